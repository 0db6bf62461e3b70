//===- comm.cpp - Launch detection, the local backend, backend choice ----===//
#include "comm/comm_impl.h"

#include "support/tracer.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace dtc::rt {
namespace {

// A non-negative decimal int, else -1 (unset or malformed).
int envInt(const GetEnv &getenv, const char *name) {
  const char *v = getenv(name);
  if (!v || !*v)
    return -1;
  errno = 0;
  char *end = nullptr;
  long n = std::strtol(v, &end, 10);
  if (errno != 0 || *end != '\0' || n < 0 || n > INT_MAX)
    return -1;
  return int(n);
}

class LocalCommunicator final : public CommBase {
public:
  explicit LocalCommunicator(int localRank) : CommBase(0), localRank_(localRank) {}

  int rank() const override { return 0; }
  int size() const override { return 1; }
  int localRank() const override { return localRank_; }
  int localSize() const override { return 1; }
  const char *backend() const override { return "local"; }

  Request allreduceStart(int bucket, float *data, int64_t count) override {
    (void)data; // the sum over one rank
    return start(CollectiveKind::Allreduce, bucket, count * int64_t(sizeof(float)), [] {});
  }

  Request reduceScatterStart(int bucket, float *data, float *shard, int64_t shardCount) override {
    checkShard(bucket, data, shard, shardCount);
    return start(CollectiveKind::ReduceScatter, bucket, shardCount * int64_t(sizeof(float)), [&] {
      if (shard != data && shardCount > 0) // in place: shard is data (rank 0)
        std::memcpy(shard, data, size_t(shardCount) * sizeof(float));
    });
  }

  Request allgatherStart(int bucket, float *data, int64_t shardCount) override {
    (void)data; // this rank's part is the whole
    return start(CollectiveKind::Allgather, bucket, shardCount * int64_t(sizeof(float)), [] {});
  }

  void wait(Request r) override {
    const auto start = Clock::now();
    checkOwn(r);
    Slot &slot = slots_.at(r.kind(), r.bucket());
    checkInFlight(r, slot.serial, slot.pending);
    slot.pending = false;
    if (tracer_)
      tracer_->span(Tracer::kComputeTid, fmt::format("wait bucket {}", r.bucket()), start,
                    Clock::now());
  }

  void broadcast(void *, int64_t, int root) override {
    if (root != 0)
      throw Error(fmt::format("internal error: broadcast from rank {} of 1", root));
  }
  void allreduceSum(double *, int64_t) override {}
  void allgather(const void *send, void *recv, int64_t bytesPerRank) override {
    if (bytesPerRank > 0 && send != recv)
      std::memmove(recv, send, size_t(bytesPerRank));
  }
  void barrier() override {}

  Clock::time_point finishedAt(CollectiveKind kind, int bucket) const override {
    const Slot *slot = slots_.find(kind, bucket);
    return slot ? slot->finished : Clock::time_point();
  }

private:
  struct Slot {
    uint64_t serial = 0;  // the latest request's; 0: never started
    bool pending = false; // between the start and wait
    Clock::time_point finished;
  };

  // Every bucket collective: checks and records the start, runs `work` (what
  // the collective does over one rank) and traces it (`bytes`: the data's).
  template <class Work>
  Request start(CollectiveKind kind, int bucket, int64_t bytes, const Work &work) {
    Slot &slot = slots_.at(kind, bucket);
    checkStart(kind, bucket, slot.pending);
    const Request r = newRequest(kind, bucket);
    slot.serial = r.serial();
    slot.pending = true;
    const auto began = Clock::now();
    work();
    const auto end = Clock::now();
    slot.finished = end;
    if (tracer_)
      tracer_->span(Tracer::kCommTid, spanName(kind, bucket), began, end, bytes);
    return r;
  }

