//===- mpi_test.cpp - The MPI (or gloo) communicator inside an mpirun job ===//
//
// Run by ctest as `mpirun -np 2 dtcrt_mpi_test --gtest_filter=Mpi<Group>.*`.
// Every rank runs the same tests in the same order, so their collectives
// match; assertions never skip a collective (EXPECT, not ASSERT, before
// one). The process fails if any rank's tests fail. With
// DTCRT_TEST_BACKEND=gloo and DTCRT_TEST_GLOO_PORT=P (runtime.gloo.*), the
// same tests run on the gloo plugin instead: mpirun only starts the two
// processes (rank and size from OMPI_COMM_WORLD_*), which meet at
// 127.0.0.1:P, and MPI is never loaded.
//
//===----------------------------------------------------------------------===//
#include "comm/comm_impl.h"
#include "support/tracer.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

using namespace dtc::rt;
using Clock = std::chrono::steady_clock;

namespace {

CommBase *gComm = nullptr;
std::string gBackend = "mpi";

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

template <class Fn> std::string errorOf(Fn fn) {
  try {
    fn();
  } catch (const Error &e) {
    return e.what();
  }
  return "(no error)";
}

TEST(MpiAllreduce, IdentifiesItself) {
  CommBase &c = *gComm;
  EXPECT_EQ(c.backend(), gBackend);
  EXPECT_EQ(c.size(), 2);
  EXPECT_EQ(c.localSize(), 2); // both ranks run on this machine
  EXPECT_EQ(c.localRank(), c.rank());
  EXPECT_NE(c.libraryVersion(), "");
}

TEST(MpiAllreduce, SumsTheRanksContributions) {
  CommBase &c = *gComm;
  const int r = c.rank(), W = c.size();
  const int64_t n = 1000;
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i)
    x[size_t(i)] = float((r + 1) * i) * 0.25f;
  c.wait(c.allreduceStart(0, x.data(), n));
  const float ranks = float(W * (W + 1) / 2); // sum of r + 1
  for (int64_t i = 0; i < n; ++i) {
    const float want = ranks * float(i) * 0.25f;
    EXPECT_NEAR(x[size_t(i)], want, 1e-6f * std::max(1.0f, std::fabs(want))) << i;
  }
  // Equal contributions that are exact in float: the sum is exact.
  std::vector<float> y(n, 0.375f);
  c.wait(c.allreduceStart(0, y.data(), n));
  EXPECT_EQ(std::count(y.begin(), y.end(), 0.375f * float(W)), n);
}

TEST(MpiAllreduce, SeveralOutstandingBucketsWaitedInAnyOrder) {
  CommBase &c = *gComm;
  const int r = c.rank();
  const std::vector<int64_t> sizes = {1, 0, 3 << 20, 1000, 17};
  std::vector<std::vector<float>> bufs;
  for (size_t b = 0; b < sizes.size(); ++b)
    bufs.emplace_back(size_t(sizes[b]), float(r * 10 + int(b)));
  std::vector<Request> requests(sizes.size());
  for (int round = 0; round < 2; ++round) { // buckets are reused step after step
    for (size_t b = 0; b < sizes.size(); ++b) {
      std::fill(bufs[b].begin(), bufs[b].end(), float(r * 10 + int(b) + round));
      requests[b] = c.allreduceStart(int(b) + 10, bufs[b].data(), sizes[b]);
      EXPECT_EQ(requests[b].bucket(), int(b) + 10);
    }
    for (size_t b = sizes.size(); b-- > 0;)
      c.wait(requests[b]);
    for (size_t b = 0; b < sizes.size(); ++b) {
      const float want = float(b + round) + float(10 + b + round); // 2 ranks
      EXPECT_EQ(std::count(bufs[b].begin(), bufs[b].end(), want), sizes[b])
          << "bucket " << b << " round " << round;
    }
  }
}

