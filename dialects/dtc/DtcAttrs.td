//===- DtcAttrs.td - Attributes of the dtc dialect ----------*- tablegen -*-===//
//
// The training recipe, the optimizer and the initializers as typed, verified
// attributes, and the plan that dtc-plan-memory records (arena, placements,
// buckets). The dialect declares which of them may stand on which op
// (DtcDialect.td, discardableAttrs; verified in DtcDialect.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef DTC_ATTRS_TD
#define DTC_ATTRS_TD

include "DtcDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

class Dtc_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Dtc_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

// A double, printed as the shortest text that reads back to the same value.
class Dtc_F64Param<string desc> : AttrParameter<"::dtc::F64", desc> {
  let parser = "::dtc::parseF64($_parser)";
  let printer = "::dtc::printF64($_printer, $_self)";
}
class Dtc_F64Default<string value, string desc> : Dtc_F64Param<desc> {
  let defaultValue = "::dtc::F64(" # value # ")";
}
class Dtc_BoolDefault<string value, string desc> : AttrParameter<"bool", desc> {
  let parser = "::dtc::parseBool($_parser)";
  let printer = "$_printer << ($_self ? \"true\" : \"false\")";
  let defaultValue = value;
}
class Dtc_I64Param<string desc> : AttrParameter<"int64_t", desc>;
class Dtc_I64Default<string value, string desc>
    : DefaultValuedParameter<"int64_t", value, desc>;

//===----------------------------------------------------------------------===//
// Initializers
//===----------------------------------------------------------------------===//

def Dtc_InitKind : I32EnumAttr<"InitKind", "a parameter initializer", [
    I32EnumAttrCase<"Zeros", 0, "zeros">,
    I32EnumAttrCase<"Constant", 1, "constant">,
    I32EnumAttrCase<"Uniform", 2, "uniform">,
    I32EnumAttrCase<"Normal", 3, "normal">,
    I32EnumAttrCase<"GlorotUniform", 4, "glorot_uniform">,
    I32EnumAttrCase<"GlorotNormal", 5, "glorot_normal">,
    I32EnumAttrCase<"HeUniform", 6, "he_uniform">,
    I32EnumAttrCase<"HeNormal", 7, "he_normal">]> {
  let cppNamespace = "::dtc";
  let genSpecializedAttr = 0;
}
def Dtc_InitKindAttr : EnumAttr<Dtc_Dialect, Dtc_InitKind, "init"> {
  let summary = "How a parameter is initialized";
  let assemblyFormat = "`<` $value `>`";
}

//===----------------------------------------------------------------------===//
// The target
//===----------------------------------------------------------------------===//

def Dtc_Target : I32EnumAttr<"Target", "a code generation target", [
    I32EnumAttrCase<"Cpu", 0, "cpu">,
    I32EnumAttrCase<"Cuda", 1, "cuda">]> {
  let cppNamespace = "::dtc";
  let genSpecializedAttr = 0;
}
def Dtc_TargetAttr : EnumAttr<Dtc_Dialect, Dtc_Target, "target"> {
  let summary = "What the module is compiled for (the module's dtc.target)";
  let description = [{
    Set once, by dtc's `--target` (a module without it is for the CPU).
    The passes that depend on the target read it (dtc-fuse-max-pool-grad
    fuses for the CPU only), dtc-verify-backend-contract checks every
    target rule against it, and dtc-lower-to-runtime copies it into the
    program's dtcrt.spec, which the printers print.

    ```mlir
    module attributes {dtc.target = #dtc.target<cuda>} { ... }
    ```
  }];
  let assemblyFormat = "`<` $value `>`";
}

//===----------------------------------------------------------------------===//
// Sharded data parallelism
//===----------------------------------------------------------------------===//

def Dtc_ShardStage : I32EnumAttr<"ShardStage", "what the ranks shard (ZeRO's stages)", [
    I32EnumAttrCase<"None", 0, "none">,
    I32EnumAttrCase<"Optimizer", 1, "optimizer">,
    I32EnumAttrCase<"Gradients", 2, "gradients">,
    I32EnumAttrCase<"Parameters", 3, "parameters">]> {
  let cppNamespace = "::dtc";
  let genSpecializedAttr = 0;
}

