//===- comm_test.cpp - Local communicator, launch detection, tracer ------===//
//
// Everything of the communication layer that runs in one process; the MPI
// and gloo backends are tested inside jobs by mpi_test.cpp and launch_test.cpp.
//
//===----------------------------------------------------------------------===//
#include "comm/comm_impl.h"
#include "comm/rendezvous.h"
#include "test_models.h"
#include "test_util.h"
#include "support/tracer.h"

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
  const Request r0 = comm->allreduceStart(0, a.data(), 3);
  comm->wait(r0);
  EXPECT_EQ(a, want); // bit-identical: the sum over one rank
  const Request r1 = comm->allreduceStart(1, a.data(), 3);
  const Request r2 = comm->allreduceStart(2, b.data(), 2); // several outstanding
  comm->wait(r2);
  comm->wait(r1);
  EXPECT_EQ(a, want);
  EXPECT_EQ(b, want);
  EXPECT_NE(comm->finishedAt(1), CommBase::Clock::time_point());
  EXPECT_EQ(comm->finishedAt(9), CommBase::Clock::time_point());
}

TEST(LocalComm, RequestsNameTheirBucketAndCountTheStarts) {
  const Request none;
  EXPECT_FALSE(none);
  EXPECT_EQ(none.bucket(), -1);
  EXPECT_EQ(none.serial(), 0u);
  auto comm = createLocalCommunicator();
  float x = 1, y = 2;
  const Request a = comm->allreduceStart(7, &x, 1);
  const Request b = comm->allreduceStart(3, &y, 1);
  EXPECT_TRUE(a);
  EXPECT_EQ(a.bucket(), 7);
  EXPECT_EQ(b.bucket(), 3);
  EXPECT_EQ(a.serial(), 1u);
  EXPECT_EQ(b.serial(), 2u);
  EXPECT_NE(a, b);
  const Request copy = a;
  EXPECT_EQ(copy, a);
  comm->wait(copy); // a copy is the same request
  comm->wait(b);
  const Request again = comm->allreduceStart(7, &x, 1); // the bucket, started again
  EXPECT_EQ(again.bucket(), 7);
  EXPECT_EQ(again.serial(), 3u);
  EXPECT_NE(again, a);
  comm->wait(again);
  // Another communicator counts its own starts, and its requests differ.
  auto other = createLocalCommunicator();
  const Request o = other->allreduceStart(7, &x, 1);
  EXPECT_EQ(o.serial(), 1u);
  EXPECT_NE(o, a);
  other->wait(o);
}

TEST(LocalComm, MisuseIsAnInternalError) {
  auto comm = createLocalCommunicator();
  dtc::rt::ModelSpec spec = dtc::test::SoftmaxReg::spec();
  comm->setBuckets(spec);
  EXPECT_EQ(errorOf([&] { comm->wait(Request()); }),
            "internal error: wait for a request that no all-reduce started (a "
            "default-constructed dtc::rt::Request)");
  float x = 1;
  const Request r = comm->allreduceStart(0, &x, 1);
  EXPECT_EQ(errorOf([&] { (void)comm->allreduceStart(0, &x, 1); }),
            "internal error: all-reduce of bucket 0 (fc.weight, fc.bias) started again before "
            "its wait");
  comm->wait(r);
  EXPECT_EQ(errorOf([&] { comm->wait(r); }),
            "internal error: wait for request 1 of bucket 0 (fc.weight, fc.bias), which was "
            "already waited for");
  EXPECT_EQ(errorOf([&] { comm->broadcast(&x, 4, 1); }),
            "internal error: broadcast from rank 1 of 1");
}

TEST(LocalComm, AStaleRequestIsAnErrorAndLeavesTheNewOneInFlight) {
  auto comm = createLocalCommunicator();
  float x = 1;
  const Request first = comm->allreduceStart(2, &x, 1);
  comm->wait(first);
  const Request second = comm->allreduceStart(2, &x, 1);
  EXPECT_EQ(errorOf([&] { comm->wait(first); }),
            "internal error: wait for request 1 of bucket 2, which is stale: the bucket was "
            "started again since (request 2)");
  // The failed wait changed nothing: bucket 2 is still in flight.
  EXPECT_EQ(errorOf([&] { (void)comm->allreduceStart(2, &x, 1); }),
            "internal error: all-reduce of bucket 2 started again before its wait");
  comm->wait(second);
  EXPECT_EQ(errorOf([&] { comm->wait(first); }),
            "internal error: wait for request 1 of bucket 2, which is stale: the bucket was "
            "started again since (request 2)");
}

