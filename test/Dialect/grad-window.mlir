// RUN: dtc-opt %s --dtc-autodiff --canonicalize | FileCheck %s --enable-var-scope
// Gradients of conv2d (input and weight, with the op's attributes), of max
// pooling (from the input) and of average pooling (from dy alone). The
// input's gradient (a step argument) is dropped as dead code.

// CHECK-LABEL: func.func @train_step
// CHECK: %[[W:.*]] = dtc.param_ref @w : tensor<4x1x3x3xf32>
// CHECK: %[[C:.*]] = dtc.conv2d %arg0, %[[W]] {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>}
// CHECK: %[[M:.*]] = dtc.max_pool2d %[[C]]
// CHECK: %[[A:.*]] = dtc.avg_pool2d %[[M]]
// CHECK: %[[DA:.*]] = dtc.avg_pool2d_grad %{{.*}} {count_include_pad = true, kernel = array<i64: 2, 2>, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : tensor<?x4x4x4xf32> -> tensor<?x4x3x3xf32>
// CHECK: %[[DM:.*]] = dtc.max_pool2d_grad %[[C]], %[[DA]] {{.*}} : tensor<?x4x6x6xf32>, tensor<?x4x3x3xf32> -> tensor<?x4x6x6xf32>
// CHECK-NOT: dtc.conv2d_grad_input
// CHECK: %[[DW:.*]] = dtc.conv2d_grad_weight %arg0, %[[DM]] {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : tensor<?x1x6x6xf32>, tensor<?x4x6x6xf32> -> tensor<4x1x3x3xf32>
// CHECK: dtc.apply_gradient @w, %[[DW]]
module {
  dtc.param @w : tensor<4x1x3x3xf32>
  func.func @forward(%x: tensor<?x1x6x6xf32>, %y: tensor<?xi32>) -> tensor<f32> {
    %w = dtc.param_ref @w : tensor<4x1x3x3xf32>
    %c = dtc.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<?x1x6x6xf32>, tensor<4x1x3x3xf32> -> tensor<?x4x6x6xf32>
    %m = dtc.max_pool2d %c {kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>} : tensor<?x4x6x6xf32> -> tensor<?x4x3x3xf32>
    %a = dtc.avg_pool2d %m {kernel = array<i64: 2, 2>, stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, count_include_pad = true} : tensor<?x4x3x3xf32> -> tensor<?x4x4x4xf32>
    %r = dtc.reshape %a : tensor<?x4x4x4xf32> -> tensor<?x64xf32>
    %s = dtc.reduce_sum %r {axis = 1 : i64} : tensor<?x64xf32> -> tensor<?xf32>
    %t = dtc.reduce_mean %s {axis = 0 : i64} : tensor<?xf32> -> tensor<f32>
    return %t : tensor<f32>
  }
}
