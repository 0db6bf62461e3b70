//===- cuda_test.cpp - dtc/cuda.h's kernels and the device communicators --===//
//
// Each dtc::cuda kernel against its CPU twin in dtc/kernels.h on random
// inputs, and the device communicators (local, NCCL with one rank). They
// need a GPU: without one every test is skipped with the reason (a failure
// under DTC_REQUIRE_GPU=1, cuda_test_util.h).
//
//===----------------------------------------------------------------------===//
#include "dtc/cuda.h"
#include "dtc/kernels.h"

#include "cuda_test_util.h"
#include "cuda_util.h"
#include "device_comm.h"
#include "support/error.h"
#include "options/options.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

using namespace dtc;

namespace {

const rt::HostContext kHost{}; // the CPU kernels' context

std::vector<float> randomVec(size_t n, unsigned seed, float lo = -1, float hi = 1) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto &x : v)
    x = d(gen);
  return v;
}

// Values on a coarse grid, so that maxima tie.
std::vector<float> gridVec(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> d(-4, 4);
  std::vector<float> v(n);
  for (auto &x : v)
    x = float(d(gen)) * 0.25f;
  return v;
}

void expectClose(const std::vector<float> &got, const std::vector<float> &want, float rtol,
                 float atol, const char *what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < got.size() && reported < 5; ++i)
    if (!(std::fabs(got[i] - want[i]) <= atol + rtol * std::fabs(want[i]))) {
      ADD_FAILURE() << what << " at " << i << ": " << got[i] << " vs " << want[i];
      ++reported;
    }
}

