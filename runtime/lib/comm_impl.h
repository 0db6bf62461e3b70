//===- comm_impl.h - Communicator backends, launch detection -------------===//
//
// The driver's side of dtc/comm.h: how a process finds out whether (and by
// whom) it was launched as one of several ranks, and the two backends:
//   local  one rank; allreduceStart and wait return at once.
//   mpi    libdtcrt_mpi.so (dlopen'ed; libdtcrt.a never links libmpi) driven
//          by a dedicated communication thread that owns every MPI call
//          (comm_mpi.cpp).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "dtc/comm.h"
#include "dtc/runtime.h"
#include "error.h"

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

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

enum class CommKind { Auto, Local, Mpi, Nccl };

// What the environment says about how this process was started.
struct LaunchInfo {
  std::string launcher; // "mpirun", "srun", "a PMI launcher"; empty: none
  int size = 0;         // ranks the launcher started; 0: unknown
  int rank = -1, localRank = -1;
  // torchrun's variables (-1: unset)
  int torchRank = -1, torchWorldSize = -1, torchLocalRank = -1;
};

using GetEnv = std::function<const char *(const char *)>;
LaunchInfo detectLaunch(const GetEnv &getenv);
LaunchInfo detectLaunch(); // from the process environment

class CommBase : public Communicator {
public:
  using Clock = std::chrono::steady_clock;

  explicit CommBase(double timeoutSeconds) : timeout_(timeoutSeconds) {}

  virtual int localSize() const = 0;
  // "Open MPI v4.1.4, ..." for the mpi backend; empty otherwise.
  virtual std::string libraryVersion() const { return {}; }
  // When the communication thread finished the latest all-reduce of bucket
  // (for tests and measurements); the epoch if it never ran, or was started
  // again and has not finished since.
  virtual Clock::time_point finishedAt(int bucket) const = 0;
  // True once an operation timed out: the communication thread may be stuck
  // inside MPI, so the process must end with _exit, not a clean shutdown.
  virtual bool broken() const { return false; }
  // With `defer`, a bucket's all-reduce starts at its wait rather than at
  // allreduceStart (train --overlap off, or auto without a core for the
  // communication thread): overlap then cannot take the compute thread's
  // core. Collectives still run in the order the step starts them, so ranks
  // may differ in this. Backends whose communication needs no CPU (NCCL)
  // ignore it.
  virtual void setDeferredStarts(bool defer) { (void)defer; }
  virtual bool deferredStarts() const { return false; }

  // Records all-reduce and wait spans into t (null: stop recording). Called by
  // the compute thread between steps.
  void setTracer(Tracer *t) { tracer_ = t; }
  // Bucket names for messages, from the compiled bucket plan.
  void setBuckets(const ModelSpec &spec);
  // "bucket 3 (fc1.weight, fc1.bias)"
  std::string bucketName(int bucket) const;
  double timeoutSeconds() const { return timeout_; }

protected:
  Tracer *tracer_ = nullptr;
  double timeout_;
  std::unordered_map<int, std::string> bucketNames_;
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

// Picks and creates the backend for --comm `kind`: mpi when asked for or
// when a launcher started the process, else local. Refuses --comm local under
// a multi-rank launcher, and on the CPU (cuda false) --comm nccl and
// torchrun's WORLD_SIZE > 1 without an MPI launcher. prog is argv[0], for the
// suggested mpirun command. With cuda, the result is the base that
// DeviceBackend::createCommunicator turns into the device communicator
// (--comm mpi is refused: NCCL bootstraps through mpi, torchrun or nothing).
std::unique_ptr<CommBase> createCommunicator(CommKind kind, double timeoutSeconds,
                                             const LaunchInfo &launch, const std::string &prog,
                                             bool cuda = false);
// CUDA runs: whether the ranks communicate through NCCL (--comm nccl, or
// auto under a launcher or torchrun with WORLD_SIZE > 1).
bool wantNccl(CommKind kind, const LaunchInfo &launch);
// Throws if torchrun's RANK/WORLD_SIZE are set and disagree with comm's.
void checkLaunchAgreement(const LaunchInfo &launch, const Communicator &comm);

} // namespace dtc::rt
