//===- PlanReport.h - The compile-time plan, as an analysis ---------------===//
//
// What the planned IR says about a model's memory, communication and work,
// computed from the IR alone (an MLIR analysis of the module): `dtc --report`
// and the dtc-report pass print it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mlir/IR/Operation.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/raw_ostream.h"
#include <string>

namespace dtc {

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
};

} // namespace dtc
