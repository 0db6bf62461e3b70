//===- kernels_test.cpp - dtc/kernels.h against naive references ---------===//
#include "dtc/kernels.h"
#include "support/error.h"
#include "kernels/parallel.h"
#include "kernels/simd.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

using namespace dtc;

namespace {

std::vector<float> randomVec(size_t n, unsigned seed, float lo = -1, float hi = 1) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto &x : v)
    x = d(gen);
  return v;
}

void expectNear(const std::vector<float> &got, const std::vector<float> &want, float tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol) << "at index " << i;
}

// Central finite difference of a scalar function of x (perturbed in place).
std::vector<float> numericGrad(std::vector<float> &x, const std::function<double()> &f,
                               float eps = 1e-2f) {
  std::vector<float> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    float orig = x[i];
    x[i] = orig + eps;
    double up = f();
    x[i] = orig - eps;
    double down = f();
    x[i] = orig;
    g[i] = static_cast<float>((up - down) / (2 * eps));
  }
  return g;
}

const rt::HostContext kHost{}; // the CPU kernels' context

// The scalar a loss or metric writes to out[0] (the slot starts as NaN).
float crossEntropyOf(const float *logits, const int32_t *labels, int64_t B, int64_t C) {
  float out = NAN;
  kern::crossEntropy(kHost, logits, labels, B, C, -100, &out);
  return out;
}
float accuracyOf(const float *logits, const int32_t *labels, int64_t B, int64_t C) {
  float out = NAN;
  kern::accuracy(kHost, logits, labels, B, C, -100, &out);
  return out;
}
float mseOf(const float *p, const float *t, int64_t n) {
  float out = NAN;
  kern::mse(kHost, p, t, n, &out);
  return out;
}

// One parameter's update: a group of one item.
void sgdOne(float *w, const float *g, float *buf, int64_t n, const rt::Hyper &h) {
  const rt::UpdateItem it{w, g, buf, nullptr, n};
  kern::sgdUpdate(kHost, &it, 1, h, nullptr);
}
void adamOne(float *w, const float *g, float *m, float *v, int64_t n, const rt::Hyper &h,
             bool decoupled) {
  const rt::UpdateItem it{w, g, m, v, n};
  kern::adamUpdate(kHost, &it, 1, h, nullptr, decoupled);
}
void applyMomentumOne(float *w, const float *buf, int64_t n, const rt::Hyper &h) {
  const rt::UpdateItem it{w, buf, nullptr, nullptr, n};
  kern::sgdApplyMomentum(kHost, &it, 1, h);
}

//===--- permute ----------------------------------------------------------===//

void checkPermute(std::vector<int64_t> shape, std::vector<int32_t> perm) {
  const int32_t rank = static_cast<int32_t>(shape.size());
  int64_t total = 1;
  for (auto s : shape)
    total *= s;
  auto x = randomVec(total, 7);
  std::vector<float> y(total, -99.0f), want(total);
  std::vector<int64_t> xStride(rank), yShape(rank);
  for (int32_t d = rank - 1, s = 1; d >= 0; s *= shape[d], --d)
    xStride[d] = s;
  for (int32_t d = 0; d < rank; ++d)
    yShape[d] = shape[perm[d]];
  // Naive: decompose each y linear index into a y multi-index.
  for (int64_t lin = 0; lin < total; ++lin) {
    int64_t rem = lin, xoff = 0;
    for (int32_t d = rank - 1; d >= 0; --d) {
      int64_t i = rem % yShape[d];
      rem /= yShape[d];
      xoff += i * xStride[perm[d]];
    }
    want[lin] = x[xoff];
  }
  kern::permute(kHost, x.data(), y.data(), rank, shape.data(), perm.data());
  expectNear(y, want, 0);
}

TEST(Kernels, Permute) {
  checkPermute({2, 3, 4}, {2, 0, 1});
  checkPermute({2, 3, 4}, {0, 2, 1});
  checkPermute({3, 1, 4, 5}, {3, 1, 0, 2});
  checkPermute({4, 6}, {1, 0});
  checkPermute({2, 3, 2, 2, 3, 2}, {5, 4, 3, 2, 1, 0});
  checkPermute({2, 3, 4}, {0, 1, 2});
  checkPermute({7}, {0});
}

//===--- axis reductions --------------------------------------------------===//

struct AxisShape {
  int64_t outer, n, inner;
};
const AxisShape kAxisShapes[] = {{2, 3, 4}, {3, 5, 1}, {1, 7, 130}, {4, 1, 3}};

TEST(Kernels, ReduceSumAndMax) {
  for (auto [O, N, I] : kAxisShapes) {
    auto x = randomVec(O * N * I, 11);
    std::vector<float> sum(O * I), mx(O * I), wantSum(O * I), wantMax(O * I);
    for (int64_t o = 0; o < O; ++o)
      for (int64_t k = 0; k < I; ++k) {
        double s = 0;
        float m = -INFINITY;
        for (int64_t i = 0; i < N; ++i) {
          s += x[(o * N + i) * I + k];
          m = std::max(m, x[(o * N + i) * I + k]);
        }
        wantSum[o * I + k] = float(s);
        wantMax[o * I + k] = m;
      }
    kern::reduceSum(kHost, x.data(), sum.data(), O, N, I);
    kern::reduceMax(kHost, x.data(), mx.data(), O, N, I);
    expectNear(sum, wantSum, 1e-5f);
    expectNear(mx, wantMax, 0);
  }
}

TEST(Kernels, ReduceMeanIsTheMeanOverTheMiddleAxis) {
  for (auto [O, N, I] : kAxisShapes) {
    auto x = randomVec(O * N * I, 14, -3, 5);
    std::vector<float> mean(O * I, NAN), want(O * I);
    for (int64_t o = 0; o < O; ++o)
      for (int64_t k = 0; k < I; ++k) {
        double s = 0;
        for (int64_t i = 0; i < N; ++i)
          s += x[(o * N + i) * I + k];
        want[o * I + k] = float(s / double(N));
      }
    kern::reduceMean(kHost, x.data(), mean.data(), O, N, I);
    expectNear(mean, want, 1e-6f);
  }
  // Exact on values whose sum and mean are representable.
  std::vector<float> x = {1, 2, 3, 4, 5, 6}, y(2);
  kern::reduceMean(kHost, x.data(), y.data(), 1, 3, 2); // columns {1,3,5}, {2,4,6}
  EXPECT_EQ(y, (std::vector<float>{3, 4}));
  kern::reduceMean(kHost, x.data(), y.data(), 2, 3, 1); // rows {1,2,3}, {4,5,6}
  EXPECT_EQ(y, (std::vector<float>{2, 5}));
}

TEST(Kernels, ReduceMaxGradGoesToFirstMaximum) {
  // [outer=1, n=4, inner=2]; column 0 has a tie at rows 1 and 3.
  std::vector<float> x = {0, 5, 3, 1, 2, 9, 3, 0};
  std::vector<float> y(2), dy = {10, 20}, dx(8, -1);
  kern::reduceMax(kHost, x.data(), y.data(), 1, 4, 2);
  kern::reduceMaxGrad(kHost, x.data(), y.data(), dy.data(), dx.data(), 1, 4, 2);
  expectNear(dx, {0, 0, 10, 0, 0, 20, 0, 0}, 0);
  // Chunked case (inner > 64): every column's gradient lands exactly once.
  for (auto [O, N, I] : kAxisShapes) {
    auto xs = randomVec(O * N * I, 12);
    std::vector<float> ys(O * I), dys = randomVec(O * I, 13), dxs(O * N * I, -1);
    kern::reduceMax(kHost, xs.data(), ys.data(), O, N, I);
    kern::reduceMaxGrad(kHost, xs.data(), ys.data(), dys.data(), dxs.data(), O, N, I);
    std::vector<float> back(O * I);
    kern::reduceSum(kHost, dxs.data(), back.data(), O, N, I);
    expectNear(back, dys, 0);
  }
}

//===--- sumTo ------------------------------------------------------------===//

void checkSumTo(std::vector<int64_t> xs, std::vector<int64_t> ys) {
  const int32_t xr = int32_t(xs.size()), yr = int32_t(ys.size());
  int64_t total = 1, ytotal = 1;
  for (auto s : xs)
    total *= s;
  for (auto s : ys)
    ytotal *= s;
  auto x = randomVec(total, 21);
  std::vector<double> acc(ytotal, 0);
  for (int64_t lin = 0; lin < total; ++lin) {
    int64_t rem = lin, yoff = 0, ystride = 1;
    for (int32_t d = xr - 1; d >= 0; --d) {
      int64_t i = rem % xs[d];
      rem /= xs[d];
      int32_t yd = d - (xr - yr);
      if (yd >= 0) {
        if (ys[yd] != 1)
          yoff += i * ystride;
        ystride *= ys[yd];
      }
    }
    acc[yoff] += x[lin];
  }
  std::vector<float> want(acc.begin(), acc.end()), y(ytotal, 123.0f);
  kern::sumTo(kHost, x.data(), xr, xs.data(), y.data(), yr, ys.data());
  expectNear(y, want, 1e-5f);
}

TEST(Kernels, SumToInvertsBroadcasting) {
  checkSumTo({2, 3, 4}, {4});
  checkSumTo({2, 3, 4}, {3, 1});
  checkSumTo({2, 3, 4}, {1, 3, 4});
  checkSumTo({2, 3, 4}, {2, 1, 4});
  checkSumTo({2, 3, 4}, {2, 3, 1});
  checkSumTo({2, 3, 4}, {});
  checkSumTo({2, 3, 4}, {2, 3, 4});
  checkSumTo({5, 1, 3}, {1, 3});
  checkSumTo({64, 10}, {10});
}

//===--- softmax family ---------------------------------------------------===//

TEST(Kernels, SoftmaxAndLogSoftmaxValues) {
  for (auto [O, N, I] : kAxisShapes) {
    auto x = randomVec(O * N * I, 31, -5, 5);
    std::vector<float> sm(x.size()), lsm(x.size()), want(x.size());
    for (int64_t o = 0; o < O; ++o)
      for (int64_t k = 0; k < I; ++k) {
        double s = 0;
        for (int64_t i = 0; i < N; ++i)
          s += std::exp(double(x[(o * N + i) * I + k]));
        for (int64_t i = 0; i < N; ++i)
          want[(o * N + i) * I + k] = float(std::exp(double(x[(o * N + i) * I + k])) / s);
      }
    kern::softmax(kHost, x.data(), sm.data(), O, N, I);
    kern::logSoftmax(kHost, x.data(), lsm.data(), O, N, I);
    expectNear(sm, want, 1e-6f);
    for (auto &w : want)
      w = std::log(w);
    expectNear(lsm, want, 1e-5f);
  }
}

TEST(Kernels, SoftmaxGradsMatchFiniteDifferences) {
  for (auto [O, N, I] : {AxisShape{2, 4, 3}, AxisShape{3, 5, 1}}) {
    const size_t n = size_t(O * N * I);
    auto x = randomVec(n, 41, -2, 2), c = randomVec(n, 42);
    std::vector<float> y(n), dx(n);
    for (bool log : {false, true}) {
      auto fwd = log ? kern::logSoftmax : kern::softmax;
      auto loss = [&] { // L = sum(c * f(x))
        fwd(kHost, x.data(), y.data(), O, N, I);
        double s = 0;
        for (size_t i = 0; i < n; ++i)
          s += double(c[i]) * y[i];
        return s;
      };
      auto want = numericGrad(x, loss, 1e-3f);
      fwd(kHost, x.data(), y.data(), O, N, I);
      (log ? kern::logSoftmaxGrad : kern::softmaxGrad)(kHost, y.data(), c.data(), dx.data(), O,
                                                       N, I);
      expectNear(dx, want, 2e-3f);
    }
  }
}

//===--- losses and metrics -----------------------------------------------===//

