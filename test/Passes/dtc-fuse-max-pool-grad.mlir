// RUN: dtc-opt %s --dtc-fuse-max-pool-grad | FileCheck %s
// RUN: dtc-opt %s --dtc-fuse-max-pool-grad | dtc-opt | FileCheck %s
// A max_pool2d_grad of a batch norm's ReLU result that feeds only that
// batch norm's gradient goes into it: the batch_norm_grad takes the pooled
// gradient and the window (printed `dy <type>` after the types). The
// second RUN parses the printed form back.

// CHECK-LABEL: func.func @fused
// CHECK-NOT: dtc.max_pool2d_grad
// CHECK: %{{.*}}, %{{.*}}, %{{.*}} = dtc.batch_norm_grad %arg0, %arg2, %arg3, %arg4, %arg5 relu(%arg1 : tensor<?x4x6x6xf32>) {eps = 1.000000e-05 : f64, pool_kernel = array<i64: 2, 2>, pool_padding = array<i64: 0, 0>, pool_stride = array<i64: 2, 2>} : tensor<?x4x6x6xf32>, tensor<4xf32>, dy tensor<?x4x3x3xf32>
// CHECK-NOT: dtc.max_pool2d_grad
func.func @fused(%x: tensor<?x4x6x6xf32>, %r: tensor<?x4x6x6xf32>, %dp: tensor<?x4x3x3xf32>,
                 %m: tensor<4xf32>, %v: tensor<4xf32>, %w: tensor<4xf32>) -> (tensor<?x4x6x6xf32>, tensor<4xf32>, tensor<4xf32>) {
  %dy = dtc.max_pool2d_grad %r, %dp {kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>} : tensor<?x4x6x6xf32>, tensor<?x4x3x3xf32> -> tensor<?x4x6x6xf32>
  %dx, %dw, %db = dtc.batch_norm_grad %x, %dy, %m, %v, %w relu(%r : tensor<?x4x6x6xf32>) {eps = 1.0e-05 : f64} : tensor<?x4x6x6xf32>, tensor<4xf32>
  return %dx, %dw, %db : tensor<?x4x6x6xf32>, tensor<4xf32>, tensor<4xf32>
}

// Overlapping, padded windows too (the kernel routes a plane at a time).
// CHECK-LABEL: func.func @overlapping
// CHECK-NOT: dtc.max_pool2d_grad
// CHECK: dtc.batch_norm_grad {{.*}} pool_kernel = array<i64: 3, 3>, pool_padding = array<i64: 1, 1>, pool_stride = array<i64: 2, 2>} : tensor<?x4x6x6xf32>, tensor<4xf32>, dy tensor<?x4x3x3xf32>
func.func @overlapping(%x: tensor<?x4x6x6xf32>, %r: tensor<?x4x6x6xf32>, %dp: tensor<?x4x3x3xf32>,
                       %m: tensor<4xf32>, %v: tensor<4xf32>, %w: tensor<4xf32>) -> tensor<?x4x6x6xf32> {
  %dy = dtc.max_pool2d_grad %r, %dp {kernel = array<i64: 3, 3>, stride = array<i64: 2, 2>, padding = array<i64: 1, 1>} : tensor<?x4x6x6xf32>, tensor<?x4x3x3xf32> -> tensor<?x4x6x6xf32>
  %dx, %dw, %db = dtc.batch_norm_grad %x, %dy, %m, %v, %w relu(%r : tensor<?x4x6x6xf32>) {eps = 1.0e-05 : f64} : tensor<?x4x6x6xf32>, tensor<4xf32>
  return %dx : tensor<?x4x6x6xf32>
}

