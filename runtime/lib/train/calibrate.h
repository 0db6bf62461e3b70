//===- calibrate.h - train --calibrate: this machine for dtc's cost model -===//
//
// `train --calibrate [FILE]` trains nothing and reads no data: once the
// communicator exists (so it runs as training does, alone or under mpirun),
// every rank measures, with the run's --threads, what dtc's cost model
// (passes/, dtc --machine FILE) estimates a step from (the kernels one rank
// at a time, the collectives and contention every rank at once):
//   gemm         gemm_engine::gemm(false, false, M, N, K, ...) for M, N, K in
//                {16, 64, 256, 1024, 4096} with 2MNK <= 4.3e9; gemm_cold
//                the same, each call on the next operands along 192 MB
//   conv         kern::conv2d (the entry generated code calls: the engine's
//                convolution, else im2col + GEMM), 3x3 stride 1 pad 1, N = 32
//   elementwise  y[i] = a x[i] + y[i] through kern::forRanges (rt::parallelFor,
//                as the generated fused loops), 1 KiB .. 64 MiB arrays
//   updates      kern::sgdUpdate (without and with momentum) and
//                kern::adamUpdate on one parameter, 1 KiB .. 16 MiB arrays
//   norms        kern::batchNorm, batchNormGrad, batchNormGradMaxPool,
//                maxPool2d, maxPool2dGrad (NCHW and nChw16c, N x 32 x 28 x
//                28), layerNorm and layerNormGrad (rows of 256); norms_cold
//                the same, each call on the next arrays along 192 MB
//   collectives  the bucket API compiled steps use (allreduceStart,
//                reduceScatterStart, allgatherStart, then wait), 4 KiB .. 64 MiB
//                (4, 64 and 256 KiB, then 1 MiB x 4^i); collectives_cold the
//                same, each started right after three reference GEMMs
//   contention   sustained GEMMs on every rank at once, alone and beside
//                all-reduces, against the short measurements' rate (one
//                rank at a time); and
//                reduce-scatters beside GEMMs against alone
// Each time is the median of repetitions after one warm-up, the maximum over
// the ranks; rank 0 writes them as JSON ("format": "dtc-machine/1",
// machineJson) through AtomicFile and prints a one-line summary.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dtc::rt {

class CommBase;
struct Options;

// The file's names of the normalizations' and poolings' lists ("norms":
// {...}): the dtc ops they price (dtc.batch_norm, ...; the gradient fused
// with a max pooling's, dtc-fuse-max-pool-grad's, batch_norm_grad_max_pool),
// in NCHW, then in nChw16c ("_blocked": dtc-blocked-layout's), then layer
// norm.
constexpr int kNorms = 12, kNormBlocked = 5, kNormLayer = 10;
constexpr const char *kNormNames[kNorms] = {"batch_norm",
                                            "batch_norm_grad",
                                            "batch_norm_grad_max_pool",
                                            "max_pool2d",
                                            "max_pool2d_grad",
                                            "batch_norm_blocked",
                                            "batch_norm_grad_blocked",
                                            "batch_norm_grad_max_pool_blocked",
                                            "max_pool2d_blocked",
                                            "max_pool2d_grad_blocked",
                                            "layer_norm",
                                            "layer_norm_grad"};