TEST(LocalComm, AnotherCommunicatorsRequestIsAnError) {
  auto comm = createLocalCommunicator(), other = createLocalCommunicator();
  float x = 1;
  const Request mine = comm->allreduceStart(0, &x, 1);
  const Request theirs = other->allreduceStart(0, &x, 1);
  EXPECT_EQ(mine.serial(), theirs.serial()); // same bucket, same serial: still not the same
  EXPECT_NE(mine, theirs);
  EXPECT_EQ(errorOf([&] { comm->wait(theirs); }),
            "internal error: wait for request 1 of bucket 0, which another communicator "
            "started");
  EXPECT_EQ(errorOf([&] { other->wait(mine); }),
            "internal error: wait for request 1 of bucket 0, which another communicator "
            "started");
  comm->wait(mine); // both still in flight
  other->wait(theirs);
}

// ZeRO's bucket collectives over one rank: the reduce-scatter's sum is the
// data, whose only part is this rank's; the all-gather has nothing to bring.
TEST(LocalComm, ReduceScatterAndAllgatherOverOneRank) {
  auto comm = createLocalCommunicator();
  std::vector<float> data(5), shard(5, -1.0f);
  for (int i = 0; i < 5; ++i)
    data[size_t(i)] = float(i) + 0.5f;
  const std::vector<float> want = data;
  const Request out = comm->reduceScatterStart(4, data.data(), shard.data(), 5);
  EXPECT_EQ(out.kind(), CollectiveKind::ReduceScatter);
  EXPECT_EQ(out.bucket(), 4);
  comm->wait(out);
  EXPECT_EQ(shard, want); // bit-identical: the sum over one rank
  EXPECT_EQ(data, want);  // out of place: the data is left alone
  const Request in = comm->reduceScatterStart(4, data.data(), data.data(), 5); // in place
  comm->wait(in);
  EXPECT_EQ(data, want);
  const Request gather = comm->allgatherStart(4, data.data(), 5);
  EXPECT_EQ(gather.kind(), CollectiveKind::Allgather);
  comm->wait(gather);
  EXPECT_EQ(data, want);
  // Empty shards are fine.
  comm->wait(comm->reduceScatterStart(5, data.data(), shard.data(), 0));
  comm->wait(comm->allgatherStart(5, data.data(), 0));
  EXPECT_NE(comm->finishedAt(CollectiveKind::ReduceScatter, 4), CommBase::Clock::time_point());
  EXPECT_NE(comm->finishedAt(CollectiveKind::Allgather, 4), CommBase::Clock::time_point());
  EXPECT_EQ(comm->finishedAt(4), CommBase::Clock::time_point()); // no all-reduce of bucket 4
}

