// RUN: dtc-opt %s --split-input-file --dtc-clip-grad-norm | FileCheck %s --enable-var-scope
// With dtc.clip_grad_norm on the module, every gradient an update receives
// (after its bucket's all-reduce wait) goes into one dtc.sum_squares; each
// is scaled by the dtc.clip_coef made from it, and the updates move after
// the last wait, in their order. Without the attribute nothing changes.

// CHECK-LABEL: func.func @train_step
// CHECK: %[[W0:.*]]:2 = dtc.all_reduce_wait %{{.*}}, (%{{.*}}, %{{.*}}) {bucket = 0 : i64}
// CHECK-NOT: dtc.apply_gradient
// CHECK: %[[W1:.*]] = dtc.all_reduce_wait %{{.*}}, (%{{.*}}) {bucket = 1 : i64}
// CHECK-NEXT: %[[SQ:.*]] = dtc.sum_squares %[[W0]]#0, %[[W0]]#1, %[[W1]] : tensor<3x8xf32>, tensor<8xf32>, tensor<8x4xf32> -> tensor<f32>
// CHECK-NEXT: %[[C:.*]] = dtc.clip_coef %[[SQ]] : tensor<f32> -> tensor<f32>
// CHECK-NEXT: %[[G0:.*]] = dtc.mul %[[W0]]#0, %[[C]] : tensor<3x8xf32>, tensor<f32> -> tensor<3x8xf32>
// CHECK-NEXT: %[[G1:.*]] = dtc.mul %[[W0]]#1, %[[C]]
// CHECK-NEXT: %[[G2:.*]] = dtc.mul %[[W1]], %[[C]]
// CHECK-NEXT: dtc.apply_gradient @w2, %[[G0]]
// CHECK-NEXT: dtc.apply_gradient @b1, %[[G1]]
// CHECK-NEXT: dtc.apply_gradient @w1, %[[G2]]
// CHECK-NEXT: return
module attributes {dtc.clip_grad_norm = 1.0 : f64, dtc.optimizer = #dtc.optimizer<adamw, lr = 0.01, weight_decay = 0.01>} {
  dtc.param @w1 : tensor<8x4xf32>
  dtc.param @b1 : tensor<8xf32>
  dtc.param @w2 : tensor<3x8xf32>
  func.func @train_step(%g11: tensor<3x8xf32>, %g15: tensor<8xf32>, %g16: tensor<8x4xf32>) {
    %s0 = dtc.all_reduce_start(%g11, %g15) {bucket = 0 : i64} : tensor<3x8xf32>, tensor<8xf32>
    %s1 = dtc.all_reduce_start(%g16) {bucket = 1 : i64} : tensor<8x4xf32>
    %w0:2 = dtc.all_reduce_wait %s0, (%g11, %g15) {bucket = 0 : i64} : (tensor<3x8xf32>, tensor<8xf32>) -> (tensor<3x8xf32>, tensor<8xf32>)
    dtc.apply_gradient @w2, %w0#0 : tensor<3x8xf32>
    dtc.apply_gradient @b1, %w0#1 : tensor<8xf32>
    %w1 = dtc.all_reduce_wait %s1, (%g16) {bucket = 1 : i64} : (tensor<8x4xf32>) -> tensor<8x4xf32>
    dtc.apply_gradient @w1, %w1 : tensor<8x4xf32>
    return
  }
}

// -----

// CHECK-LABEL: func.func @train_step
// CHECK-NOT: dtc.sum_squares
// CHECK-NOT: dtc.clip_coef
module attributes {dtc.optimizer = #dtc.optimizer<adamw, lr = 0.01, weight_decay = 0.01>} {
  dtc.param @w1 : tensor<8x4xf32>
  func.func @train_step(%g: tensor<8x4xf32>) {
    dtc.apply_gradient @w1, %g : tensor<8x4xf32>
    return
  }
}
