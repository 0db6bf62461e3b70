//===- Passes.td - dtc passes -------------------------------*- tablegen -*-===//
#ifndef DTC_PASSES_TD
#define DTC_PASSES_TD

include "mlir/Pass/PassBase.td"

def Autodiff : Pass<"dtc-autodiff", "mlir::ModuleOp"> {
  let summary = "Derives the training step (forward, backward, update) from the forward graph";
  let description = [{
    Takes `func.func @forward`, whose first result is the loss and whose other
    results are metrics, and builds `func.func @train_step` with the same
    signature: the forward ops, then the reverse-mode gradient of the loss
    (each op's vector-Jacobian product comes from its GradientOpInterface),
    then one `dtc.apply_gradient` per parameter that the loss depends on.
    Gradients of values used several times are summed. `@forward` stays as the
    evaluation step.
  }];
  let dependentDialects = ["dtc::DtcDialect", "mlir::func::FuncDialect"];
}

def FuseElementwise : Pass<"dtc-fuse-elementwise", "mlir::func::FuncOp"> {
  let summary = "Fuses chains of elementwise ops into single dtc.fused kernels";
  let description = [{
    Groups elementwise ops that share an iteration space (the same result
    shape) and are connected by def-use edges into one `dtc.fused` op, whose
    body keeps the chain's intermediates in registers: a fused kernel reads
    each input once and writes only the values used outside it. Splat
    constants and `dtc.batch_size` used by the chain are cloned into the body.
    Every remaining elementwise op becomes a one-op kernel, so code generators
    emit elementwise work only through `dtc.fused`.
  }];
  let dependentDialects = ["dtc::DtcDialect"];
}

def PlanMemory : Pass<"dtc-plan-memory", "mlir::ModuleOp"> {
  let summary = "Places every buffer of each step in one arena, reusing memory by liveness";
  let description = [{
    For each function, every tensor an op produces gets a byte offset
    (`dtc.offsets`, one per result) in the step's arena. Buffers whose size
    scales with the batch live in the per-sample region (offsets in bytes per
    sample; the real offset is offset * batch), the others in the fixed region
    placed after it. A buffer is live from its definition to its last use
    (reshapes alias their operand); best-fit placement reuses freed ranges.
    The function gets `dtc.arena_per_sample`, `dtc.arena_fixed` and, for
    comparison, `dtc.naive_per_sample`/`dtc.naive_fixed` (no reuse). Module
    parameters get `dtc.offset` in the persistent block and their optimizer
    state `dtc.state_offset` after all parameters; the module gets
    `dtc.param_bytes` and `dtc.persistent_bytes`.
  }];
  let options = [
    Option<"alignment", "alignment", "int64_t", /*default=*/"64",
           "Byte alignment of every buffer (per-sample offsets use alignment/4)">,
    Option<"report", "report", "bool", /*default=*/"false",
           "Emit a remark with the planned and naive sizes of each function">
  ];
}

#endif // DTC_PASSES_TD
