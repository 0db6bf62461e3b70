//===- comm_impl.h - Communicator backends, launch detection -------------===//
//
// The driver's side of dtc/comm.h: how a process finds out whether (and by
// whom) it was launched as one of several ranks, and the backends:
//   local  one rank; the bucket collectives (allreduceStart,
//          reduceScatterStart, allgatherStart) and wait return at once
//          (requests are checked as by every backend).
//   mpi    libdtcrt_mpi.so (dlopen'ed; libdtcrt.a never links libmpi) driven
//          by a dedicated communication thread that owns every MPI call
//          (comm_mpi.cpp).
//   gloo   libdtcrt_gloo.so, the same plugin table under the same thread,
//          for CPU jobs that torchrun or TF_CONFIG describe (no MPI launcher).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "dtc/comm.h"
#include "dtc/runtime.h"
#include "support/error.h"

#include <array>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace dtc::rt {

class Tracer;

// An error every rank raises at the same point (e.g. the startup check):
// the ranks shut MPI down cleanly and exit 1 instead of aborting the job.
struct CollectiveError : Error {
  using Error::Error;
};

// The communication thread is stuck inside MPI (e.g. MPI_Init never
// returned): the process cannot shut down cleanly and must _exit.
struct FatalCommError : Error {
  using Error::Error;
};

enum class CommKind { Auto, Local, Mpi, Gloo, Nccl };

// Where the ranks of a job that no MPI launcher started meet (gloo): rank 0
// serves the rendezvous on host:port, the others connect to it.
struct Rendezvous {
  std::string source; // "torchrun", "TF_CONFIG"; empty: none
  int rank = -1, size = 0;
  std::string host;
  int port = -1;
  // The variables are incomplete or malformed: what is wrong (raised only
  // when the job needs them, i.e. a CPU run without an MPI launcher).
  std::string error;
};

// What the environment says about how this process was started.
struct LaunchInfo {
  std::string launcher; // "mpirun", "srun", "a PMI launcher"; empty: none
  int size = 0;         // ranks the launcher started; 0: unknown
  int rank = -1, localRank = -1;
  // torchrun's variables (-1: unset)
  int torchRank = -1, torchWorldSize = -1, torchLocalRank = -1;
  // torchrun's (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT; when its agent
  // serves its own store on MASTER_PORT, TORCHELASTIC_USE_AGENT_STORE=True,
  // MASTER_PORT + 1; DTC_RENDEZVOUS_PORT overrides the port) or TF_CONFIG's.
  Rendezvous rendezvous;
  // train --local_rank K (torch.distributed.launch passes it); -1: not given.
  int localRankArg = -1;
};

using GetEnv = std::function<const char *(const char *)>;
// localRankArg: train's --local_rank (-1: not given), the local rank when
// no launcher variable gives one.
LaunchInfo detectLaunch(const GetEnv &getenv, int localRankArg = -1);
LaunchInfo detectLaunch(int localRankArg = -1); // from the process environment

// TF_CONFIG's cluster description ({"cluster": {"worker": ["host:port", ...]},
// "task": {"type": "worker", "index": K}}, optionally with a "chief" list that
// comes first): rank, size and the rendezvous (the first task's host:port).
// Throws Error naming TF_CONFIG and what is wrong.
Rendezvous parseTfConfig(const std::string &json);

class CommBase : public Communicator {
public:
  using Clock = std::chrono::steady_clock;

  explicit CommBase(double timeoutSeconds) : timeout_(timeoutSeconds) {}