TEST(Kernels, CrossEntropyValueAndGrad) {
  const int64_t B = 4, C = 5;
  auto logits = randomVec(B * C, 51, -3, 3);
  std::vector<int32_t> labels = {0, 4, 2, 2};
  double want = 0;
  for (int64_t b = 0; b < B; ++b) {
    double s = 0;
    for (int64_t c = 0; c < C; ++c)
      s += std::exp(double(logits[b * C + c]));
    want += std::log(s) - logits[b * C + labels[b]];
  }
  EXPECT_NEAR(crossEntropyOf(logits.data(), labels.data(), B, C), want / B, 1e-6);

  const float dloss = 0.7f;
  auto num = numericGrad(logits, [&] {
    return dloss * double(crossEntropyOf(logits.data(), labels.data(), B, C));
  }, 1e-2f);
  std::vector<float> grad(B * C);
  kern::crossEntropyGrad(kHost, logits.data(), labels.data(), B, C, -100, &dloss, grad.data());
  expectNear(grad, num, 1e-3f);
}

// A death test's regular expression matching `text` literally.
std::string literally(const std::string &text) {
  std::string r;
  for (char ch : text) {
    if (std::strchr("\\^$.|?*+()[]{}", ch))
      r += '\\';
    r += ch;
  }
  return r;
}

TEST(Kernels, CrossEntropyLabelOutOfRangeIsFatal) {
  std::vector<float> logits(6, 0.0f);
  std::vector<int32_t> labels = {1, 3};
  float out = 0;
  EXPECT_EXIT(kern::crossEntropy(kHost, logits.data(), labels.data(), 2, 3, -100, &out),
              ::testing::ExitedWithCode(1), "train: error: label 3 in row 1");
  labels = {-1, 0};
  float dl = 1;
  EXPECT_EXIT(kern::crossEntropyGrad(kHost, logits.data(), labels.data(), 2, 3, -100, &dl, logits.data()),
              ::testing::ExitedWithCode(1), "label -1 in row 0");
  // The whole line, whose text the CUDA executor throws for the same label
  // (rt::labelOutsideMessage; runtime.cuda.Kernels.OutOfRange*).
  EXPECT_EQ(rt::labelOutsideMessage(-1, 0, 3),
            "label -1 in row 0 is outside the class range [0, 3)");
  labels = {0, 2, 7, 9};
  logits.assign(12, 0.0f);
  EXPECT_EXIT(kern::accuracy(kHost, logits.data(), labels.data(), 4, 3, -100, &out),
              ::testing::ExitedWithCode(1),
              "^train: error: " + literally(rt::labelOutsideMessage(7, 2, 3)) + "\n$");
}

TEST(Kernels, MseValueAndGrad) {
  auto p = randomVec(7, 61), t = randomVec(7, 62);
  double want = 0;
  for (int i = 0; i < 7; ++i)
    want += double(p[i] - t[i]) * (p[i] - t[i]);
  EXPECT_NEAR(mseOf(p.data(), t.data(), 7), want / 7, 1e-7);
  const float dloss = 2.0f;
  auto num = numericGrad(p, [&] { return dloss * double(mseOf(p.data(), t.data(), 7)); });
  std::vector<float> grad(7);
  kern::mseGrad(kHost, p.data(), t.data(), 7, &dloss, grad.data());
  expectNear(grad, num, 1e-4f);
}

TEST(Kernels, AccuracyUsesFirstMaximum) {
  // Row 0: argmax 2 (label 2 ok). Row 1: tie between 0 and 1 -> 0 (label 1 wrong).
  // Row 2: argmax 1 (label 1 ok). Row 3: argmax 0 (label 2 wrong).
  std::vector<float> logits = {0, 1, 5, 3, 3, 1, -1, 0, -2, 9, 1, 2};
  std::vector<int32_t> labels = {2, 1, 1, 2};
  EXPECT_FLOAT_EQ(accuracyOf(logits.data(), labels.data(), 4, 3), 0.5f);
}

// The scalar goes to out[0] and nowhere else; B = 0 (n = 0) writes 0.
TEST(Kernels, LossesAndMetricsWriteThroughOut) {
  const std::vector<float> logits = {0, 1, 5, /**/ 3, 3, 1};
  const std::vector<int32_t> labels = {2, 0};
  double ce = 0;
  for (int b = 0; b < 2; ++b) {
    double s = 0;
    for (int c = 0; c < 3; ++c)
      s += std::exp(double(logits[b * 3 + c]));
    ce += std::log(s) - logits[b * 3 + labels[b]];
  }
  std::vector<float> out(4, -7.0f);
  kern::crossEntropy(kHost, logits.data(), labels.data(), 2, 3, -100, out.data() + 1);
  EXPECT_NEAR(out[1], ce / 2, 1e-6);
  kern::accuracy(kHost, logits.data(), labels.data(), 2, 3, -100, out.data() + 2);
  EXPECT_EQ(out[2], 1.0f);
  const std::vector<float> p = {1, 2, 3}, t = {1, 0, 6};
  kern::mse(kHost, p.data(), t.data(), 3, out.data() + 3);
  EXPECT_EQ(out[3], 13.0f / 3.0f);
  EXPECT_EQ(out[0], -7.0f); // untouched
  kern::crossEntropy(kHost, logits.data(), labels.data(), 0, 3, -100, out.data());
  kern::accuracy(kHost, logits.data(), labels.data(), 0, 3, -100, out.data() + 1);
  kern::mse(kHost, p.data(), t.data(), 0, out.data() + 2);
  EXPECT_EQ(out, (std::vector<float>{0, 0, 0, 13.0f / 3.0f}));
}

//===--- fill, copy -------------------------------------------------------===//

TEST(Kernels, FillAndCopy) {
  std::vector<float> a(1003, -1.0f), b(1005, -1.0f);
  kern::fill(kHost, a.data() + 1, 1001, 2.5f);
  EXPECT_EQ(a.front(), -1.0f);
  EXPECT_EQ(a.back(), -1.0f);
  EXPECT_TRUE(std::all_of(a.begin() + 1, a.end() - 1, [](float v) { return v == 2.5f; }));
  const auto src = randomVec(1003, 15);
  kern::copy(kHost, b.data() + 1, src.data(), 1003);
  EXPECT_EQ(b.front(), -1.0f);
  EXPECT_EQ(b.back(), -1.0f);
  EXPECT_EQ(std::vector<float>(b.begin() + 1, b.end() - 1), src);
  kern::copy(kHost, b.data(), b.data(), 1005); // onto itself: unchanged
  EXPECT_EQ(std::vector<float>(b.begin() + 1, b.end() - 1), src);
  kern::fill(kHost, b.data(), 0, 9.0f); // n = 0: nothing
  kern::copy(kHost, b.data(), a.data(), 0);
  EXPECT_EQ(b.front(), -1.0f);
}

//===--- optimizers: expected values from torch.optim (PyTorch 1.13) -------===//

using Trajectory = std::vector<std::vector<float>>;
const std::vector<float> kW0 = {0.5f, -1.0f, 2.0f};
const Trajectory kGrads = {{0.1f, -0.2f, 0.3f}, {-0.4f, 0.5f, 0.6f}, {0.7f, -0.8f, -0.9f}};

rt::Hyper hyper(float lr) {
  rt::Hyper h{};
  h.lr = lr;
  h.beta1 = 0.9f;
  h.beta2 = 0.999f;
  h.eps = 1e-8f;
  return h;
}

void runSgd(rt::Hyper h, const Trajectory &want) {
  std::vector<float> w = kW0, buf(3, 0.0f);
  for (size_t s = 0; s < kGrads.size(); ++s) {
    h.step = int64_t(s + 1);
    sgdOne(w.data(), kGrads[s].data(), buf.data(), 3, h);
    expectNear(w, want[s], 2e-6f);
  }
}

void runAdam(rt::Hyper h, bool decoupled, const Trajectory &want) {
  std::vector<float> w = kW0, m(3, 0.0f), v(3, 0.0f);
  for (size_t s = 0; s < kGrads.size(); ++s) {
    h.step = int64_t(s + 1);
    adamOne(w.data(), kGrads[s].data(), m.data(), v.data(), 3, h, decoupled);
    expectNear(w, want[s], 2e-6f);
  }
}

TEST(Optimizers, SgdPlain) {
  // Momentum 0: the buffer must not matter (pass none).
  rt::Hyper h = hyper(0.1f);
  std::vector<float> w = kW0;
  const Trajectory want = {{0.49f, -0.98f, 1.97f}, {0.53f, -1.03f, 1.91f}, {0.46f, -0.95f, 2.0f}};
  for (size_t s = 0; s < 3; ++s) {
    h.step = int64_t(s + 1);
    sgdOne(w.data(), kGrads[s].data(), nullptr, 3, h);
    expectNear(w, want[s], 2e-6f);
  }
}

TEST(Optimizers, SgdMomentumDampeningWeightDecay) {
  rt::Hyper h = hyper(0.1f);
  h.momentum = 0.9f;
  h.dampening = 0.1f;
  h.weightDecay = 0.01f;
  runSgd(h, {{0.489499986f, -0.978999972f, 1.96800005f},
             {0.515609443f, -1.00421882f, 1.88342881f},
             {0.475643903f, -0.954012036f, 1.88661969f}});
}

TEST(Optimizers, SgdNesterov) {
  rt::Hyper h = hyper(0.1f);
  h.momentum = 0.9f;
  h.nesterov = 1;
  h.weightDecay = 0.01f;
  runSgd(h, {{0.480049998f, -0.960099995f, 1.93920004f},
             {0.546632886f, -1.03626585f, 1.79559553f},
             {0.436950952f, -0.906710267f, 1.88968515f}});
}

TEST(Optimizers, AdamWithL2) {
  rt::Hyper h = hyper(0.01f);
  h.weightDecay = 0.1f;
  runAdam(h, false, {{0.49000001f, -0.99000001f, 1.99000001f},
                     {0.494211227f, -0.991946876f, 1.98013783f},
                     {0.489995003f, -0.987096906f, 1.97784245f}});
}

TEST(Optimizers, AdamW) {
  rt::Hyper h = hyper(0.01f);
  h.weightDecay = 0.1f;
  runAdam(h, true, {{0.489500016f, -0.989000022f, 1.98800004f},
                    {0.494605541f, -0.99243319f, 1.97636032f},
                    {0.490800053f, -0.988048613f, 1.97504997f}});
}

TEST(Optimizers, AdamBetasAndEps) {
  rt::Hyper h = hyper(0.01f);
  h.beta1 = 0.8f;
  h.beta2 = 0.99f;
  h.eps = 1e-3f;
  runAdam(h, false, {{0.490099013f, -0.990049779f, 1.99003327f},
                     {0.496162504f, -0.994988322f, 1.98023045f},
                     {0.492305249f, -0.991121233f, 1.98166597f}});
}

} // namespace

//===--- parallelFor and the threaded updates ---------------------------------===//

namespace {

// Restores one thread when a test ends (the pool is process-wide).
struct KernelThreads {
  explicit KernelThreads(int n, bool pin = false) { rt::setKernelThreads(n, pin); }
  ~KernelThreads() { rt::setKernelThreads(1, false); }
};

} // namespace

// y[i_0, ..., i_r] = x at the index whose dimension perm[d] is i_d: by the
// formula, over ranks 1 to 5, the blocked layout's conversions (whose
// contiguous dimensions the kernel moves as one) and 1 to 3 threads.
// copyRows (a split or concat piece) copies len floats of each row between
// strides, over the cores, and touches nothing else.
TEST(CopyRows, CopiesEachRowBetweenStrides) {
  for (int threads : {1, 3}) {
    KernelThreads t(threads);
    const int64_t rows = 300, len = 5, srcStride = 12, dstStride = 7;
    const auto src = randomVec(size_t(rows * srcStride), 91);
    std::vector<float> dst(size_t(rows * dstStride), -9.0f);
    kern::copyRows(kHost, src.data() + 4, srcStride, dst.data() + 1, dstStride, rows, len);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < dstStride; ++i) {
        const float got = dst[size_t(r * dstStride + i)];
        if (i >= 1 && i < 1 + len)
          ASSERT_EQ(got, src[size_t(r * srcStride + 4 + i - 1)]) << r << " " << i;
        else
          ASSERT_EQ(got, -9.0f) << "outside the piece: " << r << " " << i;
      }
  }
}

