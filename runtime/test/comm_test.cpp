//===- comm_test.cpp - Local communicator, launch detection, tracer ------===//
//
// Everything of the communication layer that runs in one process; the MPI
// backend is tested inside mpirun by mpi_test.cpp and launch_test.cpp.
//
//===----------------------------------------------------------------------===//
#include "comm_impl.h"
#include "rendezvous.h"
#include "test_models.h"
#include "test_util.h"
#include "tracer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include <arpa/inet.h>
#include <array>
#include <chrono>
#include <fstream>
#include <map>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <string>
#include <thread>
#include <vector>

using namespace dtc::rt;
using dtc::test::TempDir;

namespace {

template <class Fn> std::string errorOf(Fn fn) {
  try {
    fn();
  } catch (const Error &e) {
    return e.what();
  }
  return "(no error)";
}

//===--- the local communicator -------------------------------------------===//

TEST(LocalComm, IsOneRank) {
  auto comm = createLocalCommunicator(3);
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->size(), 1);
  EXPECT_EQ(comm->localRank(), 3);
  EXPECT_EQ(comm->localSize(), 1);
  EXPECT_STREQ(comm->backend(), "local");
  EXPECT_FALSE(comm->broken());
}

TEST(LocalComm, AllreduceOverOneRankLeavesTheDataAlone) {
  auto comm = createLocalCommunicator();
  const std::vector<float> want = {1.5f, -2.0f, 0.1f};
  std::vector<float> a = want, b = want;
  comm->allreduceStart(0, a.data(), 3);
  comm->wait(0);
  EXPECT_EQ(a, want); // bit-identical: the sum over one rank
  comm->allreduceStart(1, a.data(), 3);
  comm->allreduceStart(2, b.data(), 2); // several outstanding
  comm->wait(2);
  comm->wait(1);
  EXPECT_EQ(a, want);
  EXPECT_EQ(b, want);
  EXPECT_NE(comm->finishedAt(1), CommBase::Clock::time_point());
  EXPECT_EQ(comm->finishedAt(9), CommBase::Clock::time_point());
}

TEST(LocalComm, MisuseIsAnInternalError) {
  auto comm = createLocalCommunicator();
  dtc::rt::ModelSpec spec = dtc::test::SoftmaxReg::spec();
  comm->setBuckets(spec);
  EXPECT_EQ(errorOf([&] { comm->wait(0); }),
            "internal error: wait for bucket 0 (fc.weight, fc.bias), which was not started");
  float x = 1;
  comm->allreduceStart(0, &x, 1);
  EXPECT_EQ(errorOf([&] { comm->allreduceStart(0, &x, 1); }),
            "internal error: all-reduce of bucket 0 (fc.weight, fc.bias) started again before "
            "its wait");
  comm->wait(0);
  EXPECT_EQ(errorOf([&] { comm->broadcast(&x, 4, 1); }),
            "internal error: broadcast from rank 1 of 1");
}

TEST(LocalComm, DriverCollectivesAreIdentities) {
  auto comm = createLocalCommunicator();
  double d[2] = {1.25, -3};
  comm->allreduceSum(d, 2);
  EXPECT_EQ(d[0], 1.25);
  EXPECT_EQ(d[1], -3);
  int64_t send = 42, recv = 0;
  comm->allgather(&send, &recv, sizeof send);
  EXPECT_EQ(recv, 42);
  char bytes[3] = {1, 2, 3};
  comm->broadcast(bytes, 3, 0);
  EXPECT_EQ(bytes[2], 3);
  comm->barrier();
}

TEST(LocalComm, BucketNamesComeFromTheSpec) {
  auto comm = createLocalCommunicator();
  EXPECT_EQ(comm->bucketName(3), "bucket 3");
  comm->setBuckets(dtc::test::Linear<8, 2, false, 0, true>::spec());
  EXPECT_EQ(comm->bucketName(0), "bucket 0 (fc.bias)");
  EXPECT_EQ(comm->bucketName(1), "bucket 1 (fc.weight)");
  EXPECT_EQ(comm->bucketName(2), "bucket 2");
}

//===--- launch detection and the backend choice ---------------------------===//