def Dtc_ShardAttr : Dtc_Attr<"Shard", "shard"> {
  let summary = "Sharded data parallelism: the stage and the world size planned for";
  let description = [{
    The module's `dtc.shard`, set by dtc's `--shard` and `--ranks` (or the
    recipe's `shard` and `ranks`): which of the optimizer state, the
    gradients and the parameters each of `ranks` ranks holds only its
    part of (ZeRO's stages 1, 2, 3). dtc-shard-weight-update rewrites the
    training step for it, and the memory plan sizes every shard for
    `ranks`; the program refuses to start at another world size.

    ```mlir
    module attributes {dtc.shard = #dtc.shard<gradients, ranks = 4>} { ... }
    ```
  }];
  let parameters = (ins EnumParameter<Dtc_ShardStage>:$stage,
                        Dtc_I64Param<"the world size">:$ranks);
  let assemblyFormat = "`<` $stage `,` struct($ranks) `>`";
  let genVerifyDecl = 1;
}

def Dtc_PredictionAttr : Dtc_Attr<"Prediction", "prediction"> {
  let summary = "The cost model's prediction for the planned program";
  let description = [{
    The module's `dtc.prediction`, set by dtc-predict from the planned IR
    and a machine description (`train --calibrate`'s file, or the built-in
    defaults): one training step's seconds at the recipe's `batch` per rank
    on `ranks` ranks (`compute_seconds` of kernels, `comm_seconds` of
    communication the step waits for), and a rank's peak bytes (what it
    allocates for the model, its batch buffer, the collectives' temporaries
    and the process's base; the data set not included). `budget` is the
    memory per rank the plan was chosen under (0: none). `reference_seconds`
    is the machine file's `sustained_gemm_256` (0: none): one 256^3 GEMM's
    seconds sustained on every rank at once when the machine was calibrated,
    which the program measures again after training to say how far the
    host's speed has moved since.

    ```mlir
    module attributes {dtc.prediction = #dtc.prediction<step_seconds = 0.0123,
        compute_seconds = 0.0101, comm_seconds = 0.0022,
        peak_bytes = 41943040, ranks = 2, batch = 64>} { ... }
    ```
  }];
  let parameters = (ins Dtc_F64Param<"seconds of a training step">:$step_seconds,
                        Dtc_F64Param<"of which computing">:$compute_seconds,
                        Dtc_F64Param<"of which waiting for collectives">:$comm_seconds,
                        Dtc_I64Param<"a rank's peak bytes">:$peak_bytes,
                        Dtc_I64Param<"the world size">:$ranks,
                        Dtc_I64Param<"samples a rank's step">:$batch,
                        Dtc_I64Default<"0", "the budget per rank (0: none)">:$budget,
                        Dtc_F64Default<"0", "the calibrated reference GEMM's seconds (0: none)">:$reference_seconds);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

//===----------------------------------------------------------------------===//
// The optimizer and the recipe
//===----------------------------------------------------------------------===//

def Dtc_OptimizerKind : I32EnumAttr<"OptimizerKind", "an optimizer", [
    I32EnumAttrCase<"SGD", 0, "sgd">,
    I32EnumAttrCase<"Adam", 1, "adam">,
    I32EnumAttrCase<"AdamW", 2, "adamw">]> {
  let cppNamespace = "::dtc";
  let genSpecializedAttr = 0;
}

def Dtc_OptimizerAttr : Dtc_Attr<"Optimizer", "optimizer"> {
  let summary = "The optimizer and its hyper-parameters (torch.optim's)";
  let description = [{
    `sgd` (torch.optim.SGD: momentum, dampening, nesterov, weight_decay),
    `adam` (torch.optim.Adam: betas, eps, L2 weight_decay added to the
    gradient) or `adamw` (torch.optim.AdamW: decoupled weight decay).
    Parameters left out take torch.optim's defaults; those of the other
    family must stay at theirs. The front end's defaults for `lr` and
    `weight_decay`, which depend on the optimizer, come from
    `dtc::defaultOptimizer`.

    ```mlir
    #dtc.optimizer<sgd, lr = 0.1, weight_decay = 0, momentum = 0.9>
    ```
  }];
  let parameters = (ins
    EnumParameter<Dtc_OptimizerKind>:$kind,
    Dtc_F64Param<"learning rate">:$lr,
    Dtc_F64Param<"weight decay (L2 for sgd and adam, decoupled for adamw)">:$weight_decay,
    Dtc_F64Default<"0.0", "SGD momentum">:$momentum,
    Dtc_F64Default<"0.0", "SGD dampening">:$dampening,
    Dtc_BoolDefault<"false", "SGD Nesterov momentum">:$nesterov,
    Dtc_F64Default<"0.9", "Adam beta1">:$beta1,
    Dtc_F64Default<"0.999", "Adam beta2">:$beta2,
    Dtc_F64Default<"1e-8", "Adam epsilon">:$eps
  );
  let assemblyFormat = "`<` $kind `,` struct($lr, $weight_decay, $momentum, "
                       "$dampening, $nesterov, $beta1, $beta2, $eps) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Optimizer state buffers per parameter: 1 for SGD with momentum (the
    /// momentum buffer), 2 for Adam and AdamW (exp_avg, exp_avg_sq), else 0.
    int numStateBuffers() const;
    /// SGD with momentum and no dampening, Nesterov or weight decay
    /// (m = mu m + g; w -= lr m): its momentum can be folded into the
    /// gradient buckets (dtc-fold-momentum).
    bool isFoldableMomentum() const;
  }];
}

def Dtc_DataKind : I32EnumAttr<"DataKind", "a training data set", [
    I32EnumAttrCase<"None", 0, "none">,
    I32EnumAttrCase<"IDX", 1, "idx">,
    I32EnumAttrCase<"CSV", 2, "csv">,
    I32EnumAttrCase<"Synthetic", 3, "synthetic">,
    I32EnumAttrCase<"Text", 4, "text">]> {
  let cppNamespace = "::dtc";
  let genSpecializedAttr = 0;
}

def Dtc_LrScheduleKind : I32EnumAttr<"LrScheduleKind", "a learning-rate schedule", [
    I32EnumAttrCase<"Constant", 0, "constant">,
    I32EnumAttrCase<"Cosine", 1, "cosine">,
    I32EnumAttrCase<"Linear", 2, "linear">,
    I32EnumAttrCase<"Step", 3, "step">]> {
  let cppNamespace = "::dtc";
  let genSpecializedAttr = 0;
}

def Dtc_ScheduleAttr : Dtc_Attr<"Schedule", "schedule"> {
  let summary = "The recipe's learning-rate schedule (train --lr-schedule and its options)";
  let description = [{
    The rate of each optimizer step from the optimizer's `lr`: `warmup`
    steps of linear warmup, then `constant`, `cosine` or `linear` decay to
    `min_lr` over `decay_steps` (0: the run's steps), or `step` decay by
    `gamma` every `step_size` steps (runtime/lib/options/schedule.h has the
    formulas). The train options override each.

    ```mlir
    #dtc.schedule<kind = cosine, warmup = 100, min_lr = 1.0e-04>
    ```
  }];
  let parameters = (ins
    DefaultValuedParameter<"LrScheduleKind", "LrScheduleKind::Constant", "the schedule">:$kind,
    Dtc_I64Default<"0", "steps of linear warmup">:$warmup,
    Dtc_I64Default<"0", "cosine, linear: steps to min_lr (0: the run's)">:$decay_steps,
    Dtc_F64Default<"0.0", "cosine, linear: the final rate">:$min_lr,
    Dtc_I64Default<"1", "step: steps between decays">:$step_size,
    Dtc_F64Default<"0.1", "step: the factor of each decay">:$gamma
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Dtc_RecipeAttr : Dtc_Attr<"Recipe", "recipe"> {
  let summary = "The training recipe: data, batch, epochs, seed";
  let description = [{
    The data set (`idx` in `dir`, `csv` from `train` and `test`, `synthetic`
    with `train_size` and `test_size` samples, `text` from the file or
    directory `train`, or `none`: given at run time),
    the per-rank batch, the epochs, the seed, and the fraction of the
    training set held out for validation (its last samples). `train`
    options override each at run time.

    ```mlir
    #dtc.recipe<data = idx, dir = "/usr/share/datasets/fashion-mnist", batch = 64, epochs = 1, seed = 0>
    ```
  }];
  let parameters = (ins
    DefaultValuedParameter<"DataKind", "DataKind::None", "the data set's kind"> :$data,
    StringRefParameter<"IDX directory", "\"\"">:$dir,
    StringRefParameter<"CSV training file; text: the file or directory", "\"\"">:$train,
    StringRefParameter<"CSV test file", "\"\"">:$test,
    Dtc_I64Default<"0", "synthetic training samples">:$train_size,
    Dtc_I64Default<"0", "synthetic test samples">:$test_size,
    Dtc_I64Default<"64", "samples per rank and step">:$batch,
    Dtc_I64Default<"1", "epochs">:$epochs,
    Dtc_I64Default<"0", "seed of initialization and shuffling">:$seed,
    Dtc_F64Default<"0.0", "the fraction of the training set held out for validation">:$validation
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

//===----------------------------------------------------------------------===//
// The plan (dtc-plan-memory)
//===----------------------------------------------------------------------===//

def Dtc_ArenaAttr : Dtc_Attr<"Arena", "arena"> {
  let summary = "A step's arena: bytes per sample and fixed bytes";
  let description = [{
    On each step function: its buffers need `per_sample` bytes for each
    sample of the batch plus `fixed` bytes; `naive_*` are the sizes without
    reuse, for comparison. The fixed region comes first in the arena.
  }];
  let parameters = (ins Dtc_I64Param<"bytes per sample">:$per_sample,
                        Dtc_I64Param<"fixed bytes">:$fixed,
                        Dtc_I64Param<"bytes per sample without reuse">:$naive_per_sample,
                        Dtc_I64Param<"fixed bytes without reuse">:$naive_fixed);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Dtc_PlacementAttr : Dtc_Attr<"Placement", "placement"> {
  let summary = "Where a parameter (and its optimizer state) or a buffer lives";
  let description = [{
    On each `dtc.param`: the byte offsets of its value and of its first
    optimizer state buffer (the others follow it, each of the parameter's
    size) in the persistent block. On each `dtc.buffer`: its offset only.
  }];
  let parameters = (ins Dtc_I64Param<"byte offset of the value">:$offset,
                        OptionalParameter<"std::optional<int64_t>",
                                          "byte offset of the optimizer state (none on a dtc.buffer)">:$state_offset);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Dtc_PersistentAttr : Dtc_Attr<"Persistent", "persistent"> {
  let summary = "The persistent block: parameters, buffers, then optimizer state";
  let parameters = (ins Dtc_I64Param<"bytes of the parameters">:$param_bytes,
                        Dtc_I64Default<"0", "bytes of the buffers (after the parameters)">:$buffer_bytes,
                        Dtc_I64Param<"bytes of the whole block">:$bytes);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Dtc_BucketPlanAttr : Dtc_Attr<"BucketPlan", "bucket_plan"> {
  let summary = "Where a gradient bucket lives: one contiguous buffer";
  let description = [{
    On each collective of the training step: the bucket's byte offset in the
    arena's fixed region and its size in floats; with a folded momentum
    (dtc-fold-momentum), `momentum_offset` is the byte offset in the
    persistent block of the momentum buffers laid out like the bucket, on
    which the all-reduce then works. A sharded bucket (`dtc.shard`,
    dtc-shard-weight-update) is padded to `shard` floats per rank (`count`
    is `shard` times the ranks); `param_offset` is where its parameters
    live in the persistent block, laid out like the bucket (FSDP's flat
    parameter), and `state_offset` where this rank's shard of their
    optimizer state lives (the state buffers one after the other, `shard`
    floats each).
  }];
  let parameters = (ins Dtc_I64Param<"byte offset in the fixed region">:$offset,
                        Dtc_I64Param<"size in floats">:$count,
                        OptionalParameter<"std::optional<int64_t>",
                                          "byte offset of the momentum buffers">:$momentum_offset,
                        OptionalParameter<"std::optional<int64_t>",
                                          "floats of each rank's shard (sharded buckets)">:$shard,
                        OptionalParameter<"std::optional<int64_t>",
                                          "byte offset of the bucket's parameters (sharded)">:$param_offset,
                        OptionalParameter<"std::optional<int64_t>",
                                          "byte offset of the shard's optimizer state (sharded)">:$state_offset);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif // DTC_ATTRS_TD
