// RUN: dtc-opt %s --dtc-autodiff | FileCheck %s --enable-var-scope
// reshape's gradient reshapes back; transpose's uses the inverse permutation.

// CHECK-LABEL: func.func @train_step
// CHECK: %[[W:.*]] = dtc.param_ref @w : tensor<2x3x4xf32>
// CHECK: %[[T:.*]] = dtc.transpose %[[W]] {perm = array<i64: 1, 2, 0>} : tensor<2x3x4xf32> -> tensor<3x4x2xf32>
// CHECK: %[[R:.*]] = dtc.reshape %[[T]] : tensor<3x4x2xf32> -> tensor<24xf32>
// CHECK: %[[DR:.*]] = dtc.reshape %{{.*}} : tensor<24xf32> -> tensor<3x4x2xf32>
// CHECK: %[[DT:.*]] = dtc.transpose %[[DR]] {perm = array<i64: 2, 0, 1>} : tensor<3x4x2xf32> -> tensor<2x3x4xf32>
// CHECK: dtc.apply_gradient @w, %[[DT]]
module {
  dtc.param @w : tensor<2x3x4xf32>
  func.func @forward(%x: tensor<?x4xf32>, %y: tensor<?xi32>) -> tensor<f32> {
    %w = dtc.param_ref @w : tensor<2x3x4xf32>
    %t = dtc.transpose %w {perm = array<i64: 1, 2, 0>} : tensor<2x3x4xf32> -> tensor<3x4x2xf32>
    %r = dtc.reshape %t : tensor<3x4x2xf32> -> tensor<24xf32>
    %e = dtc.exp %r : tensor<24xf32>
    %s = dtc.reduce_sum %e {axis = 0 : i64} : tensor<24xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}