TEST(Permute, MatchesTheIndexFormula) {
  struct Case {
    std::vector<int64_t> shape;
    std::vector<int32_t> perm;
  };
  const std::vector<Case> cases = {
      {{7}, {0}},
      {{3, 5}, {1, 0}},
      {{2, 3, 4}, {2, 0, 1}},
      {{4, 2, 16, 7, 7}, {0, 1, 3, 4, 2}}, // NCHW split -> nChw16c
      {{4, 2, 7, 7, 16}, {0, 1, 4, 2, 3}}, // and back
      {{2, 3, 4, 5}, {0, 2, 3, 1}},
      {{3, 1, 4, 1, 5}, {4, 3, 2, 1, 0}},
  };
  for (int threads : {1, 2, 3}) {
    KernelThreads pool(threads);
    for (const Case &k : cases) {
      const int32_t rank = int32_t(k.shape.size());
      size_t total = 1;
      for (int64_t d : k.shape)
        total *= size_t(d);
      const auto x = randomVec(total, 101);
      std::vector<float> y(total, -7.0f), want(total);
      std::vector<int64_t> strides(static_cast<size_t>(rank), 1);
      std::vector<int64_t> yShape(static_cast<size_t>(rank));
      for (int32_t d = rank - 2; d >= 0; --d)
        strides[size_t(d)] = strides[size_t(d + 1)] * k.shape[size_t(d + 1)];
      for (int32_t d = 0; d < rank; ++d)
        yShape[size_t(d)] = k.shape[size_t(k.perm[size_t(d)])];
      for (size_t i = 0; i < total; ++i) {
        size_t rest = i, at = 0;
        for (int32_t d = rank - 1; d >= 0; --d) {
          const size_t id = rest % size_t(yShape[size_t(d)]);
          rest /= size_t(yShape[size_t(d)]);
          at += id * size_t(strides[size_t(k.perm[size_t(d)])]);
        }
        want[i] = x[at];
      }
      kern::permute(kHost, x.data(), y.data(), rank, k.shape.data(), k.perm.data());
      EXPECT_EQ(y, want) << "rank " << rank << ", " << threads << " threads";
    }
  }
}

TEST(ParallelFor, CoversEveryIndexOnceInAlignedRanges) {
  for (int threads : {1, 2, 3, 4}) {
    KernelThreads pool(threads);
    EXPECT_EQ(rt::kernelThreads(), threads);
    // Many jobs in a row, of changing sizes: a helper that fell behind one
    // job must not run a range of the next twice or miss one.
    for (int64_t n : {int64_t(1), int64_t(15), int64_t(16), int64_t(1000), int64_t(4097),
                      int64_t(100003)}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      for (int job = 0; job < 50; ++job) {
        rt::parallelFor(n, 64, [&](int64_t b, int64_t e) {
          EXPECT_EQ(b % 16, 0) << "range starts mid cache line";
          for (int64_t i = b; i < e; ++i)
            hits[size_t(i)].fetch_add(1, std::memory_order_relaxed);
        });
      }
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(hits[size_t(i)].load(), 50) << "threads " << threads << " n " << n << " i " << i;
    }
  }
}

// Jobs of few chunks followed by jobs of many, each with its own closure
// and counts on the caller's stack (as the kernels' are): a helper that
// loaded the last claim of a small job must never take a chunk of the next
// job before it is published (with the chunk count once read from the next
// job's field beside the old job's claim, such a helper ran a chunk twice,
// or its function on the wrong job's closure: the GPT example crashed in a
// layer norm once in about a hundred 150-step runs on 2 threads).
TEST(ParallelFor, NeverRunsAChunkOfAJobBeforeItStarts) {
  for (int threads : {2, 3}) {
    KernelThreads pool(threads);
    for (int job = 0; job < 100000; ++job) {
      // 2 chunks, then threads x 8 (job n >= minPerThread x chunks).
      const int64_t n = job % 2 ? 2 : 4096, minPerThread = job % 2 ? 1 : 16;
      std::array<std::atomic<int>, 4096> hits{};
      rt::parallelFor(n, minPerThread, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i)
          hits[size_t(i)].fetch_add(1, std::memory_order_relaxed);
      });
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(hits[size_t(i)].load(), 1)
            << "threads " << threads << " job " << job << " index " << i;
    }
  }
}

TEST(ParallelFor, SplitsLargeJobsAndRunsSmallOnesInline) {
  KernelThreads pool(2);
  std::atomic<int> ranges{0};
  rt::parallelFor(1 << 20, 1 << 15, [&](int64_t, int64_t) { ranges.fetch_add(1); });
  EXPECT_GT(ranges.load(), 1); // cut into chunks the threads claim
  ranges = 0;
  rt::parallelFor(1000, 1 << 15, [&](int64_t b, int64_t e) {
    ranges.fetch_add(1);
    EXPECT_EQ(b, 0);
    EXPECT_EQ(e, 1000);
  });
  EXPECT_EQ(ranges.load(), 1); // below the minimum: one call, no hand-over
}

// The updates are elementwise: any split gives bit-identical results.
TEST(ParallelFor, ThreadedUpdatesMatchOneThreadBitForBit) {
  const size_t n = 300007; // several chunks, and a ragged end
  const std::vector<float> w0 = randomVec(n, 1), g = randomVec(n, 2), s0 = randomVec(n, 3, 0, 1);
  rt::Hyper h{};
  h.lr = 0.01f;
  h.momentum = 0.9f;
  h.weightDecay = 1e-4f;
  h.beta1 = 0.9f;
  h.beta2 = 0.999f;
  h.eps = 1e-8f;
  h.step = 3;
  auto run = [&](int threads) {
    KernelThreads pool(threads, /*pin=*/threads > 1);
    std::vector<float> w = w0, buf = s0, m = s0, v = s0, w2 = w0;
    sgdOne(w.data(), g.data(), buf.data(), int64_t(n), h);
    adamOne(w2.data(), g.data(), m.data(), v.data(), int64_t(n), h, true);
    return std::vector<std::vector<float>>{w, buf, w2, m, v};
  };
  const auto one = run(1), two = run(2), three = run(3);
  EXPECT_NE(one[0], w0); // the update did something
  EXPECT_EQ(one, two);
  EXPECT_EQ(one, three);
}

namespace {

// Momentum folded into the buckets (dtc.fold_momentum) on W ranks: each rank
// accumulates its gradient into its copy of the buffer with the share
// mu / W, the all-reduce (here a sum) gives the new buffer, and
// sgdApplyMomentum steps. Against sgdUpdate on the summed gradient, over
// steps 1 (buffer = gradient) to 4, for W = 1, 2, 3.
TEST(Kernels, FoldedMomentumMatchesSgdOnTheSummedGradient) {
  const int64_t n = 1000;
  for (int W = 1; W <= 3; ++W) {
    rt::Hyper h = hyper(0.1f);
    h.momentum = 0.9f;
    std::vector<float> w = randomVec(n, 7), wRef = w, buf(n, 0.0f), bufRef(n, 0.0f);
    for (int64_t step = 1; step <= 4; ++step) {
      h.step = step;
      const float share = rt::momentumShare(h, W);
      EXPECT_EQ(share, step == 1 ? 0.0f : 0.9f / float(W));
      std::vector<float> sum(n, 0.0f), gSum(n, 0.0f);
      for (int r = 0; r < W; ++r) {
        std::vector<float> g = randomVec(n, unsigned(100 * step + r)), mine = buf;
        kern::momentumAccumulate(kHost, mine.data(), g.data(), n, share);
        for (int64_t i = 0; i < n; ++i) {
          sum[i] += mine[i];
          gSum[i] += g[i];
        }
      }
      buf = sum; // the all-reduce
      applyMomentumOne(w.data(), buf.data(), n, h);
      sgdOne(wRef.data(), gSum.data(), bufRef.data(), n, h);
      expectNear(buf, bufRef, 1e-5f);
      expectNear(w, wRef, 1e-6f);
    }
  }
}

// Grouped updates: one call over several parameters of different sizes
// (one empty, one split over the threads) equals one call per parameter,
// bit for bit, for parameters, momentum buffers and moments; with a
// gradient scale (the clip factor), one call per parameter on gradients
// scaled beforehand (what a separate multiply would have written).
TEST(Optimizers, GroupedUpdatesMatchOneCallPerItemBitForBit) {
  KernelThreads pool(2);
  const std::vector<int64_t> sizes = {3, 0, 1000, 100003, 17};
  const size_t count = sizes.size();
  rt::Hyper h = hyper(0.05f);
  h.momentum = 0.9f;
  h.dampening = 0.1f;
  h.weightDecay = 0.01f;
  struct State {
    std::vector<std::vector<float>> w, g, s0, s1;
  };
  auto init = [&] {
    State st;
    for (size_t i = 0; i < count; ++i) {
      const size_t n = size_t(sizes[i]);
      st.w.push_back(randomVec(n, unsigned(10 + i)));
      st.g.push_back(randomVec(n, unsigned(20 + i)));
      st.s0.push_back(randomVec(n, unsigned(30 + i)));
      st.s1.push_back(randomVec(n, unsigned(40 + i), 0, 1));
    }
    return st;
  };
  auto itemsOf = [&](State &st, bool withS0) {
    std::vector<rt::UpdateItem> items;
    for (size_t i = 0; i < count; ++i)
      items.push_back({st.w[i].data(), st.g[i].data(), withS0 ? st.s0[i].data() : nullptr,
                       st.s1[i].data(), sizes[i]});
    return items;
  };
  const State start = init();
  const float clip = 0.3719f;
  for (int kind = 0; kind < 10; ++kind) { // SGD: step 1, step 4, no buffer; Adam; AdamW
    h.step = kind % 5 == 0 ? 1 : 4;
    const bool adam = kind % 5 >= 3, withS0 = kind % 5 != 2, scaled = kind >= 5;
    State grouped = start, single = start;
    if (scaled)
      for (auto &g : single.g)
        for (float &x : g)
          x *= clip;
    const auto items = itemsOf(grouped, withS0);
    const float *scale = scaled ? &clip : nullptr;
    if (adam)
      kern::adamUpdate(kHost, items.data(), int32_t(count), h, scale, kind % 5 == 4);
    else
      kern::sgdUpdate(kHost, items.data(), int32_t(count), h, scale);
    for (size_t i = 0; i < count; ++i) {
      State &st = single;
      if (adam)
        adamOne(st.w[i].data(), st.g[i].data(), st.s0[i].data(), st.s1[i].data(), sizes[i], h,
                kind % 5 == 4);
      else
        sgdOne(st.w[i].data(), st.g[i].data(), withS0 ? st.s0[i].data() : nullptr, sizes[i], h);
    }
    EXPECT_NE(grouped.w, start.w) << "kind " << kind; // the update did something
    EXPECT_EQ(grouped.w, single.w) << "kind " << kind;
    EXPECT_EQ(grouped.s0, single.s0) << "kind " << kind;
    EXPECT_EQ(grouped.s1, single.s1) << "kind " << kind;
  }
}

// share == 0 copies g into the buffer whatever it held (NaN included);
// otherwise buf = g + share * buf.
TEST(Kernels, MomentumAccumulate) {
  const int64_t n = 1001;
  const auto g = randomVec(n, 50), old = randomVec(n, 51);
  std::vector<float> buf(n, NAN);
  kern::momentumAccumulate(kHost, buf.data(), g.data(), n, 0.0f);
  EXPECT_EQ(buf, g);
  buf = old;
  kern::momentumAccumulate(kHost, buf.data(), g.data(), n, 0.45f);
  std::vector<float> want(n);
  for (int64_t i = 0; i < n; ++i)
    want[i] = g[i] + 0.45f * old[i];
  expectNear(buf, want, 1e-6f);
  buf = old;
  kern::momentumAccumulate(kHost, buf.data(), g.data(), 0, 0.0f); // n = 0: nothing
  EXPECT_EQ(buf, old);
}

// Each item's g is the summed momentum buffer: w -= lr * g, whatever the
// momentum, dampening, Nesterov flag and weight decay; g and s0 untouched.
TEST(Kernels, SgdApplyMomentumIsPlainSgdOnTheBuffer) {
  rt::Hyper h = hyper(0.1f);
  h.momentum = 0.9f;
  h.dampening = 0.3f;
  h.nesterov = 1;
  h.weightDecay = 0.5f;
  h.step = 3;
  const std::vector<int64_t> sizes = {5, 0, 70001};
  std::vector<std::vector<float>> w, buf, s0;
  std::vector<rt::UpdateItem> items;
  for (size_t i = 0; i < sizes.size(); ++i) {
    w.push_back(randomVec(size_t(sizes[i]), unsigned(60 + i)));
    buf.push_back(randomVec(size_t(sizes[i]), unsigned(70 + i)));
    s0.push_back(randomVec(size_t(sizes[i]), unsigned(80 + i)));
  }
  const auto w0 = w, buf0 = buf, s00 = s0;
  for (size_t i = 0; i < sizes.size(); ++i)
    items.push_back({w[i].data(), buf[i].data(), s0[i].data(), nullptr, sizes[i]});
  kern::sgdApplyMomentum(kHost, items.data(), int32_t(items.size()), h);
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::vector<float> want(w0[i].size());
    for (size_t j = 0; j < want.size(); ++j)
      want[j] = w0[i][j] - h.lr * buf0[i][j];
    expectNear(w[i], want, 1e-6f);
  }
  EXPECT_EQ(buf, buf0);
  EXPECT_EQ(s0, s00);
}

} // namespace

