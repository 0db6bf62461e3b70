//===- CostModel.h - A training step's time and a rank's memory, predicted
//-===//
//
// The machine a program will run on (what `train --calibrate` measured, or
// built-in defaults) and the cost model that predicts, from a planned
// module alone, how long its training step takes there and how much memory
// a rank holds at its peak. dtc-predict records the prediction on the module
// (dtc.prediction); the planner (Planner.h) compares plans by it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"
#include <string>
#include <vector>

namespace dtc {

/// A machine and world size, as `train --calibrate` measured it
/// (docs/runtime.md, "Calibration": the format dtc-machine/1), or the
/// built-in defaults (docs/passes.md, dtc-predict). Seconds at sizes
/// between measured ones are interpolated linearly; past the largest, they
/// grow in proportion to the size.
struct Machine {
  struct Point {
    double size, seconds; // size: bytes or FLOPs
  };
  struct GemmPoint {
    int64_t m, n, k;
    double seconds;
  };
  enum class Collective { AllReduce, ReduceScatter, AllGather };

  /// Where it came from: the file, or "built-in defaults".
  std::string source = "built-in defaults";
  int64_t ranks = 1, threads = 1;
  /// The ranks on one machine (the file's "machine_ranks": those whose
  /// kernel is rank 0's; else its "local_ranks", MPI's ranks on a node;
  /// else 1): they share its last-level cache.
  int64_t machineRanks = 1;
  /// Collectives progress only while a rank waits for them (the runtime's
  /// --overlap auto without a core for the communication thread).
  bool deferredStarts = false;
  /// A process's resident memory before the model's (libraries, MPI).
  int64_t processBytes = 0;
  /// Sustained work against the short measurements, which one rank made at
  /// a time (the file's "contention", >= 1): kernels back to back on every
  /// rank at once (`compute`), and beside the communication thread's
  /// collectives
  /// (`computeCommunicating`). 1 where a node has a core for each thread.
  double compute = 1, computeCommunicating = 1;
  /// Collectives beside compute against alone (the file's "contention"
  /// `communication`, >= 1; optional): while the rank's kernels run, a
  /// collective progresses this many times slower than calibrated (and at
  /// the calibrated rate while the rank waits for it).
  double communication = 1;
  /// One 256^3 GEMM's seconds sustained on every rank at once (the file's
  /// "contention" `sustained_gemm_256`; 0: not measured, as the built-in
  /// machine): the program measures it again after training and scales
  /// the prediction's kernels by the ratio (docs/runtime.md).
  double sustainedGemm = 0;
  /// `compute` by how long a rank computes between two synchronizations
  /// (the file's "contention" `compute_rounds`; optional): `size` is the
  /// kernels' seconds alone, `seconds` the factor. Where ranks share
  /// cores, the scheduler keeps their placement for tens of milliseconds,
  /// then moves them about: short stretches meet the slowest placement.
  llvm::SmallVector<Point> computeRounds;
  /// The same by a collective's length (the file's "communication_beside":
  /// reduce-scatters of 256 KiB to 16 MiB): `size` is its seconds alone,
  /// `seconds` beside the rank's kernels. Where it is measured, it is used
  /// instead of `communication`: a long collective on a slow link is bound
  /// by the link, which drains the socket's buffers while the kernels run,
  /// and slows less than a short one, which waits for a core.
  llvm::SmallVector<Point> beside;
  llvm::SmallVector<GemmPoint> gemm;
  /// The same shapes, each call's operands the next ones along buffers of
  /// gemmColdBytes (the file's "gemm_cold"; optional, else empty): from
  /// beyond the caches.
  llvm::SmallVector<GemmPoint> gemmCold;
  double gemmColdBytes = 0;
  llvm::SmallVector<Point> conv, elementwise;
  /// The optimizer updates by their state buffers (0: SGD, 1: SGD with
  /// momentum, 2: Adam; the file's "updates"; optional): the bytes moved.
  llvm::SmallVector<Point> updates[3];
  /// The normalizations and poolings by the dtc op they price
  /// (`batch_norm`, `max_pool2d_grad_blocked`, `layer_norm`, ...: the
  /// file's "norms"; optional): the bytes of their input x.
  llvm::StringMap<llvm::SmallVector<Point>> norms;
  /// The same, each call's arrays the next ones along buffers of
  /// normsColdBytes (the file's "norms_cold"; optional, else empty).
  llvm::StringMap<llvm::SmallVector<Point>> normsCold;
  double normsColdBytes = 0;
  llvm::SmallVector<Point> collectives[3];
  /// The same, each started right after compute (the file's
  /// "collectives_cold"; optional, else empty): what a collective costs
  /// that starts at its wait (deferred starts, a blocking all-reduce).
  llvm::SmallVector<Point> collectivesCold[3];

