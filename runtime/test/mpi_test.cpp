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
