// RUN: dtc-opt %s --dtc-fuse-max-pool-grad | FileCheck %s
// RUN: not dtc-opt %s --dtc-verify-backend-contract 2>&1 | FileCheck %s --check-prefix=CONTRACT
// The fused kernel is the CPU's: in a module for CUDA (its dtc.target)
// the pass leaves the pair as it is.

// CHECK: dtc.target = #dtc.target<cuda>
// CHECK-LABEL: func.func @kept
// CHECK: dtc.max_pool2d_grad
// CHECK: dtc.batch_norm_grad %arg0, %{{.*}}, %arg3, %arg4, %arg5 relu(%arg1
// CHECK-NOT: pool_kernel
// CHECK-LABEL: func.func @fused_by_hand
module attributes {dtc.target = #dtc.target<cuda>} {
func.func @kept(%x: tensor<?x4x6x6xf32>, %r: tensor<?x4x6x6xf32>, %dp: tensor<?x4x3x3xf32>,
                 %m: tensor<4xf32>, %v: tensor<4xf32>, %w: tensor<4xf32>) -> (tensor<?x4x6x6xf32>, tensor<4xf32>, tensor<4xf32>) {
  %dy = dtc.max_pool2d_grad %r, %dp {kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>} : tensor<?x4x6x6xf32>, tensor<?x4x3x3xf32> -> tensor<?x4x6x6xf32>
  %dx, %dw, %db = dtc.batch_norm_grad %x, %dy, %m, %v, %w relu(%r : tensor<?x4x6x6xf32>) {eps = 1.0e-05 : f64} : tensor<?x4x6x6xf32>, tensor<4xf32>
  return %dx, %dw, %db : tensor<?x4x6x6xf32>, tensor<4xf32>, tensor<4xf32>
}

// The backend contract owns the target's rules: the fused op, written by
// hand into a CUDA module, is refused where it stands (one diagnostic per
// rule, at the first op that breaks it).
// CONTRACT: dtc-fuse-max-pool-grad-cuda.mlir:[[@LINE+3]]:{{[0-9]+}}: error: backend contract: the CUDA kernels have no fused max-pool and batch-norm gradient
func.func @fused_by_hand(%x: tensor<?x4x6x6xf32>, %r: tensor<?x4x6x6xf32>, %dp: tensor<?x4x3x3xf32>,
                 %m: tensor<4xf32>, %v: tensor<4xf32>, %w: tensor<4xf32>) -> (tensor<?x4x6x6xf32>, tensor<4xf32>, tensor<4xf32>) {
  %dx, %dw, %db = dtc.batch_norm_grad %x, %dp, %m, %v, %w relu(%r : tensor<?x4x6x6xf32>) {eps = 1.0e-05 : f64, pool_kernel = array<i64: 2, 2>, pool_padding = array<i64: 0, 0>, pool_stride = array<i64: 2, 2>} : tensor<?x4x6x6xf32>, tensor<4xf32>, dy tensor<?x4x3x3xf32>
  return %dx, %dw, %db : tensor<?x4x6x6xf32>, tensor<4xf32>, tensor<4xf32>
}
}
