//===- DtcrtSpec.td - The program's spec: what the runtime reads -*- tablegen -*-===//
//
// dtc-lower-to-runtime decides, besides the steps' calls, everything the
// runtime reads of a program (dtc::rt::ModelSpec, runtime.h): the target,
// the input and labels, each parameter with its initializer and fans, the
// buffers, the bucket plan, the sizes of the persistent block and the arena,
// the recipe and the optimizer. It records them in one dtcrt.spec op, whose
// enums are the runtime's own (their values and names are dtc::rt's), so
// that the printers print it field by field and decide nothing.
//
//===----------------------------------------------------------------------===//
#ifndef DTCRT_SPEC_TD
#define DTCRT_SPEC_TD

include "DtcrtDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/CommonAttrConstraints.td"

class Dtcrt_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Dtcrt_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

// An enum of the runtime (runtime.h): the cases are its enumerators, with
// the same values, printed with the same names.
class Dtcrt_RuntimeEnum<string name, string summary, list<I32EnumAttrCase> cases>
    : I32EnumAttr<name, summary, cases> {
  let cppNamespace = "::dtcrt";
  let genSpecializedAttr = 0;
}

def Dtcrt_Target : Dtcrt_RuntimeEnum<"Target", "what the program runs on", [
    I32EnumAttrCase<"Cpu", 0, "cpu">,
    I32EnumAttrCase<"Cuda", 1, "cuda">]>;
def Dtcrt_TargetAttr : EnumAttr<Dtcrt_Dialect, Dtcrt_Target, "target"> {
  let summary = "The program's target: C++ for the CPU, or CUDA C++ holding the CPU steps too";
  let assemblyFormat = "`<` $value `>`";
}

def Dtcrt_InitKind : Dtcrt_RuntimeEnum<"InitKind", "dtc::rt::InitKind", [
    I32EnumAttrCase<"Zeros", 0>, I32EnumAttrCase<"Constant", 1>,
    I32EnumAttrCase<"Uniform", 2>, I32EnumAttrCase<"Normal", 3>,
    I32EnumAttrCase<"GlorotUniform", 4>, I32EnumAttrCase<"GlorotNormal", 5>,
    I32EnumAttrCase<"HeUniform", 6>, I32EnumAttrCase<"HeNormal", 7>]>;
def Dtcrt_ElementType : Dtcrt_RuntimeEnum<"ElementType", "dtc::rt::ElementType", [
    I32EnumAttrCase<"F32", 0>, I32EnumAttrCase<"I64", 1>, I32EnumAttrCase<"I32", 2>]>;
def Dtcrt_LabelKind : Dtcrt_RuntimeEnum<"LabelKind", "dtc::rt::LabelKind", [
    I32EnumAttrCase<"Class", 0>, I32EnumAttrCase<"Value", 1>]>;
def Dtcrt_DatasetKind : Dtcrt_RuntimeEnum<"DatasetKind", "dtc::rt::DatasetKind", [
    I32EnumAttrCase<"None", 0>, I32EnumAttrCase<"IDX", 1>, I32EnumAttrCase<"CSV", 2>,
    I32EnumAttrCase<"Synthetic", 3>, I32EnumAttrCase<"Text", 4>]>;
def Dtcrt_OptimizerKind : Dtcrt_RuntimeEnum<"OptimizerKind", "dtc::rt::OptimizerKind", [
    I32EnumAttrCase<"SGD", 0>, I32EnumAttrCase<"Adam", 1>, I32EnumAttrCase<"AdamW", 2>]>;
def Dtcrt_ScheduleKind : Dtcrt_RuntimeEnum<"ScheduleKind",
    "dtc::rt::Schedule::kind (runtime/lib/schedule.cpp)", [
    I32EnumAttrCase<"Constant", 0>, I32EnumAttrCase<"Cosine", 1>,
    I32EnumAttrCase<"Linear", 2>, I32EnumAttrCase<"Step", 3>]>;

// A double, kept bit for bit (an f64 FloatAttr).
class Dtcrt_F64<string desc> : AttrParameter<"::mlir::FloatAttr", desc>;