// A bucket has one request in flight per collective kind: its all-reduce,
// reduce-scatter and all-gather may be in flight together, each checked on
// its own.
TEST(LocalComm, OneRequestPerKindAndBucket) {
  auto comm = createLocalCommunicator();
  comm->setBuckets(dtc::test::SoftmaxReg::spec());
  std::vector<float> data = {1, 2, 3}, shard(3), gathered = {4, 5, 6};
  const Request ar = comm->allreduceStart(0, data.data(), 3);
  const Request rs = comm->reduceScatterStart(0, data.data(), shard.data(), 3);
  const Request ag = comm->allgatherStart(0, gathered.data(), 3);
  EXPECT_EQ(ar.kind(), CollectiveKind::Allreduce);
  EXPECT_EQ(rs.serial(), ar.serial() + 1); // one count of starts, every kind
  EXPECT_EQ(ag.serial(), rs.serial() + 1);
  EXPECT_NE(ar, rs);
  EXPECT_EQ(errorOf([&] { (void)comm->reduceScatterStart(0, data.data(), shard.data(), 3); }),
            "internal error: reduce-scatter of bucket 0 (fc.weight, fc.bias) started again "
            "before its wait");
  EXPECT_EQ(errorOf([&] { (void)comm->allgatherStart(0, gathered.data(), 3); }),
            "internal error: all-gather of bucket 0 (fc.weight, fc.bias) started again before "
            "its wait");
  comm->wait(ag); // in any order
  comm->wait(ar);
  EXPECT_EQ(errorOf([&] { comm->wait(ag); }),
            "internal error: wait for all-gather request 3 of bucket 0 (fc.weight, fc.bias), "
            "which was already waited for");
  comm->wait(rs);
  EXPECT_EQ(errorOf([&] { comm->wait(rs); }),
            "internal error: wait for reduce-scatter request 2 of bucket 0 (fc.weight, "
            "fc.bias), which was already waited for");
  // Started again: the first reduce-scatter is stale, and waiting for it
  // neither waits for nor consumes the second (nor touches the all-reduce).
  const Request rs2 = comm->reduceScatterStart(0, data.data(), shard.data(), 3);
  EXPECT_EQ(errorOf([&] { comm->wait(rs); }),
            "internal error: wait for reduce-scatter request 2 of bucket 0 (fc.weight, "
            "fc.bias), which is stale: the bucket's reduce-scatter was started again since "
            "(request 4)");
  EXPECT_EQ(errorOf([&] { (void)comm->reduceScatterStart(0, data.data(), shard.data(), 3); }),
            "internal error: reduce-scatter of bucket 0 (fc.weight, fc.bias) started again "
            "before its wait");
  comm->wait(rs2);
  const Request ar2 = comm->allreduceStart(0, data.data(), 3); // all-reduces are as before
  comm->wait(ar2);
  EXPECT_EQ(errorOf([&] { comm->wait(ar); }),
            "internal error: wait for request 1 of bucket 0 (fc.weight, fc.bias), which is "
            "stale: the bucket was started again since (request 5)");
  auto other = createLocalCommunicator();
  const Request foreign = other->allgatherStart(0, gathered.data(), 3);
  EXPECT_EQ(errorOf([&] { comm->wait(foreign); }),
            "internal error: wait for all-gather request 1 of bucket 0, which another "
            "communicator started");
  other->wait(foreign);
}

TEST(LocalComm, AShardMustBeInPlaceOrABufferOfItsOwn) {
  auto comm = createLocalCommunicator();
  std::vector<float> data(8, 1.0f);
  EXPECT_EQ(errorOf([&] { (void)comm->reduceScatterStart(1, data.data(), data.data() + 2, 4); }),
            "internal error: reduce-scatter of bucket 1: its shard overlaps its data but is not "
            "this rank's part of it (data + 0 * 4 elements, in place)");
  EXPECT_EQ(errorOf([&] { (void)comm->reduceScatterStart(1, data.data() + 3, data.data(), 4); }),
            "internal error: reduce-scatter of bucket 1: its shard overlaps its data but is not "
            "this rank's part of it (data + 0 * 4 elements, in place)");
  EXPECT_EQ(errorOf([&] { (void)comm->reduceScatterStart(1, data.data(), data.data(), -1); }),
            "internal error: reduce-scatter of bucket 1 with -1 elements per rank");
  // The refusals started nothing; adjacent buffers do not overlap.
  comm->wait(comm->reduceScatterStart(1, data.data(), data.data() + 4, 4));
}

