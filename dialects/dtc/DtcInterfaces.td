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

// Ops computed one element at a time (with numpy broadcasting of operands):
// `dtc-fuse-elementwise` may put them inside one `dtc.fused` loop nest, and
// each code generator knows the scalar expression of each of them.
def Dtc_Elementwise : NativeOpTrait<"Elementwise"> {
  let cppNamespace = "::dtc::OpTrait";
}

#endif // DTC_INTERFACES_TD