  int localRank_;
  BucketSlots<Slot> slots_;
};

// "host:port" or "[v6addr]:port" of TF_CONFIG's cluster lists.
bool splitHostPort(const std::string &s, std::string *host, int *port) {
  const size_t colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == s.size())
    return false;
  std::string h = s.substr(0, colon);
  if (h.front() == '[') {
    if (h.size() < 3 || h.back() != ']')
      return false;
    h = h.substr(1, h.size() - 2);
  } else if (h.find(':') != std::string::npos) {
    return false; // a bare IPv6 address needs brackets
  }
  long n = 0;
  for (size_t i = colon + 1; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9' || n > 65535)
      return false;
    n = n * 10 + (s[i] - '0');
  }
  if (n < 1 || n > 65535)
    return false;
  *host = h;
  *port = int(n);
  return true;
}

// torchrun's job (WORLD_SIZE > 1), else TF_CONFIG's, else none.
Rendezvous detectRendezvous(const GetEnv &getenv, const LaunchInfo &info) {
  Rendezvous r;
  if (info.torchWorldSize > 1) {
    r.source = "torchrun";
    r.size = info.torchWorldSize;
    r.rank = info.torchRank;
    const char *addr = getenv("MASTER_ADDR");
    int port = envInt(getenv, "MASTER_PORT");
    std::vector<std::string> missing;
    if (info.torchRank < 0)
      missing.push_back("RANK");
    if (!addr || !*addr)
      missing.push_back("MASTER_ADDR");
    if (port < 1 || port > 65535)
      missing.push_back("MASTER_PORT");
    if (!missing.empty()) {
      std::string list;
      for (size_t i = 0; i < missing.size(); ++i)
        list += (i == 0 ? "" : i + 1 == missing.size() ? " and " : ", ") + missing[i];
      r.error = fmt::format("WORLD_SIZE={} (torchrun) needs RANK, MASTER_ADDR and MASTER_PORT "
                            "too, but {} {} missing or not a valid number",
                            r.size, list, missing.size() == 1 ? "is" : "are");
      return r;
    }
    if (r.rank >= r.size) {
      r.error = fmt::format("RANK={} is out of range for WORLD_SIZE={} (torchrun)", r.rank, r.size);
      return r;
    }
    // torchrun's agent serves its own store on MASTER_PORT.
    const char *agent = getenv("TORCHELASTIC_USE_AGENT_STORE");
    if (agent && (std::strcmp(agent, "True") == 0 || std::strcmp(agent, "1") == 0))
      port = port + 1 > 65535 ? port - 1 : port + 1;
    const int own = envInt(getenv, "DTC_RENDEZVOUS_PORT");
    if (own >= 1 && own <= 65535)
      port = own;
    r.host = addr;
    r.port = port;
    return r;
  }
  const char *tf = getenv("TF_CONFIG");
  if (tf && *tf) {
    try {
      r = parseTfConfig(tf);
    } catch (const Error &e) {
      r = Rendezvous();
      r.source = "TF_CONFIG";
      r.error = e.what();
    }
  }
  return r;
}

} // namespace

