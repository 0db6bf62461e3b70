//===- preempt.h - SIGTERM, SIGINT and SIGUSR1 end a run at a step boundary -===//
//
// While training, PreemptionHandler catches SIGTERM (what Slurm, Kubernetes
// and torchrun send before they kill), SIGINT (Ctrl-C) and SIGUSR1 (what
// OpenMPI's mpirun forwards to every rank; sbatch --signal=USR1@60). The
// handler only records the signal; the training loop (training_loop.h)
// asks requested() at each step boundary, the ranks agree on it, write a
// checkpoint and exit with kExitPreempted. A second SIGTERM or SIGINT while
// that happens ends the process at once, as if it were not caught.
//
// Where the signals are delivered: routeSignalsToOwnThread(), called first
// thing in main, blocks the three in the main thread (and so in every
// thread started after it: the communication thread, MPI's, OpenMP's, the
// helpers of parallelFor) and starts one thread that takes them. The
// signal frame is then never pushed on a thread that computes. That matters:
// the JIT GEMM kernels of the oneDNN that Debian 12 ships (2.6.3) point rsp
// into a heap buffer while they run, so a signal taken there writes its
// frame into the heap (oneDNN issue 4845, fixed in 3.11.1), and a SIGTERM
// during a GEMM aborted the run in free() at the next allocation.
//
//===----------------------------------------------------------------------===//
#pragma once

namespace dtc::rt {

// train's exit status after a checkpoint written on a signal ("temporary
// failure, try again": sysexits.h's EX_TEMPFAIL).
constexpr int kExitPreempted = 75;

// Blocks SIGTERM, SIGINT and SIGUSR1 in the calling thread and starts the
// thread that receives them (their handlers, or their default actions,
// run there). Call it before any other thread starts; later calls do
// nothing.
void routeSignalsToOwnThread();

class PreemptionHandler {
public:
  PreemptionHandler();  // installs the handlers
  ~PreemptionHandler(); // restores the previous ones, unless a signal came
  PreemptionHandler(const PreemptionHandler &) = delete;
  PreemptionHandler &operator=(const PreemptionHandler &) = delete;

  // The first signal caught (0: none).
  static int requested();
  // "SIGTERM"
  static const char *name(int signal);
};

} // namespace dtc::rt