//===--- dropout ------------------------------------------------------------===//

TEST(Dropout, KeepsAboutOneMinusPScaledAndTheGradientUsesTheSameMask) {
  const int64_t n = 200000;
  std::vector<float> x(static_cast<size_t>(n), 2.0f), y(x.size()), dy(x.size(), 3.0f),
      dx(x.size());
  for (float p : {0.0f, 0.1f, 0.5f, 0.9f}) {
    const uint64_t seed = rt::stepRngSeed(7, 3, 0);
    kern::dropout(kHost, x.data(), y.data(), n, p, seed, 1);
    kern::dropoutGrad(kHost, dy.data(), dx.data(), n, p, seed, 1);
    int64_t kept = 0;
    for (int64_t i = 0; i < n; ++i) {
      const bool keep = rt::dropoutKeeps(seed, 1, i, p);
      const float scale = 1.0f / (1.0f - p); // the kernel's: x * (1 / (1 - p))
      ASSERT_EQ(y[size_t(i)], keep ? 2.0f * scale : 0.0f) << i;
      ASSERT_EQ(dx[size_t(i)], keep ? 3.0f * scale : 0.0f) << i;
      kept += keep;
    }
    // Within 5 standard deviations of n (1 - p).
    const double expect = double(n) * (1 - p), sd = std::sqrt(double(n) * p * (1 - p));
    EXPECT_NEAR(double(kept), expect, 5 * sd + 1e-9) << "p " << p;
  }
  kern::dropout(kHost, x.data(), y.data(), n, 1.0f, 5, 0);
  EXPECT_EQ(*std::max_element(y.begin(), y.end()), 0.0f) << "p = 1 drops everything";
}

TEST(Dropout, MasksDifferBySaltStepAndRankAndRepeatForTheSameStep) {
  auto mask = [](uint64_t seed, int64_t salt) {
    std::vector<bool> m(4096);
    for (size_t i = 0; i < m.size(); ++i)
      m[i] = rt::dropoutKeeps(seed, salt, int64_t(i), 0.5f);
    return m;
  };
  const auto base = mask(rt::stepRngSeed(1, 10, 0), 0);
  EXPECT_EQ(base, mask(rt::stepRngSeed(1, 10, 0), 0)); // a resumed run draws it again
  for (const auto &other : {mask(rt::stepRngSeed(1, 10, 0), 1), mask(rt::stepRngSeed(1, 11, 0), 0),
                            mask(rt::stepRngSeed(1, 10, 1), 0), mask(rt::stepRngSeed(2, 10, 0), 0)}) {
    size_t same = 0;
    for (size_t i = 0; i < base.size(); ++i)
      same += base[i] == other[i];
    // Independent masks agree on about half the elements.
    EXPECT_GT(same, base.size() * 4 / 10);
    EXPECT_LT(same, base.size() * 6 / 10);
  }
}

//===--- batch normalization ------------------------------------------------===//

namespace {
// x [n, C, inner]: the double-precision batch statistics of channel c.
void channelStats(const std::vector<float> &x, int64_t n, int64_t C, int64_t inner, int64_t c,
                  double &mean, double &var) {
  double s = 0, q = 0;
  for (int64_t k = 0; k < n; ++k)
    for (int64_t i = 0; i < inner; ++i)
      s += x[size_t((k * C + c) * inner + i)];
  mean = s / double(n * inner);
  for (int64_t k = 0; k < n; ++k)
    for (int64_t i = 0; i < inner; ++i) {
      const double d = x[size_t((k * C + c) * inner + i)] - mean;
      q += d * d;
    }
  var = q / double(n * inner);
}
} // namespace

TEST(BatchNorm, TrainingUsesTheBatchStatisticsAndInferenceTheGivenOnes) {
  const int64_t n = 5, C = 3, inner = 7;
  const size_t T = size_t(n * C * inner);
  // Channel c offset by 3c: a mean far from 0 that the kernel must remove.
  auto x = randomVec(T, 31, -1, 1);
  for (int64_t k = 0; k < n; ++k)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < inner; ++i)
        x[size_t((k * C + c) * inner + i)] += 3.0f * float(c);
  const std::vector<float> w{0.5f, 1.0f, 2.0f}, b{0.1f, -0.2f, 0.3f};
  const float eps = 1e-5f;
  std::vector<float> y(T), mean(C), var(C), yi(T);
  kern::batchNorm(kHost, x.data(), w.data(), b.data(), y.data(), mean.data(), var.data(), n, C,
                  inner, eps, false, 1);
  std::vector<float> yr(T), mr(C), vr(C);
  kern::batchNorm(kHost, x.data(), w.data(), b.data(), yr.data(), mr.data(), vr.data(), n, C,
                  inner, eps, true, 1);
  for (size_t at = 0; at < T; ++at)
    EXPECT_EQ(yr[at], std::max(y[at], 0.0f)) << "relu at " << at;
  for (int64_t c = 0; c < C; ++c) {
    double m, v;
    channelStats(x, n, C, inner, c, m, v);
    EXPECT_NEAR(mean[size_t(c)], m, 1e-6);
    EXPECT_NEAR(var[size_t(c)], v, 1e-6); // biased, as torch normalizes with
    for (int64_t k = 0; k < n; ++k)
      for (int64_t i = 0; i < inner; ++i) {
        const size_t at = size_t((k * C + c) * inner + i);
        EXPECT_NEAR(y[at], (x[at] - m) / std::sqrt(v + eps) * w[size_t(c)] + b[size_t(c)], 1e-5);
      }
  }
  // Inference with other statistics: those, not the batch's.
  const std::vector<float> rm{1.0f, 2.0f, 3.0f}, rv{4.0f, 0.25f, 1.0f};
  kern::batchNormInference(kHost, x.data(), w.data(), b.data(), rm.data(), rv.data(), yi.data(),
                           n, C, inner, eps, false, 1);
  for (size_t at = 0; at < T; ++at) {
    const size_t c = (at / size_t(inner)) % size_t(C);
    EXPECT_NEAR(yi[at], (x[at] - rm[c]) / std::sqrt(rv[c] + eps) * w[c] + b[c], 1e-5);
  }
}

// Layer norm against a double-precision reference of torch.nn.LayerNorm's
// formulas, and the same bits at any --threads (rows over several blocks,
// in tiles of four rows and alone; widths with a tail, a lone vector of 8,
// and whole pairs of vectors).
class LayerNormTest : public ::testing::TestWithParam<int64_t> {};
INSTANTIATE_TEST_SUITE_P(Widths, LayerNormTest, ::testing::Values(37, 24, 128, 5));
TEST_P(LayerNormTest, MatchesTheReferenceAtAnyThreadCount) {
  const int64_t rows = 70, d = GetParam();
  const size_t T = size_t(rows * d), R = size_t(rows), D = size_t(d);
  const auto x = randomVec(T, 41, -3, 5), dy = randomVec(T, 42), w = randomVec(size_t(d), 43),
             b = randomVec(size_t(d), 44);
  const float eps = 1e-5f;
  std::vector<double> ry(T), rdx(T), rdw(size_t(d), 0), rdb(size_t(d), 0);
  for (int64_t r = 0; r < rows; ++r) {
    double m = 0, v = 0;
    for (int64_t i = 0; i < d; ++i)
      m += x[size_t(r * d + i)];
    m /= double(d);
    for (int64_t i = 0; i < d; ++i)
      v += (x[size_t(r * d + i)] - m) * (x[size_t(r * d + i)] - m);
    const double is = 1 / std::sqrt(v / double(d) + eps);
    double mg = 0, mgx = 0;
    for (int64_t i = 0; i < d; ++i) {
      const size_t at = size_t(r * d + i);
      const double xh = (x[at] - m) * is, g = double(dy[at]) * w[size_t(i)];
      ry[at] = xh * w[size_t(i)] + b[size_t(i)];
      mg += g / double(d);
      mgx += g * xh / double(d);
      rdw[size_t(i)] += dy[at] * xh;
      rdb[size_t(i)] += dy[at];
    }
    for (int64_t i = 0; i < d; ++i) {
      const size_t at = size_t(r * d + i);
      const double xh = (x[at] - m) * is;
      rdx[at] = is * (double(dy[at]) * w[size_t(i)] - mg - xh * mgx);
    }
  }
  std::vector<float> first;
  for (int threads : {1, 3}) {
    KernelThreads t(threads);
    std::vector<float> y(T), mean(R), rstd(R), dx(T), dw(D), db(D);
    kern::layerNorm(kHost, x.data(), w.data(), b.data(), y.data(), mean.data(), rstd.data(), rows,
                    d, eps);
    kern::layerNormGrad(kHost, x.data(), dy.data(), mean.data(), rstd.data(), w.data(),
                        dx.data(), dw.data(), db.data(), rows, d);
    for (size_t i = 0; i < T; ++i) {
      ASSERT_NEAR(y[i], ry[i], 2e-5) << "y " << i;
      ASSERT_NEAR(dx[i], rdx[i], 2e-5) << "dx " << i;
    }
    for (size_t i = 0; i < size_t(d); ++i) {
      ASSERT_NEAR(dw[i], rdw[i], 1e-4) << "dweight " << i;
      ASSERT_NEAR(db[i], rdb[i], 1e-4) << "dbias " << i;
    }
    std::vector<float> all(y);
    for (auto *v : {&dx, &dw, &db})
      all.insert(all.end(), v->begin(), v->end());
    if (first.empty())
      first = all;
    else
      EXPECT_EQ(all, first) << "--threads " << threads;
  }
}

// RMS norm against a double-precision reference of torch.nn.RMSNorm's
// formulas (x / sqrt(mean(x^2) + eps) * weight), and the same bits at any
// --threads (rows over several blocks, in tiles of four and alone; widths
// with a tail, a lone vector of 8 and whole pairs of vectors).
class RmsNormTest : public ::testing::TestWithParam<int64_t> {};
INSTANTIATE_TEST_SUITE_P(Widths, RmsNormTest, ::testing::Values(37, 24, 128, 5));
TEST_P(RmsNormTest, MatchesTheReferenceAtAnyThreadCount) {
  const int64_t rows = 70, d = GetParam();
  const size_t T = size_t(rows * d), R = size_t(rows), D = size_t(d);
  const auto x = randomVec(T, 51, -3, 5), dy = randomVec(T, 52), w = randomVec(D, 53);
  const float eps = 1e-6f;
  std::vector<double> ry(T), rdx(T), rdw(D, 0);
  for (int64_t r = 0; r < rows; ++r) {
    double q = 0;
    for (int64_t i = 0; i < d; ++i)
      q += double(x[size_t(r * d + i)]) * x[size_t(r * d + i)];
    const double is = 1 / std::sqrt(q / double(d) + eps);
    double mgx = 0;
    for (int64_t i = 0; i < d; ++i) {
      const size_t at = size_t(r * d + i);
      const double xh = x[at] * is, g = double(dy[at]) * w[size_t(i)];
      ry[at] = xh * w[size_t(i)];
      mgx += g * xh / double(d);
      rdw[size_t(i)] += dy[at] * xh;
    }
    for (int64_t i = 0; i < d; ++i) {
      const size_t at = size_t(r * d + i);
      rdx[at] = is * (double(dy[at]) * w[size_t(i)] - x[at] * is * mgx);
    }
  }
  std::vector<float> first;
  for (int threads : {1, 3}) {
    KernelThreads t(threads);
    std::vector<float> y(T), rstd(R), dx(T), dw(D);
    kern::rmsNorm(kHost, x.data(), w.data(), y.data(), rstd.data(), rows, d, eps);
    kern::rmsNormGrad(kHost, x.data(), dy.data(), rstd.data(), w.data(), dx.data(), dw.data(),
                      rows, d);
    for (size_t i = 0; i < T; ++i) {
      ASSERT_NEAR(y[i], ry[i], 2e-5) << "y " << i;
      ASSERT_NEAR(dx[i], rdx[i], 2e-5) << "dx " << i;
    }
    for (size_t i = 0; i < D; ++i)
      ASSERT_NEAR(dw[i], rdw[i], 1e-4) << "dweight " << i;
    std::vector<float> all(y);
    for (auto *v : {&rstd, &dx, &dw})
      all.insert(all.end(), v->begin(), v->end());
    if (first.empty())
      first = all;
    else
      EXPECT_EQ(all, first) << "--threads " << threads;
  }
}

