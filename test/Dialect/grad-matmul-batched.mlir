// RUN: dtc-opt %s --dtc-autodiff | FileCheck %s --enable-var-scope
// Gradients of matmul over leading dimensions. Batched (both operands
// [B, 3, ...]): the 2-D formulas per leading index. A 2-D rhs broadcast over
// every row of a [B, 3, 4] lhs (nn.Linear on a 3-D input): dA per row, and
// dW summed over every row: one contraction (contract_batch), not a
// batched product.

// CHECK-LABEL: func.func @train_step
// CHECK: %[[W:.*]] = dtc.param_ref @w : tensor<5x4xf32>
// CHECK: %[[Y:.*]] = dtc.matmul %[[X:.*]], %[[W]] {transpose_rhs = true} : tensor<?x3x4xf32>, tensor<5x4xf32> -> tensor<?x3x5xf32>
// CHECK: %[[S:.*]] = dtc.matmul %[[Y]], %[[Y]] {transpose_rhs = true} : tensor<?x3x5xf32>, tensor<?x3x5xf32> -> tensor<?x3x3xf32>
// CHECK: %[[DS:.*]] = dtc.broadcast_to %{{.*}} -> tensor<?x3x3xf32>
// CHECK: %[[DY1:.*]] = dtc.matmul %[[DS]], %[[Y]] : tensor<?x3x3xf32>, tensor<?x3x5xf32> -> tensor<?x3x5xf32>
// CHECK: %[[DY2:.*]] = dtc.matmul %[[DS]], %[[Y]] {transpose_lhs = true} : tensor<?x3x3xf32>, tensor<?x3x5xf32> -> tensor<?x3x5xf32>
// CHECK: %[[DY:.*]] = dtc.add
// CHECK: dtc.matmul %[[DY]], %[[W]] : tensor<?x3x5xf32>, tensor<5x4xf32> -> tensor<?x3x4xf32>
// CHECK: %[[DW:.*]] = dtc.matmul %[[DY]], %[[X]] {contract_batch, transpose_lhs = true} : tensor<?x3x5xf32>, tensor<?x3x4xf32> -> tensor<5x4xf32>
// CHECK: dtc.apply_gradient @w, %[[DW]]
module {
  dtc.param @w : tensor<5x4xf32>
  func.func @forward(%x: tensor<?x3x4xf32>, %l: tensor<?xi32>) -> tensor<f32> {
    %w = dtc.param_ref @w : tensor<5x4xf32>
    %y = dtc.matmul %x, %w {transpose_rhs = true} : tensor<?x3x4xf32>, tensor<5x4xf32> -> tensor<?x3x5xf32>
    %s = dtc.matmul %y, %y {transpose_rhs = true} : tensor<?x3x5xf32>, tensor<?x3x5xf32> -> tensor<?x3x3xf32>
    %r = dtc.reduce_sum %s {axis = 2 : i64} : tensor<?x3x3xf32> -> tensor<?x3xf32>
    %q = dtc.reduce_sum %r {axis = 1 : i64} : tensor<?x3xf32> -> tensor<?xf32>
    %t = dtc.reduce_sum %q {axis = 0 : i64} : tensor<?xf32> -> tensor<f32>
    return %t : tensor<f32>
  }
}