// train --overlap off (or auto without a spare core): a bucket's all-reduce
// starts at its wait, after those started before it. Only rank 0 defers
// here: the collectives' order is the start order either way, so ranks may
// differ.
TEST(MpiAllreduce, DeferredStartsRunAtTheWaitInStartOrder) {
  CommBase &c = *gComm;
  const int r = c.rank();
  c.setDeferredStarts(r == 0);
  std::vector<float> a(1 << 20, float(r + 1)), b(1000, float(r + 2));
  const Request ra = c.allreduceStart(60, a.data(), int64_t(a.size()));
  const Request rb = c.allreduceStart(61, b.data(), int64_t(b.size()));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  if (r == 0) {
    EXPECT_EQ(c.finishedAt(60), Clock::time_point()) << "started before its wait";
    EXPECT_EQ(c.finishedAt(61), Clock::time_point()) << "started before its wait";
  }
  c.wait(rb); // runs 60, then 61
  ASSERT_NE(c.finishedAt(60), Clock::time_point());
  EXPECT_LE(c.finishedAt(60), c.finishedAt(61));
  c.wait(ra);
  EXPECT_EQ(std::count(a.begin(), a.end(), 3.0f), int64_t(a.size()));
  EXPECT_EQ(std::count(b.begin(), b.end(), 5.0f), int64_t(b.size()));
  c.setDeferredStarts(false);
}

// Switching deferral off enqueues (and wakes the thread for) what waits.
TEST(MpiAllreduce, SwitchingDeferralOffRunsTheDeferred) {
  CommBase &c = *gComm;
  c.setDeferredStarts(true);
  EXPECT_TRUE(c.deferredStarts());
  std::vector<float> a(1000, 1.0f);
  const Request ra = c.allreduceStart(63, a.data(), int64_t(a.size()));
  c.setDeferredStarts(false);
  EXPECT_FALSE(c.deferredStarts());
  c.wait(ra);
  EXPECT_EQ(a[999], 2.0f);
}

TEST(MpiCollectives, BroadcastAllgatherAllreduceSumBarrier) {
  CommBase &c = *gComm;
  const int r = c.rank();
  for (int root = 0; root < 2; ++root) {
    std::vector<char> bytes(100000, char(r == root ? 7 + root : 0));
    c.broadcast(bytes.data(), int64_t(bytes.size()), root);
    EXPECT_EQ(std::count(bytes.begin(), bytes.end(), char(7 + root)), 100000) << root;
  }
  struct Item {
    int64_t rank;
    double value;
  } mine{r, 0.5 * r}, all[2];
  c.allgather(&mine, all, sizeof(Item));
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(all[k].rank, k);
    EXPECT_EQ(all[k].value, 0.5 * k);
  }
  double sums[3] = {1.0 + r, 1e-3 * r, -2};
  c.allreduceSum(sums, 3);
  EXPECT_EQ(sums[0], 3.0);
  EXPECT_DOUBLE_EQ(sums[1], 1e-3);
  EXPECT_EQ(sums[2], -4.0);
  c.barrier();
}

TEST(MpiCollectives, DriverCollectivesQueueBehindPendingAllreduces) {
  CommBase &c = *gComm;
  std::vector<float> big(4 << 20, 1.0f);
  const Request r = c.allreduceStart(30, big.data(), int64_t(big.size()));
  double x = 1;
  c.allreduceSum(&x, 1); // runs after bucket 30, in the FIFO's order
  const auto returned = Clock::now();
  EXPECT_EQ(x, 2.0);
  EXPECT_NE(c.finishedAt(30), Clock::time_point());
  EXPECT_LE(c.finishedAt(30), returned);
  c.wait(r);
  EXPECT_EQ(big[123], 2.0f);
}

TEST(MpiCollectives, DeferredAllreducesRunBeforeALaterCollective) {
  CommBase &c = *gComm;
  c.setDeferredStarts(true);
  std::vector<float> big(1 << 20, 1.0f);
  const Request r = c.allreduceStart(62, big.data(), int64_t(big.size()));
  double x = 1;
  c.allreduceSum(&x, 1); // bucket 62 was started first: it runs first
  const auto returned = Clock::now();
  EXPECT_EQ(x, 2.0);
  ASSERT_NE(c.finishedAt(62), Clock::time_point());
  EXPECT_LE(c.finishedAt(62), returned);
  c.wait(r);
  EXPECT_EQ(big[123], 2.0f);
  c.setDeferredStarts(false);
}

