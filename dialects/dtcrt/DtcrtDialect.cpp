//===- DtcrtDialect.cpp - The runtime-call dialect: registration, verifiers =//
#include "dialects/dtcrt/DtcrtDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace dtcrt;

#include "dialects/dtcrt/DtcrtDialect.cpp.inc"
#include "dialects/dtcrt/DtcrtEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/dtcrt/DtcrtAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/dtcrt/DtcrtTypes.cpp.inc"

#define GET_OP_CLASSES
#include "dialects/dtcrt/DtcrtOps.cpp.inc"

void DtcrtDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/dtcrt/DtcrtAttrs.cpp.inc"
      >();
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
  if (std::optional<ArrayRef<int64_t>> inPlace = getInPlace()) {
    if (inPlace->size() != getOutputs().size())
      return emitOpError("'in_place' needs one entry per output");
    SmallVector<bool> taken(getInputs().size(), false);
    for (int64_t i : *inPlace) {
      if (i == -1)
        continue;
      if (i < 0 || i >= (int64_t)getInputs().size() || taken[size_t(i)] ||
          !cast<DenseI64ArrayAttr>(getStrides()[size_t(i)]).empty())
        return emitOpError("'in_place' names, for each output, an input read "
                           "at the linear index that no other output "
                           "overwrites, or -1");
      taken[size_t(i)] = true;
    }
  }
  return success();
}

LogicalResult SpecOp::verify() {
  // The runtime's arrays hold shapes of rank 6 at most (ParamSpec::shape).
  constexpr size_t kMaxRank = 6;
  if (getInput().getShape().size() > kMaxRank)
    return emitOpError("an input of rank ")
           << getInput().getShape().size() << " (at most " << kMaxRank
           << " a sample)";
  for (Attribute a : getParams()) {
    auto p = cast<ParamSpecAttr>(a);
    if (p.getShape().size() > kMaxRank)
      return emitOpError("parameter '")
             << p.getName() << "' has rank " << p.getShape().size()
             << " (at most " << kMaxRank << ")";
  }
  for (Attribute a : getBuffers())
    if (cast<BufferSpecAttr>(a).getShape().size() > kMaxRank)
      return emitOpError("buffer '") << cast<BufferSpecAttr>(a).getName()
                                     << "' has rank > " << kMaxRank;
  for (Attribute a : getBuckets())
    for (int32_t i : cast<BucketSpecAttr>(a).getParams().asArrayRef())
      if (i < 0 || i >= (int64_t)getParams().size())
        return emitOpError("bucket ")
               << cast<BucketSpecAttr>(a).getId() << " carries parameter " << i
               << " of " << getParams().size();
  ShardAttr shard = getShardAttr();
  for (Attribute a : getBuckets()) {
    auto b = cast<BucketSpecAttr>(a);
    if (b.getShard().has_value() != bool(shard) ||
        (b.getShard() &&
         (!b.getWithin() || b.getWithin().size() != b.getParams().size())))
      return emitOpError("bucket ")
             << b.getId()
             << ": a sharded program's buckets have a shard and each "
                "parameter's offset, a replicated program's neither";
    if (b.getShard() && *b.getShard() * shard.getRanks() != b.getCount())
      return emitOpError("bucket ")
             << b.getId() << " of " << b.getCount() << " floats is not "
             << shard.getRanks() << " shards of " << *b.getShard();
  }
  if (shard &&
      (shard.getStage() < 1 || shard.getStage() > 3 || shard.getRanks() < 1))
    return emitOpError("shard: a stage 1-3 and ranks >= 1");
  MemoryAttr m = getMemory();
  for (int64_t v : {m.getPersistent(), m.getParams(), m.getBuffers(),
                    m.getStates(), m.getPerSample(), m.getFixed()})
    if (v < 0)
      return emitOpError("memory sizes are >= 0");
  if (m.getParams() + m.getBuffers() > m.getPersistent())
    return emitOpError("the parameters and buffers (")
           << m.getParams() + m.getBuffers()
           << " bytes) exceed the persistent block (" << m.getPersistent()
           << ")";
  return success();
}
