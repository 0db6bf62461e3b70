// RUN: dtc-opt %s | dtc-opt | FileCheck %s
// conv2d, max_pool2d, avg_pool2d and their gradients print and parse back.

// CHECK-LABEL: func.func @window_ops
// CHECK: dtc.conv2d %{{.*}}, %{{.*}} {dilation = array<i64: 1, 2>, groups = 2 : i64, padding = array<i64: 1, 0>, stride = array<i64: 2, 1>} : tensor<?x4x9x8xf32>, tensor<6x2x3x3xf32> -> tensor<?x6x5x4xf32>
// CHECK: dtc.conv2d_grad_input %{{.*}}, %{{.*}} {{.*}} : tensor<?x6x5x4xf32>, tensor<6x2x3x3xf32> -> tensor<?x4x9x8xf32>
// CHECK: dtc.conv2d_grad_weight %{{.*}}, %{{.*}} {{.*}} : tensor<?x4x9x8xf32>, tensor<?x6x5x4xf32> -> tensor<6x2x3x3xf32>
// CHECK: dtc.max_pool2d %{{.*}} {kernel = array<i64: 3, 3>, padding = array<i64: 1, 1>, stride = array<i64: 2, 2>} : tensor<?x4x9x8xf32> -> tensor<?x4x5x4xf32>
// CHECK: dtc.max_pool2d_grad
// CHECK: dtc.avg_pool2d %{{.*}} {count_include_pad = false, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0>, stride = array<i64: 2, 2>} : tensor<?x4x9x8xf32> -> tensor<?x4x4x4xf32>
// CHECK: dtc.avg_pool2d_grad
func.func @window_ops(%x: tensor<?x4x9x8xf32>, %w: tensor<6x2x3x3xf32>) {
  %y = dtc.conv2d %x, %w {stride = array<i64: 2, 1>, padding = array<i64: 1, 0>, dilation = array<i64: 1, 2>, groups = 2 : i64} : tensor<?x4x9x8xf32>, tensor<6x2x3x3xf32> -> tensor<?x6x5x4xf32>
  %dx = dtc.conv2d_grad_input %y, %w {stride = array<i64: 2, 1>, padding = array<i64: 1, 0>, dilation = array<i64: 1, 2>, groups = 2 : i64} : tensor<?x6x5x4xf32>, tensor<6x2x3x3xf32> -> tensor<?x4x9x8xf32>
  %dw = dtc.conv2d_grad_weight %x, %y {stride = array<i64: 2, 1>, padding = array<i64: 1, 0>, dilation = array<i64: 1, 2>, groups = 2 : i64} : tensor<?x4x9x8xf32>, tensor<?x6x5x4xf32> -> tensor<6x2x3x3xf32>
  %m = dtc.max_pool2d %x {kernel = array<i64: 3, 3>, stride = array<i64: 2, 2>, padding = array<i64: 1, 1>} : tensor<?x4x9x8xf32> -> tensor<?x4x5x4xf32>
  %dm = dtc.max_pool2d_grad %x, %m {kernel = array<i64: 3, 3>, stride = array<i64: 2, 2>, padding = array<i64: 1, 1>} : tensor<?x4x9x8xf32>, tensor<?x4x5x4xf32> -> tensor<?x4x9x8xf32>
  %a = dtc.avg_pool2d %x {kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, count_include_pad = false} : tensor<?x4x9x8xf32> -> tensor<?x4x4x4xf32>
  %da = dtc.avg_pool2d_grad %a {kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, count_include_pad = false} : tensor<?x4x4x4xf32> -> tensor<?x4x9x8xf32>
  return
}
