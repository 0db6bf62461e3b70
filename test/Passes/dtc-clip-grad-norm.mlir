// RUN: dtc-opt %s --split-input-file --dtc-clip-grad-norm | FileCheck %s --enable-var-scope
// RUN: dtc-opt %s --split-input-file --dtc-clip-grad-norm --dtc-group-updates | FileCheck %s --check-prefix=GROUP
// With dtc.clip_grad_norm on the module, every gradient an update receives
// (after its bucket's all-reduce wait) goes into one dtc.sum_squares; the
// dtc.clip_coef made from it becomes each update's scale (`* %c`: the
// update multiplies the gradient as it reads it), and the updates move
// after the last wait, in the order of the parameters' declarations (torch's
// model.parameters()), whatever order the buckets left them in: the norm's
// float sum must not depend on the bucket caps or the overlap schedule.
// dtc-group-updates keeps the scale on the group. Without the attribute
// nothing changes.

// CHECK-LABEL: func.func @train_step
// CHECK: %[[W0:.*]]:2 = dtc.all_reduce_wait %{{.*}}, (%{{.*}}, %{{.*}}) {bucket = 0 : i64}
// CHECK-NOT: dtc.apply_gradient
// CHECK: %[[W1:.*]] = dtc.all_reduce_wait %{{.*}}, (%{{.*}}) {bucket = 1 : i64}
// CHECK-NEXT: %[[SQ:.*]] = dtc.sum_squares %[[W1]], %[[W0]]#1, %[[W0]]#0 : tensor<8x4xf32>, tensor<8xf32>, tensor<3x8xf32> -> tensor<f32>
// CHECK-NEXT: %[[C:.*]] = dtc.clip_coef %[[SQ]] : tensor<f32> -> tensor<f32>
// CHECK-NOT: dtc.mul
// CHECK-NEXT: dtc.apply_gradient @w1, %[[W1]] * %[[C]] : tensor<8x4xf32>{{$}}
// CHECK-NEXT: dtc.apply_gradient @b1, %[[W0]]#1 * %[[C]]
// CHECK-NEXT: dtc.apply_gradient @w2, %[[W0]]#0 * %[[C]]
// CHECK-NEXT: return
// GROUP-LABEL: func.func @train_step
// GROUP: %[[C:.*]] = dtc.clip_coef
// GROUP-NEXT: dtc.update_group [@w1, @b1, @w2](%{{.*}}, %{{.*}}, %{{.*}}) * %[[C]] : tensor<8x4xf32>, tensor<8xf32>, tensor<3x8xf32>{{$}}
// GROUP-NEXT: return
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
// CHECK: dtc.apply_gradient @w1, %{{.*}} : tensor<8x4xf32>{{$}}
// GROUP-LABEL: func.func @train_step
// GROUP-NEXT: dtc.update_group [@w1](%{{.*}}) : tensor<8x4xf32>{{$}}
module attributes {dtc.optimizer = #dtc.optimizer<adamw, lr = 0.01, weight_decay = 0.01>} {
  dtc.param @w1 : tensor<8x4xf32>
  func.func @train_step(%g: tensor<8x4xf32>) {
    dtc.apply_gradient @w1, %g : tensor<8x4xf32>
    return
  }
}