  virtual int localSize() const = 0;
  // "Open MPI v4.1.4, ..." for the mpi backend, "gloo 0.5.0 (tcp, ...)" for
  // gloo; empty otherwise.
  virtual std::string libraryVersion() const { return {}; }
  // When the communication thread finished the latest `kind` of bucket
  // (for tests and measurements); the epoch if it never ran, or was started
  // again and has not finished since. finishedAt(bucket): its all-reduce.
  virtual Clock::time_point finishedAt(CollectiveKind kind, int bucket) const = 0;
  Clock::time_point finishedAt(int bucket) const {
    return finishedAt(CollectiveKind::Allreduce, bucket);
  }
  // True once an operation timed out: the communication thread may be stuck
  // inside MPI (or gloo), so the process must end with _exit, not a clean
  // shutdown.
  virtual bool broken() const { return false; }
  // With `defer`, a bucket collective starts at its wait rather than at its
  // start (allreduceStart, reduceScatterStart, allgatherStart; train
  // --overlap off, or auto without a core for the communication thread):
  // overlap then cannot take the compute thread's core. Collectives still
  // run in the order the step starts them, so ranks may differ in this.
  // Backends whose communication needs no CPU (NCCL) ignore it.
  virtual void setDeferredStarts(bool defer) { (void)defer; }
  virtual bool deferredStarts() const { return false; }

  // Records the bucket collectives' spans ("allreduce bucket 3",
  // "reducescatter bucket 3", "allgather bucket 3"; the communication
  // thread's) and the waits' ("wait bucket 3"; the compute thread's) into t
  // (null: stop recording). Called by the compute thread between steps;
  // once it returns, no thread records into the previous tracer (a
  // collective still in flight, such as a carried all-gather, is not
  // recorded), so the caller may destroy it.
  virtual void setTracer(Tracer *t) { tracer_ = t; }
  // Bucket names for messages, from the compiled bucket plan.
  void setBuckets(const ModelSpec &spec);
  // "bucket 3 (fc1.weight, fc1.bias)"
  std::string bucketName(int bucket) const;
  // "reduce-scatter of bucket 3 (fc1.weight, fc1.bias)", for messages.
  std::string collectiveName(CollectiveKind kind, int bucket) const;
  // "all-reduce", "reduce-scatter", "all-gather"
  static const char *kindName(CollectiveKind kind);
  // The communication thread's trace spans: "allreduce bucket 3",
  // "reducescatter bucket 3", "allgather bucket 3".
  static std::string spanName(CollectiveKind kind, int bucket);
  double timeoutSeconds() const { return timeout_; }

protected:
  // The request of the `kind` of `bucket` being started: the next serial
  // number of this communicator (the compute thread's starts of every kind,
  // from 1).
  Request newRequest(CollectiveKind kind, int bucket) {
    return makeRequest(kind, bucket, ++serial_);
  }
  // For the starts: throws unless the `kind` of bucket may start, i.e. its
  // previous one is not `pending` (started and not yet waited for).
  void checkStart(CollectiveKind kind, int bucket, bool pending) const;
  // For reduceScatterStart, before checkStart: throws unless shardCount >= 0
  // and shard is in place (data + rank() * shardCount) or overlaps no
  // element of data[0 .. shardCount * size()).
  void checkShard(int bucket, const float *data, const float *shard, int64_t shardCount) const;
  // For wait: throws unless r is one of this communicator's requests (not
  // default-constructed, not another communicator's).
  void checkOwn(const Request &r) const;
  // For wait, after checkOwn: throws unless r is the request in flight of its
  // kind and bucket, whose latest start had serial `latest` (0: never
  // started) and is `pending` (not yet waited for): r waited for already, or
  // stale (the bucket's collective of that kind was started again since).
  void checkInFlight(const Request &r, uint64_t latest, bool pending) const;

  Tracer *tracer_ = nullptr;
  double timeout_;
  std::unordered_map<int, std::string> bucketNames_;
  uint64_t serial_ = 0; // the latest request's
};

constexpr size_t kCollectiveKinds = 3; // CollectiveKind's values

