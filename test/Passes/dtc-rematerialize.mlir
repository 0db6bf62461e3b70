// RUN: dtc-opt %s --dtc-rematerialize=policy=blocks | FileCheck %s --check-prefix=BLOCKS
// RUN: dtc-opt %s --dtc-rematerialize=policy=selective | FileCheck %s --check-prefix=SELECTIVE
// RUN: dtc-opt %s --dtc-rematerialize | FileCheck %s --check-prefix=NONE
// RUN: not dtc-opt %s --dtc-rematerialize=policy=all 2>&1 | FileCheck %s --check-prefix=BAD
//
// A block instance h0 (linear, tanh, linear; dtc.block from the front end)
// and a head outside it, after dtc-autodiff: backward reads the tanh %2
// (the gradient of h0.p's weight, and the tanh's own derivative).

// blocks (torch.utils.checkpoint): h0 keeps its input (%arg0) and its
// result (%4, read by the head in forward); the tanh it gave up is made
// again, with the matmul it needs, right before backward's first read of
// it, and backward reads the clone.
// BLOCKS:      %[[H:.*]] = dtc.matmul %arg0, %[[W:.*]] {dtc.block = "h0", transpose_rhs = true}
// BLOCKS-NEXT: %[[A:.*]] = dtc.tanh %[[H]] {dtc.block = "h0"}
// BLOCKS:      dtc.grad_seed
// BLOCKS:      %[[D:.*]] = dtc.matmul %{{.*}}, %[[P:.*]] : tensor<?x4xf32>, tensor<4x4xf32> -> tensor<?x4xf32>
// BLOCKS-NEXT: %[[H2:.*]] = dtc.matmul %arg0, %[[W]] {dtc.block = "h0", transpose_rhs = true}
// BLOCKS-NEXT: %[[A2:.*]] = dtc.tanh %[[H2]] {dtc.block = "h0"}
// BLOCKS-NEXT: dtc.matmul %{{.*}}, %[[A2]] {transpose_lhs = true}
// BLOCKS-NEXT: dtc.mul %[[A2]], %[[A2]]
// BLOCKS-NOT:  %[[A]]{{[^0-9]}}

// selective (the min-cut partitioner, dtc-rematerialize-selective.mlir):
// the tanh stays in forward, its result kept: recomputing it would keep
// the matmul's result instead, the same bytes, and repeat work.
// SELECTIVE:     dtc.grad_seed
// SELECTIVE-NOT: dtc.tanh

// NONE:     dtc.grad_seed
// NONE-NOT: dtc.tanh

// BAD: error: dtc-rematerialize: unknown policy 'all' (expected none, blocks, selective)

module {
  dtc.param @h0.h.weight : tensor<4x4xf32>
  dtc.param @h0.p.weight : tensor<4x4xf32>
  dtc.param @out.weight : tensor<3x4xf32>
  func.func @train_step(%arg0: tensor<?x4xf32>, %arg1: tensor<?xi32>) -> tensor<f32> {
    %0 = dtc.param_ref @h0.h.weight : tensor<4x4xf32>
    %1 = dtc.matmul %arg0, %0 {dtc.block = "h0", transpose_rhs = true} : tensor<?x4xf32>, tensor<4x4xf32> -> tensor<?x4xf32>
    %2 = dtc.tanh %1 {dtc.block = "h0"} : tensor<?x4xf32>
    %3 = dtc.param_ref @h0.p.weight : tensor<4x4xf32>
    %4 = dtc.matmul %2, %3 {dtc.block = "h0", transpose_rhs = true} : tensor<?x4xf32>, tensor<4x4xf32> -> tensor<?x4xf32>
    %5 = dtc.param_ref @out.weight : tensor<3x4xf32>
    %6 = dtc.matmul %4, %5 {transpose_rhs = true} : tensor<?x4xf32>, tensor<3x4xf32> -> tensor<?x3xf32>
    %7 = dtc.cross_entropy %6, %arg1 : tensor<?x3xf32>, tensor<?xi32> -> tensor<f32>
    %8 = dtc.grad_seed : tensor<f32>
    %9 = dtc.cross_entropy_grad %6, %arg1, %8 : (tensor<?x3xf32>, tensor<?xi32>, tensor<f32>) -> tensor<?x3xf32>
    %10 = dtc.matmul %9, %5 : tensor<?x3xf32>, tensor<3x4xf32> -> tensor<?x4xf32>
    %11 = dtc.matmul %9, %4 {transpose_lhs = true} : tensor<?x3xf32>, tensor<?x4xf32> -> tensor<3x4xf32>
    %12 = dtc.matmul %10, %3 : tensor<?x4xf32>, tensor<4x4xf32> -> tensor<?x4xf32>
    %13 = dtc.matmul %10, %2 {transpose_lhs = true} : tensor<?x4xf32>, tensor<?x4xf32> -> tensor<4x4xf32>
    %14 = dtc.mul %2, %2 : tensor<?x4xf32>, tensor<?x4xf32> -> tensor<?x4xf32>
    %15 = dtc.constant {value = 1.000000e+00 : f32} : tensor<f32>
    %16 = dtc.sub %15, %14 : tensor<f32>, tensor<?x4xf32> -> tensor<?x4xf32>
    %17 = dtc.mul %12, %16 : tensor<?x4xf32>, tensor<?x4xf32> -> tensor<?x4xf32>
    %18 = dtc.matmul %17, %arg0 {transpose_lhs = true} : tensor<?x4xf32>, tensor<?x4xf32> -> tensor<4x4xf32>
    dtc.apply_gradient @h0.h.weight, %18 : tensor<4x4xf32>
    dtc.apply_gradient @h0.p.weight, %13 : tensor<4x4xf32>
    dtc.apply_gradient @out.weight, %11 : tensor<3x4xf32>
    return %7 : tensor<f32>
  }
}
