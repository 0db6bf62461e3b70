//===- PlanReport.h - The compile-time plan, as an analysis ---------------===//
//
// What the planned IR says about a model's memory, communication and work,
// computed from the IR alone (an MLIR analysis of the module): `dtc --report`
// and the dtc-report pass print it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/raw_ostream.h"
#include <optional>
#include <string>

namespace dtc {

struct PipelineOptions;
class MatmulOp;

struct PlanReport {
  /// The analysis of a planned module (after dtc-plan-memory).
  explicit PlanReport(mlir::Operation *module);

  struct Param {
    std::string name;
    int64_t floats, offset;
  };
  struct Step {
    std::string name;
    int64_t perSample, fixed, naivePerSample, naiveFixed;
  };
  struct Bucket {
    int64_t id, bytes;
    llvm::SmallVector<std::string> params; // whose gradients it carries
  };

  int64_t batch = 64; // the recipe's, at which arenas are sized
  llvm::SmallVector<Param> params;
  int64_t paramBytes = 0, persistentBytes = 0;
  llvm::SmallVector<Step> steps;
  llvm::SmallVector<Bucket> buckets; // in all-reduce order
  double gemmFlops = 0;              // of one training step at `batch`
  double convFlops = 0;              // (convolutions and their gradients)
  double attentionFlops = 0;         // (fused attention, forward and backward)

  /// The largest arena of a step, at `batch`.
  int64_t peakArena() const;
  void print(llvm::raw_ostream &os) const;

  /// Sharded data parallelism (dtc.shard): the stage (0: replicated) and
  /// the world size planned for (0: any).
  int64_t shardStage = 0, shardRanks = 0;
  /// The persistent block's parts.
  int64_t bufferBytes = 0, stateBytes = 0, accumulatorBytes = 0;
  /// The most bytes of gradients (buckets, and stage 2's shards) live at
  /// once in @train_step's arena.
  int64_t gradientBytes = 0;
  /// Stage 3: the most bytes of parameters gathered whole at once.
  int64_t gatheredBytes = 0;
  /// The floats a step's collectives send over the ranks (N-1)/N of: a
  /// bucket's twice for an all-reduce (a reduce-scatter and an all-gather),
  /// once for each reduce-scatter and all-gather (padded).
  int64_t collectiveFloats = 0;
  /// The arena a rank allocates at `batch`, as the runtime does
  /// (arenaBytes, runtime/lib/train/session.h): the steps' largest fixed
  /// region with the alignment room after it (the program's spec), their
  /// largest per-sample region times the batch, and 64 bytes of slack; the
  /// gradient-only step's left out (--gradcheck's only).
  int64_t allocatedArena() const;
  /// What one rank allocates: the persistent block and that arena.
  int64_t rankBytes() const { return persistentBytes + allocatedArena(); }
  /// The bytes a rank sends a step at `ranks` ranks (ring algorithms).
  int64_t sentPerStep(int64_t ranks) const {
    return ranks <= 1 ? 0 : collectiveFloats * 4 * (ranks - 1) / ranks;
  }
};

/// The shapes a step's work is counted by, the dynamic (batch) dimension at
/// `batch`: PlanReport's FLOPs and the cost model's times (CostModel.h).
namespace work {
/// A dtc.matmul as one GEMM C[m,n] = A[m,k] B[k,n]: m the result's leading
/// dimensions folded, k the inner one (summed over the leading positions
/// under contract_batch).
struct Gemm {
  double m, n, k;
};
Gemm gemm(MatmulOp op, int64_t batch);
/// A convolution's or either gradient's FLOPs, 2 N O Ho Wo (C / groups) kH
/// kW (O Ho Wo: a sample's elements of y, in any layout); 0 for other ops.
double convFlops(mlir::Operation *op, int64_t batch);
/// Fused attention (any of its four ops) per head: the [tq, dim] x [dim,
/// tk] products, under a causal mask or not, forward or its gradient.
struct Attention {
  double heads, tq, tk, dim;
  bool causal, gradient;
};
std::optional<Attention> attention(mlir::Operation *op, int64_t batch);
} // namespace work

/// What `dtc --report` adds for sharded data parallelism: the per-rank
/// memory of `frontEnd` (a module from the front end) planned under each
/// stage (replicated, 1, 2) at 1, 2, 4 and 8 ranks and at `ranks` (0:
/// none), each compiled with `options`, and the bytes a rank sends a step.
mlir::LogicalResult printShardingReport(mlir::ModuleOp frontEnd,
                                        const PipelineOptions &options,
                                        int64_t ranks, llvm::raw_ostream &os);

} // namespace dtc