//===--- ZeRO's bucket collectives: reduce-scatter and all-gather ------------===//

// Rank r contributes 1000 * r + i at element i of the bucket; the sum at i
// over W ranks is 1000 * W * (W - 1) / 2 + W * i (exact in float here).
float contribution(int rank, int64_t i) { return float(1000 * rank + i); }
float sumAt(int W, int64_t i) { return float(1000 * W * (W - 1) / 2 + W * i); }

TEST(MpiSharded, ReduceScatterOutOfPlace) {
  CommBase &c = *gComm;
  const int r = c.rank(), W = c.size();
  for (int64_t shardCount : {int64_t(1), int64_t(1000), int64_t(4097), int64_t(0)}) {
    std::vector<float> data(size_t(shardCount * W)), shard(size_t(shardCount), -1.0f);
    for (int64_t i = 0; i < shardCount * W; ++i)
      data[size_t(i)] = contribution(r, i);
    const std::vector<float> before = data;
    const Request q = c.reduceScatterStart(20, data.data(), shard.data(), shardCount);
    EXPECT_EQ(q.kind(), CollectiveKind::ReduceScatter);
    c.wait(q);
    int64_t wrong = 0;
    for (int64_t i = 0; i < shardCount; ++i)
      wrong += shard[size_t(i)] != sumAt(W, r * shardCount + i);
    EXPECT_EQ(wrong, 0) << shardCount << " per rank; shard[0] = "
                        << (shardCount ? shard[0] : 0.0f);
    EXPECT_EQ(data, before) << "out of place: the data is left alone";
  }
}

TEST(MpiSharded, ReduceScatterInPlace) {
  CommBase &c = *gComm;
  const int r = c.rank(), W = c.size();
  for (int64_t shardCount : {int64_t(1), int64_t(3000), int64_t(1) << 20}) {
    std::vector<float> data(size_t(shardCount * W));
    for (int64_t i = 0; i < shardCount * W; ++i)
      data[size_t(i)] = contribution(r, i % 4096);
    float *shard = data.data() + r * shardCount;
    c.wait(c.reduceScatterStart(21, data.data(), shard, shardCount));
    int64_t wrong = 0;
    for (int64_t i = 0; i < shardCount; ++i)
      wrong += shard[i] != sumAt(W, (r * shardCount + i) % 4096);
    EXPECT_EQ(wrong, 0) << shardCount << " per rank";
  }
}

TEST(MpiSharded, AllgatherInPlace) {
  CommBase &c = *gComm;
  const int r = c.rank(), W = c.size();
  for (int64_t shardCount : {int64_t(1), int64_t(1001), int64_t(1) << 20, int64_t(0)}) {
    // Only this rank's part is its own; the others' are garbage until gathered.
    std::vector<float> data(size_t(shardCount * W), -7.0f);
    for (int64_t i = 0; i < shardCount; ++i)
      data[size_t(r * shardCount + i)] = contribution(r, i % 4096);
    const Request q = c.allgatherStart(22, data.data(), shardCount);
    EXPECT_EQ(q.kind(), CollectiveKind::Allgather);
    c.wait(q);
    int64_t wrong = 0;
    for (int p = 0; p < W; ++p)
      for (int64_t i = 0; i < shardCount; ++i)
        wrong += data[size_t(p * shardCount + i)] != contribution(p, i % 4096);
    EXPECT_EQ(wrong, 0) << shardCount << " per rank";
  }
}