// A device copy of a host vector.
template <class T> class DevVec {
public:
  explicit DevVec(const std::vector<T> &host) : n_(host.size()) {
    EXPECT_EQ(cudaMalloc(&p_, std::max<size_t>(n_, 1) * sizeof(T)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
    // From pageable memory cudaMemcpy may return before the copy is done,
    // and the kernels under test run on a non-blocking stream.
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  explicit DevVec(size_t n) : DevVec(std::vector<T>(n, T(-7))) {}
  ~DevVec() { cudaFree(p_); }
  DevVec(const DevVec &) = delete;
  DevVec &operator=(const DevVec &) = delete;
  T *get() const { return p_; }
  std::vector<T> host() const {
    std::vector<T> h(n_);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(h.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }

private:
  T *p_ = nullptr;
  size_t n_;
};

class Kernels : public ::testing::Test {
protected:
  void SetUp() override {
    DTC_NEED_GPUS(1);
    ASSERT_EQ(cudaStreamCreateWithFlags(&ctx_.stream, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cublasCreate(&ctx_.blas), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cublasSetStream(ctx_.blas, ctx_.stream), CUBLAS_STATUS_SUCCESS);
    ctx_.device = 0;
  }
  void TearDown() override {
    if (ctx_.blas)
      cublasDestroy(ctx_.blas);
    if (ctx_.stream)
      cudaStreamDestroy(ctx_.stream);
  }
  const rt::DeviceContext &c() const { return ctx_; }

  rt::DeviceContext ctx_{nullptr, nullptr, 0};
};

struct View {
  int64_t outer, n, inner;
};
const View kViews[] = {{3, 7, 1}, {2, 300, 1}, {4, 5, 6}, {2, 1000, 40}, {1, 1, 1}, {70000, 3, 1}};

//===--- the ABI ------------------------------------------------------------===//

// Generated code prints the same calls for both targets: kernels.h and
// cuda.h declare every kernel from the same dtcrt op (dtc/kernels_abi.inc,
// generated), so they cannot differ; test/abi calls each one on both.

//===--- GEMM ---------------------------------------------------------------===//

TEST_F(Kernels, GemmMatchesTheCpuInEveryTransposition) {
  struct Size {
    int64_t M, N, K;
  };
  for (Size s : {Size{5, 7, 3}, Size{64, 33, 129}, Size{1, 300, 17}})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        auto A = randomVec(size_t(s.M * s.K), 1), B = randomVec(size_t(s.K * s.N), 2),
             C = randomVec(size_t(s.M * s.N), 3);
        DevVec<float> dA(A), dB(B), dC(C);
        kern::gemm(kHost, ta, tb, s.M, s.N, s.K, 1.5f, A.data(), B.data(), -0.5f,
                   C.data());
        cuda::gemm(c(), ta, tb, s.M, s.N, s.K, 1.5f, dA.get(), dB.get(), -0.5f, dC.get());
        expectClose(dC.host(), C, 1e-5f, 1e-4f,
                    ("gemm " + std::to_string(ta) + std::to_string(tb)).c_str());
      }
  std::vector<float> C = {1, 2, 3, 4};
  DevVec<float> dC(C);
  cuda::gemm(c(), false, false, 2, 2, 0, 1.0f, nullptr, nullptr, 0.5f, dC.get());
  expectClose(dC.host(), {0.5f, 1, 1.5f, 2}, 0, 0, "gemm K=0");
}

TEST_F(Kernels, GemmBatchedMatchesTheCpuInEveryTransposition) {
  const int64_t count = 6, M = 9, N = 7, K = 5;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      auto A = randomVec(size_t(count * M * K), 4), B = randomVec(size_t(count * K * N), 5),
           C = randomVec(size_t(count * M * N), 6);
      DevVec<float> dA(A), dB(B), dC(C);
      kern::gemmBatched(kHost, ta, tb, count, M, N, K, 1.5f, A.data(), B.data(), 0.25f,
                        C.data());
      cuda::gemmBatched(c(), ta, tb, count, M, N, K, 1.5f, dA.get(), dB.get(), 0.25f,
                        dC.get());
      expectClose(dC.host(), C, 1e-5f, 1e-4f,
                  ("gemmBatched " + std::to_string(ta) + std::to_string(tb)).c_str());
    }
}

//===--- permute, sumTo -------------------------------------------------------===//

TEST_F(Kernels, PermuteMatchesTheCpu) {
  struct Case {
    std::vector<int64_t> shape;
    std::vector<int32_t> perm;
  };
  for (const Case &k : {Case{{3, 4, 5}, {2, 0, 1}}, Case{{2, 3, 4, 5}, {3, 1, 0, 2}},
                        Case{{7, 9}, {1, 0}}, Case{{2, 1, 3, 1, 2, 2}, {5, 4, 3, 2, 1, 0}},
                        Case{{}, {}}}) {
    int64_t n = 1;
    for (int64_t d : k.shape)
      n *= d;
    auto x = randomVec(size_t(n), 4);
    std::vector<float> y(static_cast<size_t>(n));
    DevVec<float> dx(x), dy(static_cast<size_t>(n));
    const int32_t rank = int32_t(k.shape.size());
    kern::permute(kHost, x.data(), y.data(), rank, k.shape.data(), k.perm.data());
    cuda::permute(c(), dx.get(), dy.get(), rank, k.shape.data(), k.perm.data());
    expectClose(dy.host(), y, 0, 0, "permute");
  }
}

TEST_F(Kernels, SumToMatchesTheCpu) {
  struct Case {
    std::vector<int64_t> x, y;
  };
  for (const Case &k : {Case{{4, 3, 5}, {3, 1}}, Case{{4, 3, 5}, {5}}, Case{{4, 3, 5}, {}},
                        Case{{8, 3000}, {3000}}, Case{{2, 1, 3}, {2, 1, 3}},
                        Case{{6, 5, 4, 3}, {5, 1, 3}}, Case{{300, 10}, {10}}}) {
    int64_t nx = 1, ny = 1;
    for (int64_t d : k.x)
      nx *= d;
    for (int64_t d : k.y)
      ny *= d;
    auto x = randomVec(size_t(nx), 5);
    std::vector<float> y(static_cast<size_t>(ny));
    DevVec<float> dx(x), dy(static_cast<size_t>(ny));
    kern::sumTo(kHost, x.data(), int32_t(k.x.size()), k.x.data(), y.data(),
                int32_t(k.y.size()), k.y.data());
    cuda::sumTo(c(), dx.get(), int32_t(k.x.size()), k.x.data(), dy.get(), int32_t(k.y.size()),
                k.y.data());
    expectClose(dy.host(), y, 1e-5f, 1e-4f, "sumTo");
  }
}

//===--- convolution and pooling ----------------------------------------------===//

namespace {
// A rt::Window2d's 16 values (NCHW), with Ho and Wo computed as shape inference does.
std::vector<int64_t> window2d(int64_t C, int64_t H, int64_t W, int64_t O, int64_t kH, int64_t kW,
                              int64_t s, int64_t p, int64_t d, int64_t groups) {
  const int64_t Ho = (H + 2 * p - d * (kH - 1) - 1) / s + 1;
  const int64_t Wo = (W + 2 * p - d * (kW - 1) - 1) / s + 1;
  return {C, H, W, O, kH, kW, s, s, p, p, d, d, groups, Ho, Wo, 0};
}
} // namespace

TEST_F(Kernels, ConvolutionsMatchTheCpu) {
  // Plain, padded and strided, dilated, grouped, 1x1 (the columns are x).
  for (const std::vector<int64_t> &win :
       {window2d(3, 9, 8, 4, 3, 3, 1, 0, 1, 1), window2d(2, 10, 11, 6, 3, 2, 2, 1, 1, 1),
        window2d(4, 12, 12, 4, 3, 3, 1, 2, 2, 2), window2d(6, 7, 7, 3, 3, 3, 1, 1, 1, 3),
        window2d(5, 6, 6, 7, 1, 1, 1, 0, 1, 1)}) {
    const rt::Window2d w = rt::Window2d::from(win.data());
    const int64_t N = 3;
    const size_t nx = size_t(N * w.C * w.H * w.W), ny = size_t(N * w.O * w.Ho * w.Wo),
                 nw = size_t(w.O * (w.C / w.groups) * w.kH * w.kW),
                 ncols = size_t(w.C * w.kH * w.kW * w.Ho * w.Wo);
    auto x = randomVec(nx, 11), wt = randomVec(nw, 12), dy = randomVec(ny, 13),
         bias = randomVec(size_t(w.O), 14);
    std::vector<float> y(ny), dx(nx), dw(nw), db(size_t(w.O)), cols(ncols);
    DevVec<float> dX(x), dW(wt), dB(bias), dDy(dy), dY(ny), dDx(nx), dDw(nw), dDb(size_t(w.O)),
        dCols(ncols);
    // With a bias and its gradient, and without (null).
    for (bool withBias : {true, false}) {
      kern::conv2d(kHost, x.data(), wt.data(), withBias ? bias.data() : nullptr, y.data(),
                   cols.data(), N, win.data());
      kern::conv2dGradInput(kHost, dy.data(), wt.data(), dx.data(), cols.data(), N, win.data());
      kern::conv2dGradWeight(kHost, x.data(), dy.data(), dw.data(), withBias ? db.data() : nullptr,
                             cols.data(), N, win.data());
      cuda::conv2d(c(), dX.get(), dW.get(), withBias ? dB.get() : nullptr, dY.get(), dCols.get(),
                   N, win.data());
      cuda::conv2dGradInput(c(), dDy.get(), dW.get(), dDx.get(), dCols.get(), N, win.data());
      cuda::conv2dGradWeight(c(), dX.get(), dDy.get(), dDw.get(), withBias ? dDb.get() : nullptr,
                             dCols.get(), N, win.data());
      expectClose(dY.host(), y, 1e-5f, 1e-4f, "conv2d");
      expectClose(dDx.host(), dx, 1e-5f, 1e-4f, "conv2dGradInput");
      expectClose(dDw.host(), dw, 1e-5f, 1e-4f, "conv2dGradWeight");
      if (withBias)
        expectClose(dDb.host(), db, 1e-5f, 1e-4f, "conv2dGradWeight (bias)");
    }
  }
}

TEST_F(Kernels, PoolingMatchesTheCpu) {
  // Non-overlapping, overlapping with padding, strided past the edge.
  for (const std::vector<int64_t> &win :
       {window2d(3, 8, 8, 3, 2, 2, 2, 0, 1, 1), window2d(2, 9, 7, 2, 3, 3, 1, 1, 1, 1),
        window2d(4, 11, 10, 4, 3, 2, 2, 1, 1, 1)}) {
    const rt::Window2d w = rt::Window2d::from(win.data());
    const int64_t N = 2;
    const size_t nx = size_t(N * w.C * w.H * w.W), ny = size_t(N * w.C * w.Ho * w.Wo);
    auto x = gridVec(nx, 14), dy = randomVec(ny, 15);
    DevVec<float> dX(x), dDy(dy), dMax(ny), dAvg(ny), dDxMax(nx), dDxAvg(nx);
    for (bool includePad : {true, false}) {
      std::vector<float> mx(ny), avg(ny), dxMax(nx), dxAvg(nx);
      kern::maxPool2d(kHost, x.data(), mx.data(), N, win.data());
      kern::maxPool2dGrad(kHost, x.data(), dy.data(), dxMax.data(), N, win.data());
      kern::avgPool2d(kHost, x.data(), avg.data(), N, win.data(), includePad);
      kern::avgPool2dGrad(kHost, dy.data(), dxAvg.data(), N, win.data(), includePad);
      cuda::maxPool2d(c(), dX.get(), dMax.get(), N, win.data());
      cuda::maxPool2dGrad(c(), dX.get(), dDy.get(), dDxMax.get(), N, win.data());
      cuda::avgPool2d(c(), dX.get(), dAvg.get(), N, win.data(), includePad);
      cuda::avgPool2dGrad(c(), dDy.get(), dDxAvg.get(), N, win.data(), includePad);
      expectClose(dMax.host(), mx, 0, 0, "maxPool2d");
      expectClose(dDxMax.host(), dxMax, 1e-6f, 1e-5f, "maxPool2dGrad");
      expectClose(dAvg.host(), avg, 1e-6f, 1e-5f, "avgPool2d");
      expectClose(dDxAvg.host(), dxAvg, 1e-6f, 1e-5f, "avgPool2dGrad");
    }
  }
}

TEST_F(Kernels, DropoutDrawsTheCpuMasks) {
  const int64_t n = 100003;
  auto x = randomVec(size_t(n), 16);
  DevVec<float> dX(x), dY(static_cast<size_t>(n)), dDx(static_cast<size_t>(n));
  for (float p : {0.0f, 0.3f, 1.0f}) {
    const uint64_t seed = rt::stepRngSeed(3, 2, 1);
    std::vector<float> y(static_cast<size_t>(n)), dx(static_cast<size_t>(n));
    kern::dropout(kHost, x.data(), y.data(), n, p, seed, 4);
    kern::dropoutGrad(kHost, x.data(), dx.data(), n, p, seed, 4);
    cuda::dropout(c(), dX.get(), dY.get(), n, p, seed, 4);
    cuda::dropoutGrad(c(), dX.get(), dDx.get(), n, p, seed, 4);
    expectClose(dY.host(), y, 0, 0, "dropout");
    expectClose(dDx.host(), dx, 0, 0, "dropoutGrad");
  }
}

TEST_F(Kernels, LayerNormMatchesTheCpu) {
  for (auto [rows, d] : std::vector<std::pair<int64_t, int64_t>>{{5, 7}, {4096, 128}, {70, 67}}) {
    const size_t T = size_t(rows * d), D = size_t(d), R = size_t(rows);
    auto x = randomVec(T, 31), dy = randomVec(T, 32), w = randomVec(D, 33), b = randomVec(D, 34);
    std::vector<float> y(T), mean(R), rstd(R), dx(T), dw(D), db(D);
    kern::layerNorm(kHost, x.data(), w.data(), b.data(), y.data(), mean.data(), rstd.data(), rows,
                    d, 1e-5f);
    kern::layerNormGrad(kHost, x.data(), dy.data(), mean.data(), rstd.data(), w.data(), dx.data(),
                        dw.data(), db.data(), rows, d);
    DevVec<float> dX(x), dDy(dy), dW(w), dB(b), dY(T), dMean(R), dRstd(R), dDx(T), dDw(D), dDb(D);
    cuda::layerNorm(c(), dX.get(), dW.get(), dB.get(), dY.get(), dMean.get(), dRstd.get(), rows, d,
                    1e-5f);
    cuda::layerNormGrad(c(), dX.get(), dDy.get(), dMean.get(), dRstd.get(), dW.get(), dDx.get(),
                        dDw.get(), dDb.get(), rows, d);
    expectClose(dY.host(), y, 1e-5f, 1e-4f, "layerNorm");
    expectClose(dMean.host(), mean, 1e-6f, 1e-5f, "layerNorm mean");
    expectClose(dRstd.host(), rstd, 1e-5f, 1e-4f, "layerNorm rstd");
    expectClose(dDx.host(), dx, 1e-5f, 1e-4f, "layerNormGrad dx");
    expectClose(dDw.host(), dw, 1e-4f, 1e-4f, "layerNormGrad dweight");
    expectClose(dDb.host(), db, 1e-4f, 1e-4f, "layerNormGrad dbias");
  }
}

TEST_F(Kernels, RmsNormMatchesTheCpu) {
  for (auto [rows, d] : std::vector<std::pair<int64_t, int64_t>>{{5, 7}, {4096, 128}, {70, 67}}) {
    const size_t T = size_t(rows * d), D = size_t(d), R = size_t(rows);
    auto x = randomVec(T, 35), dy = randomVec(T, 36), w = randomVec(D, 37);
    std::vector<float> y(T), rstd(R), dx(T), dw(D);
    kern::rmsNorm(kHost, x.data(), w.data(), y.data(), rstd.data(), rows, d, 1e-6f);
    kern::rmsNormGrad(kHost, x.data(), dy.data(), rstd.data(), w.data(), dx.data(), dw.data(),
                      rows, d);
    DevVec<float> dX(x), dDy(dy), dW(w), dY(T), dRstd(R), dDx(T), dDw(D);
    cuda::rmsNorm(c(), dX.get(), dW.get(), dY.get(), dRstd.get(), rows, d, 1e-6f);
    cuda::rmsNormGrad(c(), dX.get(), dDy.get(), dRstd.get(), dW.get(), dDx.get(), dDw.get(), rows,
                      d);
    expectClose(dY.host(), y, 1e-5f, 1e-4f, "rmsNorm");
    expectClose(dRstd.host(), rstd, 1e-5f, 1e-4f, "rmsNorm rstd");
    expectClose(dDx.host(), dx, 1e-5f, 1e-4f, "rmsNormGrad dx");
    expectClose(dDw.host(), dw, 1e-4f, 1e-4f, "rmsNormGrad dweight");
  }
}

TEST_F(Kernels, BatchNormMatchesTheCpu) {
  struct Shape {
    int64_t n, channels, inner;
  };
  for (Shape sh : {Shape{5, 3, 7}, Shape{64, 32, 196}, Shape{33, 10, 1}})
  for (bool relu : {false, true}) {
    const int64_t total = sh.n * sh.channels * sh.inner;
    const size_t T = size_t(total), C = size_t(sh.channels);
    auto x = randomVec(T, 21), dy = randomVec(T, 22), w = randomVec(C, 23), b = randomVec(C, 24);
    const float eps = 1e-5f, momentum = 0.1f;
    std::vector<float> y(T), mean(C), var(C), dx(T), dw(C), db(C), yi(T);
    std::vector<float> rm(C, 0.0f), rv(C, 1.0f);
    int64_t tracked = 4;
    kern::batchNorm(kHost, x.data(), w.data(), b.data(), y.data(), mean.data(), var.data(), sh.n,
                    sh.channels, sh.inner, eps, relu, 1);
    kern::batchNormGrad(kHost, x.data(), dy.data(), mean.data(), var.data(), w.data(),
                        relu ? y.data() : nullptr, dx.data(), dw.data(), db.data(), sh.n,
                        sh.channels, sh.inner, eps, 1);
    kern::batchNormInference(kHost, x.data(), w.data(), b.data(), mean.data(), var.data(),
                             yi.data(), sh.n, sh.channels, sh.inner, eps, relu, 1);
    kern::updateRunningStats(kHost, mean.data(), var.data(), rm.data(), rv.data(), &tracked,
                             sh.channels, sh.n * sh.inner, momentum);
    DevVec<float> dX(x), dDy(dy), dW(w), dB(b), dY(T), dMean(C), dVar(C), dDx(T), dDw(C), dDb(C),
        dYi(T), dRm(std::vector<float>(C, 0.0f)), dRv(std::vector<float>(C, 1.0f));
    DevVec<int64_t> dTracked(std::vector<int64_t>{4});
    cuda::batchNorm(c(), dX.get(), dW.get(), dB.get(), dY.get(), dMean.get(), dVar.get(), sh.n,
                    sh.channels, sh.inner, eps, relu, 1);
    cuda::batchNormGrad(c(), dX.get(), dDy.get(), dMean.get(), dVar.get(), dW.get(),
                        relu ? dY.get() : nullptr, dDx.get(), dDw.get(), dDb.get(), sh.n,
                        sh.channels, sh.inner, eps, 1);
    cuda::batchNormInference(c(), dX.get(), dW.get(), dB.get(), dMean.get(), dVar.get(),
                             dYi.get(), sh.n, sh.channels, sh.inner, eps, relu, 1);
    cuda::updateRunningStats(c(), dMean.get(), dVar.get(), dRm.get(), dRv.get(), dTracked.get(),
                             sh.channels, sh.n * sh.inner, momentum);
    expectClose(dY.host(), y, 1e-5f, 1e-4f, "batchNorm");
    expectClose(dMean.host(), mean, 1e-6f, 1e-5f, "batchNorm mean");
    expectClose(dVar.host(), var, 1e-6f, 1e-5f, "batchNorm var");
    expectClose(dDx.host(), dx, 1e-5f, 1e-4f, "batchNormGrad dx");
    expectClose(dDw.host(), dw, 1e-4f, 1e-4f, "batchNormGrad dweight");
    expectClose(dDb.host(), db, 1e-4f, 1e-4f, "batchNormGrad dbias");
    expectClose(dYi.host(), yi, 1e-5f, 1e-4f, "batchNormInference");
    expectClose(dRm.host(), rm, 1e-6f, 1e-5f, "updateRunningStats mean");
    expectClose(dRv.host(), rv, 1e-6f, 1e-5f, "updateRunningStats var");
    EXPECT_EQ(dTracked.host()[0], 5);
  }
}

//===--- axis views ---------------------------------------------------------===//

TEST_F(Kernels, ReductionsMatchTheCpu) {
  for (View v : kViews) {
    const size_t nx = size_t(v.outer * v.n * v.inner), ny = size_t(v.outer * v.inner);
    auto x = gridVec(nx, 6);
    auto dy = randomVec(ny, 7);
    DevVec<float> dX(x), dDy(dy), dSum(ny), dMax(ny), dMean(ny), dDx(nx);
    std::vector<float> sum(ny), mx(ny), mean(ny), dx(nx);
    kern::reduceSum(kHost, x.data(), sum.data(), v.outer, v.n, v.inner);
    kern::reduceMax(kHost, x.data(), mx.data(), v.outer, v.n, v.inner);
    kern::reduceMean(kHost, x.data(), mean.data(), v.outer, v.n, v.inner);
    kern::reduceMaxGrad(kHost, x.data(), mx.data(), dy.data(), dx.data(), v.outer, v.n,
                        v.inner);
    cuda::reduceSum(c(), dX.get(), dSum.get(), v.outer, v.n, v.inner);
    cuda::reduceMax(c(), dX.get(), dMax.get(), v.outer, v.n, v.inner);
    cuda::reduceMean(c(), dX.get(), dMean.get(), v.outer, v.n, v.inner);
    cuda::reduceMaxGrad(c(), dX.get(), dMax.get(), dDy.get(), dDx.get(), v.outer, v.n, v.inner);
    expectClose(dSum.host(), sum, 1e-5f, 1e-4f, "reduceSum");
    expectClose(dMax.host(), mx, 0, 0, "reduceMax");
    expectClose(dMean.host(), mean, 1e-5f, 1e-5f, "reduceMean");
    expectClose(dDx.host(), dx, 0, 0, "reduceMaxGrad (the first maximum gets dy)");
  }
}

TEST_F(Kernels, SoftmaxFamilyMatchesTheCpu) {
  for (View v : kViews) {
    const size_t nx = size_t(v.outer * v.n * v.inner);
    auto x = randomVec(nx, 8, -5, 5), dy = randomVec(nx, 9);
    DevVec<float> dX(x), dDy(dy), dS(nx), dL(nx), dGs(nx), dGl(nx);
    std::vector<float> s(nx), l(nx), gs(nx), gl(nx);
    kern::softmax(kHost, x.data(), s.data(), v.outer, v.n, v.inner);
    kern::logSoftmax(kHost, x.data(), l.data(), v.outer, v.n, v.inner);
    kern::softmaxGrad(kHost, s.data(), dy.data(), gs.data(), v.outer, v.n, v.inner);
    kern::logSoftmaxGrad(kHost, l.data(), dy.data(), gl.data(), v.outer, v.n, v.inner);
    cuda::softmax(c(), dX.get(), dS.get(), v.outer, v.n, v.inner);
    cuda::logSoftmax(c(), dX.get(), dL.get(), v.outer, v.n, v.inner);
    DevVec<float> cpuS(s), cpuL(l); // the grads from the same inputs
    cuda::softmaxGrad(c(), cpuS.get(), dDy.get(), dGs.get(), v.outer, v.n, v.inner);
    cuda::logSoftmaxGrad(c(), cpuL.get(), dDy.get(), dGl.get(), v.outer, v.n, v.inner);
    expectClose(dS.host(), s, 1e-5f, 1e-7f, "softmax");
    expectClose(dL.host(), l, 1e-5f, 1e-5f, "logSoftmax");
    expectClose(dGs.host(), gs, 1e-4f, 1e-6f, "softmaxGrad");
    expectClose(dGl.host(), gl, 1e-4f, 1e-5f, "logSoftmaxGrad");
  }
}

//===--- losses and metrics ---------------------------------------------------===//

TEST_F(Kernels, LossesAndMetricsMatchTheCpu) {
  struct Size {
    int64_t B, C;
  };
  for (Size s : {Size{37, 10}, Size{300, 1000}, Size{1, 1}, Size{5, 40}}) {
    auto logits = randomVec(size_t(s.B * s.C), 10, -3, 3);
    std::vector<int32_t> labels(size_t(s.B));
    for (int64_t b = 0; b < s.B; ++b)
      labels[size_t(b)] = int32_t((b * 7 + 3) % s.C);
    const std::vector<float> dloss = {0.7f};
    DevVec<float> dLogits(logits), dOut(3), dDloss(dloss), dGrad(size_t(s.B * s.C));
    DevVec<int32_t> dLabels(labels);
    cuda::crossEntropy(c(), dLogits.get(), dLabels.get(), s.B, s.C, -100, dOut.get());
    cuda::accuracy(c(), dLogits.get(), dLabels.get(), s.B, s.C, -100, dOut.get() + 1);
    cuda::crossEntropyGrad(c(), dLogits.get(), dLabels.get(), s.B, s.C, -100, dDloss.get(),
                           dGrad.get());
    std::vector<float> grad(size_t(s.B * s.C));
    kern::crossEntropyGrad(kHost, logits.data(), labels.data(), s.B, s.C, -100, dloss.data(),
                           grad.data());
    const std::vector<float> out = dOut.host();
    float cpu[3] = {NAN, NAN, NAN};
    kern::crossEntropy(kHost, logits.data(), labels.data(), s.B, s.C, -100, cpu);
    kern::accuracy(kHost, logits.data(), labels.data(), s.B, s.C, -100, cpu + 1);
    EXPECT_NEAR(out[0], cpu[0], 1e-5);
    EXPECT_EQ(out[1], cpu[1]);
    expectClose(dGrad.host(), grad, 1e-5f, 1e-8f, "crossEntropyGrad");

    auto p = randomVec(size_t(s.B * s.C), 11), t = randomVec(size_t(s.B * s.C), 12);
    DevVec<float> dP(p), dT(t), dDp(p.size());
    cuda::mse(c(), dP.get(), dT.get(), int64_t(p.size()), dOut.get() + 2);
    cuda::mseGrad(c(), dP.get(), dT.get(), int64_t(p.size()), dDloss.get(), dDp.get());
    std::vector<float> dp(p.size());
    kern::mseGrad(kHost, p.data(), t.data(), int64_t(p.size()), dloss.data(), dp.data());
    kern::mse(kHost, p.data(), t.data(), int64_t(p.size()), cpu + 2);
    EXPECT_NEAR(dOut.host()[2], cpu[2], 1e-6);
    expectClose(dDp.host(), dp, 1e-6f, 1e-9f, "mseGrad");
  }
}

TEST_F(Kernels, AccuracyTakesTheFirstMaximumAndOutOfRangeLabelsDoNotCrash) {
  const std::vector<float> logits = {1, 3, 3, 0, /**/ 2, 2, 2, 2, /**/ 0, 0, 0, 5};
  const std::vector<int32_t> labels = {1, 0, 99}; // 99: clamped by crossEntropy, never right
  DevVec<float> dLogits(logits), dOut(2);
  DevVec<int32_t> dLabels(labels);
  cuda::accuracy(c(), dLogits.get(), dLabels.get(), 3, 4, -100, dOut.get());
  cuda::crossEntropy(c(), dLogits.get(), dLabels.get(), 3, 4, -100, dOut.get() + 1);
  const auto out = dOut.host();
  EXPECT_FLOAT_EQ(out[0], 2.0f / 3.0f);
  EXPECT_TRUE(std::isfinite(out[1]));
  // Read clamped, but recorded: the executor stops with the CPU's error.
  EXPECT_EQ(rt::takeRangeFault(c().stream), rt::labelOutsideMessage(99, 2, 4));
  EXPECT_EQ(rt::takeRangeFault(c().stream), "");
}

TEST_F(Kernels, OutOfRangeLabelsAndIdsStopWithTheCpuMessage) {
  ASSERT_EQ(rt::takeRangeFault(c().stream), ""); // nothing left by another test
  const int64_t B = 40, C = 5, num = 7, dim = 3;
  const auto logits = randomVec(size_t(B * C), 41);
  std::vector<int32_t> labels(size_t(B), 1);
  labels[30] = 5;
  labels[12] = -2; // the first outside: the CPU names it
  labels[3] = -100; // ignored
  DevVec<float> dLogits(logits), dOut(1), dGrad(logits.size()),
      dDloss(std::vector<float>{1.0f});
  DevVec<int32_t> dLabels(labels);
  cuda::crossEntropy(c(), dLogits.get(), dLabels.get(), B, C, -100, dOut.get());
  dOut.host();
  EXPECT_EQ(rt::takeRangeFault(c().stream), rt::labelOutsideMessage(-2, 12, C));
  cuda::crossEntropyGrad(c(), dLogits.get(), dLabels.get(), B, C, -100, dDloss.get(),
                         dGrad.get());
  dGrad.host();
  EXPECT_EQ(rt::takeRangeFault(c().stream), rt::labelOutsideMessage(-2, 12, C));

  std::vector<int32_t> ids(static_cast<size_t>(B));
  for (int64_t r = 0; r < B; ++r)
    ids[size_t(r)] = int32_t(r % num);
  ids[25] = int32_t(num);
  ids[17] = int32_t(num) + 100;
  const auto w = randomVec(size_t(num * dim), 42), dy = randomVec(size_t(B * dim), 43);
  DevVec<float> dW(w), dDy(dy), dEmb(size_t(B * dim)), dDw(size_t(num * dim));
  DevVec<int32_t> dIds(ids);
  cuda::embedding(c(), dW.get(), dIds.get(), B, num, dim, dEmb.get());
  dEmb.host();
  EXPECT_EQ(rt::takeRangeFault(c().stream), rt::idOutsideMessage("embedding", num + 100, 17, num));
  cuda::embeddingGrad(c(), dIds.get(), dDy.get(), B, num, dim, dDw.get());
  dDw.host();
  EXPECT_EQ(rt::takeRangeFault(c().stream), rt::idOutsideMessage("embedding_grad", num + 100, 17, num));
  // Both in one step: one of the two (the smaller site: the (kind, limit)
  // first used in the process, which in a training step is its first kernel).
  cuda::embedding(c(), dW.get(), dIds.get(), B, num, dim, dEmb.get());
  cuda::crossEntropy(c(), dLogits.get(), dLabels.get(), B, C, -100, dOut.get());
  dOut.host();
  const std::string first = rt::takeRangeFault(c().stream);
  EXPECT_TRUE(first == rt::idOutsideMessage("embedding", num + 100, 17, num) ||
              first == rt::labelOutsideMessage(-2, 12, C))
      << first;
  EXPECT_EQ(rt::takeRangeFault(c().stream), "");
}

TEST_F(Kernels, GridWideCrossEntropyMatchesTheCpuAndRepeatsBitForBit) {
  struct Size {
    int64_t B, C;
  };
  // The GPT's rows (B * T = 768, 256 classes), one row per warp and far more
  // rows than blocks.
  for (Size s : {Size{768, 256}, Size{9, 3}, Size{200003, 7}}) {
    const auto logits = randomVec(size_t(s.B * s.C), 51, -4, 4);
    std::vector<int32_t> labels(size_t(s.B));
    for (int64_t b = 0; b < s.B; ++b)
      labels[size_t(b)] = b % 11 == 4 ? -100 : int32_t((b * 5 + 1) % s.C);
    float cpu = NAN;
    kern::crossEntropy(kHost, logits.data(), labels.data(), s.B, s.C, -100, &cpu);
    DevVec<float> dLogits(logits), dOut(2);
    DevVec<int32_t> dLabels(labels);
    cuda::crossEntropy(c(), dLogits.get(), dLabels.get(), s.B, s.C, -100, dOut.get());
    cuda::crossEntropy(c(), dLogits.get(), dLabels.get(), s.B, s.C, -100, dOut.get() + 1);
    const auto out = dOut.host();
    EXPECT_NEAR(out[0], cpu, 1e-5 * std::fabs(cpu)) << s.B << " x " << s.C;
    EXPECT_EQ(out[0], out[1]) << "the same sums in the same order";
  }
  // Every row ignored: NaN, as the CPU; no rows: 0.
  const std::vector<int32_t> ignored(5, -100);
  DevVec<float> dLogits(randomVec(15, 52)), dOut(2);
  DevVec<int32_t> dLabels(ignored);
  cuda::crossEntropy(c(), dLogits.get(), dLabels.get(), 5, 3, -100, dOut.get());
  cuda::crossEntropy(c(), dLogits.get(), dLabels.get(), 0, 3, -100, dOut.get() + 1);
  const auto out = dOut.host();
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_EQ(out[1], 0.0f);
}

TEST_F(Kernels, GridWideSumSquaresMatchesTheCpuAndRepeatsBitForBit) {
  for (int64_t n : {int64_t(1), int64_t(1000), int64_t(300007), int64_t(5000011)}) {
    const auto x = randomVec(size_t(n), 53);
    float cpu = 0.5f;
    kern::sumSquares(kHost, x.data(), n, &cpu);
    DevVec<float> dX(x), dAcc(std::vector<float>{0.5f, 0.5f});
    cuda::sumSquares(c(), dX.get(), n, dAcc.get());
    cuda::sumSquares(c(), dX.get(), n, dAcc.get() + 1);
    const auto acc = dAcc.host();
    EXPECT_NEAR(acc[0], cpu, 1e-6 * std::fabs(cpu)) << n;
    EXPECT_EQ(acc[0], acc[1]) << n;
  }
  // Accumulates into acc, as the CPU (one call per gradient bucket).
  const auto a = randomVec(100, 54), b = randomVec(70000, 55);
  float cpu = 0;
  kern::sumSquares(kHost, a.data(), 100, &cpu);
  kern::sumSquares(kHost, b.data(), 70000, &cpu);
  DevVec<float> dA(a), dB(b), dAcc(std::vector<float>{0.0f});
  cuda::sumSquares(c(), dA.get(), 100, dAcc.get());
  cuda::sumSquares(c(), dB.get(), 70000, dAcc.get());
  EXPECT_NEAR(dAcc.host()[0], cpu, 1e-6 * std::fabs(cpu));
}

TEST_F(Kernels, GridWideEmbeddingGradIsTheCpusBitForBit) {
  struct Size {
    int64_t num, dim, rows;
  };
  // The GPT's token table (256 x 128, B * T = 768 ids), few ids (fewer
  // groups than a block's warps), many tiles of ids, and more columns than
  // the old grid of one thread per column reached (524,288).
  for (Size s : {Size{256, 128, 768}, Size{3, 33, 1000}, Size{64, 128, 64}, Size{1000, 8, 5000},
                 Size{2, 600000, 5}}) {
    const auto dy = randomVec(size_t(s.rows * s.dim), 56);
    std::vector<int32_t> ids(size_t(s.rows));
    for (int64_t r = 0; r < s.rows; ++r)
      ids[size_t(r)] = int32_t((r * r * 7 + r + 3) % s.num);
    std::vector<float> dw(size_t(s.num * s.dim));
    kern::embeddingGrad(kHost, ids.data(), dy.data(), s.rows, s.num, s.dim, dw.data());
    DevVec<float> dDy(dy), dDw(std::vector<float>(dw.size(), 3.0f));
    DevVec<int32_t> dIds(ids);
    cuda::embeddingGrad(c(), dIds.get(), dDy.get(), s.rows, s.num, s.dim, dDw.get());
    expectClose(dDw.host(), dw, 0, 0, "embeddingGrad (the same order of sums)");
  }
  EXPECT_EQ(rt::takeRangeFault(c().stream), "");
}

TEST_F(Kernels, AttentionGradWithASequenceOfLengthZero) {
  // No queries: dk and dv are 0 (the CPU's), dq has no rows; no keys: dq is
  // 0. Neither launches a grid of 0 blocks (a launch error).
  const int64_t heads = 3, d = 8, t = 5;
  const float scale = 0.3f;
  const auto q = randomVec(size_t(heads * t * d), 61), k = randomVec(size_t(heads * t * d), 62),
             v = randomVec(size_t(heads * t * d), 63), out = randomVec(size_t(heads * t * d), 64),
             dout = randomVec(size_t(heads * t * d), 65), lse = randomVec(size_t(heads * t), 66);
  DevVec<float> dQ(q), dK(k), dV(v), dOut(out), dDout(dout), dLse(lse);
  {
    DevVec<float> dDq(1), dDk(k.size()), dDv(v.size());
    cuda::attentionGrad(c(), dQ.get(), dK.get(), dV.get(), dOut.get(), dLse.get(), dDout.get(),
                        dDq.get(), dDk.get(), dDv.get(), heads, 1, d, d, 0, t, d, d, false, scale);
    expectClose(dDk.host(), std::vector<float>(k.size(), 0.0f), 0, 0, "dk without queries");
    expectClose(dDv.host(), std::vector<float>(v.size(), 0.0f), 0, 0, "dv without queries");
  }
  {
    DevVec<float> dDq(q.size()), dDk(1), dDv(1);
    cuda::attentionGrad(c(), dQ.get(), dK.get(), dV.get(), dOut.get(), dLse.get(), dDout.get(),
                        dDq.get(), dDk.get(), dDv.get(), heads, 1, d, d, t, 0, d, d, false, scale);
    expectClose(dDq.host(), std::vector<float>(q.size(), 0.0f), 0, 0, "dq without keys");
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST_F(Kernels, FillAndCopy) {
  DevVec<float> a(static_cast<size_t>(100003)), b(static_cast<size_t>(100003));
  cuda::fill(c(), a.get(), 100003, 2.5f);
  cuda::copy(c(), b.get(), a.get(), 100003);
  const auto h = b.host();
  EXPECT_TRUE(std::all_of(h.begin(), h.end(), [](float v) { return v == 2.5f; }));
}

TEST_F(Kernels, CopyRowsMatchesTheCpu) {
  const int64_t rows = 33, len = 5, srcStride = 12, dstStride = 7;
  const auto src = randomVec(size_t(rows * srcStride), 92);
  std::vector<float> dst(size_t(rows * dstStride), -9.0f);
  DevVec<float> dSrc(src), dDst(dst);
  kern::copyRows(kHost, src.data() + 4, srcStride, dst.data() + 1, dstStride, rows, len);
  cuda::copyRows(c(), dSrc.get() + 4, srcStride, dDst.get() + 1, dstStride, rows, len);
  expectClose(dDst.host(), dst, 0, 0, "copyRows");
}

TEST_F(Kernels, IgnoredRowsAndEmbeddingsMatchTheCpu) {
  const int64_t B = 300, C = 9, num = 13, dim = 40;
  const auto logits = randomVec(size_t(B * C), 93, -3, 3);
  std::vector<int32_t> labels(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b)
    labels[size_t(b)] = b % 4 == 1 ? 7 : int32_t((b * 5) % C); // 7: ignored
  std::vector<float> cpu(2), grad(size_t(B * C));
  const float dloss = 0.25f;
  kern::crossEntropy(kHost, logits.data(), labels.data(), B, C, 7, cpu.data());
  kern::accuracy(kHost, logits.data(), labels.data(), B, C, 7, cpu.data() + 1);
  kern::crossEntropyGrad(kHost, logits.data(), labels.data(), B, C, 7, &dloss, grad.data());
  DevVec<float> dLogits(logits), dOut(2), dDloss(std::vector<float>{dloss}), dGrad(grad.size());
  DevVec<int32_t> dLabels(labels);
  cuda::crossEntropy(c(), dLogits.get(), dLabels.get(), B, C, 7, dOut.get());
  cuda::accuracy(c(), dLogits.get(), dLabels.get(), B, C, 7, dOut.get() + 1);
  cuda::crossEntropyGrad(c(), dLogits.get(), dLabels.get(), B, C, 7, dDloss.get(), dGrad.get());
  expectClose(dOut.host(), cpu, 1e-5f, 1e-7f, "crossEntropy/accuracy with ignore_index");
  expectClose(dGrad.host(), grad, 1e-5f, 1e-8f, "crossEntropyGrad with ignore_index");

  const auto w = randomVec(size_t(num * dim), 94), dy = randomVec(size_t(B * dim), 95);
  std::vector<int32_t> ids(static_cast<size_t>(B));
  for (int64_t r = 0; r < B; ++r)
    ids[size_t(r)] = int32_t((r * 7 + 1) % num);
  std::vector<float> out(size_t(B * dim)), dw(size_t(num * dim));
  kern::embedding(kHost, w.data(), ids.data(), B, num, dim, out.data());
  kern::embeddingGrad(kHost, ids.data(), dy.data(), B, num, dim, dw.data());
  DevVec<float> dW(w), dDy(dy), dEmb(out.size()), dDw(std::vector<float>(dw.size(), 3.0f));
  DevVec<int32_t> dIds(ids);
  cuda::embedding(c(), dW.get(), dIds.get(), B, num, dim, dEmb.get());
  cuda::embeddingGrad(c(), dIds.get(), dDy.get(), B, num, dim, dDw.get());
  expectClose(dEmb.host(), out, 0, 0, "embedding");
  expectClose(dDw.host(), dw, 0, 0, "embeddingGrad (the same order of sums)");
}

TEST_F(Kernels, AttentionMatchesTheCpu) {
  // Heads contiguous (group 1) and interleaved row by row (group 3: the
  // buffers read as [heads / 3, t, 3, d]).
  for (int64_t group : {1, 3})
    for (bool causal : {false, true}) {
      const int64_t heads = 6, tq = 37, tk = causal ? 37 : 50, d = 40, dv = causal ? 40 : 24;
      const float scale = 0.17f;
      const auto q = randomVec(size_t(heads * tq * d), 96),
                 k = randomVec(size_t(heads * tk * d), 97),
                 v = randomVec(size_t(heads * tk * dv), 98),
                 dout = randomVec(size_t(heads * tq * dv), 99);
      std::vector<float> out(size_t(heads * tq * dv)), lse(size_t(heads * tq)), dq(q.size()),
          dk(k.size()), dvv(v.size());
      kern::attention(kHost, q.data(), k.data(), v.data(), out.data(), lse.data(), heads, group,
                      group * d, group * dv, tq, tk, d, dv, causal, scale);
      kern::attentionGrad(kHost, q.data(), k.data(), v.data(), out.data(), lse.data(),
                          dout.data(), dq.data(), dk.data(), dvv.data(), heads, group, group * d,
                          group * dv, tq, tk, d, dv, causal, scale);
      DevVec<float> dQ(q), dK(k), dV(v), dDout(dout), dOut(out.size()), dLse(lse.size()),
          dDq(dq.size()), dDk(dk.size()), dDv(dvv.size());
      cuda::attention(c(), dQ.get(), dK.get(), dV.get(), dOut.get(), dLse.get(), heads, group,
                      group * d, group * dv, tq, tk, d, dv, causal, scale);
      cuda::attentionGrad(c(), dQ.get(), dK.get(), dV.get(), dOut.get(), dLse.get(),
                          dDout.get(), dDq.get(), dDk.get(), dDv.get(), heads, group, group * d,
                          group * dv, tq, tk, d, dv, causal, scale);
      expectClose(dOut.host(), out, 1e-5f, 1e-6f, "attention");
      expectClose(dLse.host(), lse, 1e-5f, 1e-6f, "attention lse");
      expectClose(dDq.host(), dq, 1e-4f, 1e-6f, "attentionGrad dq");
      expectClose(dDk.host(), dk, 1e-4f, 1e-6f, "attentionGrad dk");
      expectClose(dDv.host(), dvv, 1e-4f, 1e-6f, "attentionGrad dv");
    }
}

TEST_F(Kernels, AttentionOnPackedQkvMatchesTheCpu) {
  // q, k, v the slices of one [B, T, 3, H, D] buffer (rows 3 H D apart),
  // dq, dk, dv written into the slices of another (its other floats kept).
  const int64_t batch = 2, h = 3, t = 29, d = 16, heads = batch * h, rows = 3 * h * d;
  const float scale = 0.25f;
  const auto qkv = randomVec(size_t(batch * t * rows), 71),
             dout = randomVec(size_t(heads * t * d), 72);
  for (bool causal : {false, true}) {
    std::vector<float> out(size_t(heads * t * d)), lse(size_t(heads * t)),
        dqkv(qkv.size(), 7.0f);
    const float *q = qkv.data();
    kern::attention(kHost, q, q + h * d, q + 2 * h * d, out.data(), lse.data(), heads, h, rows,
                    rows, t, t, d, d, causal, scale);
    kern::attentionGrad(kHost, q, q + h * d, q + 2 * h * d, out.data(), lse.data(), dout.data(),
                        dqkv.data(), dqkv.data() + h * d, dqkv.data() + 2 * h * d, heads, h, rows,
                        rows, t, t, d, d, causal, scale);
    DevVec<float> dQkv(qkv), dDout(dout), dOut(out.size()), dLse(lse.size()),
        dDqkv(std::vector<float>(qkv.size(), 7.0f));
    const float *g = dQkv.get();
    cuda::attention(c(), g, g + h * d, g + 2 * h * d, dOut.get(), dLse.get(), heads, h, rows,
                    rows, t, t, d, d, causal, scale);
    cuda::attentionGrad(c(), g, g + h * d, g + 2 * h * d, dOut.get(), dLse.get(), dDout.get(),
                        dDqkv.get(), dDqkv.get() + h * d, dDqkv.get() + 2 * h * d, heads, h, rows,
                        rows, t, t, d, d, causal, scale);
    expectClose(dOut.host(), out, 1e-5f, 1e-6f, "packed attention");
    expectClose(dLse.host(), lse, 1e-5f, 1e-6f, "packed attention lse");
    expectClose(dDqkv.host(), dqkv, 1e-4f, 1e-6f, "packed attentionGrad dqkv");
  }
}

TEST_F(Kernels, FillAndCopyMatchTheCpu) {
  const size_t n = 70001;
  const auto src = randomVec(n, 13);
  std::vector<float> a(n + 2, -7.0f), b(n + 2, -7.0f); // the CPU twins, one float of margin
  DevVec<float> dA(n + 2), dB(n + 2), dSrc(src);
  kern::fill(kHost, a.data() + 1, int64_t(n), -0.5f);
  kern::copy(kHost, b.data() + 1, src.data(), int64_t(n));
  cuda::fill(c(), dA.get() + 1, int64_t(n), -0.5f);
  cuda::copy(c(), dB.get() + 1, dSrc.get(), int64_t(n));
  expectClose(dA.host(), a, 0, 0, "fill");
  expectClose(dB.host(), b, 0, 0, "copy");
}

//===--- optimizer updates ------------------------------------------------------===//

// 40 items (two launches) of sizes 0..~5000; the CPU updates them one by one.
void checkUpdates(const rt::DeviceContext &ctx, bool adam, bool decoupled, const rt::Hyper &h,
                  bool scaled = false) {
  const int count = 40;
  std::vector<std::vector<float>> w(count), g(count), s0(count), s1(count);
  std::vector<std::unique_ptr<DevVec<float>>> dw, dg, ds0, ds1;
  std::vector<rt::UpdateItem> items, hostItems;
  for (int i = 0; i < count; ++i) {
    const size_t n = size_t(i == 3 ? 0 : (i * 131) % 5000 + 1);
    w[i] = randomVec(n, 20 + i);
    g[i] = randomVec(n, 100 + i);
    s0[i] = randomVec(n, 200 + i);
    s1[i] = randomVec(n, 300 + i, 0, 1);
    dw.push_back(std::make_unique<DevVec<float>>(w[i]));
    dg.push_back(std::make_unique<DevVec<float>>(g[i]));
    ds0.push_back(std::make_unique<DevVec<float>>(s0[i]));
    ds1.push_back(std::make_unique<DevVec<float>>(s1[i]));
    items.push_back({dw[i]->get(), dg[i]->get(), ds0[i]->get(), ds1[i]->get(), int64_t(n)});
  }
  for (int i = 0; i < count; ++i)
    hostItems.push_back(
        {w[i].data(), g[i].data(), s0[i].data(), s1[i].data(), int64_t(w[i].size())});
  // The clip factor: in device memory for the device, in host memory here.
  const float clip = 0.3719f;
  DevVec<float> dclip(std::vector<float>{clip});
  const float *devScale = scaled ? dclip.get() : nullptr, *hostScale = scaled ? &clip : nullptr;
  if (adam)
    cuda::adamUpdate(ctx, items.data(), count, h, devScale, decoupled);
  else
    cuda::sgdUpdate(ctx, items.data(), count, h, devScale);
  if (adam)
    kern::adamUpdate(kHost, hostItems.data(), count, h, hostScale, decoupled);
  else
    kern::sgdUpdate(kHost, hostItems.data(), count, h, hostScale);
  for (int i = 0; i < count; ++i) {
    expectClose(dw[i]->host(), w[i], 1e-5f, 1e-6f, "w");
    expectClose(ds0[i]->host(), s0[i], 1e-5f, 1e-6f, "state 0");
    if (adam)
      expectClose(ds1[i]->host(), s1[i], 1e-5f, 1e-7f, "state 1");
  }
}

TEST_F(Kernels, SgdMatchesTheCpu) {
  rt::Hyper h{0.1f, 0.9f, 0.1f, 0.01f, 0.9f, 0.999f, 1e-8f, 0, 1};
  checkUpdates(c(), false, false, h); // first step: buf = g
  h.step = 5;
  checkUpdates(c(), false, false, h);
  h.nesterov = 1;
  h.dampening = 0;
  checkUpdates(c(), false, false, h);
  h.momentum = 0;
  checkUpdates(c(), false, false, h);
  checkUpdates(c(), false, false, h, /*scaled=*/true);
}

TEST_F(Kernels, AdamAndAdamWMatchTheCpu) {
  rt::Hyper h{0.01f, 0, 0, 0.05f, 0.9f, 0.999f, 1e-8f, 0, 1};
  for (int64_t step : {1, 7}) {
    h.step = step;
    checkUpdates(c(), true, false, h);
    checkUpdates(c(), true, true, h);
    checkUpdates(c(), true, true, h, /*scaled=*/true);
  }
}

TEST_F(Kernels, MomentumAccumulateMatchesTheCpu) {
  const size_t n = 300007;
  const auto g = randomVec(n, 30), buf0 = randomVec(n, 31);
  for (float share : {0.0f, 0.45f}) {
    std::vector<float> buf = buf0;
    DevVec<float> dBuf(buf0), dG(g);
    kern::momentumAccumulate(kHost, buf.data(), g.data(), int64_t(n), share);
    cuda::momentumAccumulate(c(), dBuf.get(), dG.get(), int64_t(n), share);
    expectClose(dBuf.host(), buf, 1e-6f, 1e-7f, share == 0 ? "momentumAccumulate (copy)"
                                                            : "momentumAccumulate");
  }
}

// 40 items (two launches) of sizes 0..~5000; momentum, Nesterov and weight
// decay set, and ignored; the state buffers are not touched.
TEST_F(Kernels, SgdApplyMomentumMatchesTheCpu) {
  rt::Hyper h{0.1f, 0.9f, 0.1f, 0.01f, 0.9f, 0.999f, 1e-8f, 1, 5};
  const int count = 40;
  std::vector<std::vector<float>> w(count), g(count), s0(count);
  std::vector<std::unique_ptr<DevVec<float>>> dw, dg, ds0;
  std::vector<rt::UpdateItem> items, hostItems;
  for (int i = 0; i < count; ++i) {
    const size_t n = size_t(i == 3 ? 0 : (i * 131) % 5000 + 1);
    w[i] = randomVec(n, 40 + i);
    g[i] = randomVec(n, 140 + i);
    s0[i] = randomVec(n, 240 + i);
    dw.push_back(std::make_unique<DevVec<float>>(w[i]));
    dg.push_back(std::make_unique<DevVec<float>>(g[i]));
    ds0.push_back(std::make_unique<DevVec<float>>(s0[i]));
    items.push_back({dw[i]->get(), dg[i]->get(), ds0[i]->get(), nullptr, int64_t(n)});
    hostItems.push_back({w[i].data(), g[i].data(), s0[i].data(), nullptr, int64_t(n)});
  }
  cuda::sgdApplyMomentum(c(), items.data(), count, h);
  kern::sgdApplyMomentum(kHost, hostItems.data(), count, h);
  for (int i = 0; i < count; ++i) {
    expectClose(dw[i]->host(), w[i], 1e-6f, 1e-7f, "w");
    expectClose(ds0[i]->host(), s0[i], 0, 0, "s0 (untouched)");
    expectClose(dg[i]->host(), g[i], 0, 0, "g (untouched)");
  }
}

//===--- device communicators -------------------------------------------------===//

class DeviceComms : public ::testing::Test {
protected:
  void SetUp() override {
    DTC_NEED_GPUS(1);
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override {
    if (stream_)
      cudaStreamDestroy(stream_);
  }
  std::unique_ptr<rt::CommBase> make(bool nccl) {
    rt::Options opts;
    opts.commTimeout = 30;
    auto comm = rt::createDeviceCommunicator(rt::createLocalCommunicator(0), nccl,
                                             rt::LaunchInfo{}, opts);
    static_cast<rt::DeviceComm &>(*comm).setComputeStream(stream_);
    return comm;
  }
  cudaStream_t stream_ = nullptr;
};

TEST_F(DeviceComms, LocalLeavesTheDataAlone) {
  auto comm = make(false);
  EXPECT_STREQ(comm->backend(), "local");
  DevVec<float> g(std::vector<float>{1, 2, 3});
  const rt::Request r = comm->allreduceStart(0, g.get(), 3);
  EXPECT_EQ(r.bucket(), 0);
  comm->wait(r);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  expectClose(g.host(), {1, 2, 3}, 0, 0, "the sum over one rank");
  EXPECT_THROW(comm->wait(r), rt::Error);             // waited for already
  EXPECT_THROW(comm->wait(rt::Request()), rt::Error); // default-constructed
  const rt::Request r1 = comm->allreduceStart(1, g.get(), 3);
  EXPECT_THROW((void)comm->allreduceStart(1, g.get(), 3), rt::Error);
  auto other = rt::createLocalCommunicator();
  float x = 1;
  const rt::Request foreign = other->allreduceStart(1, &x, 1);
  EXPECT_THROW(comm->wait(foreign), rt::Error);
  comm->wait(r1);
  other->wait(foreign);
}

TEST_F(DeviceComms, NcclWithOneRank) {
  auto comm = make(true);
  EXPECT_STREQ(comm->backend(), "nccl");
  EXPECT_EQ(comm->size(), 1);
  DevVec<float> g(std::vector<float>{1, 2, 3}), h(std::vector<float>{4, 5});
  const rt::Request rg = comm->allreduceStart(0, g.get(), 3);
  const rt::Request rh = comm->allreduceStart(1, h.get(), 2);
  EXPECT_EQ(rh.bucket(), 1);
  EXPECT_EQ(rh.serial(), rg.serial() + 1);
  comm->wait(rh);
  comm->wait(rg);
  EXPECT_THROW(comm->wait(rg), rt::Error); // waited for already
  EXPECT_THROW(comm->wait(rt::Request()), rt::Error);
  const rt::Request rg2 = comm->allreduceStart(0, g.get(), 3);
  EXPECT_THROW(comm->wait(rg), rt::Error); // stale: bucket 0 was started again
  comm->wait(rg2);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  expectClose(g.host(), {1, 2, 3}, 0, 0, "sum over one rank");
  expectClose(h.host(), {4, 5}, 0, 0, "sum over one rank");
  // The driver's collectives, through NCCL (no MPI underneath).
  double sums[3] = {1.5, 2.5, -1};
  comm->allreduceSum(sums, 3);
  EXPECT_EQ(sums[1], 2.5);
  int64_t mine = 42, all = 0;
  comm->allgather(&mine, &all, sizeof mine);
  EXPECT_EQ(all, 42);
  std::vector<char> big(size_t(70) << 20, 'x'); // more than one broadcast chunk
  comm->broadcast(big.data(), int64_t(big.size()), 0);
  EXPECT_EQ(big.back(), 'x');
  comm->barrier();
}

// ZeRO's bucket collectives over one rank, on both device communicators:
// the reduce-scatter leaves the data's (only) part in the shard, in place or
// not; the all-gather has nothing to bring. A bucket's reduce-scatter and
// all-gather are in flight together.
TEST_F(DeviceComms, ReduceScatterAndAllgatherOverOneRank) {
  for (bool nccl : {false, true}) {
    SCOPED_TRACE(nccl ? "nccl" : "local");
    auto comm = make(nccl);
    const std::vector<float> values = {0.5f, 1001, 2002.5f, -3};
    DevVec<float> data(values), shard(size_t(4)), gathered(values);
    const rt::Request rs = comm->reduceScatterStart(2, data.get(), shard.get(), 4);
    const rt::Request ag = comm->allgatherStart(2, gathered.get(), 4);
    EXPECT_EQ(rs.kind(), rt::CollectiveKind::ReduceScatter);
    EXPECT_EQ(ag.kind(), rt::CollectiveKind::Allgather);
    EXPECT_EQ(ag.serial(), rs.serial() + 1);
    EXPECT_THROW((void)comm->reduceScatterStart(2, data.get(), shard.get(), 4), rt::Error);
    EXPECT_THROW((void)comm->allgatherStart(2, gathered.get(), 4), rt::Error);
    comm->wait(ag);
    comm->wait(rs);
    EXPECT_THROW(comm->wait(rs), rt::Error); // waited for already
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    expectClose(shard.host(), values, 0, 0, "the reduce-scatter over one rank");
    expectClose(data.host(), values, 0, 0, "out of place: the data is left alone");
    expectClose(gathered.host(), values, 0, 0, "the all-gather over one rank");
    const rt::Request in = comm->reduceScatterStart(2, data.get(), data.get(), 4); // in place
    EXPECT_THROW(comm->wait(rs), rt::Error); // stale: started again
    comm->wait(in);
    EXPECT_THROW((void)comm->reduceScatterStart(3, data.get(), data.get() + 1, 2), rt::Error);
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    expectClose(data.host(), values, 0, 0, "in place over one rank");
  }
}

//===--- launches (no GPU needed) ---------------------------------------------===//

// The launch shape generated kernels and the runtime's share (dtc/cuda.h).
static_assert(cuda::kThreads == 256 && cuda::kMaxBlocks == 4096);
static_assert(cuda::gridFor(0) == 1 && cuda::gridFor(256) == 1 && cuda::gridFor(257) == 2);
static_assert(cuda::gridFor(int64_t(1) << 40) == 4096 && cuda::gridFor(100, 32) == 4);

TEST(Launch, AFaultSaysItMayBeAnEarlierKernelsAndHowToRerun) {
  const std::string fault = rt::launchFailure("layerNorm", cudaErrorIllegalAddress, false);
  EXPECT_NE(fault.find("a kernel faulted"), std::string::npos) << fault;
  EXPECT_NE(fault.find("layerNorm"), std::string::npos) << fault;
  EXPECT_NE(fault.find("may be an earlier kernel's"), std::string::npos) << fault;
  EXPECT_NE(fault.find("rerun with CUDA_LAUNCH_BLOCKING=1"), std::string::npos) << fault;
  EXPECT_NE(fault.find(cudaGetErrorString(cudaErrorIllegalAddress)), std::string::npos) << fault;
  // Under CUDA_LAUNCH_BLOCKING=1 the check waits for the kernel: its own.
  const std::string own = rt::launchFailure("layerNorm", cudaErrorIllegalAddress, true);
  EXPECT_NE(own.find("kernel layerNorm faulted"), std::string::npos) << own;
  EXPECT_EQ(own.find("may be an earlier"), std::string::npos) << own;
  // A launch's own error (a bad configuration) names the launch alone.
  const std::string config = rt::launchFailure("softmax", cudaErrorInvalidConfiguration, false);
  EXPECT_EQ(config.rfind("CUDA error when launching softmax: ", 0), 0u) << config;
  EXPECT_EQ(config.find("CUDA_LAUNCH_BLOCKING"), std::string::npos) << config;
  EXPECT_TRUE(rt::isKernelFault(cudaErrorLaunchFailure));
  EXPECT_FALSE(rt::isKernelFault(cudaErrorInvalidValue));
}

} // namespace
