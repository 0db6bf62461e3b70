// RUN: dtc-opt %s --dtc-group-updates | FileCheck %s
// Each run of consecutive updates becomes one dtc.update_group (one optimizer
// call); a run ends at any other op, and where folded momentum starts or stops.

module attributes {dtc.optimizer = #dtc.optimizer<sgd, lr = 0.1, weight_decay = 0.0, momentum = 0.9>} {
  dtc.param @a : tensor<4xf32>
  dtc.param @b : tensor<2xf32>
  dtc.param @c : tensor<3xf32>
  dtc.param @d : tensor<3xf32>
  // CHECK-LABEL: func.func @train_step
  func.func @train_step(%ga: tensor<4xf32>, %gb: tensor<2xf32>, %gc: tensor<3xf32>, %gd: tensor<3xf32>) {
    // CHECK: dtc.update_group [@a, @b](%arg0, %arg1) : tensor<4xf32>, tensor<2xf32>
    // CHECK-NOT: momentum_folded
    dtc.apply_gradient @a, %ga : tensor<4xf32>
    dtc.apply_gradient @b, %gb : tensor<2xf32>
    // CHECK-NEXT: dtc.all_reduce_bucket
    %s:2 = dtc.all_reduce_bucket(%gc, %gd) {bucket = 0 : i64, dtc.bucket_plan = #dtc.bucket_plan<offset = 0, count = 8, momentum_offset = 64>} : (tensor<3xf32>, tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>)
    // A folded bucket's updates, then an unfolded one: two groups.
    // CHECK-NEXT: dtc.update_group [@c, @d](%{{.*}}#0, %{{.*}}#1) {momentum_folded} : tensor<3xf32>, tensor<3xf32>
    // CHECK-NEXT: dtc.update_group [@a](%arg0) : tensor<4xf32>
    // CHECK-NOT: dtc.apply_gradient
    dtc.apply_gradient @c, %s#0 : tensor<3xf32>
    dtc.apply_gradient @d, %s#1 : tensor<3xf32>
    dtc.apply_gradient @a, %ga : tensor<4xf32>
    return
  }
}
