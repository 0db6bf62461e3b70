// RUN: dtc-opt %s --dtc-derivatives-in-forward --split-input-file | FileCheck %s --enable-var-scope
// RUN: dtc-opt %s --dtc-derivatives-in-forward --dtc-fuse-elementwise --split-input-file | FileCheck %s --check-prefix=FUSED --enable-var-scope

// x serves only the GELU and its gradient: the derivative comes right after
// the GELU, the gradient becomes dy * d.
// CHECK-LABEL: func.func @tanh_form
// CHECK: %[[X:.*]] = dtc.add %arg0, %arg1
// CHECK-NEXT: %[[Y:.*]] = dtc.gelu_tanh %[[X]]
// CHECK-NEXT: %[[D:.*]] = dtc.gelu_tanh_deriv %[[X]] : tensor<?x8xf32>
// CHECK-NEXT: %[[S:.*]] = dtc.matmul %[[Y]], %arg3
// CHECK-NEXT: %[[G:.*]] = dtc.mul %arg2, %[[D]] : tensor<?x8xf32>, tensor<?x8xf32> -> tensor<?x8xf32>
// CHECK-NOT: gelu_tanh_grad
// CHECK: return %[[S]], %[[G]]
// With fusion, the derivative is a second output of the GELU's kernel; the
// backward's kernel only multiplies.
// FUSED-LABEL: func.func @tanh_form
// FUSED: %[[F:.*]]:2 = dtc.fused(%arg0, %arg1)
// FUSED:   dtc.add
// FUSED-NEXT: dtc.gelu_tanh
// FUSED-NEXT: dtc.gelu_tanh_deriv
// FUSED-NEXT: dtc.yield
// FUSED: dtc.matmul %[[F]]#0, %arg3
// FUSED-NEXT: dtc.fused(%arg2, %[[F]]#1)
// FUSED-NEXT: ^bb0
// FUSED-NEXT: dtc.mul
// FUSED-NEXT: dtc.yield
func.func @tanh_form(%a: tensor<?x8xf32>, %b: tensor<8xf32>, %dy: tensor<?x8xf32>, %w: tensor<4x8xf32>) -> (tensor<?x4xf32>, tensor<?x8xf32>) {
  %x = dtc.add %a, %b : tensor<?x8xf32>, tensor<8xf32> -> tensor<?x8xf32>
  %y = dtc.gelu_tanh %x : tensor<?x8xf32>
  %s = dtc.matmul %y, %w {transpose_rhs = true} : tensor<?x8xf32>, tensor<4x8xf32> -> tensor<?x4xf32>
  %g = dtc.gelu_tanh_grad %x, %dy : tensor<?x8xf32>
  return %s, %g : tensor<?x4xf32>, tensor<?x8xf32>
}

// -----

// The exact form too; two gradients of one x share one derivative.
// CHECK-LABEL: func.func @exact_form
// CHECK: %[[Y:.*]] = dtc.gelu %arg0
// CHECK-NEXT: %[[D:.*]] = dtc.gelu_deriv %arg0 : tensor<4xf32>
// CHECK: dtc.mul %arg1, %[[D]]
// CHECK: dtc.mul %arg2, %[[D]]
// CHECK-NOT: gelu_grad
func.func @exact_form(%x: tensor<4xf32>, %dy: tensor<4xf32>, %dz: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %y = dtc.gelu %x : tensor<4xf32>
  %g = dtc.gelu_grad %x, %dy : tensor<4xf32>
  %h = dtc.gelu_grad %x, %dz : tensor<4xf32>
  return %y, %g, %h : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// x also feeds another op (a residual): the step keeps x anyway, and the
// gradient stays as it is (the derivative would be a second tensor kept).
// CHECK-LABEL: func.func @input_used_elsewhere
// CHECK-NOT: gelu_tanh_deriv
// CHECK: dtc.gelu_tanh_grad %arg0, %arg1
func.func @input_used_elsewhere(%x: tensor<4xf32>, %dy: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %y = dtc.gelu_tanh %x : tensor<4xf32>
  %r = dtc.add %y, %x : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %g = dtc.gelu_tanh_grad %x, %dy : tensor<4xf32>
  return %r, %g : tensor<4xf32>, tensor<4xf32>
}

// -----

// A gradient without its forward (x an argument of a gradient-only step):
// nothing to put the derivative next to.
// CHECK-LABEL: func.func @no_forward
// CHECK: dtc.gelu_tanh_grad %arg0, %arg1
func.func @no_forward(%x: tensor<4xf32>, %dy: tensor<4xf32>) -> tensor<4xf32> {
  %g = dtc.gelu_tanh_grad %x, %dy : tensor<4xf32>
  return %g : tensor<4xf32>
}