LaunchInfo launchFrom(std::map<std::string, std::string> env) {
  return detectLaunch([env](const char *name) -> const char * {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(CommSetup, Detection) {
  LaunchInfo none = launchFrom({});
  EXPECT_EQ(none.launcher, "");
  EXPECT_EQ(none.localRank, -1);
  EXPECT_EQ(none.torchWorldSize, -1);

  LaunchInfo ompi = launchFrom({{"OMPI_COMM_WORLD_SIZE", "4"},
                                {"OMPI_COMM_WORLD_RANK", "3"},
                                {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                {"LOCAL_RANK", "7"}});
  EXPECT_EQ(ompi.launcher, "mpirun");
  EXPECT_EQ(ompi.size, 4);
  EXPECT_EQ(ompi.rank, 3);
  EXPECT_EQ(ompi.localRank, 1); // the launcher's wins over LOCAL_RANK

  LaunchInfo srun =
      launchFrom({{"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "0"}});
  EXPECT_EQ(srun.launcher, "srun");
  EXPECT_EQ(srun.size, 8);
  EXPECT_EQ(srun.rank, 2);
  EXPECT_EQ(srun.localRank, 0);
  // One task (e.g. a batch script's own shell) is not a multi-rank launch.
  EXPECT_EQ(launchFrom({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}}).launcher, "");

  LaunchInfo pmi = launchFrom({{"PMI_SIZE", "2"}, {"PMI_RANK", "1"}});
  EXPECT_EQ(pmi.launcher, "a PMI launcher");
  EXPECT_EQ(pmi.size, 2);
  EXPECT_EQ(launchFrom({{"PMIX_RANK", "0"}}).launcher, "a PMIx launcher");

  LaunchInfo torch = launchFrom({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}});
  EXPECT_EQ(torch.launcher, "");
  EXPECT_EQ(torch.torchRank, 1);
  EXPECT_EQ(torch.torchWorldSize, 2);
  EXPECT_EQ(torch.localRank, 1);
  EXPECT_EQ(launchFrom({{"WORLD_SIZE", "two"}}).torchWorldSize, -1);
}

TEST(CommSetup, BackendChoiceAndRefusals) {
  auto local = createCommunicator(CommKind::Auto, 5, launchFrom({{"LOCAL_RANK", "2"}}), "./train");
  EXPECT_STREQ(local->backend(), "local");
  EXPECT_EQ(local->localRank(), 2);

  EXPECT_EQ(errorOf([] {
              createCommunicator(CommKind::Auto, 5, launchFrom({{"WORLD_SIZE", "2"}}), "./train");
            }),
            "launched with WORLD_SIZE=2 (torchrun), but the CPU build communicates through MPI; "
            "start it with: mpirun -np 2 ./train");
  EXPECT_EQ(errorOf([] {
              createCommunicator(CommKind::Local, 5,
                                 launchFrom({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}}),
                                 "./train");
            }),
            "--comm local, but srun started 4 ranks; run a single process without srun, or use "
            "--comm auto");
  // torchrun's variables must agree with the communicator's.
  EXPECT_NO_THROW(checkLaunchAgreement(launchFrom({{"WORLD_SIZE", "1"}, {"RANK", "0"}}), *local));
  EXPECT_EQ(errorOf([&] {
              checkLaunchAgreement(
                  launchFrom({{"OMPI_COMM_WORLD_SIZE", "1"}, {"WORLD_SIZE", "2"}, {"RANK", "1"}}),
                  *local);
            }),
            "the environment says WORLD_SIZE=2 RANK=1 (torchrun), but local runs 1 ranks and "
            "this is rank 0; start it with mpirun alone");
}

TEST(CommSetup, CudaRunsBootstrapNcclAndRefuseMpi) {
  const LaunchInfo torch = launchFrom({{"WORLD_SIZE", "2"}, {"RANK", "1"}, {"LOCAL_RANK", "1"}});
  // torchrun is fine for CUDA: a local base, NCCL bootstraps from the variables.
  auto base = createCommunicator(CommKind::Auto, 5, torch, "./train", /*cuda=*/true);
  EXPECT_STREQ(base->backend(), "local");
  EXPECT_EQ(base->localRank(), 1);
  EXPECT_TRUE(wantNccl(CommKind::Auto, torch));
  EXPECT_FALSE(wantNccl(CommKind::Auto, launchFrom({})));
  EXPECT_TRUE(wantNccl(CommKind::Nccl, launchFrom({})));
  EXPECT_TRUE(wantNccl(CommKind::Auto, launchFrom({{"OMPI_COMM_WORLD_SIZE", "2"}})));
  EXPECT_EQ(createCommunicator(CommKind::Nccl, 5, launchFrom({}), "./train", true)->size(), 1);
  EXPECT_EQ(errorOf([&] { createCommunicator(CommKind::Local, 5, torch, "./train", true); }),
            "--comm local, but torchrun started 2 ranks (WORLD_SIZE=2); run a single process, "
            "or use --comm auto");
  EXPECT_EQ(errorOf([] { createCommunicator(CommKind::Mpi, 5, launchFrom({}), "./train", true); })
                .rfind("--comm mpi all-reduces host memory, but this run uses a CUDA device", 0),
            0u);
  EXPECT_EQ(errorOf([] { createCommunicator(CommKind::Nccl, 5, launchFrom({}), "./train"); })
                .rfind("--comm nccl: NCCL connects CUDA devices, but this run uses the CPU", 0),
            0u);
}

//===--- the rendezvous (torchrun's ranks exchange the NCCL id) ------------===//

// A port that was free a moment ago.
int freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

TEST(Rendezvous, RankZeroHandsItsBytesToEveryRank) {
  const int port = freePort(), world = 4;
  std::vector<std::array<unsigned char, 128>> ids(world);
  for (int i = 0; i < 128; ++i)
    ids[0][size_t(i)] = static_cast<unsigned char>(i * 7 + 1);
  std::vector<std::string> errors(world);
  std::vector<std::thread> ranks;
  // The others start first: they retry until rank 0 listens.
  for (int r = world - 1; r >= 0; --r) {
    ranks.emplace_back([&, r] {
      errors[size_t(r)] = errorOf([&] {
        rendezvousBroadcast(r, world, "localhost", port, 20, ids[size_t(r)].data(), 128);
      });
    });
    if (r == world - 1)
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  for (auto &t : ranks)
    t.join();
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(errors[size_t(r)], "(no error)") << "rank " << r;
    EXPECT_EQ(ids[size_t(r)], ids[0]) << "rank " << r;
  }
}

TEST(Rendezvous, TimeoutsAndMismatchesAreErrors) {
  const int port = freePort();
  unsigned char id[128] = {};
  const std::string noServer =
      errorOf([&] { rendezvousBroadcast(1, 2, "127.0.0.1", port, 0.5, id, sizeof id); });
  EXPECT_EQ(noServer.rfind(fmt::format("rendezvous: rank 1 could not reach rank 0 at "
                                       "127.0.0.1:{} within 0.5 s (",
                                       port),
                           0),
            0u)
      << noServer;
  const std::string noPeers =
      errorOf([&] { rendezvousBroadcast(0, 3, "", port, 0.5, id, sizeof id); });
  EXPECT_EQ(noPeers, fmt::format("rendezvous: 2 of 2 ranks did not connect to rank 0 (port {}) "
                                 "within 0.5 s; start every rank with the same MASTER_ADDR, "
                                 "MASTER_PORT and WORLD_SIZE",
                                 port));
  std::string server, client;
  std::thread t0([&] {
    server = errorOf([&] { rendezvousBroadcast(0, 2, "", port, 5, id, sizeof id); });
  });
  std::thread t1([&] {
    unsigned char mine[128];
    client = errorOf([&] { rendezvousBroadcast(1, 3, "localhost", port, 2, mine, sizeof mine); });
  });
  t0.join();
  t1.join();
  EXPECT_EQ(server, "rendezvous: rank 1 runs with WORLD_SIZE=3, rank 0 with 2");
  EXPECT_NE(client, "(no error)");
  EXPECT_NO_THROW(rendezvousBroadcast(0, 1, "", port, 1, id, sizeof id)); // one rank: nothing
}

TEST(CommSetup, MpiPluginErrors) {
  EXPECT_EQ(errorOf([] {
              createMpiCommunicator(5, "", "--comm mpi");
            }).rfind("MPI is needed (--comm mpi), but this runtime was built without MPI", 0),
            0u);
  EXPECT_EQ(errorOf([] { createMpiCommunicator(5, "/nonexistent/libdtcrt_mpi.so", "--comm mpi"); }),
            "cannot load the MPI plugin '/nonexistent/libdtcrt_mpi.so' (needed because --comm "
            "mpi): /nonexistent/libdtcrt_mpi.so: cannot open shared object file: No such file or "
            "directory; set DTC_MPI_PLUGIN to libdtcrt_mpi.so, and install the MPI library it "
            "was built with");
  const std::string notPlugin =
      errorOf([] { createMpiCommunicator(5, "libc.so.6", "the program was launched by mpirun"); });
  EXPECT_EQ(notPlugin.rfind("'libc.so.6' is not a dtc MPI plugin: ", 0), 0u) << notPlugin;
  EXPECT_NE(notPlugin.find("undefined symbol: dtcrt_mpi_plugin"), std::string::npos) << notPlugin;
}

TEST(CommSetup, PluginPathIsCompiledInAndOverridable) {
  const char *old = std::getenv("DTC_MPI_PLUGIN");
  ::unsetenv("DTC_MPI_PLUGIN");
  const std::string builtIn = mpiPluginPath();
#ifdef DTCRT_HAVE_MPI
  EXPECT_EQ(builtIn.front(), '/');
  EXPECT_TRUE(std::ifstream(builtIn).good()) << builtIn;
#endif
  ::setenv("DTC_MPI_PLUGIN", "/x/y.so", 1);
  EXPECT_EQ(mpiPluginPath(), "/x/y.so");
  old ? ::setenv("DTC_MPI_PLUGIN", old, 1) : ::unsetenv("DTC_MPI_PLUGIN");
}

//===--- the tracer ---------------------------------------------------------===//

TEST(Tracer, RankPaths) {
  EXPECT_EQ(Tracer::rankPath("t.json", 0), "t.json");
  EXPECT_EQ(Tracer::rankPath("t.json", 1), "t.rank1.json");
  EXPECT_EQ(Tracer::rankPath("/a.b/trace", 12), "/a.b/trace.rank12");
  EXPECT_EQ(Tracer::rankPath("dir/x.y.json", 3), "dir/x.y.rank3.json");
  EXPECT_EQ(Tracer::rankPath(".trace", 2), ".trace.rank2");
}

TEST(Tracer, RecordsNestedSpansAndCommunicationSpans) {
  Tracer t(3);
  traceBegin(&t, "outer");
  traceBegin(&t, "inner \"quoted\"");
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  traceEnd(&t);
  traceEnd(&t);
  traceEnd(&t); // unbalanced: ignored
  traceBegin(nullptr, "nothing");
  traceEnd(nullptr);
  const auto now = Tracer::Clock::now();
  std::thread([&] {
    t.span(Tracer::kCommTid, "allreduce bucket 0", now, now + std::chrono::microseconds(1500),
           4096);
  }).join();
  EXPECT_EQ(t.numEvents(), 3u);

  nlohmann::json doc = nlohmann::json::parse(t.json());
  std::map<std::string, nlohmann::json> byName;
  for (const auto &e : doc.at("traceEvents")) {
    EXPECT_EQ(e.at("pid"), 3);
    if (e.at("ph") == "X")
      byName[e.at("name")] = e;
  }
  ASSERT_EQ(byName.size(), 3u);
  const auto &outer = byName["outer"], &inner = byName["inner \"quoted\""],
             &comm = byName["allreduce bucket 0"];
  EXPECT_EQ(outer.at("tid"), 1);
  EXPECT_EQ(comm.at("tid"), 2);
  EXPECT_EQ(comm.at("args").at("bytes"), 4096);
  EXPECT_NEAR(comm.at("dur").get<double>(), 1500, 1);
  EXPECT_GE(inner.at("dur").get<double>(), 2000);
  EXPECT_LE(outer.at("ts").get<double>(), inner.at("ts").get<double>());
  EXPECT_GE(outer.at("ts").get<double>() + outer.at("dur").get<double>(),
            inner.at("ts").get<double>() + inner.at("dur").get<double>());
}

TEST(Tracer, WritesAtomically) {
  TempDir dir;
  Tracer t(0);
  traceBegin(&t, "x");
  traceEnd(&t);
  t.write(dir.file("t.json"));
  EXPECT_FALSE(std::ifstream(dir.file("t.json.tmp")).good());
  EXPECT_NO_THROW(nlohmann::json::parse(dtc::test::readFile(dir.file("t.json"))));
  EXPECT_EQ(errorOf([&] {
              t.write(dir.file("no/such/dir/t.json"));
            }).rfind("cannot write trace file '" + dir.file("no/such/dir/t.json") + "': ", 0),
            0u);
}

} // namespace
