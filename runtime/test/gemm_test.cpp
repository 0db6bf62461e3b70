//===- gemm_test.cpp - kern::gemm on each GEMM engine against a naive one ===//
//
// Built once per engine (dtcrt_gemm_<engine>_test, runtime.gemm.<engine>.*):
// every transposition, shapes small and large enough to be split over
// threads, 1 to 3 threads, beta 0 with NaN in C; no library threads at
// --threads 1.
#include "dtc/kernels.h"
#include "kernels/gemm/engine.h"
#include "kernels/parallel.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

using namespace dtc;

namespace {

const rt::HostContext kHost{}; // the CPU kernels' context

std::vector<float> randomVec(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> v(n);
  for (auto &x : v)
    x = d(gen);
  return v;
}

struct Threads {
  explicit Threads(int n) {
    rt::setKernelThreads(n, false);
    rt::gemm_engine::setThreads(n);
  }
  ~Threads() {
    rt::setKernelThreads(1, false);
    rt::gemm_engine::setThreads(1);
  }
};

// C = alpha op(A) op(B) + beta C in double.
std::vector<float> naive(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                         const std::vector<float> &A, const std::vector<float> &B, float beta,
                         const std::vector<float> &C) {
  std::vector<float> want(C);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k)
        acc += double(ta ? A[k * M + i] : A[i * K + k]) * (tb ? B[j * K + k] : B[k * N + j]);
      want[i * N + j] = float(alpha * acc + (beta == 0 ? 0.0 : beta * double(C[i * N + j])));
    }
  return want;
}

// (transA, transB, shape index, threads)
class GemmTest : public ::testing::TestWithParam<std::tuple<bool, bool, int, int>> {};

// {M, N, K}: tiny; more rows than columns and more columns than rows, each
// over the size at which the oneDNN engine splits C between threads, with
// sizes that are not multiples of the block sizes; and a long reduction
// (the oneDNN engine gives its transposed-A form to OpenBLAS on hosts
// without AVX-512).
constexpr int64_t kShapes[][3] = {
    {5, 7, 3}, {300, 70, 130}, {33, 517, 150}, {64, 500, 784}, {160, 384, 300}};

TEST_P(GemmTest, MatchesNaive) {
  auto [ta, tb, shape, threads] = GetParam();
  const int64_t M = kShapes[shape][0], N = kShapes[shape][1], K = kShapes[shape][2];
  Threads t(threads);
  auto A = randomVec(M * K, 1), B = randomVec(K * N, 2), C = randomVec(M * N, 3);
  for (float beta : {-0.5f, 0.0f}) {
    const float alpha = 1.5f;
    std::vector<float> got(C);
    if (beta == 0)
      std::fill(got.begin(), got.end(), std::numeric_limits<float>::quiet_NaN());
    kern::gemm(kHost, ta, tb, M, N, K, alpha, A.data(), B.data(), beta, got.data());
    std::vector<float> want = naive(ta, tb, M, N, K, alpha, A, B, beta, C);
    // fp32 sums of K products of magnitude <= 1.5, in another order.
    const float tol = 1e-6f * float(K) + 1e-5f;
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], want[i], tol) << "beta " << beta << " at row " << i / N << " col "
                                        << i % N << " (" << rt::gemm_engine::name() << ")";
  }
}

INSTANTIATE_TEST_SUITE_P(Engine, GemmTest,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool(),
                                            ::testing::Range(0, 5), ::testing::Values(1, 2, 3)));

// (transA, transB, threads): kern::gemmBatched against the naive product
// of each matrix pair, for products small enough to go to the threads whole
// (attention's per-head scores) and large enough to be split each.
class GemmBatchedTest : public ::testing::TestWithParam<std::tuple<bool, bool, int>> {};

TEST_P(GemmBatchedTest, MatchesEachProduct) {
  auto [ta, tb, threads] = GetParam();
  Threads t(threads);
  for (auto [count, M, N, K] : std::vector<std::array<int64_t, 4>>{
           {7, 5, 6, 3}, {24, 16, 16, 8}, {3, 130, 140, 150}}) {
    auto A = randomVec(count * M * K, 6), B = randomVec(count * K * N, 7),
         C = randomVec(count * M * N, 8);
    for (float beta : {0.25f, 0.0f}) {
      std::vector<float> got(C);
      if (beta == 0)
        std::fill(got.begin(), got.end(), std::numeric_limits<float>::quiet_NaN());
      kern::gemmBatched(kHost, ta, tb, count, M, N, K, 1.5f, A.data(), B.data(), beta,
                        got.data());
      const float tol = 1e-6f * float(K) + 1e-5f;
      for (int64_t i = 0; i < count; ++i) {
        auto at = [&](const std::vector<float> &v, int64_t n) {
          return std::vector<float>(v.begin() + i * n, v.begin() + (i + 1) * n);
        };
        const std::vector<float> want =
            naive(ta, tb, M, N, K, 1.5f, at(A, M * K), at(B, K * N), beta, at(C, M * N));
        for (int64_t j = 0; j < M * N; ++j)
          ASSERT_NEAR(got[size_t(i * M * N + j)], want[size_t(j)], tol)
              << "product " << i << " of " << count << " [" << M << ", " << N << ", " << K
              << "] beta " << beta << " element " << j;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Engine, GemmBatchedTest,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool(),
                                            ::testing::Values(1, 2, 3)));

int threadsOfThisProcess() {
  int n = 0;
  for (const auto &e : std::filesystem::directory_iterator("/proc/self/task"))
    n += e.is_directory() ? 1 : 0;
  return n;
}

// The engine's library starts no threads of its own at --threads 1 (oneDNN:
// no OpenMP team, whose idle threads would spin on the rank's core). From a
// new thread: OpenMP's thread count is per calling thread.
TEST(GemmEngine, OneThreadStartsNoThreads) {
  Threads t(1);
  const int64_t M = 256, N = 512, K = 512;
  auto A = randomVec(M * K, 4), B = randomVec(K * N, 5);
  std::vector<float> C(M * N);
  int before = 0, after = 0;
  std::thread caller([&] {
    before = threadsOfThisProcess();
    for (int i = 0; i < 3; ++i)
      kern::gemm(kHost, false, false, M, N, K, 1.0f, A.data(), B.data(), 0.0f, C.data());
    after = threadsOfThisProcess();
  });
  caller.join();
  EXPECT_EQ(after, before);
}

TEST(GemmEngine, EmptyKScalesC) {
  std::vector<float> C = {1, 2, 3, 4};
  kern::gemm(kHost, false, false, 2, 2, 0, 1.0f, nullptr, nullptr, 0.5f, C.data());
  EXPECT_EQ(C, (std::vector<float>{0.5f, 1, 1.5f, 2}));
  kern::gemm(kHost, false, false, 2, 2, 0, 1.0f, nullptr, nullptr, 0.0f, C.data());
  EXPECT_EQ(C, (std::vector<float>{0, 0, 0, 0}));
}

TEST(GemmEngine, Named) {
  const std::string n = rt::gemm_engine::name();
  EXPECT_EQ(n.rfind(DTCRT_GEMM_ENGINE " ", 0), 0u) << n;
}

} // namespace
