//===- options.h - The train program's command line ----------------------===//
#pragma once

#include "comm_impl.h"
#include "data.h"
#include "dtc/runtime.h"
#include "schedule.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dtc::rt {

enum class ProgressMode { Auto, On, Off };
enum class DeviceKind { Auto, Cpu, Cuda };

// The run's settings: the recipe's defaults overridden by the command line.
struct Options {
  DataSource data;
  int64_t epochs = 1;
  int64_t batch = 1;
  float lr = 0;
  float maxGradNorm = 0; // --clip-grad-norm (the recipe's clip_grad_norm)
  LrSchedule schedule; // --lr-schedule, --warmup-steps, ... (schedule.h)
  uint64_t seed = 0;
  bool shuffle = true;
  std::string savePath, initPath, metricsPath;
  // --predict INPUTS --output FILE (predict.h): run the model on new inputs.
  std::string predictPath, outputPath;
  // Training-state checkpoints (checkpoint.h): written to checkpointPath
  // every checkpointEvery steps (0: never), at each epoch's end and on a
  // preemption signal; checkpointKeep > 1 also keeps the latest K as
  // <stem>.step<N><ext>. resumePath: the checkpoint to continue ("auto":
  // checkpointPath if it exists, else a fresh start).
  std::string checkpointPath, resumePath;
  int64_t checkpointEvery = 0, checkpointKeep = 1;
  // Options given on the command line ("--batch", ...): a resumed run takes
  // the others from its checkpoint.
  std::vector<std::string> given;
  // Set by the driver, the same on every rank: this run restores a training
  // state (--resume FILE, or auto and the checkpoint exists).
  bool resumeActive = false;
  bool isGiven(const char *option) const;
  ProgressMode progress = ProgressMode::Auto;
  int threads = 1;
  bool threadsGiven = false; // --threads on the command line
  int64_t maxSteps = 0; // 0: no limit
  bool eval = true;
  bool quiet = false;
  bool gradcheck = false;
  double gradcheckEps = 1e-2, gradcheckAtol = 1e-3, gradcheckRtol = 2e-2;
  CommKind comm = CommKind::Auto;
  double commTimeout = 120; // seconds
  // --local_rank / --local-rank K (torch.distributed.launch passes it); -1:
  // not given. detectLaunch takes it; createCommunicator checks it against
  // LOCAL_RANK.
  int localRankArg = -1;
  // --overlap: start bucket all-reduces where the step does (on), at their
  // waits (off), or on only when each rank has a core for its communication
  // thread (auto). CPU (MPI) runs; NCCL overlaps on its own stream.
  enum class Overlap { Auto, On, Off } overlap = Overlap::Auto;
  std::string tracePath;
  int64_t traceSteps = 20;
  DeviceKind device = DeviceKind::Auto;
  int64_t logInterval = 20; // device runs: steps between reads of the outputs
  bool tf32 = false;        // device runs: TF32 tensor cores in GEMMs
};

// Whether bucket all-reduces start where the step starts them (true) or at
// their waits: --overlap on/off, or for auto whether each rank has a core
// for its communication thread besides its compute threads.
bool overlapAllreduces(Options::Overlap overlap, int coresPerRank, int threads);

// "sgd(lr=0.1, momentum=0.9, ...)" etc., for the header line.
std::string optimizerDescription(const ModelSpec &spec, float lr);

// The options before any argument is parsed.
Options defaultOptions(const ModelSpec &spec);

// Parses argv into `out` (starting from defaultOptions). Returns an exit code
// when the program must stop now: 0 after printing --help or --version, 2
// after printing "train: error: ..." for a bad command line.
std::optional<int> parseOptions(int argc, char **argv, const ModelSpec &spec,
                                Options &out);

} // namespace dtc::rt
