// RUN: dtc-opt %s --dtc-autodiff --split-input-file | FileCheck %s --enable-var-scope
// Reductions: sum spreads dy back (reshape to keep the axis, broadcast);
// mean also divides by the count, which over the batch dimension is the
// run-time dtc.batch_size; max routes dy to the first maximum.

// CHECK-LABEL: func.func @train_step
// CHECK: %[[W:.*]] = dtc.param_ref @w : tensor<3x4xf32>
// CHECK: %[[M:.*]] = dtc.reduce_max %[[W]] {axis = 1 : i64}
// CHECK: %[[N:.*]] = dtc.reduce_mean %[[M]] {axis = 0 : i64}
// CHECK: %[[C:.*]] = dtc.constant {value = 3.000000e+00 : f32}
// CHECK: %[[D:.*]] = dtc.div %{{.*}}, %[[C]]
// CHECK: %[[R:.*]] = dtc.reshape %[[D]] : tensor<f32> -> tensor<1xf32>
// CHECK: %[[DM:.*]] = dtc.broadcast_to %[[R]] : tensor<1xf32> -> tensor<3xf32>
// CHECK: %[[DW:.*]] = dtc.reduce_max_grad %[[W]], %[[M]], %[[DM]] {axis = 1 : i64}
// CHECK: dtc.apply_gradient @w, %[[DW]]
module {
  dtc.param @w : tensor<3x4xf32>
  func.func @forward(%in: tensor<?x4xf32>, %y: tensor<?xi32>) -> tensor<f32> {
    %w = dtc.param_ref @w : tensor<3x4xf32>
    %m = dtc.reduce_max %w {axis = 1 : i64} : tensor<3x4xf32> -> tensor<3xf32>
    %n = dtc.reduce_mean %m {axis = 0 : i64} : tensor<3xf32> -> tensor<f32>
    return %n : tensor<f32>
  }
}

// -----

// CHECK-LABEL: func.func @train_step
// CHECK: %[[BS:.*]] = dtc.batch_size : tensor<f32>
// CHECK: dtc.div %{{.*}}, %[[BS]]
// CHECK: dtc.broadcast_to %{{.*}} : tensor<1x4xf32> -> tensor<?x4xf32>
module {
  dtc.param @w : tensor<4xf32>
  func.func @forward(%in: tensor<?x4xf32>, %y: tensor<?xi32>) -> tensor<f32> {
    %w = dtc.param_ref @w : tensor<4xf32>
    %p = dtc.mul %in, %w : tensor<?x4xf32>, tensor<4xf32> -> tensor<?x4xf32>
    %m = dtc.reduce_mean %p {axis = 0 : i64} : tensor<?x4xf32> -> tensor<4xf32>
    %s = dtc.reduce_sum %m {axis = 0 : i64} : tensor<4xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}