// A backend's per-bucket state for each collective kind (a bucket may have
// one request of each kind in flight), indexed by bucket id and grown on
// first use, so steps do not allocate.
template <class Slot> class BucketSlots {
public:
  Slot &at(CollectiveKind kind, int bucket) {
    if (bucket < 0)
      throw Error("internal error: negative bucket id " + std::to_string(bucket));
    std::vector<Slot> &v = slots_[size_t(kind)];
    if (size_t(bucket) >= v.size())
      v.resize(size_t(bucket) + 1);
    return v[size_t(bucket)];
  }
  // Null when the bucket has never had a `kind`.
  const Slot *find(CollectiveKind kind, int bucket) const {
    const std::vector<Slot> &v = slots_[size_t(kind)];
    return bucket >= 0 && size_t(bucket) < v.size() ? &v[size_t(bucket)] : nullptr;
  }
  Slot *find(CollectiveKind kind, int bucket) {
    return const_cast<Slot *>(static_cast<const BucketSlots *>(this)->find(kind, bucket));
  }
  // fn(kind, bucket, slot) for every slot (of every bucket ever used).
  template <class Fn> void forEach(Fn fn) {
    for (size_t k = 0; k < kCollectiveKinds; ++k)
      for (size_t b = 0; b < slots_[k].size(); ++b)
        fn(CollectiveKind(k), int(b), slots_[k][b]);
  }

private:
  std::array<std::vector<Slot>, kCollectiveKinds> slots_;
};

std::unique_ptr<CommBase> createLocalCommunicator(int localRank = 0);
// Loads the plugin at pluginPath (see mpiPluginPath) and starts the
// communication thread, which initializes MPI. `why` says what asked for MPI
// (for the error message when the plugin cannot be loaded).
std::unique_ptr<CommBase>
createMpiCommunicator(double timeoutSeconds, const std::string &pluginPath, const std::string &why);
// $DTC_MPI_PLUGIN if set, else where the build put libdtcrt_mpi.so (empty when
// the runtime was built without MPI).
std::string mpiPluginPath();
// The same for gloo: libdtcrt_gloo.so, the plugin at pluginPath (see
// glooPluginPath), whose communication thread meets the other ranks at rdzv.
std::unique_ptr<CommBase> createGlooCommunicator(double timeoutSeconds,
                                                 const std::string &pluginPath,
                                                 const std::string &why, const Rendezvous &rdzv);
// $DTC_GLOO_PLUGIN, else where the build put libdtcrt_gloo.so (empty without gloo).
std::string glooPluginPath();

// Picks and creates the backend for --comm `kind`. On the CPU: mpi when
// asked for or when an MPI launcher (mpirun, srun, PMI) started the process;
// gloo when asked for or when torchrun's variables or TF_CONFIG describe a
// job of several ranks and no MPI launcher did; else local. Refuses --comm
// local under a multi-rank launcher, --comm nccl on the CPU, malformed
// rendezvous variables, a --local_rank that disagrees with LOCAL_RANK, and a
// communicator whose size is not the launcher's (srun without a PMI: MPI
// comes up as a singleton). prog is argv[0], for the suggested commands.
// With cuda, the result is the base that DeviceBackend::createCommunicator
// turns into the device communicator (--comm mpi and gloo are refused: NCCL
// bootstraps through mpi, torchrun or nothing).
std::unique_ptr<CommBase> createCommunicator(CommKind kind, double timeoutSeconds,
                                             const LaunchInfo &launch, const std::string &prog,
                                             bool cuda = false);
// CUDA runs: whether the ranks communicate through NCCL (--comm nccl, or
// auto under a launcher or torchrun with WORLD_SIZE > 1).
bool wantNccl(CommKind kind, const LaunchInfo &launch);
// Throws if the launcher started several ranks and comm has another size
// (srun without a PMI: MPI comes up as a singleton); prog for the commands.
void checkLauncherSize(const LaunchInfo &launch, const Communicator &comm, const std::string &prog);
// Throws if torchrun's RANK/WORLD_SIZE are set and disagree with comm's, or
// if the launcher started several ranks and comm has another size.
void checkLaunchAgreement(const LaunchInfo &launch, const Communicator &comm);

// Broadcasts rank 0's string to every rank (collective).
void broadcastString(CommBase &comm, std::string &text);

} // namespace dtc::rt
