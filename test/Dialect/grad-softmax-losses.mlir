// RUN: dtc-opt %s --dtc-autodiff --split-input-file | FileCheck %s --enable-var-scope
// softmax / log_softmax gradients from their results; the losses' gradients
// take the incoming dloss; labels get none; metrics are not differentiated.

// CHECK-LABEL: func.func @train_step
// CHECK: %[[W:.*]] = dtc.param_ref @w : tensor<2x5xf32>
// CHECK: %[[S:.*]] = dtc.softmax %[[W]] {axis = 1 : i64}
// CHECK: %[[L:.*]] = dtc.log_softmax %[[S]] {axis = 0 : i64}
// CHECK: %[[DL:.*]] = dtc.log_softmax_grad %[[L]], %{{.*}} {axis = 0 : i64}
// CHECK: %[[DS:.*]] = dtc.softmax_grad %[[S]], %[[DL]] {axis = 1 : i64}
// CHECK: dtc.apply_gradient @w, %[[DS]]
module {
  dtc.param @w : tensor<2x5xf32>
  func.func @forward(%in: tensor<?x4xf32>, %y: tensor<?xi32>) -> tensor<f32> {
    %w = dtc.param_ref @w : tensor<2x5xf32>
    %s = dtc.softmax %w {axis = 1 : i64} : tensor<2x5xf32>
    %l = dtc.log_softmax %s {axis = 0 : i64} : tensor<2x5xf32>
    %r = dtc.reduce_sum %l {axis = 1 : i64} : tensor<2x5xf32> -> tensor<2xf32>
    %t = dtc.reduce_sum %r {axis = 0 : i64} : tensor<2xf32> -> tensor<f32>
    return %t : tensor<f32>
  }
}

// -----

// CHECK-LABEL: func.func @train_step
// CHECK: %[[LOGITS:.*]] = dtc.matmul
// CHECK: %[[CE:.*]] = dtc.cross_entropy %[[LOGITS]], %arg1
// CHECK: %[[ACC:.*]] = dtc.accuracy %[[LOGITS]], %arg1
// CHECK: %[[SEED:.*]] = dtc.grad_seed : tensor<f32>
// CHECK: %[[DL:.*]] = dtc.cross_entropy_grad %[[LOGITS]], %arg1, %[[SEED]]
// CHECK-NOT: dtc.accuracy
// CHECK: dtc.apply_gradient @w
// CHECK: return %[[CE]], %[[ACC]]
module {
  dtc.param @w : tensor<3x4xf32>
  func.func @forward(%x: tensor<?x4xf32>, %y: tensor<?xi32>) -> (tensor<f32>, tensor<f32>) {
    %w = dtc.param_ref @w : tensor<3x4xf32>
    %l = dtc.matmul %x, %w {transpose_rhs = true} : tensor<?x4xf32>, tensor<3x4xf32> -> tensor<?x3xf32>
    %ce = dtc.cross_entropy %l, %y : tensor<?x3xf32>, tensor<?xi32> -> tensor<f32>
    %acc = dtc.accuracy %l, %y : tensor<?x3xf32>, tensor<?xi32> -> tensor<f32>
    return %ce, %acc : tensor<f32>, tensor<f32>
  }
}

// -----

// CHECK-LABEL: func.func @train_step
// CHECK: %[[P:.*]] = dtc.matmul
// CHECK: %[[L:.*]] = dtc.mse %[[P]], %arg1
// CHECK: %[[DP:.*]] = dtc.mse_grad %[[P]], %arg1, %{{.*}} : (tensor<?x2xf32>, tensor<?x2xf32>, tensor<f32>) -> tensor<?x2xf32>
// CHECK: dtc.matmul %[[DP]], %arg0 {transpose_lhs = true}
module {
  dtc.param @w : tensor<2x4xf32>
  func.func @forward(%x: tensor<?x4xf32>, %y: tensor<?x2xf32>) -> tensor<f32> {
    %w = dtc.param_ref @w : tensor<2x4xf32>
    %p = dtc.matmul %x, %w {transpose_rhs = true} : tensor<?x4xf32>, tensor<2x4xf32> -> tensor<?x2xf32>
    %l = dtc.mse %p, %y : tensor<?x2xf32>, tensor<?x2xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
