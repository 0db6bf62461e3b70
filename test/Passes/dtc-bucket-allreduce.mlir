// RUN: dtc-opt %s --dtc-bucket-allreduce | FileCheck %s --check-prefix=ONE --enable-var-scope
// RUN: dtc-opt %s --dtc-bucket-allreduce="bucket-bytes=0 first-bucket-bytes=0" | FileCheck %s --check-prefix=EACH --enable-var-scope
// RUN: dtc-opt %s --dtc-bucket-allreduce="bucket-bytes=1000 first-bucket-bytes=100" | FileCheck %s --check-prefix=CAPS --enable-var-scope
// Gradients are bucketed in the order backward produces them: @w2 (96 B),
// then @b1 (32 B), then @w1 (128 B). A bucket closes once it holds at least
// its cap (the first bucket has a smaller cap, as in PyTorch DDP).

// Default caps (1 MiB first, 25 MiB after): one bucket for all.
// ONE: %[[GW2:.*]] = dtc.matmul %{{.*}}, %{{.*}} {transpose_lhs = true} : tensor<?x3xf32>, tensor<?x8xf32> -> tensor<3x8xf32>
// ONE: %[[GB1:.*]] = dtc.sum_to
// ONE: %[[GW1:.*]] = dtc.matmul %{{.*}}, %arg0 {transpose_lhs = true}
// ONE: %[[R:.*]]:3 = dtc.all_reduce_bucket(%[[GW2]], %[[GB1]], %[[GW1]]) {bucket = 0 : i64}
// ONE-NEXT: dtc.apply_gradient @w1, %[[R]]#2
// ONE-NEXT: dtc.apply_gradient @b1, %[[R]]#1
// ONE-NEXT: dtc.apply_gradient @w2, %[[R]]#0
// ONE-NOT: dtc.all_reduce

// Caps of 0: one bucket per parameter, numbered in backward order.
// EACH: %[[B0:.*]] = dtc.all_reduce_bucket(%{{.*}}) {bucket = 0 : i64} : (tensor<3x8xf32>) -> tensor<3x8xf32>
// EACH-NEXT: %[[B1:.*]] = dtc.all_reduce_bucket(%{{.*}}) {bucket = 1 : i64} : (tensor<8xf32>) -> tensor<8xf32>
// EACH-NEXT: %[[B2:.*]] = dtc.all_reduce_bucket(%{{.*}}) {bucket = 2 : i64} : (tensor<8x4xf32>) -> tensor<8x4xf32>
// EACH-NEXT: dtc.apply_gradient @w1, %[[B2]]
// EACH-NEXT: dtc.apply_gradient @b1, %[[B1]]
// EACH-NEXT: dtc.apply_gradient @w2, %[[B0]]

// First cap 100 B: @w2 (96) + @b1 (32) close bucket 0; @w1 is bucket 1.
// CAPS: dtc.all_reduce_bucket(%{{.*}}, %{{.*}}) {bucket = 0 : i64} : (tensor<3x8xf32>, tensor<8xf32>)
// CAPS-NEXT: dtc.all_reduce_bucket(%{{.*}}) {bucket = 1 : i64} : (tensor<8x4xf32>)
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
    %17 = dtc.all_reduce %16 : tensor<8x4xf32>
    dtc.apply_gradient @w1, %17 : tensor<8x4xf32>
    %18 = dtc.all_reduce %15 : tensor<8xf32>
    dtc.apply_gradient @b1, %18 : tensor<8xf32>
    %19 = dtc.all_reduce %11 : tensor<3x8xf32>
    dtc.apply_gradient @w2, %19 : tensor<3x8xf32>
    return %8 : tensor<f32>
  }
}

