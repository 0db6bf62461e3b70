//===- DtcInterfaces.td - Interfaces of the dtc dialect -----*- tablegen -*-===//
#ifndef DTC_INTERFACES_TD
#define DTC_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Dtc_GradientOpInterface : OpInterface<"GradientOpInterface"> {
  let cppNamespace = "::dtc";
  let description = [{
    A differentiable op states its own vector-Jacobian product: given the
    gradients of its results (a null Value where a result has none), it builds,
    at the builder's insertion point, the gradient of each operand and appends
    it to `operandGrads` (a null Value for operands that take no gradient, such
    as integer labels). Each operand gradient has exactly the operand's type.
    Reverse-mode autodiff (`dtc-autodiff`) relies on nothing else, so adding a
    differentiable op never touches the pass.
  }];
  let methods = [
    InterfaceMethod<
      "Builds the gradients of the operands from those of the results.",
      "::llvm::LogicalResult", "buildGradients",
      (ins "::mlir::OpBuilder &":$builder,
           "::mlir::ValueRange":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>
  ];
}

def Dtc_TiedOpInterface : OpInterface<"TiedOpInterface"> {
  let cppNamespace = "::dtc";
  let description = [{
    An op some of whose results live in the buffer of one of its operands
    (as IREE's tied ops): a view of it (dtc.reshape) or an in-place update
    of it (the gradient collectives, which sum over the ranks where the
    gradient is). Memory planning gives a tied result no buffer of its own
    and keeps the operand's buffer alive as long as the result is used;
    the back end reads and writes the result where the operand is.
  }];
  let methods = [
    InterfaceMethod<
      "The operand whose buffer result `index` lives in, or null.",
      "::mlir::Value", "getTiedOperand", (ins "unsigned":$index)>
  ];
}

def Dtc_ScratchOpInterface : OpInterface<"ScratchOpInterface"> {
  let cppNamespace = "::dtc";
  let description = [{
    An op whose kernel needs working memory while it runs (the columns of
    an im2col convolution). Memory planning places that many bytes in the
    arena's fixed region, live during the op alone, and records where in
    the op's `dtc.scratch`; the lowering hands the kernel that buffer.
  }];
  let methods = [
    InterfaceMethod<
      "The bytes of scratch memory the op's kernel needs (0: none).",
      "int64_t", "getScratchBytes", (ins)>
  ];
}

def Dtc_ModeOpInterface : OpInterface<"ModeOpInterface"> {
  let cppNamespace = "::dtc";
  let description = [{
    An op that computes otherwise when the model is evaluated (dropout: the
    identity; batch normalization: the running statistics). @forward and
    @train_step hold its training form; dtc-derive-steps replaces it in
    @eval_step by what `buildEvalForm` builds at its place.
  }];
  let methods = [
    InterfaceMethod<
      "Builds the evaluation form of the op; appends its results.",
      "::llvm::LogicalResult", "buildEvalForm",
      (ins "::mlir::OpBuilder &":$builder,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$results)>
  ];
}

// Ops computed one element at a time (with numpy broadcasting of operands):
// `dtc-fuse-elementwise` may put them inside one `dtc.fused` loop nest, and
// each code generator knows the scalar expression of each of them.
def Dtc_Elementwise : NativeOpTrait<"Elementwise"> {
  let cppNamespace = "::dtc::OpTrait";
}

#endif // DTC_INTERFACES_TD