TEST(LocalComm, TracesNameTheCollective) {
  auto comm = createLocalCommunicator();
  Tracer t(0);
  comm->setTracer(&t);
  std::vector<float> data(6, 1.0f), shard(6);
  comm->wait(comm->reduceScatterStart(3, data.data(), shard.data(), 6));
  comm->wait(comm->allgatherStart(3, data.data(), 6));
  comm->wait(comm->allreduceStart(3, data.data(), 6));
  comm->setTracer(nullptr);
  std::map<std::string, int> count;
  std::map<std::string, int> tid;
  const nlohmann::json doc = nlohmann::json::parse(t.json());
  for (const auto &e : doc.at("traceEvents"))
    if (e.at("ph") == "X") {
      ++count[e.at("name").get<std::string>()];
      tid[e.at("name").get<std::string>()] = e.at("tid").get<int>();
    }
  EXPECT_EQ(count, (std::map<std::string, int>{{"reducescatter bucket 3", 1},
                                               {"allgather bucket 3", 1},
                                               {"allreduce bucket 3", 1},
                                               {"wait bucket 3", 3}}));
  EXPECT_EQ(tid["reducescatter bucket 3"], Tracer::kCommTid);
  EXPECT_EQ(tid["allgather bucket 3"], Tracer::kCommTid);
  EXPECT_EQ(tid["wait bucket 3"], Tracer::kComputeTid);
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

// torchrun's variables describe a gloo rendezvous at MASTER_ADDR:MASTER_PORT
// (+1 when torchrun's agent serves its own store there).
TEST(CommSetup, TorchrunRendezvous) {
  const std::map<std::string, std::string> base = {{"RANK", "1"},
                                                   {"WORLD_SIZE", "2"},
                                                   {"LOCAL_RANK", "1"},
                                                   {"MASTER_ADDR", "10.1.2.3"},
                                                   {"MASTER_PORT", "29500"}};
  Rendezvous r = launchFrom(base).rendezvous;
  EXPECT_EQ(r.source, "torchrun");
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.rank, 1);
  EXPECT_EQ(r.size, 2);
  EXPECT_EQ(r.host, "10.1.2.3");
  EXPECT_EQ(r.port, 29500);
  auto with = [&](std::map<std::string, std::string> extra) {
    for (const auto &kv : base)
      extra.insert(kv);
    return launchFrom(extra).rendezvous;
  };
  EXPECT_EQ(with({{"TORCHELASTIC_USE_AGENT_STORE", "True"}}).port, 29501);
  EXPECT_EQ(with({{"TORCHELASTIC_USE_AGENT_STORE", "False"}}).port, 29500);
  EXPECT_EQ(with({{"TORCHELASTIC_USE_AGENT_STORE", "True"}, {"DTC_RENDEZVOUS_PORT", "4000"}}).port,
            4000);
  // One rank, or no torchrun: nothing to meet for.
  EXPECT_EQ(launchFrom({{"RANK", "0"}, {"WORLD_SIZE", "1"}}).rendezvous.source, "");
  EXPECT_EQ(launchFrom({}).rendezvous.source, "");
  EXPECT_EQ(launchFrom({{"WORLD_SIZE", "2"}}).rendezvous.error,
            "WORLD_SIZE=2 (torchrun) needs RANK, MASTER_ADDR and MASTER_PORT too, but RANK, "
            "MASTER_ADDR and MASTER_PORT are missing or not a valid number");
  EXPECT_EQ(
      launchFrom(
          {{"WORLD_SIZE", "2"}, {"RANK", "0"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "70000"}})
          .rendezvous.error,
      "WORLD_SIZE=2 (torchrun) needs RANK, MASTER_ADDR and MASTER_PORT too, but "
      "MASTER_PORT is missing or not a valid number");
  EXPECT_EQ(launchFrom(
                {{"WORLD_SIZE", "2"}, {"RANK", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1234"}})
                .rendezvous.error,
            "RANK=2 is out of range for WORLD_SIZE=2 (torchrun)");
  // torchrun wins over an inherited TF_CONFIG.
  EXPECT_EQ(with({{"TF_CONFIG", "{}"}}).source, "torchrun");
}

//===--- TF_CONFIG ------------------------------------------------------------===//

TEST(TfConfig, WorkersGiveRankSizeAndRendezvous) {
  Rendezvous r = parseTfConfig(R"({"cluster": {"worker": ["host0:2222", "host1:2223",
                               "[fe80::1]:2224"]}, "task": {"type": "worker", "index": 2}})");
  EXPECT_EQ(r.source, "TF_CONFIG");
  EXPECT_EQ(r.rank, 2);
  EXPECT_EQ(r.size, 3);
  EXPECT_EQ(r.host, "host0"); // worker 0 serves the rendezvous
  EXPECT_EQ(r.port, 2222);
  EXPECT_EQ(r.error, "");
  // A chief comes first (MultiWorkerMirroredStrategy): rank 0, workers after it.
  const char *withChief = R"({"cluster": {"chief": ["[::1]:5000"], "worker": ["a:1", "b:2"]},
                             "task": {"type": "TYPE", "index": INDEX}})";
  auto task = [&](const char *type, int index) {
    std::string s = withChief;
    s.replace(s.find("TYPE"), 4, type);
    s.replace(s.find("INDEX"), 5, std::to_string(index));
    return parseTfConfig(s);
  };
  EXPECT_EQ(task("chief", 0).rank, 0);
  EXPECT_EQ(task("worker", 0).rank, 1);
  EXPECT_EQ(task("worker", 1).rank, 2);
  EXPECT_EQ(task("worker", 1).size, 3);
  EXPECT_EQ(task("worker", 1).host, "::1");
  EXPECT_EQ(task("worker", 1).port, 5000);
  // Through the environment.
  LaunchInfo l = launchFrom(
      {{"TF_CONFIG",
        R"({"cluster":{"worker":["w0:1000","w1:1001"]},"task":{"type":"worker","index":1}})"}});
  EXPECT_EQ(l.launcher, "");
  EXPECT_EQ(l.rendezvous.source, "TF_CONFIG");
  EXPECT_EQ(l.rendezvous.rank, 1);
  EXPECT_EQ(l.rendezvous.port, 1000);
}

