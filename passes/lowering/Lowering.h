//===- Lowering.h - Planned dtc IR to runtime calls (dtcrt) ---------------===//
//
// dtc-lower-to-runtime lowers each planned step, op by op in order, to the
// dtcrt ops the generated program runs. Each op family's lowering lives in
// a file of its own (Linear.cpp, Reduction.cpp, Loss.cpp, ...), which
// registers one function per op in the table below (its populate*
// function); adding an op is one such function plus its kernels in the
// runtime. The lowering is target-independent: both printers print its
// output (passes/codegen).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "dialects/dtc/DtcDialect.h"
#include "dialects/dtc/ShapeInference.h"
#include "dialects/dtcrt/DtcrtDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include <functional>

namespace dtc::lowering {

/// The state of one step's lowering: the builder (at the end of the new
/// step's body), each dtc value's lowered pointer, and the helpers that
/// make dtcrt values. Each helper creates an op, so lowerings call them in
/// statements of their own, never two in one call's arguments (whose order
/// of evaluation C++ leaves to the compiler): the IR, and so the program and
/// its fingerprint, must not depend on the compiler that built dtc.
class Lowering {
public:
  Lowering(mlir::ModuleOp module, mlir::func::FuncOp step, mlir::OpBuilder &b);

  mlir::OpBuilder &b;
  mlir::ModuleOp module;
  mlir::func::FuncOp step; // the dtc step being lowered
  DtcDialect *dtc;

  /// The pointer a dtc value lowered to.
  mlir::Value ptr(mlir::Value v) const { return ptrs.lookup(v); }
  /// Records that dtc value `v` lives at `p`.
  void map(mlir::Value v, mlir::Value p) { ptrs[v] = p; }
  /// The planned buffer of result `i` of `op` (its dtc.offsets entry), which
  /// `op`'s results then map to.
  mlir::Value resultBuffer(mlir::Operation *op, unsigned i = 0);
  /// The persistent buffer at byte `offset`.
  mlir::Value persistent(int64_t offset);
  /// A null pointer (an optional buffer that is absent).
  mlir::Value null();
  /// The scratch buffer the memory plan gave `op` (its dtc.scratch).
  mlir::Value scratch(mlir::Operation *op);

  /// The elements of a tensor type (B times the rest for batched ones).
  mlir::Value size(mlir::Type tensor);
  /// Elements [from, to) of a shape, as a size.
  mlir::Value size(llvm::ArrayRef<int64_t> shape, size_t from, size_t to);
  mlir::Value i1(bool v);
  mlir::Value i32(int32_t v);
  mlir::Value i64(int64_t v);
  mlir::Value f32(float v);
  mlir::Value scalar(dtcrt::StepScalar which);
  mlir::Value hyper();
  /// A host array of a shape (? as the batch) or of a permutation.
  mlir::Value array(llvm::ArrayRef<int64_t> values, unsigned bits);
  /// The host array of a dtc::rt::Window2d: x [N, C, H, W] to y [N, O, Ho,
  /// Wo] through window `w` (its kernel filled in) in `groups` groups.
  mlir::Value window2d(mlir::Type x, mlir::Type y, const shape::Window &w,
                       int64_t groups);
  /// [outer, n, inner] of a tensor viewed around `axis`.
  std::array<mlir::Value, 3> axisView(mlir::Type tensor, int64_t axis);

  /// A parameter's placement (dtc.placement) and index in parameter order.
  PlacementAttr placement(llvm::StringRef param);
  int32_t paramIndex(llvm::StringRef param);

  /// Folded momentum (dtc-fold-momentum): the persistent byte offset of the
  /// momentum buffer each folded gradient is accumulated into, and the
  /// gradients whose producer accumulated them itself (a GEMM with beta).
  llvm::DenseMap<mlir::Value, int64_t> momentumOf;
  llvm::DenseSet<mlir::Value> accumulated;

  /// Sharded buckets (dtc-shard-weight-update): each reduce-scatter's plan
  /// by bucket, taken from @train_step before any step is lowered (stage 3's
  /// other steps gather the buckets too).
  llvm::DenseMap<int64_t, BucketPlanAttr> shardedPlans;

  mlir::Location loc;
  /// All-reduces outside buckets: numbered -1, -2, ... (after no plan).
  int64_t looseCollectives = 0;

private:
  llvm::DenseMap<mlir::Value, mlir::Value> ptrs;
  llvm::StringMap<std::pair<PlacementAttr, int32_t>> params;
};

/// The plan of sharded bucket `bucket` (its reduce-scatter's), or null.
BucketPlanAttr shardedBucketPlan(int64_t bucket, Lowering &l);
/// The sharded buckets (reduce-scatters) of the module's training step.
int64_t numShardedBuckets(Lowering &l);

/// A shape with the batch dimension as -1 (dtcrt's arrays and kernels).
llvm::SmallVector<int64_t> batchAsMinusOne(llvm::ArrayRef<int64_t> shape);

using LowerFn =
    std::function<mlir::LogicalResult(mlir::Operation *, Lowering &)>;

/// Which function lowers each dtc op.
class LoweringTable {
public:
  template <typename Op>
  void add(std::function<mlir::LogicalResult(Op, Lowering &)> fn) {
    fns[mlir::TypeID::get<Op>()] = [fn](mlir::Operation *op, Lowering &l) {
      return fn(llvm::cast<Op>(op), l);
    };
  }
  const LowerFn *lookup(mlir::Operation *op) const {
    auto it = fns.find(op->getName().getTypeID());
    return it == fns.end() ? nullptr : &it->second;
  }

private:
  llvm::DenseMap<mlir::TypeID, LowerFn> fns;
};

/// What the program's spec (Spec.cpp) takes from the planned dtc steps,
/// read before they are lowered: the evaluation step's signature and
/// outputs, the largest arena regions, the bucket plan.
struct SpecPlan {
  mlir::FunctionType evalType;
  mlir::ArrayAttr outputs;
  int64_t perSample = 0, fixed = 0;
  /// The gradient-only step's (--gradcheck's), which the above leave out.
  int64_t gradPerSample = 0, gradFixed = 0;
  llvm::SmallVector<mlir::Attribute> buckets;
};
SpecPlan planSpec(mlir::ModuleOp module);
/// The module's dtcrt.spec, after its steps are lowered (the lowered
/// evaluation step gives the loss's classes, the ids' limit and the
/// predictions' width), placed first in the module.
dtcrt::SpecOp buildSpec(mlir::ModuleOp module, const SpecPlan &plan);

// One per op family, each in its file.
void populateDataMovementLowerings(LoweringTable &t);  // DataMovement.cpp
void populateLinearLowerings(LoweringTable &t);        // Linear.cpp
void populateAttentionLowerings(LoweringTable &t);     // Attention.cpp
void populateConvolutionLowerings(LoweringTable &t);   // Convolution.cpp
void populatePoolingLowerings(LoweringTable &t);       // Pooling.cpp
void populateRandomLowerings(LoweringTable &t);        // Random.cpp
void populateNormalizationLowerings(LoweringTable &t); // Normalization.cpp
void populateReductionLowerings(LoweringTable &t);     // Reduction.cpp
void populateLossLowerings(LoweringTable &t);          // Loss.cpp
void populateElementwiseLowerings(LoweringTable &t);   // Elementwise.cpp
void populateOptimizerLowerings(LoweringTable &t);     // Optimizer.cpp
void populateCollectiveLowerings(LoweringTable &t);    // Collective.cpp

} // namespace dtc::lowering