TEST(BatchNorm, GradientMatchesFiniteDifferences) {
  const int64_t n = 4, C = 2, inner = 3;
  const size_t T = size_t(n * C * inner);
  auto x0 = randomVec(T, 41), K = randomVec(T, 42);
  const float eps = 1e-3f;
  // loss = sum(batch_norm(x) * K), with and without a fused ReLU.
  for (bool relu : {false, true}) {
    auto x = x0;
    std::vector<float> w{0.7f, 1.3f}, b{0.2f, -0.1f};
    auto loss = [&]() {
      std::vector<float> y(T), m(2), v(2);
      kern::batchNorm(kHost, x.data(), w.data(), b.data(), y.data(), m.data(), v.data(), n, C,
                      inner, eps, relu, 1);
      double s = 0;
      for (size_t i = 0; i < T; ++i)
        s += double(y[i]) * K[i];
      return s;
    };
    std::vector<float> y(T), m(2), v(2), dx(T), dw(2), db(2);
    kern::batchNorm(kHost, x.data(), w.data(), b.data(), y.data(), m.data(), v.data(), n, C,
                    inner, eps, relu, 1);
    kern::batchNormGrad(kHost, x.data(), K.data(), m.data(), v.data(), w.data(),
                        relu ? y.data() : nullptr, dx.data(), dw.data(), db.data(), n, C, inner,
                        eps, 1);
    if (relu) {
      // The ReLU's gradient applied first, then batch norm's without it:
      // the same numbers (finite differences would cross the kink, where
      // batch norm puts many values).
      std::vector<float> masked(T), dx2(T), dw2(2), db2(2);
      for (size_t i = 0; i < T; ++i)
        masked[i] = y[i] > 0 ? K[i] : 0.0f;
      kern::batchNormGrad(kHost, x.data(), masked.data(), m.data(), v.data(), w.data(), nullptr,
                          dx2.data(), dw2.data(), db2.data(), n, C, inner, eps, 1);
      EXPECT_EQ(dx, dx2);
      EXPECT_EQ(dw, dw2);
      EXPECT_EQ(db, db2);
      continue;
    }
    expectNear(dx, numericGrad(x, loss), 2e-2f);
    expectNear(dw, numericGrad(w, loss), 2e-2f);
    expectNear(db, numericGrad(b, loss), 2e-2f);
    // The input's gradient sums to zero per channel (the mean is removed).
    for (int64_t c = 0; c < C; ++c) {
      double s = 0;
      for (int64_t k = 0; k < n; ++k)
        for (int64_t i = 0; i < inner; ++i)
          s += dx[size_t((k * C + c) * inner + i)];
      EXPECT_NEAR(s, 0.0, 1e-5);
    }
  }
}

TEST(BatchNorm, RunningStatisticsMoveByMomentumWithTheUnbiasedVariance) {
  const std::vector<float> mean{1.0f, -2.0f}, var{0.5f, 2.0f};
  std::vector<float> rm{0.0f, 1.0f}, rv{1.0f, 1.0f};
  int64_t tracked = 41;
  kern::updateRunningStats(kHost, mean.data(), var.data(), rm.data(), rv.data(), &tracked, 2, 5,
                           0.1f);
  EXPECT_FLOAT_EQ(rm[0], 0.1f);
  EXPECT_FLOAT_EQ(rm[1], 0.9f * 1.0f + 0.1f * -2.0f);
  EXPECT_FLOAT_EQ(rv[0], 0.9f + 0.1f * 0.5f * 5.0f / 4.0f);
  EXPECT_FLOAT_EQ(rv[1], 0.9f + 0.1f * 2.0f * 5.0f / 4.0f);
  EXPECT_EQ(tracked, 42);
}

//===--- channels last (NHWC) against NCHW --------------------------------===//

namespace {
// x [N, C, H, W] as [N, H, W, C], and back.
std::vector<float> nhwcOf(const std::vector<float> &x, int64_t N, int64_t C, int64_t H,
                          int64_t W) {
  std::vector<float> y(x.size());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t p = 0; p < H * W; ++p)
        y[size_t((n * H * W + p) * C + c)] = x[size_t((n * C + c) * H * W + p)];
  return y;
}
std::vector<float> nchwOf(const std::vector<float> &x, int64_t N, int64_t C, int64_t H,
                          int64_t W) {
  std::vector<float> y(x.size());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t p = 0; p < H * W; ++p)
        y[size_t((n * C + c) * H * W + p)] = x[size_t((n * H * W + p) * C + c)];
  return y;
}
// A window's 16 values (Ho, Wo as shape inference computes them).
std::vector<int64_t> window(int64_t C, int64_t H, int64_t W, int64_t O, int64_t k, int64_t s,
                            int64_t p, int64_t d, int64_t groups, bool last) {
  const int64_t Ho = (H + 2 * p - d * (k - 1) - 1) / s + 1;
  const int64_t Wo = (W + 2 * p - d * (k - 1) - 1) / s + 1;
  return {C, H, W, O, k, k, s, s, p, p, d, d, groups, Ho, Wo, last ? 1 : 0};
}
} // namespace

// The NHWC pooling kernels make the same comparisons and sums in the same
// order as the NCHW ones: equal results, bit for bit, on ties too.
TEST(ChannelsLast, PoolingEqualsNchw) {
  const int64_t N = 3;
  // 2x2 stride 2 (the fast paths; odd sizes leave a row and a column out),
  // overlapping with padding, and a channel count that is not a multiple of 4.
  for (auto [C, H, W, k, s, p] : std::vector<std::array<int64_t, 6>>{
           {8, 6, 6, 2, 2, 0}, {5, 7, 5, 2, 2, 0}, {6, 7, 7, 3, 2, 1}, {3, 5, 6, 3, 1, 1}}) {
    const std::vector<int64_t> wn = window(C, H, W, C, k, s, p, 1, 1, false),
                               wl = window(C, H, W, C, k, s, p, 1, 1, true);
    const int64_t Ho = wn[13], Wo = wn[14];
    auto x = randomVec(size_t(N * C * H * W), 51);
    for (size_t i = 0; i < x.size(); i += 7)
      x[i] = x[i + 1 < x.size() ? i + 1 : i]; // ties: the first must win in both
    const auto dy = randomVec(size_t(N * C * Ho * Wo), 52);
    const auto xl = nhwcOf(x, N, C, H, W), dyl = nhwcOf(dy, N, C, Ho, Wo);
    std::vector<float> y(dy.size()), yl(dy.size()), dx(x.size()), dxl(x.size());
    kern::maxPool2d(kHost, x.data(), y.data(), N, wn.data());
    kern::maxPool2d(kHost, xl.data(), yl.data(), N, wl.data());
    EXPECT_EQ(nchwOf(yl, N, C, Ho, Wo), y) << "max_pool2d C " << C << " k " << k;
    kern::maxPool2dGrad(kHost, x.data(), dy.data(), dx.data(), N, wn.data());
    kern::maxPool2dGrad(kHost, xl.data(), dyl.data(), dxl.data(), N, wl.data());
    EXPECT_EQ(nchwOf(dxl, N, C, H, W), dx) << "max_pool2d_grad C " << C << " k " << k;
    for (bool include : {true, false}) {
      kern::avgPool2d(kHost, x.data(), y.data(), N, wn.data(), include);
      kern::avgPool2d(kHost, xl.data(), yl.data(), N, wl.data(), include);
      EXPECT_EQ(nchwOf(yl, N, C, Ho, Wo), y) << "avg_pool2d C " << C << " k " << k;
      kern::avgPool2dGrad(kHost, dy.data(), dx.data(), N, wn.data(), include);
      kern::avgPool2dGrad(kHost, dyl.data(), dxl.data(), N, wl.data(), include);
      EXPECT_EQ(nchwOf(dxl, N, C, H, W), dx) << "avg_pool2d_grad C " << C << " k " << k;
    }
  }
}

// Batch norm on [N, H, W, C] is the [rows, channels] kernel: the statistics,
// the result and the gradients of the NCHW kernel, to rounding (the sums
// go in another order), with and without the fused ReLU.
TEST(ChannelsLast, BatchNormMatchesNchw) {
  const int64_t N = 6, C = 7, H = 5, W = 9; // C not a multiple of 4; rows span blocks
  const size_t T = size_t(N * C * H * W);
  auto x = randomVec(T, 61, -1, 3);
  const auto w = randomVec(size_t(C), 62, 0.5f, 2.0f), b = randomVec(size_t(C), 63);
  const auto dy = randomVec(T, 64);
  const auto xl = nhwcOf(x, N, C, H, W), dyl = nhwcOf(dy, N, C, H, W);
  for (bool relu : {false, true}) {
    std::vector<float> y(T), yl(T), m(C), ml(C), v(C), vl(C);
    kern::batchNorm(kHost, x.data(), w.data(), b.data(), y.data(), m.data(), v.data(), N, C,
                    H * W, 1e-5f, relu, 1);
    kern::batchNorm(kHost, xl.data(), w.data(), b.data(), yl.data(), ml.data(), vl.data(),
                    N * H * W, C, 1, 1e-5f, relu, 1);
    expectNear(ml, m, 1e-6f);
    expectNear(vl, v, 1e-5f);
    expectNear(nchwOf(yl, N, C, H, W), y, 1e-5f);
    std::vector<float> dx(T), dxl(T), dw(C), dwl(C), db(C), dbl(C);
    kern::batchNormGrad(kHost, x.data(), dy.data(), m.data(), v.data(), w.data(),
                        relu ? y.data() : nullptr, dx.data(), dw.data(), db.data(), N, C, H * W,
                        1e-5f, 1);
    kern::batchNormGrad(kHost, xl.data(), dyl.data(), ml.data(), vl.data(), w.data(),
                        relu ? yl.data() : nullptr, dxl.data(), dwl.data(), dbl.data(),
                        N * H * W, C, 1, 1e-5f, 1);
    expectNear(dwl, dw, 1e-4f);
    expectNear(dbl, db, 1e-4f);
    expectNear(nchwOf(dxl, N, C, H, W), dx, 1e-5f);
    std::vector<float> yi(T), yil(T);
    kern::batchNormInference(kHost, x.data(), w.data(), b.data(), m.data(), v.data(), yi.data(),
                             N, C, H * W, 1e-5f, relu, 1);
    kern::batchNormInference(kHost, xl.data(), w.data(), b.data(), m.data(), v.data(),
                             yil.data(), N * H * W, C, 1, 1e-5f, relu, 1);
    expectNear(nchwOf(yil, N, C, H, W), yi, 1e-6f);
  }
}

//===--- blocked (nChw16c) against NCHW ------------------------------------===//