TEST(TfConfig, MalformedIsAnErrorNamingTfConfig) {
  const std::string expected =
      "expected {\"cluster\": {\"worker\": [\"host0:port0\", \"host1:port1\", ...]}, "
      "\"task\": {\"type\": \"worker\", \"index\": K}}";
  const std::string notJson = errorOf([] { parseTfConfig("{\"cluster\": "); });
  EXPECT_EQ(notJson.rfind("TF_CONFIG is not valid JSON (", 0), 0u) << notJson;
  EXPECT_NE(notJson.find("); " + expected), std::string::npos) << notJson;
  EXPECT_EQ(errorOf([] { parseTfConfig("[1, 2]"); }),
            "TF_CONFIG is not a JSON object; " + expected);
  EXPECT_EQ(errorOf([] { parseTfConfig(R"({"task": {"type": "worker", "index": 0}})"); }),
            "TF_CONFIG has no \"cluster\" object; " + expected);
  const std::string noWorkers = "TF_CONFIG has no cluster.worker list of \"host:port\" "
                                "addresses (or it is empty); " +
                                expected;
  EXPECT_EQ(errorOf([] { parseTfConfig(R"({"cluster": {"ps": ["a:1"]}, "task": {}})"); }),
            noWorkers);
  EXPECT_EQ(errorOf([] { parseTfConfig(R"({"cluster": {"worker": []}})"); }), noWorkers);
  EXPECT_EQ(errorOf([] { parseTfConfig(R"({"cluster": {"worker": "a:1"}})"); }), noWorkers);
  EXPECT_EQ(
      errorOf([] {
        parseTfConfig(
            R"({"cluster": {"worker": ["a:1", "b"]}, "task": {"type": "worker", "index": 0}})");
      }),
      "TF_CONFIG's cluster.worker[1] is \"b\", not \"host:port\"");
  EXPECT_EQ(errorOf([] { parseTfConfig(R"({"cluster": {"worker": ["a:99999"]}})"); }),
            "TF_CONFIG's cluster.worker[0] is \"a:99999\", not \"host:port\"");
  EXPECT_EQ(errorOf([] { parseTfConfig(R"({"cluster": {"worker": [7]}})"); }),
            "TF_CONFIG's cluster.worker[0] is 7, not \"host:port\"");
  EXPECT_EQ(errorOf([] { parseTfConfig(R"({"cluster": {"worker": ["fe80::1:80"]}})"); }),
            "TF_CONFIG's cluster.worker[0] is \"fe80::1:80\", not \"host:port\"");
  EXPECT_EQ(errorOf([] { parseTfConfig(R"({"cluster": {"worker": ["a:1"]}})"); }),
            "TF_CONFIG has no \"task\" object saying which worker this process is; " + expected);
  EXPECT_EQ(errorOf([] {
              parseTfConfig(
                  R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "ps", "index": 0}})");
            }),
            "TF_CONFIG's task.type is \"ps\", but train runs only as a \"worker\" (or the "
            "\"chief\"): every rank of a data-parallel job trains");
  EXPECT_EQ(
      errorOf([] { parseTfConfig(R"({"cluster": {"worker": ["a:1"]}, "task": {"index": 0}})"); }),
      "TF_CONFIG's task.type is missing, but train runs only as a \"worker\" (or the "
      "\"chief\"): every rank of a data-parallel job trains");
  EXPECT_EQ(errorOf([] {
              parseTfConfig(
                  R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": "0"}})");
            }),
            "TF_CONFIG's task.index is \"0\", not a non-negative integer");
  EXPECT_EQ(errorOf([] {
              parseTfConfig(
                  R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": -1}})");
            }),
            "TF_CONFIG's task.index is -1, not a non-negative integer");
  EXPECT_EQ(
      errorOf([] {
        parseTfConfig(
            R"({"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 2}})");
      }),
      "TF_CONFIG's task.index 2 is out of range: cluster.worker has 2 entries");
  EXPECT_EQ(errorOf([] {
              parseTfConfig(
                  R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "chief", "index": 0}})");
            }),
            "TF_CONFIG's task.type is \"chief\", but its cluster has no chief list");
  // Malformed TF_CONFIG matters only when the job needs it: a CPU run
  // without an MPI launcher stops with the message and the mpirun command.
  const LaunchInfo bad = launchFrom({{"TF_CONFIG", "not json"}});
  EXPECT_EQ(bad.rendezvous.source, "TF_CONFIG");
  const std::string e = errorOf([&] { createCommunicator(CommKind::Auto, 5, bad, "./train"); });
  EXPECT_EQ(e.rfind("TF_CONFIG is not valid JSON (", 0), 0u) << e;
  EXPECT_NE(e.find("; or start the job with mpirun: mpirun -np N ./train"), std::string::npos) << e;
  // One worker: one rank, no rendezvous.
  auto one = createCommunicator(
      CommKind::Auto, 5,
      launchFrom(
          {{"TF_CONFIG", R"({"cluster":{"worker":["a:1"]},"task":{"type":"worker","index":0}})"}}),
      "./train");
  EXPECT_STREQ(one->backend(), "local");
  EXPECT_EQ(
      errorOf([] {
        createCommunicator(
            CommKind::Local, 5,
            launchFrom(
                {{"TF_CONFIG",
                  R"({"cluster":{"worker":["a:1","b:2"]},"task":{"type":"worker","index":0}})"}}),
            "./train");
      }),
      "--comm local, but TF_CONFIG describes 2 workers; run a single process without "
      "TF_CONFIG, or use --comm auto");
}