Rendezvous parseTfConfig(const std::string &text) {
  static const char *kExpected = "expected {\"cluster\": {\"worker\": [\"host0:port0\", "
                                 "\"host1:port1\", ...]}, \"task\": {\"type\": \"worker\", "
                                 "\"index\": K}}";
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception &e) {
    throw Error(fmt::format("TF_CONFIG is not valid JSON ({}); {}", e.what(), kExpected));
  }
  if (!doc.is_object())
    throw Error(fmt::format("TF_CONFIG is not a JSON object; {}", kExpected));
  auto cluster = doc.find("cluster");
  if (cluster == doc.end() || !cluster->is_object())
    throw Error(fmt::format("TF_CONFIG has no \"cluster\" object; {}", kExpected));
  auto workers = cluster->find("worker");
  if (workers == cluster->end() || !workers->is_array() || workers->empty())
    throw Error(fmt::format("TF_CONFIG has no cluster.worker list of \"host:port\" addresses "
                            "(or it is empty); {}",
                            kExpected));
  // MultiWorkerMirroredStrategy's chief, if any, is rank 0; workers follow.
  std::vector<std::string> tasks;
  auto addList = [&](const nlohmann::json &list, const char *name) {
    for (size_t i = 0; i < list.size(); ++i) {
      std::string host;
      int port = 0;
      if (!list[i].is_string() || !splitHostPort(list[i].get<std::string>(), &host, &port))
        throw Error(fmt::format("TF_CONFIG's cluster.{}[{}] is {}, not \"host:port\"", name, i,
                                list[i].dump()));
      tasks.push_back(list[i].get<std::string>());
    }
  };
  size_t chiefs = 0;
  auto chief = cluster->find("chief");
  if (chief != cluster->end()) {
    if (!chief->is_array())
      throw Error("TF_CONFIG's cluster.chief is not a list of \"host:port\" addresses");
    addList(*chief, "chief");
    chiefs = chief->size();
  }
  addList(*workers, "worker");
  auto task = doc.find("task");
  if (task == doc.end() || !task->is_object())
    throw Error(fmt::format("TF_CONFIG has no \"task\" object saying which worker this process "
                            "is; {}",
                            kExpected));
  auto type = task->find("type");
  const std::string kind = type != task->end() && type->is_string() ? type->get<std::string>() : "";
  if (kind != "worker" && kind != "chief")
    throw Error(fmt::format("TF_CONFIG's task.type is {}, but train runs only as a \"worker\" "
                            "(or the \"chief\"): every rank of a data-parallel job trains",
                            type == task->end() ? "missing" : type->dump()));
  auto index = task->find("index");
  if (index == task->end() || !index->is_number_integer() || index->get<int64_t>() < 0)
    throw Error(fmt::format("TF_CONFIG's task.index is {}, not a non-negative integer",
                            index == task->end() ? "missing" : index->dump()));
  const size_t listSize = kind == "chief" ? chiefs : workers->size();
  if (index->get<int64_t>() >= int64_t(listSize)) {
    if (kind == "chief" && chiefs == 0)
      throw Error("TF_CONFIG's task.type is \"chief\", but its cluster has no chief list");
    throw Error(fmt::format("TF_CONFIG's task.index {} is out of range: cluster.{} has {} "
                            "entr{}",
                            index->get<int64_t>(), kind, listSize, listSize == 1 ? "y" : "ies"));
  }
  Rendezvous r;
  r.source = "TF_CONFIG";
  r.size = int(tasks.size());
  r.rank = int(kind == "chief" ? 0 : chiefs) + int(index->get<int64_t>());
  splitHostPort(tasks[0], &r.host, &r.port);
  return r;
}

