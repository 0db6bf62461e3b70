//===- DtcrtDialect.h - The runtime-call dialect --------------------------===//
#pragma once

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace dtcrt::OpTrait {
/// An op that is one call of the runtime's kernels (DtcrtOps.td).
template <typename ConcreteType>
class KernelCall : public mlir::OpTrait::TraitBase<ConcreteType, KernelCall> {};
} // namespace dtcrt::OpTrait

#include "dialects/dtcrt/DtcrtDialect.h.inc"
#include "dialects/dtcrt/DtcrtEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/dtcrt/DtcrtAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/dtcrt/DtcrtTypes.h.inc"

#define GET_OP_CLASSES
#include "dialects/dtcrt/DtcrtOps.h.inc"

namespace dtcrt {
/// The runtime function a KernelCall op calls: its name in camelCase
/// (dtcrt.reduce_sum: reduceSum).
std::string calleeOf(mlir::Operation *op);
} // namespace dtcrt