// ZeRO's step: reduce-scatter the gradients, update the shard, all-gather
// the parameters. A reduce-scatter and an all-gather of the same bucket (and
// its all-reduce) are in flight together, waited for in any order.
TEST(MpiSharded, OneRequestPerKindOfABucketInFlightTogether) {
  CommBase &c = *gComm;
  const int r = c.rank(), W = c.size();
  const int64_t n = 5000;
  for (int round = 0; round < 2; ++round) { // buckets are reused step after step
    std::vector<float> grads(size_t(n * W)), params(size_t(n * W), -1.0f);
    std::vector<float> shard(static_cast<size_t>(n)), sums(size_t(n), float(r + round));
    for (int64_t i = 0; i < n * W; ++i)
      grads[size_t(i)] = contribution(r, i) + float(round);
    for (int64_t i = 0; i < n; ++i)
      params[size_t(r * n + i)] = contribution(r, i) - float(round);
    const Request rs = c.reduceScatterStart(23, grads.data(), shard.data(), n);
    const Request ag = c.allgatherStart(23, params.data(), n);
    const Request ar = c.allreduceStart(23, sums.data(), n);
    EXPECT_EQ(rs.bucket(), 23);
    EXPECT_EQ(ag.bucket(), 23);
    EXPECT_EQ(ag.serial(), rs.serial() + 1);
    EXPECT_EQ(errorOf([&] { (void)c.reduceScatterStart(23, grads.data(), shard.data(), n); }),
              "internal error: reduce-scatter of bucket 23 started again before its wait");
    EXPECT_EQ(errorOf([&] { (void)c.allgatherStart(23, params.data(), n); }),
              "internal error: all-gather of bucket 23 started again before its wait");
    c.wait(ar);
    c.wait(ag);
    c.wait(rs);
    int64_t wrongShard = 0, wrongParams = 0;
    for (int64_t i = 0; i < n; ++i)
      wrongShard += shard[size_t(i)] != sumAt(W, r * n + i) + float(W * round);
    for (int p = 0; p < W; ++p)
      for (int64_t i = 0; i < n; ++i)
        wrongParams += params[size_t(p * n + i)] != contribution(p, i) - float(round);
    EXPECT_EQ(wrongShard, 0) << "round " << round;
    EXPECT_EQ(wrongParams, 0) << "round " << round;
    EXPECT_EQ(std::count(sums.begin(), sums.end(), float(W * (W - 1) / 2 + W * round)), n);
    EXPECT_EQ(errorOf([&] { c.wait(rs); }),
              fmt::format("internal error: wait for reduce-scatter request {} of bucket 23, "
                          "which was already waited for",
                          rs.serial()));
    EXPECT_EQ(errorOf([&] { c.wait(ag); }),
              fmt::format("internal error: wait for all-gather request {} of bucket 23, which "
                          "was already waited for",
                          ag.serial()));
  }
  // Started again: the old all-gather request is stale, and waiting for it
  // neither waits for nor consumes the new one.
  std::vector<float> params(size_t(n * W), float(r));
  const Request first = c.allgatherStart(24, params.data(), n);
  c.wait(first);
  const Request again = c.allgatherStart(24, params.data(), n);
  EXPECT_EQ(errorOf([&] { c.wait(first); }),
            fmt::format("internal error: wait for all-gather request {} of bucket 24, which is "
                        "stale: the bucket's all-gather was started again since (request {})",
                        first.serial(), again.serial()));
  c.wait(again);
  for (int p = 0; p < W; ++p)
    EXPECT_EQ(params[size_t(p * n)], float(p));
  EXPECT_FALSE(c.broken());
}

// Deferred starts (train --overlap off) run every kind at the wait, in the
// order the step started them. Only rank 0 defers: the collectives' order
// is the start order either way.
TEST(MpiSharded, DeferredStartsKeepTheStartOrder) {
  CommBase &c = *gComm;
  const int r = c.rank(), W = c.size();
  c.setDeferredStarts(r == 0);
  const int64_t n = 1 << 18;
  std::vector<float> grads(size_t(n * W), 1.0f), params(size_t(n * W), 0.0f);
  std::vector<float> shard(static_cast<size_t>(n)), sums(1000, float(r + 1));
  for (int64_t i = 0; i < n; ++i)
    params[size_t(r * n + i)] = float(r + 5);
  const Request rs = c.reduceScatterStart(64, grads.data(), shard.data(), n);
  const Request ar = c.allreduceStart(65, sums.data(), int64_t(sums.size()));
  const Request ag = c.allgatherStart(64, params.data(), n);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  if (r == 0) {
    EXPECT_EQ(c.finishedAt(CollectiveKind::ReduceScatter, 64), Clock::time_point())
        << "started before its wait";
    EXPECT_EQ(c.finishedAt(65), Clock::time_point()) << "started before its wait";
    EXPECT_EQ(c.finishedAt(CollectiveKind::Allgather, 64), Clock::time_point())
        << "started before its wait";
  }
  c.wait(ag); // runs the reduce-scatter, the all-reduce, then the all-gather
  const auto rsDone = c.finishedAt(CollectiveKind::ReduceScatter, 64),
             arDone = c.finishedAt(65), agDone = c.finishedAt(CollectiveKind::Allgather, 64);
  ASSERT_NE(rsDone, Clock::time_point());
  ASSERT_NE(arDone, Clock::time_point());
  EXPECT_LE(rsDone, arDone);
  EXPECT_LE(arDone, agDone);
  c.wait(rs);
  c.wait(ar);
  EXPECT_EQ(std::count(shard.begin(), shard.end(), float(W)), n);
  EXPECT_EQ(std::count(sums.begin(), sums.end(), 3.0f), int64_t(sums.size()));
  for (int p = 0; p < W; ++p)
    EXPECT_EQ(std::count(params.begin() + p * n, params.begin() + (p + 1) * n, float(p + 5)), n)
        << "part " << p;
  c.setDeferredStarts(false);
}