def Dtcrt_ParamSpecAttr : Dtcrt_Attr<"ParamSpec", "param"> {
  let summary = "A parameter (dtc::rt::ParamSpec)";
  let description = [{
    Its name (the safetensors key), shape, byte offset in the persistent
    block and its optimizer state's, and its initializer with the arguments
    and fans it draws from (fan_in and fan_out as torch computes them for
    the shape: a vector's fan-in is its length).
  }];
  let parameters = (ins StringRefParameter<"the name">:$name,
                        "::mlir::DenseI64ArrayAttr":$shape,
                        "int64_t":$offset, "int64_t":$state_offset,
                        EnumParameter<Dtcrt_InitKind>:$init,
                        Dtcrt_F64<"the initializer's first argument">:$a,
                        Dtcrt_F64<"the initializer's second argument">:$b,
                        "int64_t":$fan_in, "int64_t":$fan_out);
  let assemblyFormat = "`<` $name `,` $shape `,` struct($offset, "
                       "$state_offset, $init, $a, $b, $fan_in, $fan_out) `>`";
}

def Dtcrt_BufferSpecAttr : Dtcrt_Attr<"BufferSpec", "buffer"> {
  let summary = "A buffer: state that is not trained (dtc::rt::BufferSpec)";
  let parameters = (ins StringRefParameter<"the name">:$name,
                        EnumParameter<Dtcrt_ElementType>:$type,
                        "::mlir::DenseI64ArrayAttr":$shape,
                        "int64_t":$offset,
                        Dtcrt_F64<"every element's initial value">:$value);
  let assemblyFormat = "`<` $name `,` $type `,` $shape `,` "
                       "struct($offset, $value) `>`";
}

def Dtcrt_BucketSpecAttr : Dtcrt_Attr<"BucketSpec", "bucket"> {
  let summary = "A gradient bucket (dtc::rt::BucketSpec)";
  let description = [{
    Its id (the all-reduce's `bucket`), its floats, and the indices (in
    `params` order) of the parameters whose gradients it carries. A sharded
    bucket (dtc-shard-weight-update) also has its `shard` (floats per
    rank), the byte offsets of its parameters (laid out like the bucket)
    and of this rank's shard of their optimizer state in the persistent
    block, and each parameter's offset in the bucket (`within`, floats).
  }];
  let parameters = (ins "int64_t":$id, "int64_t":$count,
                        "::mlir::DenseI32ArrayAttr":$params,
                        OptionalParameter<"std::optional<int64_t>",
                                          "floats of each rank's shard">:$shard,
                        DefaultValuedParameter<"int64_t", "0",
                                               "byte offset of its parameters">:$param_offset,
                        DefaultValuedParameter<"int64_t", "0",
                                               "byte offset of the shard's state">:$state_offset,
                        OptionalParameter<"::mlir::DenseI64ArrayAttr",
                                          "each parameter's offset in floats">:$within);
  let assemblyFormat = "`<` $id `,` $count `,` $params (`,` `shard` $shard^ "
                       "`,` `params` `at` $param_offset `,` `state` `at` "
                       "$state_offset `,` `within` $within)? `>`";
}

def Dtcrt_InputAttr : Dtcrt_Attr<"Input", "input"> {
  let summary = "A sample's input: its shape, element type and the ids' limit";
  let description = [{
    `id_limit`: the rows of the smallest table the input's ids index (0
    for inputs that are not ids), which the runtime checks the data against.
  }];
  let parameters = (ins "::mlir::DenseI64ArrayAttr":$shape,
                        "int64_t":$numel, EnumParameter<Dtcrt_ElementType>:$type,
                        "int64_t":$id_limit);
  let assemblyFormat = "`<` $shape `,` struct($numel, $type, $id_limit) `>`";
}

def Dtcrt_LabelsAttr : Dtcrt_Attr<"Labels", "labels"> {
  let summary = "A sample's labels: classes or values";
  let parameters = (ins EnumParameter<Dtcrt_LabelKind>:$kind, "int64_t":$numel,
                        "int64_t":$classes, "int64_t":$ignore_index);
  let assemblyFormat = "`<` $kind `,` struct($numel, $classes, $ignore_index) `>`";
}

def Dtcrt_MemoryAttr : Dtcrt_Attr<"Memory", "memory"> {
  let summary = "The persistent block and the arena, in bytes";
  let description = [{
    The persistent block (`persistent` bytes: the parameters' `params`, the
    buffers' `buffers`, the optimizer state of `states` buffers a
    parameter), and the arena the steps share: `per_sample` bytes a sample
    and `fixed` bytes, each the largest of the steps', the fixed region
    with the room to align the per-sample region after it.
  }];
  let parameters = (ins "int64_t":$persistent, "int64_t":$params,
                        "int64_t":$buffers, "int64_t":$states,
                        "int64_t":$per_sample, "int64_t":$fixed,
                        DefaultValuedParameter<"int64_t", "0">:$grad_per_sample,
                        DefaultValuedParameter<"int64_t", "0">:$grad_fixed);
  let assemblyFormat = "`<` struct(params) `>`";
}

def Dtcrt_RecipeAttr : Dtcrt_Attr<"Recipe", "recipe"> {
  let summary = "The training recipe (dtc::rt::Recipe and its data set)";
  let parameters = (ins EnumParameter<Dtcrt_DatasetKind>:$data,
                        StringRefParameter<"the data set's folder">:$dir,
                        StringRefParameter<"the training file">:$train,
                        StringRefParameter<"the test file">:$test,
                        "int64_t":$train_size, "int64_t":$test_size,
                        "int64_t":$batch, "int64_t":$epochs, "int64_t":$seed,
                        Dtcrt_F64<"the validation fraction">:$validation,
                        "int64_t":$accumulate);
  let assemblyFormat = "`<` $data `,` struct($dir, $train, $test, $train_size, "
                       "$test_size, $batch, $epochs, $seed, $validation, "
                       "$accumulate) `>`";
}