TEST(CommSetup, BackendChoiceAndRefusals) {
  auto local = createCommunicator(CommKind::Auto, 5, launchFrom({{"LOCAL_RANK", "2"}}), "./train");
  EXPECT_STREQ(local->backend(), "local");
  EXPECT_EQ(local->localRank(), 2);

  EXPECT_EQ(errorOf([] {
              createCommunicator(CommKind::Auto, 5, launchFrom({{"WORLD_SIZE", "2"}}), "./train");
            }),
            "WORLD_SIZE=2 (torchrun) needs RANK, MASTER_ADDR and MASTER_PORT too, but RANK, "
            "MASTER_ADDR and MASTER_PORT are missing or not a valid number; or start the job "
            "with mpirun: mpirun -np 2 ./train");
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

// srun without a PMI: SLURM_NTASKS says 2 tasks, but MPI comes up as a
// singleton in each. Every task would train alone: an error, at once.
TEST(CommSetup, SlurmWithoutPmiIsAnError) {
  auto single = createLocalCommunicator(); // what MPI's singleton looks like: 1 rank
  const LaunchInfo slurm =
      launchFrom({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "0"}});
  const std::string want =
      "Slurm started 2 tasks (SLURM_NTASKS=2), but local runs 1 rank: srun gave MPI no PMI, so "
      "every task would train alone; start it with `srun --mpi=pmix ./train` (`srun "
      "--mpi=list` shows the PMIs), or with `mpirun -np 2 ./train` inside the allocation";
  EXPECT_EQ(errorOf([&] { checkLauncherSize(slurm, *single, "./train"); }), want);
  EXPECT_EQ(errorOf([&] { checkLaunchAgreement(slurm, *single); }), want);
  // Any launcher that said N ranks while the communicator has another size.
  EXPECT_EQ(
      errorOf([&] {
        checkLauncherSize(launchFrom({{"PMI_SIZE", "4"}, {"PMI_RANK", "1"}}), *single, "bin/train");
      }),
      "a PMI launcher started 4 ranks, but local runs 1 rank; start it with `mpirun -np "
      "4 bin/train`, with every rank under one launcher");
  EXPECT_NO_THROW(checkLauncherSize(launchFrom({{"PMIX_RANK", "0"}}), *single, "./train"));
  EXPECT_NO_THROW(checkLauncherSize(launchFrom({{"OMPI_COMM_WORLD_SIZE", "1"}}), *single, "t"));
}