TEST(MpiSharded, TracesNameTheCollective) {
  CommBase &c = *gComm;
  const int W = c.size();
  Tracer t(c.rank());
  c.setTracer(&t);
  std::vector<float> grads(size_t(100 * W), 1.0f), shard(100);
  const Request rs = c.reduceScatterStart(66, grads.data(), shard.data(), 100);
  const Request ag = c.allgatherStart(66, grads.data(), 100);
  c.wait(rs);
  c.wait(ag);
  c.setTracer(nullptr);
  const std::string json = t.json();
  for (const char *name : {"\"reducescatter bucket 66\"", "\"allgather bucket 66\"",
                           "\"wait bucket 66\""})
    EXPECT_NE(json.find(name), std::string::npos) << name << " in " << json;
}

TEST(MpiErrors, MisuseIsAnInternalError) {
  CommBase &c = *gComm;
  EXPECT_EQ(errorOf([&] { c.wait(Request()); }),
            "internal error: wait for a request that no all-reduce started (a "
            "default-constructed dtc::rt::Request)");
  float x = 1;
  const Request r = c.allreduceStart(98, &x, 1);
  EXPECT_EQ(r.bucket(), 98);
  EXPECT_EQ(errorOf([&] { (void)c.allreduceStart(98, &x, 1); }),
            "internal error: all-reduce of bucket 98 started again before its wait");
  c.wait(r);
  EXPECT_EQ(x, float(c.size())); // the sum of 1 over the ranks
  EXPECT_EQ(errorOf([&] { c.wait(r); }),
            fmt::format("internal error: wait for request {} of bucket 98, which was already "
                        "waited for",
                        r.serial()));
  // Started again: the first request is stale, and waiting for it neither
  // waits for nor consumes the second.
  const Request again = c.allreduceStart(98, &x, 1);
  EXPECT_EQ(again.serial(), r.serial() + 1);
  EXPECT_EQ(errorOf([&] { c.wait(r); }),
            fmt::format("internal error: wait for request {} of bucket 98, which is stale: the "
                        "bucket was started again since (request {})",
                        r.serial(), again.serial()));
  // A request of another communicator (one that never communicates).
  auto local = createLocalCommunicator();
  float y = 1;
  const Request foreign = local->allreduceStart(98, &y, 1);
  EXPECT_EQ(errorOf([&] { c.wait(foreign); }),
            fmt::format("internal error: wait for request {} of bucket 98, which another "
                        "communicator started",
                        foreign.serial()));
  local->wait(foreign);
  c.wait(again);
  EXPECT_EQ(x, float(c.size() * c.size()));
  EXPECT_FALSE(c.broken());
}

