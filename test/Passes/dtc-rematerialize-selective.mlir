// RUN: dtc-opt %s --dtc-rematerialize=policy=selective | FileCheck %s
// RUN: dtc-opt %s --dtc-rematerialize=policy=selective --dtc-derivatives-in-forward --dtc-fuse-elementwise --dtc-plan-memory | FileCheck %s --check-prefix=KERNEL
// RUN: dtc-opt %s --dtc-derivatives-in-forward --dtc-fuse-elementwise | FileCheck %s --check-prefix=NONE
//
// `selective` (the min-cut partitioner): a layer h0 of a GELU MLP and a
// residual, tanh(x + W2 gelu(W1 x)), after dtc-autodiff. Backward reads the
// GEMM's result %2 (the GELU's derivative), the GELU's %3 (W2's gradient)
// and the tanh's %7 (its own derivative and the head's gradient); GEMMs are
// never recomputed. Of the cuts that separate what backward reads from the
// GEMMs, the smallest keeps %2 and %7 (a sample's 16 bytes each), and
// recomputes the GELU from %2, which backward holds anyway: 32 bytes kept
// instead of 48. The residual add and the tanh stay in forward: recomputing
// the tanh would keep the GEMM %5 it adds instead (the same bytes, and work
// repeated), which the earlier rule (recompute every cheap op) did.
// CHECK:      %[[H:.*]] = dtc.matmul %arg0
// CHECK-NEXT: %[[A:.*]] = dtc.gelu_tanh %[[H]] {dtc.block = "h0"}
// CHECK:      dtc.grad_seed
// CHECK-NOT:  dtc.tanh
// CHECK-NOT:  dtc.add
// CHECK:      %[[A2:.*]] = dtc.gelu_tanh %[[H]] {dtc.block = "h0"}
// CHECK-NEXT: dtc.matmul %{{.*}}, %[[A2]] {transpose_lhs = true}
// CHECK-NOT:  %[[A]]{{[^0-9]}}
//
// The GELU's derivative goes with the clone (not the forward's GELU, where
// it would be held across the step instead of %2), and with the product
// by the gradient beside it, one kernel reads %2 once and writes the GELU
// over it and the product over the gradient (both die there).
// KERNEL:      dtc.grad_seed
// KERNEL:      %[[DY:.*]] = dtc.matmul %{{.*}}, %{{.*}} {dtc.offsets = array<i64: {{[0-9]+}}>} : tensor<?x4xf32>, tensor<4x4xf32>
// KERNEL-NEXT: %{{.*}}:2 = dtc.fused(%{{.*}}, %[[DY]]) {dtc.in_place = array<i64: 0, 1>
// KERNEL-NEXT: ^bb0
// KERNEL-NEXT: dtc.gelu_tanh
// KERNEL-NEXT: dtc.gelu_tanh_deriv
// KERNEL-NEXT: dtc.mul
//
// Without recomputation the derivative is made beside the forward's GELU.
// NONE:      dtc.fused(%{{.*}}) : (tensor<?x4xf32>) -> (tensor<?x4xf32>, tensor<?x4xf32>)
// NONE-NEXT: ^bb0
// NONE-NEXT: dtc.gelu_tanh
// NONE-NEXT: dtc.gelu_tanh_deriv
// NONE:      dtc.grad_seed
// NONE-NOT:  dtc.gelu_tanh_deriv

module {
  dtc.param @h0.h.weight : tensor<4x4xf32>
  dtc.param @h0.o.weight : tensor<4x4xf32>
  dtc.param @logits.weight : tensor<3x4xf32>
  func.func @train_step(%arg0: tensor<?x4xf32>, %arg1: tensor<?xi32>) -> tensor<f32> {
    %0 = dtc.constant {value = 1.000000e+00 : f32} : tensor<f32>
    %1 = dtc.param_ref @h0.h.weight : tensor<4x4xf32>
    %2 = dtc.matmul %arg0, %1 {dtc.block = "h0", transpose_rhs = true} : tensor<?x4xf32>, tensor<4x4xf32> -> tensor<?x4xf32>
    %3 = dtc.gelu_tanh %2 {dtc.block = "h0"} : tensor<?x4xf32>
    %4 = dtc.param_ref @h0.o.weight : tensor<4x4xf32>
    %5 = dtc.matmul %3, %4 {dtc.block = "h0", transpose_rhs = true} : tensor<?x4xf32>, tensor<4x4xf32> -> tensor<?x4xf32>
    %6 = dtc.add %arg0, %5 {dtc.block = "h0"} : tensor<?x4xf32>, tensor<?x4xf32> -> tensor<?x4xf32>
    %7 = dtc.tanh %6 {dtc.block = "h0"} : tensor<?x4xf32>
    %8 = dtc.param_ref @logits.weight : tensor<3x4xf32>
    %9 = dtc.matmul %7, %8 {transpose_rhs = true} : tensor<?x4xf32>, tensor<3x4xf32> -> tensor<?x3xf32>
    %10 = dtc.cross_entropy %9, %arg1 : tensor<?x3xf32>, tensor<?xi32> -> tensor<f32>
    %11 = dtc.grad_seed : tensor<f32>
    %12 = dtc.cross_entropy_grad %9, %arg1, %11 : (tensor<?x3xf32>, tensor<?xi32>, tensor<f32>) -> tensor<?x3xf32>
    %13 = dtc.matmul %12, %8 : tensor<?x3xf32>, tensor<3x4xf32> -> tensor<?x4xf32>
    %14 = dtc.matmul %12, %7 {transpose_lhs = true} : tensor<?x3xf32>, tensor<?x4xf32> -> tensor<3x4xf32>
    %15 = dtc.mul %7, %7 : tensor<?x4xf32>, tensor<?x4xf32> -> tensor<?x4xf32>
    %16 = dtc.sub %0, %15 : tensor<f32>, tensor<?x4xf32> -> tensor<?x4xf32>
    %17 = dtc.mul %13, %16 : tensor<?x4xf32>, tensor<?x4xf32> -> tensor<?x4xf32>
    %18 = dtc.matmul %17, %4 : tensor<?x4xf32>, tensor<4x4xf32> -> tensor<?x4xf32>
    %19 = dtc.matmul %17, %3 {transpose_lhs = true} : tensor<?x4xf32>, tensor<?x4xf32> -> tensor<4x4xf32>
    %20 = dtc.gelu_tanh_grad %2, %18 : tensor<?x4xf32>
    %21 = dtc.matmul %20, %arg0 {transpose_lhs = true} : tensor<?x4xf32>, tensor<?x4xf32> -> tensor<4x4xf32>
    dtc.apply_gradient @h0.h.weight, %21 : tensor<4x4xf32>
    dtc.apply_gradient @h0.o.weight, %19 : tensor<4x4xf32>
    dtc.apply_gradient @logits.weight, %14 : tensor<3x4xf32>
    return %10 : tensor<f32>
  }
}
