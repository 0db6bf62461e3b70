// RUN: dtc-opt %s --dtc-autodiff | FileCheck %s --enable-var-scope
// matmul gradients for every transpose combination: dop(A) = dC op(B)^T,
// dop(B) = op(A)^T dC, transposed back for operands stored transposed. The
// contraction over the batch dimension gives the weight gradient.

// CHECK-LABEL: func.func @train_step
// CHECK: %[[X:.*]] = dtc.param_ref @x : tensor<5x3xf32>
// CHECK: %[[W:.*]] = dtc.param_ref @w : tensor<4x3xf32>
// CHECK: %[[V:.*]] = dtc.param_ref @v : tensor<4x2xf32>
// CHECK: %[[H:.*]] = dtc.matmul %[[X]], %[[W]] {transpose_rhs = true}
// CHECK: %[[O:.*]] = dtc.matmul %[[H]], %[[V]] : tensor<5x4xf32>, tensor<4x2xf32> -> tensor<5x2xf32>
// CHECK: %[[DO:.*]] = dtc.broadcast_to %{{.*}} -> tensor<5x2xf32>
// CHECK: %[[DH:.*]] = dtc.matmul %[[DO]], %[[V]] {transpose_rhs = true} : tensor<5x2xf32>, tensor<4x2xf32> -> tensor<5x4xf32>
// CHECK: %[[DV:.*]] = dtc.matmul %[[H]], %[[DO]] {transpose_lhs = true} : tensor<5x4xf32>, tensor<5x2xf32> -> tensor<4x2xf32>
// CHECK: %[[DX:.*]] = dtc.matmul %[[DH]], %[[W]] : tensor<5x4xf32>, tensor<4x3xf32> -> tensor<5x3xf32>
// CHECK: %[[DW:.*]] = dtc.matmul %[[DH]], %[[X]] {transpose_lhs = true} : tensor<5x4xf32>, tensor<5x3xf32> -> tensor<4x3xf32>
// CHECK: dtc.apply_gradient @x, %[[DX]]
// CHECK: dtc.apply_gradient @w, %[[DW]]
// CHECK: dtc.apply_gradient @v, %[[DV]]
module {
  dtc.param @x : tensor<5x3xf32>
  dtc.param @w : tensor<4x3xf32>
  dtc.param @v : tensor<4x2xf32>
  func.func @forward(%in: tensor<?x4xf32>, %y: tensor<?xi32>) -> tensor<f32> {
    %x = dtc.param_ref @x : tensor<5x3xf32>
    %w = dtc.param_ref @w : tensor<4x3xf32>
    %v = dtc.param_ref @v : tensor<4x2xf32>
    %h = dtc.matmul %x, %w {transpose_rhs = true} : tensor<5x3xf32>, tensor<4x3xf32> -> tensor<5x4xf32>
    %o = dtc.matmul %h, %v : tensor<5x4xf32>, tensor<4x2xf32> -> tensor<5x2xf32>
    %r = dtc.reduce_sum %o {axis = 1 : i64} : tensor<5x2xf32> -> tensor<5xf32>
    %l = dtc.reduce_sum %r {axis = 0 : i64} : tensor<5xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