namespace {
// x [N, C, H, W] as [N, C / 16, H, W, 16], and back.
std::vector<float> blockedOf(const std::vector<float> &x, int64_t N, int64_t C, int64_t H,
                             int64_t W) {
  std::vector<float> y(x.size());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t p = 0; p < H * W; ++p)
        y[size_t(((n * (C / 16) + c / 16) * H * W + p) * 16 + c % 16)] =
            x[size_t((n * C + c) * H * W + p)];
  return y;
}
std::vector<float> unblocked(const std::vector<float> &x, int64_t N, int64_t C, int64_t H,
                             int64_t W) {
  std::vector<float> y(x.size());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t p = 0; p < H * W; ++p)
        y[size_t((n * C + c) * H * W + p)] =
            x[size_t(((n * (C / 16) + c / 16) * H * W + p) * 16 + c % 16)];
  return y;
}
// window() with the layout's flags for blocked input and result.
std::vector<int64_t> blockedWindow(int64_t C, int64_t H, int64_t W, int64_t O, int64_t k,
                                   int64_t s, int64_t p, int64_t d, int64_t groups, bool in,
                                   bool out) {
  auto w = window(C, H, W, O, k, s, p, d, groups, false);
  w[15] = (in ? rt::Window2d::kInBlocked : 0) | (out ? rt::Window2d::kOutBlocked : 0);
  return w;
}
} // namespace

// Blocked pooling is the NHWC kernels' on 16-channel blocks: the NCHW
// results, bit for bit, ties included.
TEST(Blocked, PoolingEqualsNchw) {
  const int64_t N = 2;
  for (auto [C, H, W, k, s, p] : std::vector<std::array<int64_t, 6>>{
           {16, 6, 6, 2, 2, 0}, {32, 7, 5, 2, 2, 0}, {16, 7, 7, 3, 2, 1}, {32, 5, 6, 3, 1, 1}}) {
    const auto wn = window(C, H, W, C, k, s, p, 1, 1, false),
               wb = blockedWindow(C, H, W, C, k, s, p, 1, 1, true, true);
    const int64_t Ho = wn[13], Wo = wn[14];
    auto x = randomVec(size_t(N * C * H * W), 81);
    for (size_t i = 0; i < x.size(); i += 7)
      x[i] = x[i + 1 < x.size() ? i + 1 : i];
    const auto dy = randomVec(size_t(N * C * Ho * Wo), 82);
    const auto xb = blockedOf(x, N, C, H, W), dyb = blockedOf(dy, N, C, Ho, Wo);
    std::vector<float> y(dy.size()), yb(dy.size()), dx(x.size()), dxb(x.size());
    kern::maxPool2d(kHost, x.data(), y.data(), N, wn.data());
    kern::maxPool2d(kHost, xb.data(), yb.data(), N, wb.data());
    EXPECT_EQ(unblocked(yb, N, C, Ho, Wo), y) << "max_pool2d C " << C << " k " << k;
    kern::maxPool2dGrad(kHost, x.data(), dy.data(), dx.data(), N, wn.data());
    kern::maxPool2dGrad(kHost, xb.data(), dyb.data(), dxb.data(), N, wb.data());
    EXPECT_EQ(unblocked(dxb, N, C, H, W), dx) << "max_pool2d_grad C " << C << " k " << k;
    for (bool include : {true, false}) {
      kern::avgPool2d(kHost, x.data(), y.data(), N, wn.data(), include);
      kern::avgPool2d(kHost, xb.data(), yb.data(), N, wb.data(), include);
      EXPECT_EQ(unblocked(yb, N, C, Ho, Wo), y) << "avg_pool2d C " << C << " k " << k;
      kern::avgPool2dGrad(kHost, dy.data(), dx.data(), N, wn.data(), include);
      kern::avgPool2dGrad(kHost, dyb.data(), dxb.data(), N, wb.data(), include);
      EXPECT_EQ(unblocked(dxb, N, C, H, W), dx) << "avg_pool2d_grad C " << C << " k " << k;
    }
  }
}

// Blocked batch norm (lanes 16): the NCHW kernel's statistics, result and
// gradients, to rounding (the sums go in another order); an odd plane
// takes the one-row tail.
TEST(Blocked, BatchNormMatchesNchw) {
  const int64_t N = 5, C = 32, H = 5, W = 7;
  const size_t T = size_t(N * C * H * W);
  const auto x = randomVec(T, 91, -1, 3);
  const auto w = randomVec(size_t(C), 92, 0.5f, 2.0f), b = randomVec(size_t(C), 93);
  const auto dy = randomVec(T, 94);
  const auto xb = blockedOf(x, N, C, H, W), dyb = blockedOf(dy, N, C, H, W);
  for (bool relu : {false, true}) {
    std::vector<float> y(T), yb(T), m(C), mb(C), v(C), vb(C);
    kern::batchNorm(kHost, x.data(), w.data(), b.data(), y.data(), m.data(), v.data(), N, C,
                    H * W, 1e-5f, relu, 1);
    kern::batchNorm(kHost, xb.data(), w.data(), b.data(), yb.data(), mb.data(), vb.data(), N, C,
                    H * W, 1e-5f, relu, 16);
    expectNear(mb, m, 1e-6f);
    expectNear(vb, v, 1e-5f);
    expectNear(unblocked(yb, N, C, H, W), y, 1e-5f);
    std::vector<float> dx(T), dxb(T), dw(C), dwb(C), db(C), dbb(C);
    kern::batchNormGrad(kHost, x.data(), dy.data(), m.data(), v.data(), w.data(),
                        relu ? y.data() : nullptr, dx.data(), dw.data(), db.data(), N, C, H * W,
                        1e-5f, 1);
    kern::batchNormGrad(kHost, xb.data(), dyb.data(), mb.data(), vb.data(), w.data(),
                        relu ? yb.data() : nullptr, dxb.data(), dwb.data(), dbb.data(), N, C,
                        H * W, 1e-5f, 16);
    expectNear(dwb, dw, 1e-4f);
    expectNear(dbb, db, 1e-4f);
    expectNear(unblocked(dxb, N, C, H, W), dx, 1e-5f);
    std::vector<float> yi(T), yib(T);
    kern::batchNormInference(kHost, x.data(), w.data(), b.data(), m.data(), v.data(), yi.data(),
                             N, C, H * W, 1e-5f, relu, 1);
    kern::batchNormInference(kHost, xb.data(), w.data(), b.data(), m.data(), v.data(),
                             yib.data(), N, C, H * W, 1e-5f, relu, 16);
    expectNear(unblocked(yib, N, C, H, W), yi, 1e-6f);
  }
}

// Blocked convolutions (the engine's nChw16c, or the NCHW path between
// conversions): the NCHW results to rounding, with the input, the result or
// both blocked (a first layer of one channel writes blocked).
TEST(Blocked, ConvolutionsMatchNchw) {
  const int64_t N = 3;
  for (auto [C, H, W, O, k, s, p, d] : std::vector<std::array<int64_t, 8>>{
           {1, 9, 8, 16, 3, 1, 1, 1},
           {32, 7, 7, 16, 3, 1, 1, 1},
           {16, 9, 10, 24, 3, 2, 1, 2},
           {16, 6, 6, 32, 1, 1, 0, 1}}) {
    const bool in = C % 16 == 0, out = O % 16 == 0;
    const auto wn = window(C, H, W, O, k, s, p, d, 1, false),
               wb = blockedWindow(C, H, W, O, k, s, p, d, 1, in, out);
    const int64_t Ho = wn[13], Wo = wn[14];
    const auto x = randomVec(size_t(N * C * H * W), 95);
    const auto wt = randomVec(size_t(O * C * k * k), 96);
    const auto bias = randomVec(size_t(O), 97);
    const auto dy = randomVec(size_t(N * O * Ho * Wo), 98);
    std::vector<float> cols(size_t(C * k * k * Ho * Wo));
    std::vector<float> y(dy.size()), yb(dy.size()), dx(x.size()), dxb(x.size());
    std::vector<float> dw(wt.size()), dwb(wt.size()), db(bias.size()), dbb(bias.size());
    const auto xb = in ? blockedOf(x, N, C, H, W) : x;
    const auto dyb = out ? blockedOf(dy, N, O, Ho, Wo) : dy;
    auto asNchw = [&](const std::vector<float> &t, bool b, int64_t ch, int64_t h, int64_t wd) {
      return b ? unblocked(t, N, ch, h, wd) : t;
    };
    kern::conv2d(kHost, x.data(), wt.data(), bias.data(), y.data(), cols.data(), N, wn.data());
    kern::conv2d(kHost, xb.data(), wt.data(), bias.data(), yb.data(), cols.data(), N, wb.data());
    expectNear(asNchw(yb, out, O, Ho, Wo), y, 1e-4f);
    kern::conv2dGradInput(kHost, dy.data(), wt.data(), dx.data(), cols.data(), N, wn.data());
    kern::conv2dGradInput(kHost, dyb.data(), wt.data(), dxb.data(), cols.data(), N, wb.data());
    expectNear(asNchw(dxb, in, C, H, W), dx, 1e-4f);
    kern::conv2dGradWeight(kHost, x.data(), dy.data(), dw.data(), db.data(), cols.data(), N,
                           wn.data());
    kern::conv2dGradWeight(kHost, xb.data(), dyb.data(), dwb.data(), dbb.data(), cols.data(), N,
                           wb.data());
    expectNear(dwb, dw, 1e-3f);
    expectNear(dbb, db, 1e-4f);
  }
}

// batchNormGradMaxPool (dtc-fuse-max-pool-grad's kernel) gives what
// maxPool2dGrad of the ReLU's result, then batchNormGrad, give: bit for
// bit, over 2x2 windows (odd sizes leave a row and a column out),
// overlapping padded windows and stride 1; the ReLU's zeros tie in the
// windows, where the first must win in both.
TEST(BatchNorm, FusedMaxPoolGradientEqualsThePair) {
  const int64_t N = 3;
  for (auto [C, H, W, k, s, p] : std::vector<std::array<int64_t, 6>>{
           {8, 6, 6, 2, 2, 0}, {5, 7, 5, 2, 2, 0}, {6, 7, 7, 3, 2, 1}, {3, 5, 6, 3, 1, 1}}) {
    const std::vector<int64_t> win = window(C, H, W, C, k, s, p, 1, 1, false);
    const int64_t Ho = win[13], Wo = win[14];
    const size_t T = size_t(N * C * H * W);
    const auto x = randomVec(T, 71, -2, 2);
    const auto w = randomVec(size_t(C), 72, 0.5f, 2.0f), b = randomVec(size_t(C), 73);
    const auto dp = randomVec(size_t(N * C * Ho * Wo), 74);
    std::vector<float> y(T), m(C), v(C);
    kern::batchNorm(kHost, x.data(), w.data(), b.data(), y.data(), m.data(), v.data(), N, C,
                    H * W, 1e-5f, /*relu=*/true, 1);
    ASSERT_GT(std::count(y.begin(), y.end(), 0.0f), int64_t(T / 4)) << "the ReLU's zeros";
    std::vector<float> dy(T), dx(T), dw(C), db(C), dxf(T, -1.0f), dwf(C), dbf(C);
    kern::maxPool2dGrad(kHost, y.data(), dp.data(), dy.data(), N, win.data());
    kern::batchNormGrad(kHost, x.data(), dy.data(), m.data(), v.data(), w.data(), y.data(),
                        dx.data(), dw.data(), db.data(), N, C, H * W, 1e-5f, 1);
    kern::batchNormGradMaxPool(kHost, x.data(), dp.data(), m.data(), v.data(), w.data(),
                               y.data(), dxf.data(), dwf.data(), dbf.data(), N, C, H * W,
                               1e-5f, 1, win.data());
    EXPECT_EQ(dxf, dx) << "C " << C << " H " << H << " k " << k << " s " << s;
    EXPECT_EQ(dwf, dw) << "C " << C << " H " << H << " k " << k << " s " << s;
    EXPECT_EQ(dbf, db) << "C " << C << " H " << H << " k " << k << " s " << s;
  }
}

