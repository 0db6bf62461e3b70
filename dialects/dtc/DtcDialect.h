//===- DtcDialect.h - The dtc dialect: ops, traits, interfaces ------------===//
#pragma once

#include "dialects/dtc/ShapeInference.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/Hashing.h"
#include "llvm/ADT/bit.h"

namespace dtc::OpTrait {
/// Marks ops computed one (broadcast) element at a time; see DtcInterfaces.td.
template <typename ConcreteType>
class Elementwise : public mlir::OpTrait::TraitBase<ConcreteType, Elementwise> {
};
} // namespace dtc::OpTrait

namespace dtc {
/// A double as an attribute parameter (hashable, compared bit for bit), read
/// and written as a double.
struct F64 {
  F64(double v = 0) : value(v) {}
  operator double() const { return value; }
  bool operator==(const F64 &o) const {
    return llvm::bit_cast<uint64_t>(value) == llvm::bit_cast<uint64_t>(o.value);
  }
  double value;
};
inline llvm::hash_code hash_value(F64 f) {
  return llvm::hash_value(llvm::bit_cast<uint64_t>(f.value));
}
/// Parameters of dtc's attributes: a double printed as the shortest text that
/// reads back to it, and true/false.
mlir::FailureOr<F64> parseF64(mlir::AsmParser &parser);
void printF64(mlir::AsmPrinter &printer, double value);
/// That text: "0.1", "1.0e-08", "0.0".
std::string f64Text(double value);
mlir::FailureOr<bool> parseBool(mlir::AsmParser &parser);
} // namespace dtc

#include "dialects/dtc/DtcEnums.h.inc"
#define GET_ATTRDEF_CLASSES
#include "dialects/dtc/DtcAttrs.h.inc"

#include "dialects/dtc/DtcDialect.h.inc"
#include "dialects/dtc/DtcInterfaces.h.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/dtc/DtcTypes.h.inc"

#define GET_OP_CLASSES
#include "dialects/dtc/DtcOps.h.inc"

namespace dtc {
/// torch.optim's defaults for `kind` (lr 0.01 for SGD, 0.001 for Adam and
/// AdamW; weight decay 0, 0.01 for AdamW): the one place dtc writes them.
OptimizerAttr defaultOptimizer(mlir::MLIRContext *context, OptimizerKind kind);

/// The module's target (its dtc.target; the CPU without one).
Target targetOf(mlir::ModuleOp module);

/// The sums of a gradient collective (dtc.all_reduce, dtc.all_reduce_bucket,
/// or dtc.all_reduce_start through its wait), one per gradient operand.
mlir::ResultRange sumsOf(mlir::Operation *collective);
/// For each gradient operand of a collective, the parameter whose update
/// (dtc.apply_gradient or dtc.update_group) reads its sum, or "" when none
/// or several do: the one gradient-to-parameter mapping of the dialect.
llvm::SmallVector<llvm::StringRef> updatedParams(mlir::Operation *collective);

/// True for ops that `dtc-fuse-elementwise` may put in a fused kernel.
inline bool isElementwise(mlir::Operation *op) {
  return op->hasTrait<OpTrait::Elementwise>();
}
} // namespace dtc
