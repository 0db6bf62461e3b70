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
//===----------------------------------------------------------------------===//
#pragma once

namespace dtc::rt {

// train's exit status after a checkpoint written on a signal ("temporary
// failure, try again": sysexits.h's EX_TEMPFAIL).
constexpr int kExitPreempted = 75;

class PreemptionHandler {
public:
  PreemptionHandler();  // installs the handlers
  ~PreemptionHandler(); // restores the previous ones
  PreemptionHandler(const PreemptionHandler &) = delete;
  PreemptionHandler &operator=(const PreemptionHandler &) = delete;

  // The first signal caught (0: none).
  static int requested();
  // "SIGTERM"
  static const char *name(int signal);
};

} // namespace dtc::rt
