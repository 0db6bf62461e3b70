//===- DtcDialect.td - The dtc dialect ----------------------*- tablegen -*-===//
#ifndef DTC_DIALECT_TD
#define DTC_DIALECT_TD

include "mlir/IR/OpBase.td"

def Dtc_Dialect : Dialect {
  let name = "dtc";
  let cppNamespace = "::dtc";
  let summary = "Tensor-level training graphs for the dtc compiler";
  let description = [{
    The `dtc` dialect holds a model's forward graph as the frontend builds it,
    the training step that autodiff derives from it (forward, backward and the
    optimizer update) and, after fusion and memory planning, the annotated graph
    that the code generators emit. Values are ranked tensors of `f32` (labels
    `i32`); a dynamic first dimension (`?`) is the batch dimension, whose size
    is known only when a step runs.
  }];
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
  let hasConstantMaterializer = 1;
  // The dtc.* attributes that stand on ops other than dtc's own: the module's
  // recipe, the functions' plans, the collectives' buckets. Named here once;
  // DtcDialect::verifyOperationAttribute checks their types and places.
  let discardableAttrs = (ins
    "::dtc::TargetAttr":$target,
    "::dtc::ShardAttr":$shard,
    "::dtc::PredictionAttr":$prediction,
    "::dtc::RecipeAttr":$recipe,
    "::dtc::OptimizerAttr":$optimizer,
    "::dtc::ScheduleAttr":$schedule,
    "::mlir::FloatAttr":$clip_grad_norm,
    "::mlir::IntegerAttr":$accumulate,
    "::mlir::StringAttr":$model,
    "::mlir::StringAttr":$source,
    "::mlir::IntegerAttr":$model_digest,
    "::dtc::PersistentAttr":$persistent,
    "::dtc::ArenaAttr":$arena,
    "::mlir::ArrayAttr":$outputs,
    "::mlir::UnitAttr":$traced,
    "::mlir::DenseI64ArrayAttr":$offsets,
    "::mlir::DenseI64ArrayAttr":$in_place,
    "::mlir::IntegerAttr":$scratch,
    "::dtc::PlacementAttr":$placement,
    "::dtc::BucketPlanAttr":$bucket_plan,
    "::mlir::StringAttr":$block,
    "::mlir::ArrayAttr":$checkpoint
  );
  let hasOperationAttrVerify = 1;
  let extraClassDeclaration = [{
    void registerAttributes();
  }];
  let hasRegionArgAttrVerify = 1;
}

class Dtc_Op<string mnemonic, list<Trait> traits = []>
    : Op<Dtc_Dialect, mnemonic, traits>;

#endif // DTC_DIALECT_TD