// And on blocked tensors (lanes 16): batchNormGradMaxPool gives what the
// blocked maxPool2dGrad then batchNormGrad give, bit for bit: 2x2 windows
// on an even width (routed in registers; an odd last row in no window),
// an odd width and a general window (routed into a plane first).
TEST(Blocked, FusedMaxPoolGradientEqualsThePair) {
  const int64_t N = 3;
  for (auto [C, H, W, k, s, p] : std::vector<std::array<int64_t, 6>>{{16, 6, 6, 2, 2, 0},
                                                                       {32, 7, 6, 2, 2, 0},
                                                                       {16, 28, 28, 2, 2, 0},
                                                                       {32, 7, 5, 2, 2, 0},
                                                                       {16, 7, 7, 3, 2, 1}}) {
    const auto win = blockedWindow(C, H, W, C, k, s, p, 1, 1, true, true);
    const int64_t Ho = win[13], Wo = win[14];
    const size_t T = size_t(N * C * H * W);
    const auto x = blockedOf(randomVec(T, 111, -2, 2), N, C, H, W);
    const auto w = randomVec(size_t(C), 112, 0.5f, 2.0f), b = randomVec(size_t(C), 113);
    const auto dp = randomVec(size_t(N * C * Ho * Wo), 114);
    std::vector<float> y(T), m(C), v(C);
    kern::batchNorm(kHost, x.data(), w.data(), b.data(), y.data(), m.data(), v.data(), N, C,
                    H * W, 1e-5f, /*relu=*/true, 16);
    ASSERT_GT(std::count(y.begin(), y.end(), 0.0f), int64_t(T / 4)) << "the ReLU's zeros";
    std::vector<float> dy(T), dx(T), dw(C), db(C), dxf(T, -1.0f), dwf(C), dbf(C);
    kern::maxPool2dGrad(kHost, y.data(), dp.data(), dy.data(), N, win.data());
    kern::batchNormGrad(kHost, x.data(), dy.data(), m.data(), v.data(), w.data(), y.data(),
                        dx.data(), dw.data(), db.data(), N, C, H * W, 1e-5f, 16);
    kern::batchNormGradMaxPool(kHost, x.data(), dp.data(), m.data(), v.data(), w.data(),
                               y.data(), dxf.data(), dwf.data(), dbf.data(), N, C, H * W,
                               1e-5f, 16, win.data());
    EXPECT_EQ(dxf, dx) << "C " << C << " H " << H << " k " << k << " s " << s;
    EXPECT_EQ(dwf, dw) << "C " << C << " H " << H << " k " << k << " s " << s;
    EXPECT_EQ(dbf, db) << "C " << C << " H " << H << " k " << k << " s " << s;
  }
}

// The convolutions on NHWC tensors (the engine's, or the NCHW path between
// transposes): the NCHW results to rounding, over stride, padding,
// dilation and groups, and a first layer of one channel.
TEST(ChannelsLast, ConvolutionsMatchNchw) {
  const int64_t N = 3;
  for (auto [C, H, W, O, k, s, p, d, g] : std::vector<std::array<int64_t, 9>>{
           {1, 9, 8, 16, 3, 1, 1, 1, 1},
           {32, 7, 7, 24, 3, 1, 1, 1, 1},
           {18, 9, 10, 12, 3, 2, 1, 2, 3},
           {16, 6, 6, 16, 1, 1, 0, 1, 1}}) {
    const auto wn = window(C, H, W, O, k, s, p, d, g, false),
               wl = window(C, H, W, O, k, s, p, d, g, true);
    const int64_t Ho = wn[13], Wo = wn[14];
    const auto x = randomVec(size_t(N * C * H * W), 71);
    const auto wt = randomVec(size_t(O * (C / g) * k * k), 72);
    const auto bias = randomVec(size_t(O), 73);
    const auto dy = randomVec(size_t(N * O * Ho * Wo), 74);
    std::vector<float> cols(size_t(C * k * k * Ho * Wo));
    std::vector<float> y(dy.size()), yl(dy.size()), dx(x.size()), dxl(x.size());
    std::vector<float> dw(wt.size()), dwl(wt.size()), db(bias.size()), dbl(bias.size());
    const auto xl = nhwcOf(x, N, C, H, W), dyl = nhwcOf(dy, N, O, Ho, Wo);
    kern::conv2d(kHost, x.data(), wt.data(), bias.data(), y.data(), cols.data(), N, wn.data());
    kern::conv2d(kHost, xl.data(), wt.data(), bias.data(), yl.data(), cols.data(), N, wl.data());
    expectNear(nchwOf(yl, N, O, Ho, Wo), y, 1e-4f);
    kern::conv2dGradInput(kHost, dy.data(), wt.data(), dx.data(), cols.data(), N, wn.data());
    kern::conv2dGradInput(kHost, dyl.data(), wt.data(), dxl.data(), cols.data(), N, wl.data());
    expectNear(nchwOf(dxl, N, C, H, W), dx, 1e-4f);
    kern::conv2dGradWeight(kHost, x.data(), dy.data(), dw.data(), db.data(), cols.data(), N,
                           wn.data());
    kern::conv2dGradWeight(kHost, xl.data(), dyl.data(), dwl.data(), dbl.data(), cols.data(), N,
                           wl.data());
    expectNear(dwl, dw, 1e-3f);
    expectNear(dbl, db, 1e-4f);
  }
}

TEST(Kernels, CrossEntropyAndAccuracyLeaveIgnoredRowsOut) {
  const int64_t B = 300, C = 7; // several row blocks
  const auto logits = randomVec(size_t(B * C), 53, -3, 3);
  std::vector<int32_t> labels(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b)
    labels[size_t(b)] = b % 5 == 2 ? -1 : int32_t((b * 3) % C); // -1: ignored
  double want = 0;
  int64_t counted = 0, correct = 0;
  for (int64_t b = 0; b < B; ++b) {
    if (labels[size_t(b)] < 0)
      continue;
    ++counted;
    double s = 0;
    int64_t best = 0;
    for (int64_t c = 0; c < C; ++c) {
      s += std::exp(double(logits[size_t(b * C + c)]));
      if (logits[size_t(b * C + c)] > logits[size_t(b * C + best)])
        best = c;
    }
    want += std::log(s) - logits[size_t(b * C + labels[size_t(b)])];
    correct += best == labels[size_t(b)];
  }
  std::vector<float> first;
  for (int threads : {1, 2, 3}) {
    KernelThreads t(threads);
    float loss = NAN, acc = NAN, dloss = 0.5f;
    kern::crossEntropy(kHost, logits.data(), labels.data(), B, C, -1, &loss);
    kern::accuracy(kHost, logits.data(), labels.data(), B, C, -1, &acc);
    EXPECT_NEAR(loss, want / double(counted), 1e-5);
    EXPECT_FLOAT_EQ(acc, float(double(correct) / double(counted)));
    std::vector<float> grad(size_t(B * C), 9.0f);
    kern::crossEntropyGrad(kHost, logits.data(), labels.data(), B, C, -1, &dloss, grad.data());
    for (int64_t b = 0; b < B; ++b) {
      double rowSum = 0;
      for (int64_t c = 0; c < C; ++c)
        rowSum += grad[size_t(b * C + c)];
      if (labels[size_t(b)] < 0) {
        for (int64_t c = 0; c < C; ++c)
          ASSERT_EQ(grad[size_t(b * C + c)], 0.0f) << "ignored row " << b;
      } else {
        ASSERT_NEAR(rowSum, 0.0, 1e-6) << "row " << b; // softmax - onehot sums to 0
        const int64_t y = labels[size_t(b)];
        double s = 0;
        for (int64_t c = 0; c < C; ++c)
          s += std::exp(double(logits[size_t(b * C + c)]));
        const double p = std::exp(double(logits[size_t(b * C + y)])) / s;
        ASSERT_NEAR(grad[size_t(b * C + y)], 0.5 * (p - 1) / double(counted), 1e-7);
      }
    }
    grad.push_back(loss);
    if (first.empty())
      first = grad;
    else
      EXPECT_EQ(grad, first) << "--threads " << threads;
  }
  // Every row ignored: NaN, as torch's mean over no rows.
  std::vector<int32_t> none(static_cast<size_t>(B), -1);
  float loss = 0;
  kern::crossEntropy(kHost, logits.data(), none.data(), B, C, -1, &loss);
  EXPECT_TRUE(std::isnan(loss));
}

TEST(Kernels, EmbeddingGathersRowsAndItsGradientSumsThemByIdAtAnyThreadCount) {
  const int64_t num = 11, dim = 37, rows = 500;
  const auto w = randomVec(size_t(num * dim), 71), dy = randomVec(size_t(rows * dim), 72);
  std::vector<int32_t> ids(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    ids[size_t(r)] = int32_t((r * r + 3) % (num - 1)); // row num - 1 is never read
  std::vector<double> want(size_t(num * dim), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t d = 0; d < dim; ++d)
      want[size_t(ids[size_t(r)] * dim + d)] += dy[size_t(r * dim + d)];
  std::vector<float> first;
  for (int threads : {1, 2, 3}) {
    KernelThreads t(threads);
    std::vector<float> out(size_t(rows * dim)), dw(size_t(num * dim), 5.0f);
    kern::embedding(kHost, w.data(), ids.data(), rows, num, dim, out.data());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t d = 0; d < dim; ++d)
        ASSERT_EQ(out[size_t(r * dim + d)], w[size_t(ids[size_t(r)] * dim + d)]);
    kern::embeddingGrad(kHost, ids.data(), dy.data(), rows, num, dim, dw.data());
    for (size_t i = 0; i < dw.size(); ++i)
      ASSERT_NEAR(dw[i], want[i], 1e-4) << i;
    for (int64_t d = 0; d < dim; ++d)
      ASSERT_EQ(dw[size_t((num - 1) * dim + d)], 0.0f); // zeroed, not left as it was
    if (first.empty())
      first = dw;
    else
      EXPECT_EQ(dw, first) << "--threads " << threads;
  }
  std::vector<int32_t> bad = {0, int32_t(num)};
  std::vector<float> out(size_t(3 * dim));
  EXPECT_EXIT(kern::embedding(kHost, w.data(), bad.data(), 2, num, dim, out.data()),
              ::testing::ExitedWithCode(1), "an id outside the table");
  // The first id outside, named with its row: the CUDA executor's message
  // for the same ids (rt::idOutsideMessage; runtime.cuda.Kernels.OutOfRange*).
  bad = {0, -3, int32_t(num) + 4};
  EXPECT_EQ(rt::idOutsideMessage("embedding", -3, 1, num),
            "embedding: id -3 in row 1 is outside the table's 11 rows [0, 11) (an id outside "
            "the table; the data is checked when loaded)");
  EXPECT_EXIT(kern::embedding(kHost, w.data(), bad.data(), 3, num, dim, out.data()),
              ::testing::ExitedWithCode(1),
              "^train: error: " + literally(rt::idOutsideMessage("embedding", -3, 1, num)) + "\n$");
  std::vector<float> dyBad(size_t(3 * dim)), dwBad(size_t(num * dim));
  EXPECT_EXIT(kern::embeddingGrad(kHost, bad.data(), dyBad.data(), 3, num, dim, dwBad.data()),
              ::testing::ExitedWithCode(1),
              "^train: error: " +
                  literally(rt::idOutsideMessage("embedding_grad", -3, 1, num)) + "\n$");
}

// [heads, t, cols] as [heads / group, t, group, cols] (group 3: the heads
// interleaved row by row, as dtc-attention-tokens-first's [B, T, H, D]).
std::vector<float> interleaveHeads(const std::vector<float> &x, int64_t heads, int64_t t,
                                   int64_t cols, int64_t group) {
  std::vector<float> y(x.size());
  for (int64_t b = 0; b < heads; ++b)
    for (int64_t i = 0; i < t; ++i)
      for (int64_t c = 0; c < cols; ++c)
        y[size_t((((b / group) * t + i) * group + b % group) * cols + c)] =
            x[size_t((b * t + i) * cols + c)];
  return y;
}

