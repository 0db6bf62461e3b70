//===- DtcrtDialect.cpp - The runtime-call dialect: registration, verifiers =//
#include "dialects/dtcrt/DtcrtDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace dtcrt;

#include "dialects/dtcrt/DtcrtDialect.cpp.inc"
#include "dialects/dtcrt/DtcrtEnums.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/dtcrt/DtcrtTypes.cpp.inc"

#define GET_OP_CLASSES
#include "dialects/dtcrt/DtcrtOps.cpp.inc"

void DtcrtDialect::initialize() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "dialects/dtcrt/DtcrtTypes.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "dialects/dtcrt/DtcrtOps.cpp.inc"
      >();
}

std::string dtcrt::calleeOf(Operation *op) {
  std::string name;
  bool upper = false;
  for (char ch : op->getName().stripDialect()) {
    if (ch == '_') {
      upper = true;
      continue;
    }
    name += upper ? char(std::toupper((unsigned char)ch)) : ch;
    upper = false;
  }
  return name;
}

LogicalResult StepArgOp::verify() {
  bool ints = getArg() == StepArg::ClassLabels || getArg() == StepArg::InputIds;
  if (cast<PtrType>(getType()).getElement().isInteger(32) != ints)
    return emitOpError("class labels and input ids are i32, every other step "
                       "argument f32");
  return success();
}

LogicalResult ConstantOp::verify() {
  if (getValue().getType() != getType())
    return emitOpError("value and result types differ");
  return success();
}

LogicalResult UpdateItemsOp::verify() {
  size_t n = getWeights().size();
  if (getGrads().size() != n || getSizes().size() != n)
    return emitOpError("needs a gradient and a size per weight");
  if (getStatesPerItem() < 0 || getStates().size() != n * getStatesPerItem())
    return emitOpError("needs ")
           << getStatesPerItem() << " state buffers per weight";
  return success();
}

LogicalResult ElementwiseOp::verify() {
  if (getOutputs().empty())
    return emitOpError("writes at least one output");
  if (getStrides().size() != getInputs().size())
    return emitOpError("needs the strides of every input");
  for (Attribute s : getStrides()) {
    auto strides = dyn_cast<DenseI64ArrayAttr>(s);
    if (!strides ||
        (!strides.empty() && strides.size() != (int64_t)getShape().size()))
      return emitOpError("each input's strides are empty (read at the linear "
                         "index) or one per dimension of the shape");
  }
  Block &body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError("the body takes one argument per input");
  return success();
}