// Blocked tensors (dtc-blocked-layout) too.
// CHECK-LABEL: func.func @blocked
// CHECK-NOT: dtc.max_pool2d_grad
// CHECK: dtc.batch_norm_grad {{.*}} pool_kernel = array<i64: 2, 2>, {{.*}} : tensor<?x1x6x6x16xf32>, tensor<16xf32>, dy tensor<?x1x3x3x16xf32>
func.func @blocked(%x: tensor<?x1x6x6x16xf32>, %r: tensor<?x1x6x6x16xf32>, %dp: tensor<?x1x3x3x16xf32>,
                   %m: tensor<16xf32>, %v: tensor<16xf32>, %w: tensor<16xf32>) -> tensor<?x1x6x6x16xf32> {
  %dy = dtc.max_pool2d_grad %r, %dp {kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>} : tensor<?x1x6x6x16xf32>, tensor<?x1x3x3x16xf32> -> tensor<?x1x6x6x16xf32>
  %dx, %dw, %db = dtc.batch_norm_grad %x, %dy, %m, %v, %w relu(%r : tensor<?x1x6x6x16xf32>) {eps = 1.0e-05 : f64} : tensor<?x1x6x6x16xf32>, tensor<16xf32>
  return %dx : tensor<?x1x6x6x16xf32>
}

// Not fused: dy has another use; the pooling's input is not the ReLU's
// result; no ReLU; channels last.
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-4: dtc.max_pool2d_grad
// CHECK-NOT: pool_kernel
// CHECK: return
func.func @kept(%x: tensor<?x4x6x6xf32>, %r: tensor<?x4x6x6xf32>, %dp: tensor<?x4x3x3xf32>,
                %m: tensor<4xf32>, %v: tensor<4xf32>, %w: tensor<4xf32>,
                %xl: tensor<?x6x6x4xf32>, %dpl: tensor<?x3x3x4xf32>) -> (tensor<?x4x6x6xf32>, tensor<?x4x6x6xf32>, tensor<?x4x6x6xf32>, tensor<?x4x6x6xf32>, tensor<?x6x6x4xf32>) {
  %dy1 = dtc.max_pool2d_grad %r, %dp {kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>} : tensor<?x4x6x6xf32>, tensor<?x4x3x3xf32> -> tensor<?x4x6x6xf32>
  %dx1, %dw1, %db1 = dtc.batch_norm_grad %x, %dy1, %m, %v, %w relu(%r : tensor<?x4x6x6xf32>) {eps = 1.0e-05 : f64} : tensor<?x4x6x6xf32>, tensor<4xf32>
  %dy2 = dtc.max_pool2d_grad %x, %dp {kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>} : tensor<?x4x6x6xf32>, tensor<?x4x3x3xf32> -> tensor<?x4x6x6xf32>
  %dx2, %dw2, %db2 = dtc.batch_norm_grad %x, %dy2, %m, %v, %w relu(%r : tensor<?x4x6x6xf32>) {eps = 1.0e-05 : f64} : tensor<?x4x6x6xf32>, tensor<4xf32>
  %dy3 = dtc.max_pool2d_grad %r, %dp {kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>} : tensor<?x4x6x6xf32>, tensor<?x4x3x3xf32> -> tensor<?x4x6x6xf32>
  %dx3, %dw3, %db3 = dtc.batch_norm_grad %x, %dy3, %m, %v, %w {eps = 1.0e-05 : f64} : tensor<?x4x6x6xf32>, tensor<4xf32>
  %dy4 = dtc.max_pool2d_grad %xl, %dpl {channels_last, kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>} : tensor<?x6x6x4xf32>, tensor<?x3x3x4xf32> -> tensor<?x6x6x4xf32>
  %dx4, %dw4, %db4 = dtc.batch_norm_grad %xl, %dy4, %m, %v, %w relu(%xl : tensor<?x6x6x4xf32>) {channels_last, eps = 1.0e-05 : f64} : tensor<?x6x6x4xf32>, tensor<4xf32>
  return %dy1, %dx1, %dx2, %dx3, %dx4 : tensor<?x4x6x6xf32>, tensor<?x4x6x6xf32>, tensor<?x4x6x6xf32>, tensor<?x4x6x6xf32>, tensor<?x6x6x4xf32>
}