def Dtcrt_HyperAttr : Dtcrt_Attr<"Hyper", "hyper"> {
  let summary = "The optimizer and its hyper-parameters (dtc::rt::Hyper)";
  let description = [{
    `max_grad_norm` only where the recipe clips gradients.
  }];
  let parameters = (ins EnumParameter<Dtcrt_OptimizerKind>:$optimizer,
                        Dtcrt_F64<"">:$lr, Dtcrt_F64<"">:$momentum,
                        Dtcrt_F64<"">:$dampening, Dtcrt_F64<"">:$weight_decay,
                        Dtcrt_F64<"">:$beta1, Dtcrt_F64<"">:$beta2,
                        Dtcrt_F64<"">:$eps, "bool":$nesterov,
                        OptionalParameter<"::mlir::FloatAttr">:$max_grad_norm);
  let assemblyFormat = "`<` $optimizer `,` struct($lr, $momentum, $dampening, "
                       "$weight_decay, $beta1, $beta2, $eps, $nesterov, "
                       "$max_grad_norm) `>`";
}

def Dtcrt_ScheduleAttr : Dtcrt_Attr<"Schedule", "schedule"> {
  let summary = "The learning-rate schedule (dtc::rt::Schedule)";
  let parameters = (ins EnumParameter<Dtcrt_ScheduleKind>:$kind,
                        "int64_t":$warmup, "int64_t":$decay_steps,
                        Dtcrt_F64<"">:$min_lr, "int64_t":$step_size,
                        Dtcrt_F64<"">:$gamma);
  let assemblyFormat = "`<` $kind `,` struct($warmup, $decay_steps, $min_lr, "
                       "$step_size, $gamma) `>`";
}

def Dtcrt_ShardAttr : Dtcrt_Attr<"Shard", "shard"> {
  let summary = "Sharded data parallelism: the stage (1-3) and the ranks planned for";
  let parameters = (ins "int64_t":$stage, "int64_t":$ranks);
  let assemblyFormat = "`<` struct(params) `>`";
}

def Dtcrt_PredictionAttr : Dtcrt_Attr<"Prediction", "prediction"> {
  let summary = "The cost model's prediction, which the program prints next to its measurement";
  let description = [{
    The module's `#dtc.prediction` (dtc-predict): a training step's
    seconds and a rank's peak bytes (the data set not included) at `batch`
    samples a rank on `ranks` ranks, and the memory budget a rank was planned
    under (0: none); `compute_seconds` of the step are kernels, and
    `reference_seconds` is the calibrated reference GEMM's sustained time
    (0: none), which the program measures again after training.
  }];
  let parameters = (ins Dtcrt_F64<"seconds of a step">:$step_seconds,
                        Dtcrt_F64<"of which computing">:$compute_seconds,
                        "int64_t":$peak_bytes, "int64_t":$ranks,
                        "int64_t":$batch, "int64_t":$budget,
                        Dtcrt_F64<"the calibrated reference GEMM's seconds (0: none)">:$reference_seconds);
  let assemblyFormat = "`<` struct(params) `>`";
}

def Dtcrt_SpecOp : Dtcrt_Op<"spec", [HasParent<"::mlir::ModuleOp">]> {
  let summary = "What the runtime reads of the program (dtc::rt::ModelSpec)";
  let description = [{
    One per lowered module, made by dtc-lower-to-runtime: the target, the
    model's name and source file, the input and labels, the parameters and
    buffers in order, the gradient buckets in the order their all-reduces
    start, the memory plan's sizes, the evaluation step's outputs and the
    width of its exported predictions (0: none), the recipe, the optimizer
    and the schedule; a sharded program's stage and world size, and the
    model's digest (the front end's dtc.model_digest: which training states
    it may resume), and the cost model's prediction (dtc.prediction). The printers print it as the program's ModelSpec.
  }];
  let arguments = (ins Dtcrt_TargetAttr:$target, StrAttr:$name, StrAttr:$source,
      Dtcrt_InputAttr:$input, Dtcrt_LabelsAttr:$labels,
      TypedArrayAttrBase<Dtcrt_ParamSpecAttr, "parameters">:$params,
      TypedArrayAttrBase<Dtcrt_BufferSpecAttr, "buffers">:$buffers,
      TypedArrayAttrBase<Dtcrt_BucketSpecAttr, "buckets">:$buckets,
      Dtcrt_MemoryAttr:$memory, StrArrayAttr:$outputs, I64Attr:$predict_width,
      Dtcrt_RecipeAttr:$recipe, Dtcrt_HyperAttr:$hyper,
      OptionalAttr<Dtcrt_ScheduleAttr>:$schedule,
      OptionalAttr<Dtcrt_ShardAttr>:$shard,
      OptionalAttr<I64Attr>:$model_digest,
      OptionalAttr<Dtcrt_PredictionAttr>:$prediction);
  let assemblyFormat = "$target attr-dict";
  let hasVerifier = 1;
}

#endif // DTCRT_SPEC_TD