// torch.distributed.launch passes --local_rank K; torchrun sets LOCAL_RANK.
TEST(CommSetup, LocalRankArgumentMustAgreeWithLocalRank) {
  auto from = [](std::map<std::string, std::string> env, int arg) {
    return detectLaunch(
        [env](const char *name) -> const char * {
          auto it = env.find(name);
          return it == env.end() ? nullptr : it->second.c_str();
        },
        arg);
  };
  LaunchInfo argOnly = from({}, 3);
  EXPECT_EQ(argOnly.localRankArg, 3);
  EXPECT_EQ(argOnly.localRank, 3); // no variable says otherwise
  EXPECT_EQ(createCommunicator(CommKind::Auto, 5, argOnly, "./train")->localRank(), 3);
  LaunchInfo agree = from({{"LOCAL_RANK", "1"}}, 1);
  EXPECT_EQ(createCommunicator(CommKind::Auto, 5, agree, "./train")->localRank(), 1);
  EXPECT_EQ(from({{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}}, 5).localRank,
            0); // the launcher's wins
  EXPECT_EQ(errorOf([&] {
              createCommunicator(CommKind::Auto, 5, from({{"LOCAL_RANK", "0"}}, 1), "./train");
            }),
            "--local_rank 1 disagrees with LOCAL_RANK=0; start every rank with one launcher "
            "(torchrun sets LOCAL_RANK, torch.distributed.launch passes --local_rank)");
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
  EXPECT_EQ(errorOf([] {
              createCommunicator(CommKind::Gloo, 5, launchFrom({}), "./train", true);
            }).rfind("--comm gloo all-reduces host memory, but this run uses a CUDA device", 0),
            0u);
  EXPECT_EQ(
      errorOf([] {
        createCommunicator(
            CommKind::Auto, 5,
            launchFrom(
                {{"TF_CONFIG",
                  R"({"cluster":{"worker":["a:1","b:2"]},"task":{"type":"worker","index":0}})"}}),
            "./train", true);
      }),
      "TF_CONFIG describes a job of several workers, but a CUDA run's ranks start NCCL "
      "from mpirun, srun or torchrun; start them with one of those, or run with --device "
      "cpu");
}