TEST(Attention, MatchesTheReferenceAndItsGradientAtAnyThreadCount) {
  // Shapes below and across the kernel's tiles: 4 query rows (or keys) by
  // 16, 8 and single columns, keys transposed in 8 x 8 blocks and edges.
  // Then the same heads interleaved row by row (group 3): the same bits.
  struct Shape {
    bool causal;
    int64_t tq, tk, d, dv;
    float scale;
  };
  for (const Shape &sh : {Shape{false, 9, 13, 6, 3, 1.1f}, Shape{true, 9, 9, 6, 6, 0.4f},
                          Shape{true, 37, 37, 24, 20, 0.2f}, Shape{false, 30, 45, 16, 40, 0.25f},
                          Shape{true, 21, 30, 8, 8, 0.35f}}) {
    const bool causal = sh.causal;
    const int64_t heads = 6, tq = sh.tq, tk = sh.tk, d = sh.d, dv = sh.dv;
    const float scale = sh.scale;
    const auto q = randomVec(size_t(heads * tq * d), 81, -2, 2),
               k = randomVec(size_t(heads * tk * d), 82, -2, 2),
               v = randomVec(size_t(heads * tk * dv), 83),
               dout = randomVec(size_t(heads * tq * dv), 84);
    // The reference: the [tq, tk] probabilities in double, then autodiff by hand.
    std::vector<double> ro(q.size() / size_t(d) * size_t(dv), 0), rdq(q.size(), 0),
        rdk(k.size(), 0), rdv(v.size(), 0);
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < tq; ++i) {
        const int64_t n = causal ? i + 1 : tk;
        std::vector<double> p(static_cast<size_t>(n));
        double m = -1e300, sum = 0;
        for (int64_t j = 0; j < n; ++j) {
          double s = 0;
          for (int64_t c = 0; c < d; ++c)
            s += double(q[size_t((h * tq + i) * d + c)]) * k[size_t((h * tk + j) * d + c)];
          p[size_t(j)] = s * scale;
          m = std::max(m, p[size_t(j)]);
        }
        for (auto &x : p)
          sum += (x = std::exp(x - m));
        for (auto &x : p)
          x /= sum;
        std::vector<double> dp(static_cast<size_t>(n), 0.0);
        double di = 0;
        for (int64_t j = 0; j < n; ++j)
          for (int64_t c = 0; c < dv; ++c) {
            const size_t o = size_t((h * tq + i) * dv + c), vj = size_t((h * tk + j) * dv + c);
            ro[o] += p[size_t(j)] * v[vj];
            dp[size_t(j)] += double(dout[o]) * v[vj];
            rdv[vj] += p[size_t(j)] * dout[o];
          }
        for (int64_t j = 0; j < n; ++j)
          di += p[size_t(j)] * dp[size_t(j)];
        for (int64_t j = 0; j < n; ++j) {
          const double ds = p[size_t(j)] * (dp[size_t(j)] - di) * scale;
          for (int64_t c = 0; c < d; ++c) {
            rdq[size_t((h * tq + i) * d + c)] += ds * k[size_t((h * tk + j) * d + c)];
            rdk[size_t((h * tk + j) * d + c)] += ds * q[size_t((h * tq + i) * d + c)];
          }
        }
      }
    std::vector<float> first;
    for (int threads : {1, 3}) {
      KernelThreads t(threads);
      std::vector<float> out(ro.size()), lse(size_t(heads * tq)), dq(q.size()), dk(k.size(),
                                                                                    7.0f),
          dvv(v.size(), 7.0f);
      kern::attention(kHost, q.data(), k.data(), v.data(), out.data(), lse.data(), heads, 1, d,
                      dv, tq, tk, d, dv, causal, scale);
      kern::attentionGrad(kHost, q.data(), k.data(), v.data(), out.data(), lse.data(),
                          dout.data(), dq.data(), dk.data(), dvv.data(), heads, 1, d, dv, tq, tk, d,
                          dv, causal, scale);
      for (size_t i = 0; i < out.size(); ++i)
        ASSERT_NEAR(out[i], ro[i], 1e-5) << "out " << i << (causal ? " causal" : "") << " tq "
                                         << tq << " d " << d;
      for (size_t i = 0; i < dq.size(); ++i)
        ASSERT_NEAR(dq[i], rdq[i], 1e-5) << "dq " << i;
      for (size_t i = 0; i < dk.size(); ++i)
        ASSERT_NEAR(dk[i], rdk[i], 1e-5) << "dk " << i;
      for (size_t i = 0; i < dvv.size(); ++i)
        ASSERT_NEAR(dvv[i], rdv[i], 1e-5) << "dv " << i;
      std::vector<float> all(out);
      for (auto *x : {&lse, &dq, &dk, &dvv})
        all.insert(all.end(), x->begin(), x->end());
      if (first.empty())
        first = all;
      else
        EXPECT_EQ(all, first) << "--threads " << threads;
      // Interleaved heads: every row where group 3 puts it, the same floats.
      const int64_t g = 3;
      const auto gq = interleaveHeads(q, heads, tq, d, g), gk = interleaveHeads(k, heads, tk, d, g),
                 gv = interleaveHeads(v, heads, tk, dv, g),
                 gdout = interleaveHeads(dout, heads, tq, dv, g);
      std::vector<float> gout(out.size(), 7.0f), glse(lse.size()), gdq(dq.size(), 7.0f),
          gdk(dk.size(), 7.0f), gdv(dvv.size(), 7.0f);
      kern::attention(kHost, gq.data(), gk.data(), gv.data(), gout.data(), glse.data(), heads, g,
                      g * d, g * dv, tq, tk, d, dv, causal, scale);
      kern::attentionGrad(kHost, gq.data(), gk.data(), gv.data(), gout.data(), glse.data(),
                          gdout.data(), gdq.data(), gdk.data(), gdv.data(), heads, g, g * d,
                          g * dv, tq, tk, d, dv, causal, scale);
      EXPECT_EQ(gout, interleaveHeads(out, heads, tq, dv, g)) << "group 3 out";
      EXPECT_EQ(glse, lse) << "group 3 lse";
      EXPECT_EQ(gdq, interleaveHeads(dq, heads, tq, d, g)) << "group 3 dq";
      EXPECT_EQ(gdk, interleaveHeads(dk, heads, tk, d, g)) << "group 3 dk";
      EXPECT_EQ(gdv, interleaveHeads(dvv, heads, tk, dv, g)) << "group 3 dv";
      if (tq != tk || d != dv)
        continue;
      // q, k, v packed ([heads / 3, t, 3, 3, d]: one projection's slices,
      // rows 9 d apart), dq, dk, dv written into the slices of one such
      // buffer: the same bits.
      const int64_t tt = tq, rows = 3 * g * d;
      std::vector<float> qkv(size_t(heads * tt * 3 * d)), dqkv(qkv.size(), 7.0f);
      for (int64_t b = 0; b < heads / g; ++b)
        for (int64_t i = 0; i < tt; ++i)
          for (int64_t part = 0; part < 3; ++part)
            std::copy_n((part == 0 ? gq : part == 1 ? gk : gv).begin() + (b * tt + i) * g * d,
                        g * d, qkv.begin() + (b * tt + i) * rows + part * g * d);
      std::vector<float> pout(out.size(), 7.0f), plse(lse.size());
      kern::attention(kHost, qkv.data(), qkv.data() + g * d, qkv.data() + 2 * g * d,
                      pout.data(), plse.data(), heads, g, rows, rows, tt, tt, d, d, causal, scale);
      kern::attentionGrad(kHost, qkv.data(), qkv.data() + g * d, qkv.data() + 2 * g * d,
                          pout.data(), plse.data(), gdout.data(), dqkv.data(),
                          dqkv.data() + g * d, dqkv.data() + 2 * g * d, heads, g, rows, rows, tt,
                          tt, d, d, causal, scale);
      EXPECT_EQ(pout, gout) << "packed out";
      EXPECT_EQ(plse, lse) << "packed lse";
      for (int64_t b = 0; b < heads / g; ++b)
        for (int64_t i = 0; i < tt; ++i)
          for (int64_t part = 0; part < 3; ++part) {
            const auto &want = part == 0 ? gdq : part == 1 ? gdk : gdv;
            const auto at = dqkv.begin() + (b * tt + i) * rows + part * g * d;
            ASSERT_TRUE(std::equal(at, at + g * d, want.begin() + (b * tt + i) * g * d))
                << "packed gradient " << part << " row " << i << " of head group " << b;
          }
    }
  }
}

TEST(Simd, Exp8IsExpWithinTwoUlpAndKeepsTheSpecialValues) {
  // Softmax's range and beyond: results below 2^-125 (about 2.4e-38) may be
  // 0, the others up to FLT_MAX within two ulp.
  for (float x0 = -110.0f; x0 < 90.0f; x0 += 0.37f) {
    simd::v8 x;
    for (int l = 0; l < 8; ++l)
      x[l] = x0 + 0.041f * float(l);
    const simd::v8 y = simd::exp8(x);
    for (int l = 0; l < 8; ++l) {
      const double want = std::exp(double(x[l]));
      if (want > 3.4028234e38)
        EXPECT_EQ(y[l], INFINITY) << x[l];
      else if (want < 2.3509887e-38) // 2^-125: 0 or the value
        EXPECT_TRUE(y[l] == 0.0f || std::fabs(y[l] - want) <= want * 2.5e-7) << x[l];
      else
        EXPECT_NEAR(y[l], want, want * 2.5e-7) << x[l];
    }
  }
  const simd::v8 special = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1.0f, -200.0f, 200.0f};
  const simd::v8 y = simd::exp8(special);
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(y[1], INFINITY);
  EXPECT_EQ(y[2], 0.0f);
  EXPECT_EQ(y[3], 1.0f);
  EXPECT_EQ(y[4], 1.0f);
  EXPECT_NEAR(y[5], 2.7182817f, 3e-7);
  EXPECT_EQ(y[6], 0.0f);
  EXPECT_EQ(y[7], INFINITY);
}

// Softmax's exp of x - max: exp8's floats for x <= 0, NaN kept.
TEST(Simd, ExpNonPositive8IsExp8BelowZero) {
  for (float x0 = -110.0f; x0 <= 0.0f; x0 += 0.29f) {
    simd::v8 x;
    for (int l = 0; l < 8; ++l)
      x[l] = std::min(0.0f, x0 + 0.037f * float(l));
    const simd::v8 y = simd::expNonPositive8(x), want = simd::exp8(x);
    for (int l = 0; l < 8; ++l)
      EXPECT_EQ(y[l], want[l]) << x[l];
  }
  const simd::v8 special = {NAN, -INFINITY, 0.0f, -0.0f, -87.0f, -86.5f, -200.0f, -1.0f};
  const simd::v8 y = simd::expNonPositive8(special);
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_EQ(y[2], 1.0f);
  EXPECT_EQ(y[3], 1.0f);
  EXPECT_EQ(y[4], 0.0f);
  EXPECT_NEAR(y[5], std::exp(-86.5), 3e-45);
  EXPECT_EQ(y[6], 0.0f);
  EXPECT_NEAR(y[7], 0.36787944f, 3e-8);
}

TEST(ClipGradNorm, SumOfSquaresAndTheFactorAsClipGradNorm) {
  const std::vector<float> a = {3, -4}, b = {12};
  float acc = 0;
  kern::sumSquares(kHost, a.data(), 2, &acc);
  kern::sumSquares(kHost, b.data(), 1, &acc);
  EXPECT_EQ(acc, 169.0f); // a norm of 13
  // Past the vector lanes (16 at a time) and a tail: the sum in double.
  std::vector<float> many(37);
  double want = 2.5;
  for (size_t i = 0; i < many.size(); ++i) {
    many[i] = 0.37f * float(i) - 5.1f;
    want += double(many[i]) * double(many[i]);
  }
  float acc2 = 2.5f;
  kern::sumSquares(kHost, many.data(), int64_t(many.size()), &acc2);
  EXPECT_EQ(acc2, float(want));
  rt::Hyper h{};
  float coef = 0;
  h.maxGradNorm = 1.0f;
  kern::clipCoef(kHost, &acc, h, &coef);
  EXPECT_FLOAT_EQ(coef, 1.0f / (13.0f + 1e-6f));
  h.maxGradNorm = 26.0f; // a larger norm than the gradients': no clipping
  kern::clipCoef(kHost, &acc, h, &coef);
  EXPECT_EQ(coef, 1.0f);
  h.maxGradNorm = 0.0f; // off
  kern::clipCoef(kHost, &acc, h, &coef);
  EXPECT_EQ(coef, 1.0f);
}