// The point of the communication thread: an all-reduce started before a
// stretch of computation completes during it, not inside the final wait.
TEST(MpiProgress, AllreduceCompletesWhileTheCallerComputes) {
  CommBase &c = *gComm;
  const int r = c.rank();
  const int64_t n = 8 << 20; // 32 MiB of floats
  std::vector<float> buf(static_cast<size_t>(n));

  // Standalone time: median of 7 (start + wait right away).
  std::vector<double> times;
  for (int i = 0; i < 7; ++i) {
    std::fill(buf.begin(), buf.end(), float(r));
    c.barrier();
    const auto t0 = Clock::now();
    c.wait(c.allreduceStart(40, buf.data(), n));
    times.push_back(seconds(Clock::now() - t0));
  }
  std::sort(times.begin(), times.end());
  double standalone[2] = {0, 0};
  standalone[r] = times[3];
  c.allreduceSum(standalone, 2);
  const double t = std::max(standalone[0], standalone[1]); // the same on both ranks
  EXPECT_EQ(buf[0], float(c.size() * (c.size() - 1) / 2)); // the sum of the ranks

  std::vector<float> work(4096, 1.0f);
  volatile float sink = 0; // keeps the computation
  int early = 0;
  const int trials = 5;
  for (int trial = 0; trial < trials; ++trial) {
    std::fill(buf.begin(), buf.end(), float(r));
    c.barrier();
    const auto t0 = Clock::now();
    const Request request = c.allreduceStart(41, buf.data(), n);
    // "Computation": 5x the standalone all-reduce time of arithmetic.
    float acc = 0;
    while (seconds(Clock::now() - t0) < 5 * t)
      for (float &w : work)
        acc += (w = w * 0.999f + 0.001f);
    const auto waitCalled = Clock::now();
    c.wait(request);
    const auto finished = c.finishedAt(41);
    const bool before = finished <= waitCalled;
    early += before;
    sink = acc;
    std::printf("rank %d trial %d: standalone all-reduce of %.0f MiB %.2f ms; computed %.2f ms; "
                "all-reduce finished at %.2f ms, %s wait was called\n",
                r, trial, double(n) * 4 / (1 << 20), t * 1e3, seconds(waitCalled - t0) * 1e3,
                seconds(finished - t0) * 1e3, before ? "before" : "AFTER");
    EXPECT_EQ(buf[n - 1], float(c.size() * (c.size() - 1) / 2));
  }
  // Without a progressing thread the all-reduce could only finish inside
  // wait, never before it. (2 ranks x 2 busy threads on a 2-core test
  // machine: the all-reduce runs at 2-3x its standalone time; with 8 MiB,
  // scheduling quanta made a trial miss now and then, hence 32 MiB and a
  // majority of 5 trials.)
  EXPECT_GE(early, 3);
}

} // namespace

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  std::unique_ptr<CommBase> comm;
  if (const char *b = std::getenv("DTCRT_TEST_BACKEND"))
    gBackend = b;
  try {
    if (gBackend == "gloo") {
      const char *rank = std::getenv("OMPI_COMM_WORLD_RANK"),
                 *size = std::getenv("OMPI_COMM_WORLD_SIZE"),
                 *port = std::getenv("DTCRT_TEST_GLOO_PORT");
      if (!rank || !size || !port)
        throw Error("DTCRT_TEST_BACKEND=gloo needs OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE "
                    "(run it under Open MPI's mpirun) and DTCRT_TEST_GLOO_PORT");
      Rendezvous r;
      r.source = "the test";
      r.rank = std::atoi(rank);
      r.size = std::atoi(size);
      r.host = "127.0.0.1";
      r.port = std::atoi(port);
      comm = createGlooCommunicator(60, glooPluginPath(), "the test", r);
    } else {
      comm = createMpiCommunicator(60, mpiPluginPath(), "the test");
    }
  } catch (const std::exception &e) {
    std::fprintf(stderr, "dtcrt_mpi_test: %s\n", e.what());
    return 1;
  }
  if (comm->size() != 2) {
    std::fprintf(stderr, "dtcrt_mpi_test: run it with mpirun -np 2 (got %d ranks)\n", comm->size());
    return 1;
  }
  gComm = comm.get();
  int failed = RUN_ALL_TESTS() != 0;
  double anyFailed = failed;
  comm->allreduceSum(&anyFailed, 1); // fail on every rank if one failed
  comm.reset();                      // MPI_Finalize (gloo: closes the connections)
  return anyFailed != 0;
}
