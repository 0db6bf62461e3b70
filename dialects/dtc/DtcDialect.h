//===- DtcDialect.h - The dtc dialect: ops, traits, interfaces ------------===//
#pragma once

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace dtc::OpTrait {
/// Marks ops computed one (broadcast) element at a time; see DtcInterfaces.td.
template <typename ConcreteType>
class Elementwise
    : public mlir::OpTrait::TraitBase<ConcreteType, Elementwise> {};
} // namespace dtc::OpTrait

#include "dialects/dtc/DtcDialect.h.inc"
#include "dialects/dtc/DtcInterfaces.h.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/dtc/DtcTypes.h.inc"

#define GET_OP_CLASSES
#include "dialects/dtc/DtcOps.h.inc"

namespace dtc {
/// True for ops that `dtc-fuse-elementwise` may put in a fused kernel.
inline bool isElementwise(mlir::Operation *op) {
  return op->hasTrait<OpTrait::Elementwise>();
}
} // namespace dtc