// --comm gloo under mpirun needs a rendezvous too; alone it is one rank.
TEST(CommSetup, CommGlooRefusalsAndSingleton) {
  EXPECT_EQ(errorOf([] {
              createCommunicator(
                  CommKind::Gloo, 5,
                  launchFrom({{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "0"}}),
                  "./train");
            }),
            "--comm gloo, but mpirun started 2 ranks without saying where they meet for gloo "
            "(torchrun's RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT, or TF_CONFIG); under "
            "mpirun use --comm mpi (or auto)");
#ifdef DTCRT_HAVE_GLOO
  auto single = createCommunicator(CommKind::Gloo, 5, launchFrom({}), "./train");
  EXPECT_STREQ(single->backend(), "gloo");
  EXPECT_EQ(single->size(), 1);
  EXPECT_EQ(single->localSize(), 1);
  EXPECT_EQ(single->libraryVersion().rfind("gloo 0.", 0), 0u) << single->libraryVersion();
  std::vector<float> x = {1.5f, -2.0f};
  const Request r = single->allreduceStart(0, x.data(), 2);
  single->wait(r);
  EXPECT_EQ(errorOf([&] { single->wait(r); }),
            "internal error: wait for request 1 of bucket 0, which was already waited for");
  EXPECT_EQ(errorOf([&] { single->wait(Request()); }),
            "internal error: wait for a request that no all-reduce started (a "
            "default-constructed dtc::rt::Request)");
  EXPECT_EQ(x, (std::vector<float>{1.5f, -2.0f}));
  // ZeRO's collectives over one gloo rank (gloo's algorithms, in the plugin).
  std::vector<float> data = {0.5f, 1.5f, 2.5f}, shard(3);
  const Request rs = single->reduceScatterStart(0, data.data(), shard.data(), 3);
  const Request ag = single->allgatherStart(0, x.data(), 2); // the same bucket, in flight too
  single->wait(ag);
  single->wait(rs);
  EXPECT_EQ(shard, data);
  EXPECT_EQ(data, (std::vector<float>{0.5f, 1.5f, 2.5f}));
  EXPECT_EQ(x, (std::vector<float>{1.5f, -2.0f}));
  single->wait(single->reduceScatterStart(0, data.data(), data.data(), 3)); // in place
  EXPECT_EQ(data, (std::vector<float>{0.5f, 1.5f, 2.5f}));
  EXPECT_EQ(errorOf([&] { single->wait(rs); }),
            "internal error: wait for reduce-scatter request 2 of bucket 0, which is stale: the "
            "bucket's reduce-scatter was started again since (request 4)");
  double d = 2.5;
  single->allreduceSum(&d, 1);
  EXPECT_EQ(d, 2.5);
  int64_t send = 7, recv = 0;
  single->allgather(&send, &recv, sizeof send);
  EXPECT_EQ(recv, 7);
  single->barrier();
#endif
}

TEST(CommSetup, GlooPluginErrors) {
  const Rendezvous r{"torchrun", 0, 2, "127.0.0.1", 1, ""};
  EXPECT_EQ(errorOf([&] { createGlooCommunicator(5, "", "torchrun started 2 ranks", r); })
                .rfind("gloo is needed (torchrun started 2 ranks), but this runtime was built "
                       "without gloo (no libdtcrt_gloo.so); install libgloo-dev and rebuild dtc",
                       0),
            0u);
  EXPECT_EQ(errorOf([&] {
              createGlooCommunicator(5, "/nonexistent/libdtcrt_gloo.so", "--comm gloo", r);
            }),
            "cannot load the gloo plugin '/nonexistent/libdtcrt_gloo.so' (needed because --comm "
            "gloo): /nonexistent/libdtcrt_gloo.so: cannot open shared object file: No such file "
            "or directory; set DTC_GLOO_PLUGIN to libdtcrt_gloo.so, and install libgloo0");
#ifdef DTCRT_HAVE_MPI
  // The MPI plugin is not the gloo plugin.
  const std::string wrong =
      errorOf([&] { createGlooCommunicator(5, mpiPluginPath(), "--comm gloo", r); });
  EXPECT_EQ(wrong.rfind("'" + mpiPluginPath() + "' is not a dtc gloo plugin: ", 0), 0u) << wrong;
#endif
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

TEST(CommSetup, GlooPluginPathIsCompiledInAndOverridable) {
  const char *old = std::getenv("DTC_GLOO_PLUGIN");
  ::unsetenv("DTC_GLOO_PLUGIN");
  const std::string builtIn = glooPluginPath();
#ifdef DTCRT_HAVE_GLOO
  EXPECT_EQ(builtIn.front(), '/');
  EXPECT_TRUE(std::ifstream(builtIn).good()) << builtIn;
#else
  EXPECT_EQ(builtIn, "");
#endif
  ::setenv("DTC_GLOO_PLUGIN", "/x/z.so", 1);
  EXPECT_EQ(glooPluginPath(), "/x/z.so");
  old ? ::setenv("DTC_GLOO_PLUGIN", old, 1) : ::unsetenv("DTC_GLOO_PLUGIN");
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
