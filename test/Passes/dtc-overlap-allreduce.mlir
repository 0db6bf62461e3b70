// RUN: dtc-opt %s --dtc-overlap-allreduce | FileCheck %s --enable-var-scope
// Each bucket's all-reduce starts right after its last gradient is produced
// (bucket 0 while backward still computes @w1's gradient); waits go after
// all computation, in bucket order, each followed by its bucket's updates.

// CHECK: %[[GW2:.*]] = dtc.matmul %{{.*}}, %{{.*}} {transpose_lhs = true} : tensor<?x3xf32>, tensor<?x8xf32> -> tensor<3x8xf32>
// CHECK: %[[GB1:.*]] = dtc.sum_to
// CHECK-NEXT: %[[S0:.*]] = dtc.all_reduce_start(%[[GW2]], %[[GB1]]) {bucket = 0 : i64}
// CHECK-NEXT: %[[GW1:.*]] = dtc.matmul %{{.*}}, %arg0 {transpose_lhs = true}
// CHECK-NEXT: %[[S1:.*]] = dtc.all_reduce_start(%[[GW1]]) {bucket = 1 : i64}
// CHECK-NEXT: %[[W0:.*]]:2 = dtc.all_reduce_wait %[[S0]], (%[[GW2]], %[[GB1]]) {bucket = 0 : i64}
// CHECK-NEXT: dtc.apply_gradient @w2, %[[W0]]#0
// CHECK-NEXT: dtc.apply_gradient @b1, %[[W0]]#1
// CHECK-NEXT: %[[W1:.*]] = dtc.all_reduce_wait %[[S1]], (%[[GW1]]) {bucket = 1 : i64}
// CHECK-NEXT: dtc.apply_gradient @w1, %[[W1]]
// CHECK-NEXT: return
module attributes {dtc.optimizer = #dtc.optimizer<sgd, lr = 0.01, weight_decay = 0.0, momentum = 0.9>} {
  dtc.param @w1 : tensor<8x4xf32>
  dtc.param @b1 : tensor<8xf32>
  dtc.param @w2 : tensor<3x8xf32>
  func.func @train_step(%arg0: tensor<?x4xf32>, %arg1: tensor<?xi32>) -> tensor<f32> {
    %0 = dtc.constant {value = 1.000000e+00 : f32} : tensor<f32>
    %1 = dtc.param_ref @w1 : tensor<8x4xf32>
    %2 = dtc.param_ref @b1 : tensor<8xf32>
    %3 = dtc.param_ref @w2 : tensor<3x8xf32>
    %4 = dtc.matmul %arg0, %1 {transpose_rhs = true} : tensor<?x4xf32>, tensor<8x4xf32> -> tensor<?x8xf32>
    %5 = dtc.add %4, %2 : tensor<?x8xf32>, tensor<8xf32> -> tensor<?x8xf32>
    %6 = dtc.tanh %5 : tensor<?x8xf32>
    %7 = dtc.matmul %6, %3 {transpose_rhs = true} : tensor<?x8xf32>, tensor<3x8xf32> -> tensor<?x3xf32>
    %8 = dtc.cross_entropy %7, %arg1 : tensor<?x3xf32>, tensor<?xi32> -> tensor<f32>
    %9 = dtc.cross_entropy_grad %7, %arg1, %0 : (tensor<?x3xf32>, tensor<?xi32>, tensor<f32>) -> tensor<?x3xf32>
    %10 = dtc.matmul %9, %3 : tensor<?x3xf32>, tensor<3x8xf32> -> tensor<?x8xf32>
    %11 = dtc.matmul %9, %6 {transpose_lhs = true} : tensor<?x3xf32>, tensor<?x8xf32> -> tensor<3x8xf32>
    %12 = dtc.mul %6, %6 : tensor<?x8xf32>, tensor<?x8xf32> -> tensor<?x8xf32>
    %13 = dtc.sub %0, %12 : tensor<f32>, tensor<?x8xf32> -> tensor<?x8xf32>
    %14 = dtc.mul %10, %13 : tensor<?x8xf32>, tensor<?x8xf32> -> tensor<?x8xf32>
    %15 = dtc.sum_to %14 : tensor<?x8xf32> -> tensor<8xf32>
    %16 = dtc.matmul %14, %arg0 {transpose_lhs = true} : tensor<?x8xf32>, tensor<?x4xf32> -> tensor<8x4xf32>
    %17:2 = dtc.all_reduce_bucket(%11, %15) {bucket = 0 : i64} : (tensor<3x8xf32>, tensor<8xf32>) -> (tensor<3x8xf32>, tensor<8xf32>)
    %18 = dtc.all_reduce_bucket(%16) {bucket = 1 : i64} : (tensor<8x4xf32>) -> tensor<8x4xf32>
    dtc.apply_gradient @w1, %18 : tensor<8x4xf32>
    dtc.apply_gradient @b1, %17#1 : tensor<8xf32>
    dtc.apply_gradient @w2, %17#0 : tensor<3x8xf32>
    return %8 : tensor<f32>
  }
}