LaunchInfo detectLaunch(const GetEnv &getenv, int localRankArg) {
  LaunchInfo info;
  auto set = [&](const char *launcher, const char *size, const char *rank, const char *local) {
    info.launcher = launcher;
    info.size = size ? std::max(envInt(getenv, size), 0) : 0;
    info.rank = rank ? envInt(getenv, rank) : -1;
    info.localRank = local ? envInt(getenv, local) : -1;
  };
  const int slurmTasks = envInt(getenv, "SLURM_NTASKS");
  if (getenv("OMPI_COMM_WORLD_SIZE"))
    set("mpirun", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK");
  else if (getenv("SLURM_PROCID") && slurmTasks > 1)
    set("srun", "SLURM_NTASKS", "SLURM_PROCID", "SLURM_LOCALID");
  else if (getenv("PMI_SIZE"))
    set("a PMI launcher", "PMI_SIZE", "PMI_RANK", "MPI_LOCALRANKID");
  else if (getenv("PMIX_RANK"))
    set("a PMIx launcher", nullptr, "PMIX_RANK", nullptr);
  info.torchRank = envInt(getenv, "RANK");
  info.torchWorldSize = envInt(getenv, "WORLD_SIZE");
  info.torchLocalRank = envInt(getenv, "LOCAL_RANK");
  if (info.localRank < 0)
    info.localRank = info.torchLocalRank;
  info.localRankArg = localRankArg;
  if (info.localRank < 0)
    info.localRank = localRankArg;
  info.rendezvous = detectRendezvous(getenv, info);
  return info;
}

LaunchInfo detectLaunch(int localRankArg) {
  return detectLaunch([](const char *name) -> const char * { return std::getenv(name); },
                      localRankArg);
}

void CommBase::setBuckets(const ModelSpec &spec) {
  bucketNames_.clear();
  for (int32_t i = 0; i < spec.numBuckets; ++i) {
    const BucketSpec &b = spec.buckets[i];
    std::string names;
    for (int32_t k = 0; k < b.numParams; ++k) {
      const int32_t p = b.params[k];
      if (!names.empty())
        names += ", ";
      names += p >= 0 && p < spec.numParams && spec.params[p].name ? spec.params[p].name : "?";
    }
    bucketNames_[b.id] = names;
  }
}

namespace {
std::atomic<uint32_t> lastCommunicatorId{0};
} // namespace

Communicator::Communicator() : id_(++lastCommunicatorId) {}

const char *CommBase::kindName(CollectiveKind kind) {
  switch (kind) {
  case CollectiveKind::Allreduce:
    return "all-reduce";
  case CollectiveKind::ReduceScatter:
    return "reduce-scatter";
  case CollectiveKind::Allgather:
    return "all-gather";
  }
  return "collective";
}

std::string CommBase::spanName(CollectiveKind kind, int bucket) {
  const char *name = kind == CollectiveKind::Allreduce       ? "allreduce"
                     : kind == CollectiveKind::ReduceScatter ? "reducescatter"
                                                             : "allgather";
  return fmt::format("{} bucket {}", name, bucket);
}

std::string CommBase::collectiveName(CollectiveKind kind, int bucket) const {
  return fmt::format("{} of {}", kindName(kind), bucketName(bucket));
}

void CommBase::checkStart(CollectiveKind kind, int bucket, bool pending) const {
  if (pending)
    throw Error(fmt::format("internal error: {} started again before its wait",
                            collectiveName(kind, bucket)));
}

void CommBase::checkShard(int bucket, const float *data, const float *shard,
                          int64_t shardCount) const {
  if (shardCount < 0)
    throw Error(fmt::format("internal error: reduce-scatter of {} with {} elements per rank",
                            bucketName(bucket), shardCount));
  // As integers: shard may lie in another allocation (or on a device).
  const uintptr_t d = reinterpret_cast<uintptr_t>(data), s = reinterpret_cast<uintptr_t>(shard);
  const uintptr_t part = uintptr_t(shardCount) * sizeof(float);
  if (s == d + uintptr_t(rank()) * part || part == 0)
    return; // in place (or nothing to place)
  if (s + part <= d || s >= d + part * uintptr_t(size()))
    return; // a buffer of its own
  throw Error(fmt::format("internal error: reduce-scatter of {}: its shard overlaps its data "
                          "but is not this rank's part of it (data + {} * {} elements, in "
                          "place)",
                          bucketName(bucket), rank(), shardCount));
}

void CommBase::checkOwn(const Request &r) const {
  if (!r)
    throw Error("internal error: wait for a request that no all-reduce started (a "
                "default-constructed dtc::rt::Request)");
  if (!owns(r))
    throw Error(fmt::format("internal error: wait for {}request {} of bucket {}, which another "
                            "communicator started",
                            r.kind() == CollectiveKind::Allreduce
                                ? std::string()
                                : std::string(kindName(r.kind())) + " ",
                            r.serial(), r.bucket()));
}

void CommBase::checkInFlight(const Request &r, uint64_t latest, bool pending) const {
  if (r.serial() == latest && pending)
    return;
  // All-reduces (the common case) are "request 3 of bucket 1 (...)", the
  // others "reduce-scatter request 3 of bucket 1 (...)".
  const bool allreduce = r.kind() == CollectiveKind::Allreduce;
  const std::string request =
      fmt::format("{}{}request {} of {}", allreduce ? "" : kindName(r.kind()),
                  allreduce ? "" : " ", r.serial(), bucketName(r.bucket()));
  if (r.serial() == latest)
    throw Error(
        fmt::format("internal error: wait for {}, which was already waited for", request));
  if (r.serial() < latest)
    throw Error(fmt::format("internal error: wait for {}, which is stale: the bucket{} was "
                            "started again since (request {})",
                            request, allreduce ? "" : fmt::format("'s {}", kindName(r.kind())),
                            latest));
  throw Error(fmt::format("internal error: wait for {}, which this communicator has no "
                          "record of",
                          request));
}

std::string CommBase::bucketName(int bucket) const {
  auto it = bucketNames_.find(bucket);
  if (it == bucketNames_.end() || it->second.empty())
    return fmt::format("bucket {}", bucket);
  return fmt::format("bucket {} ({})", bucket, it->second);
}

std::unique_ptr<CommBase> createLocalCommunicator(int localRank) {
  return std::make_unique<LocalCommunicator>(localRank);
}

std::string mpiPluginPath() {
  if (const char *p = std::getenv("DTC_MPI_PLUGIN"); p && *p)
    return p;
#ifdef DTCRT_MPI_PLUGIN_DEFAULT
  return DTCRT_MPI_PLUGIN_DEFAULT;
#else
  return "";
#endif
}

std::string glooPluginPath() {
  if (const char *p = std::getenv("DTC_GLOO_PLUGIN"); p && *p)
    return p;
#ifdef DTCRT_GLOO_PLUGIN_DEFAULT
  return DTCRT_GLOO_PLUGIN_DEFAULT;
#else
  return "";
#endif
}

bool wantNccl(CommKind kind, const LaunchInfo &launch) {
  return kind == CommKind::Nccl ||
         (kind == CommKind::Auto && (!launch.launcher.empty() || launch.torchWorldSize > 1));
}

void checkLauncherSize(const LaunchInfo &launch, const Communicator &comm,
                       const std::string &prog) {
  if (launch.size <= 1 || comm.size() == launch.size)
    return;
  if (launch.launcher == "srun")
    throw Error(fmt::format(
        "Slurm started {} tasks (SLURM_NTASKS={}), but {} runs {} rank{}: srun gave MPI no "
        "PMI, so every task would train alone; start it with `srun --mpi=pmix {}` (`srun "
        "--mpi=list` shows the PMIs), or with `mpirun -np {} {}` inside the allocation",
        launch.size, launch.size, comm.backend(), comm.size(), comm.size() == 1 ? "" : "s", prog,
        launch.size, prog));
  throw Error(fmt::format("{} started {} ranks, but {} runs {} rank{}; start it with `mpirun "
                          "-np {} {}`, with every rank under one launcher",
                          launch.launcher, launch.size, comm.backend(), comm.size(),
                          comm.size() == 1 ? "" : "s", launch.size, prog));
}

std::unique_ptr<CommBase> createCommunicator(CommKind kind, double timeoutSeconds,
                                             const LaunchInfo &launch, const std::string &prog,
                                             bool cuda) {
  const bool launched = !launch.launcher.empty();
  const Rendezvous &rdzv = launch.rendezvous;
  // A job of several ranks that variables describe (torchrun, TF_CONFIG).
  const bool described = !rdzv.source.empty() && (rdzv.size > 1 || !rdzv.error.empty());
  if (launch.localRankArg >= 0 && launch.torchLocalRank >= 0 &&
      launch.localRankArg != launch.torchLocalRank)
    throw Error(fmt::format("--local_rank {} disagrees with LOCAL_RANK={}; start every rank "
                            "with one launcher (torchrun sets LOCAL_RANK, "
                            "torch.distributed.launch passes --local_rank)",
                            launch.localRankArg, launch.torchLocalRank));
  if (!cuda && kind == CommKind::Nccl)
    throw Error("--comm nccl: NCCL connects CUDA devices, but this run uses the CPU; use "
                "--comm auto|local|mpi|gloo, or --device cuda with a program compiled with "
                "dtc --target=cuda");
  if (cuda && (kind == CommKind::Mpi || kind == CommKind::Gloo))
    throw Error(fmt::format("--comm {} all-reduces host memory, but this run uses a CUDA "
                            "device, whose ranks communicate through NCCL; use --comm nccl (or "
                            "auto), or --device cpu",
                            kind == CommKind::Mpi ? "mpi" : "gloo"));
  if (cuda && !launched && kind != CommKind::Local && rdzv.source == "TF_CONFIG" && described)
    throw Error("TF_CONFIG describes a job of several workers, but a CUDA run's ranks start "
                "NCCL from mpirun, srun or torchrun; start them with one of those, or run with "
                "--device cpu");
  if (kind == CommKind::Local && launched && launch.size > 1)
    throw Error(fmt::format("--comm local, but {} started {} ranks; run a single process "
                            "without {}, or use --comm auto",
                            launch.launcher, launch.size, launch.launcher));
  if (kind == CommKind::Local && launch.torchWorldSize > 1)
    throw Error(fmt::format("--comm local, but torchrun started {} ranks (WORLD_SIZE={}); run "
                            "a single process, or use --comm auto",
                            launch.torchWorldSize, launch.torchWorldSize));
  if (kind == CommKind::Local && rdzv.source == "TF_CONFIG" && described)
    throw Error(fmt::format("--comm local, but TF_CONFIG describes {} workers; run a single "
                            "process without TF_CONFIG, or use --comm auto",
                            rdzv.size));
  // CUDA: the base communicator NCCL bootstraps from (torchrun: local).
  if (kind == CommKind::Local || (cuda && !launched))
    return createLocalCommunicator(std::max(launch.localRank, 0));

  if (kind == CommKind::Mpi || (launched && kind != CommKind::Gloo)) {
    const std::string why =
        kind == CommKind::Mpi ? "--comm mpi" : "the program was launched by " + launch.launcher;
    std::unique_ptr<CommBase> comm = createMpiCommunicator(timeoutSeconds, mpiPluginPath(), why);
    checkLauncherSize(launch, *comm, prog);
    return comm;
  }
  if (kind != CommKind::Gloo && !described)
    return createLocalCommunicator(std::max(launch.localRank, 0));

  // gloo: --comm gloo, or torchrun / TF_CONFIG without an MPI launcher.
  if (!rdzv.error.empty())
    throw Error(fmt::format("{}; or start the job with mpirun: mpirun -np {} {}", rdzv.error,
                            rdzv.size > 1 ? std::to_string(rdzv.size) : "N", prog));
  Rendezvous r = rdzv;
  if (r.source.empty() && launched && launch.size > 1)
    throw Error(fmt::format("--comm gloo, but {} started {} ranks without saying where they "
                            "meet for gloo (torchrun's RANK, WORLD_SIZE, MASTER_ADDR and "
                            "MASTER_PORT, or TF_CONFIG); under {} use --comm mpi (or auto)",
                            launch.launcher, launch.size, launch.launcher));
  if (r.source.empty()) { // --comm gloo alone: one rank
    r.source = "--comm gloo";
    r.rank = 0;
    r.size = 1;
  }
  const std::string why =
      kind == CommKind::Gloo ? std::string("--comm gloo")
      : r.source == "torchrun"
          ? fmt::format("torchrun started {} ranks (WORLD_SIZE={}) without an MPI launcher", r.size,
                        r.size)
          : fmt::format("TF_CONFIG describes {} workers", r.size);
  return createGlooCommunicator(timeoutSeconds, glooPluginPath(), why, r);
}

void checkLaunchAgreement(const LaunchInfo &launch, const Communicator &comm) {
  checkLauncherSize(launch, comm, "./train");
  if ((launch.torchWorldSize < 0 || launch.torchWorldSize == comm.size()) &&
      (launch.torchRank < 0 || launch.torchRank == comm.rank()))
    return;
  std::string vars;
  if (launch.torchWorldSize >= 0)
    vars += fmt::format("WORLD_SIZE={}", launch.torchWorldSize);
  if (launch.torchRank >= 0)
    vars += fmt::format("{}RANK={}", vars.empty() ? "" : " ", launch.torchRank);
  throw Error(fmt::format("the environment says {} (torchrun), but {} runs {} ranks and this "
                          "is rank {}; start it with mpirun alone",
                          vars, comm.backend(), comm.size(), comm.rank()));
}

// Broadcasts rank 0's string to every rank.
void broadcastString(CommBase &comm, std::string &text) {
  if (comm.size() == 1)
    return;
  int64_t n = int64_t(text.size());
  comm.broadcast(&n, sizeof n, 0);
  text.resize(size_t(n));
  if (n > 0)
    comm.broadcast(text.data(), n, 0);
}

} // namespace dtc::rt