// What --calibrate measured: the file's keys (docs/runtime.md, Calibration).
struct MachineProfile {
  struct Gemm {
    int64_t m, n, k;
    double seconds;
  };
  struct Work { // conv: flops; elementwise and collectives: bytes
    int64_t amount;
    double seconds;
  };
  std::string date, host, cpu, backend;
  int ranks = 1, localRanks = 1, threads = 1;
  // The ranks on rank 0's machine (the same kernel's boot_id; calibrate.cpp,
  // machineRanks): they share its caches.
  int machineRanks = 1;
  bool deferredStarts = false;
  int64_t processBytes = 0;
  std::vector<Gemm> gemm;
  // The same shapes, each call's operands the next ones along buffers of
  // gemmColdBytes in all (calibrate.cpp, measureGemm): from beyond the
  // caches that hold a repeated call's.
  std::vector<Gemm> gemmCold;
  int64_t gemmColdBytes = 0;
  std::vector<Work> conv, elementwise;
  // The optimizer updates by their state buffers (kUpdateNames): the bytes
  // each moves (the gradient read, the parameter and each state read and
  // written: (3 + 2 states) x 4 n) and its seconds.
  std::vector<Work> updates[3];
  // The normalizations and pooling by kNormNames: the bytes of the input x
  // and the seconds.
  std::vector<Work> norms[kNorms];
  // The same, each call's arrays the next ones along buffers of
  // normsColdBytes in all (calibrate.cpp, measureNorms).
  std::vector<Work> normsCold[kNorms];
  int64_t normsColdBytes = 0;
  std::vector<Work> allReduce, reduceScatter, allGather;
  // The same, each started right after compute (calibrate.cpp,
  // measureCollectives; the file's collectives_cold).
  std::vector<Work> allReduceCold, reduceScatterCold, allGatherCold;
  // Sustained work against the short measurements (calibrate.cpp,
  // measureContention): >= 1.
  double computeContention = 1, communicatingContention = 1, communicationContention = 1;
  // One reference GEMM's seconds sustained so, every rank at once
  // (calibrate.cpp, sustainedGemmSeconds; the file's sustained_gemm_256): what a program
  // planned from this file measures again after training.
  double sustainedGemm = 0;
  // The same factor by a round's length (the file's compute_rounds): the
  // GEMMs' seconds alone between two synchronizations, and the mean round
  // against them (>= 1), the ranks' largest.
  struct Round {
    double alone, factor;
  };
  std::vector<Round> computeRounds;
  // Reduce-scatters beside compute, by size: their time alone (the
  // reduce_scatter list's) and beside the rank's kernels.
  struct Beside {
    int64_t bytes;
    double alone, beside;
  };
  std::vector<Beside> communicationBeside;
  // (Not in the file.) The passes over the kernels the slowest rank made,
  // and how many of them were left out (the host changed speed under them:
  // calibrate.cpp, measureKernels).
  int kernelPasses = 0, passesLeftOut = 0;
  // (Not in the file.) This rank's fastest reference GEMM over those
  // passes (alone, one rank at a time), and the measurements of the
  // sustained factors the ranks made (more than one when the host changed
  // speed under them: calibrate.cpp, measureContention).
  double referenceFastest = 0;
  int contentionTries = 1;
  bool contentionSteady = true; // (the last measurement was steady)
};

// The file's names of the updates' lists ("updates": {...}), by state buffers.
constexpr const char *kUpdateNames[3] = {"sgd", "sgd_momentum", "adam"};
// The passes over the kernels a calibration keeps (calibrate.cpp,
// measureKernels): each pass lies between two measurements of the
// reference GEMM, `slower` holds each pass's slower one and `fastest` is
// the fastest of all; the indices of the passes whose slower one is at
// most kPassDrift times `fastest` (the host kept its speed under them).
constexpr double kPassDrift = 1.2;
std::vector<size_t> steadyPasses(const std::vector<double> &slower, double fastest);
// The reference GEMM: kReferenceGemm^3 (C = A B, square).
constexpr int64_t kReferenceGemm = 256;

// The host's sustained speed now against a calibration's (collective:
// every rank calls it): the reference GEMMs sustained as --calibrate
// measured them (calibrate.cpp, sustainedGemmSeconds: rounds of the same
// number of GEMMs on every rank at once, each ended as a step ends, by a
// blocking 4 KiB all-reduce; the median of five rounds, the largest over
// the ranks), against `referenceSeconds`, the file's sustained_gemm_256.
// Above 1: slower now. About 0.6 s. PredictionSink calls it after training.
double hostSpeedAgainst(CommBase &comm, double referenceSeconds);

// The JSON of a profile ("dtc-machine/1").
std::string machineJson(const MachineProfile &p);

// <cache dir>/machine-<ranks>ranks.json, the cache dir defaultDataCacheDir()'s;
// "" when there is none.
std::string defaultMachinePath(int ranks);

// train --calibrate (collective: every rank calls it). `threads`: the
// compute threads of each rank (setKernelThreads and gemm_engine::setThreads
// already applied); `cuda`: the run would use CUDA steps (refused: the
// measurements are the CPU's). Returns the exit status (0); errors throw.
int runCalibration(const Options &opts, CommBase &comm, int threads, bool cuda);

} // namespace dtc::rt