  /// The built-in machine: a core's worth of a current server at
  /// `ranks` ranks (docs/passes.md lists its figures).
  static Machine defaults(int64_t ranks);
  /// Reads a dtc-machine/1 file; on failure, says why in `error`.
  static std::optional<Machine> load(llvm::StringRef path, std::string &error);

  /// One GEMM C[m,n] = A[m,k] B[k,n] in a step that touches `meets` bytes
  /// (0: its operands in the caches, as when repeated): where the file has
  /// `gemm_cold`, between `gemm` (at the GEMM's own bytes) and `gemmCold`
  /// (at gemmColdBytes) by log2 of `meets`.
  double gemmSeconds(double m, double n, double k, double meets = 0) const;
  /// The rate of the 8 shapes of `table` nearest in log2(m, n, k).
  static double tableSeconds(llvm::ArrayRef<GemmPoint> table, double m,
                             double n, double k);
  /// A convolution (or one of its gradients) of `flops`.
  double convSeconds(double flops) const;
  /// A memory-bound kernel that reads and writes `bytes` in all.
  double elementwiseSeconds(double bytes) const;
  /// An optimizer update with `states` state buffers that moves `bytes`
  /// (the gradient read, the parameter and each state read and written);
  /// nothing where the machine has no such measurement.
  std::optional<double> updateSeconds(int64_t states, double bytes) const;
  /// The normalization or pooling `name` (a key of `norms`) of an input of
  /// `bytes` that reads and writes `own` bytes in a step that touches
  /// `meets` (0: as when repeated): where the file has `norms_cold`,
  /// between the two lists as gemmSeconds; nothing where the machine has no
  /// such measurement.
  std::optional<double> normSeconds(llvm::StringRef name, double bytes,
                                    double own = 0, double meets = 0) const;
  /// How far (0 .. 1) a kernel that reads and writes `own` bytes, in a
  /// step that touches `meets`, lies from its repeated measurement (its
  /// operands in the caches) towards its cold one (along `coldBytes`): by
  /// log2(meets / own) against log2(coldBytes / own).
  static double coldShare(double own, double meets, double coldBytes);
  /// A collective over `bytes` (the whole bucket) at this world size;
  /// `afterCompute`: started right after the rank's kernels, at its wait
  /// (collectivesCold where the file has it).
  double collectiveSeconds(Collective kind, double bytes,
                           bool afterCompute = false) const;
  /// How many times slower a collective of `alone` seconds (alone)
  /// progresses while the rank's kernels run: `beside` interpolated (the
  /// smallest's factor below it; past the largest, its last segment's slope,
  /// at least 1), else `communication`.
  double besideFactor(double alone) const;
  /// The factor on kernels that run `alone` seconds (alone) between two
  /// of the step's synchronizations: `computeRounds` interpolated (its
  /// ends' factors outside them), else `compute`.
  double computeFactor(double alone) const;
};

/// The cost model's answer for a planned module (after dtc-plan-memory).
struct Prediction {
  double stepSeconds = 0;    // one optimizer step (its micro-batches too)
  double computeSeconds = 0; // of which kernels
  double commSeconds = 0;    // of which waiting for collectives
  int64_t peakBytes = 0;     // a rank's peak, the data set not included
  int64_t ranks = 1, batch = 1;
  /// The kernels' seconds by op (`matmul`, `fused`, ...), the most first.
  std::vector<std::pair<std::string, double>> kernelSeconds;
  // The parts of peakBytes.
  int64_t persistentBytes = 0, arenaBytes = 0, batchBytes = 0, commBytes = 0,
          processBytes = 0;
};

/// Predicts `module`'s training step on `machine` at `ranks` ranks (0: the
/// module's dtc.shard ranks, else the machine's): every kernel of the step
/// costed by its shape, the collectives on a channel of their own that a
/// wait blocks on (or, with deferred starts, run at their waits), the
/// accumulation micro-batches; and a rank's memory: what it allocates for
/// the model (PlanReport::rankBytes), its batch buffer, the collectives'
/// temporaries (the largest bucket once replicated, twice sharded, three
/// times at stage 3) and the process's base.
Prediction predict(mlir::ModuleOp module, const Machine &machine,
                   int64_t ranks = 0);

/// "12.3 ms" / "1.20 s"; "512.0 MiB" / "1.50 GiB".
std::string formatSeconds(double seconds);
std::string formatBytes(int64_t bytes);

} // namespace dtc
