//===- comm.cpp - Launch detection, the local backend, backend choice ----===//
#include "comm_impl.h"

#include "tracer.h"

#include <fmt/format.h>

#include <algorithm>
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

  void allreduceStart(int bucket, float *data, int64_t count) override {
    char &pending = slot(bucket, pending_, char(0));
    if (pending)
      throw Error(fmt::format("internal error: all-reduce of {} started again before its wait",
                              bucketName(bucket)));
    pending = 1;
    (void)data;
    const auto start = Clock::now();
    const auto end = start;
    slot(bucket, finished_, Clock::time_point()) = end;
    if (tracer_)
      tracer_->span(Tracer::kCommTid, fmt::format("allreduce bucket {}", bucket), start, end,
                    count * int64_t(sizeof(float)));
  }

  void wait(int bucket) override {
    const auto start = Clock::now();
    if (bucket < 0 || size_t(bucket) >= pending_.size() || !pending_[size_t(bucket)])
      throw Error(
          fmt::format("internal error: wait for {}, which was not started", bucketName(bucket)));
    pending_[size_t(bucket)] = 0;
    if (tracer_)
      tracer_->span(Tracer::kComputeTid, fmt::format("wait bucket {}", bucket), start,
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

  Clock::time_point finishedAt(int bucket) const override {
    return bucket >= 0 && size_t(bucket) < finished_.size() ? finished_[size_t(bucket)]
                                                            : Clock::time_point();
  }

private:
  // Per-bucket state, indexed by bucket id (grown on first use, so steps do
  // not allocate).
  template <class T> T &slot(int bucket, std::vector<T> &v, T init) {
    if (bucket < 0)
      throw Error(fmt::format("internal error: negative bucket id {}", bucket));
    if (size_t(bucket) >= v.size())
      v.resize(size_t(bucket) + 1, init);
    return v[size_t(bucket)];
  }

  int localRank_;
  std::vector<char> pending_;
  std::vector<Clock::time_point> finished_;
};

} // namespace

LaunchInfo detectLaunch(const GetEnv &getenv) {
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
  return info;
}

LaunchInfo detectLaunch() {
  return detectLaunch([](const char *name) -> const char * { return std::getenv(name); });
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

bool wantNccl(CommKind kind, const LaunchInfo &launch) {
  return kind == CommKind::Nccl ||
         (kind == CommKind::Auto && (!launch.launcher.empty() || launch.torchWorldSize > 1));
}

std::unique_ptr<CommBase> createCommunicator(CommKind kind, double timeoutSeconds,
                                             const LaunchInfo &launch, const std::string &prog,
                                             bool cuda) {
  const bool launched = !launch.launcher.empty();
  if (!cuda && kind == CommKind::Nccl)
    throw Error("--comm nccl: NCCL connects CUDA devices, but this run uses the CPU; use "
                "--comm auto|local|mpi, or --device cuda with a program compiled with "
                "dtc --target=cuda");
  if (cuda && kind == CommKind::Mpi)
    throw Error("--comm mpi all-reduces host memory, but this run uses a CUDA device, whose "
                "ranks communicate through NCCL; use --comm nccl (or auto), or --device cpu");
  if (!cuda && launch.torchWorldSize > 1 && !launched)
    throw Error(fmt::format("launched with WORLD_SIZE={} (torchrun), but the CPU build "
                            "communicates through MPI; start it with: mpirun -np {} {}",
                            launch.torchWorldSize, launch.torchWorldSize, prog));
  if (kind == CommKind::Local && launched && launch.size > 1)
    throw Error(fmt::format("--comm local, but {} started {} ranks; run a single process "
                            "without {}, or use --comm auto",
                            launch.launcher, launch.size, launch.launcher));
  if (kind == CommKind::Local && launch.torchWorldSize > 1)
    throw Error(fmt::format("--comm local, but torchrun started {} ranks (WORLD_SIZE={}); run "
                            "a single process, or use --comm auto",
                            launch.torchWorldSize, launch.torchWorldSize));
  // CUDA: the base communicator NCCL bootstraps from (torchrun: local).
  if (kind == CommKind::Local || ((kind == CommKind::Auto || kind == CommKind::Nccl) && !launched))
    return createLocalCommunicator(std::max(launch.localRank, 0));

  const std::string why =
      kind == CommKind::Mpi ? "--comm mpi" : "the program was launched by " + launch.launcher;
  return createMpiCommunicator(timeoutSeconds, mpiPluginPath(), why);
}

void checkLaunchAgreement(const LaunchInfo &launch, const Communicator &comm) {
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

} // namespace dtc::rt
