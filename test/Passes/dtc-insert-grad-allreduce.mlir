// RUN: dtc-opt %s --dtc-insert-grad-allreduce --split-input-file | FileCheck %s --enable-var-scope

// Every update reads an all-reduced (averaged) gradient.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[G1:.*]] = dtc.matmul %{{.*}}, %arg0 {transpose_lhs = true}
// CHECK: %[[R1:.*]] = dtc.all_reduce %[[G1]] : tensor<8x4xf32>
// CHECK-NEXT: dtc.apply_gradient @w1, %[[R1]]
// CHECK: %[[R2:.*]] = dtc.all_reduce %[[G2:.*]] : tensor<8xf32>
// CHECK-NEXT: dtc.apply_gradient @b1, %[[R2]]
module {
  dtc.param @w1 : tensor<8x4xf32>
  dtc.param @b1 : tensor<8xf32>
  func.func @train_step(%x: tensor<?x4xf32>, %y: tensor<?xi32>) -> tensor<f32> {
    %w1 = dtc.param_ref @w1 : tensor<8x4xf32>
    %b1 = dtc.param_ref @b1 : tensor<8xf32>
    %h = dtc.matmul %x, %w1 {transpose_rhs = true} : tensor<?x4xf32>, tensor<8x4xf32> -> tensor<?x8xf32>
    %a = dtc.add %h, %b1 : tensor<?x8xf32>, tensor<8xf32> -> tensor<?x8xf32>
    %s = dtc.reduce_sum %a {axis = 1 : i64} : tensor<?x8xf32> -> tensor<?xf32>
    %l = dtc.reduce_mean %s {axis = 0 : i64} : tensor<?xf32> -> tensor<f32>
    %one = dtc.constant {value = 1.0 : f32} : tensor<f32>
    %d = dtc.broadcast_to %one : tensor<f32> -> tensor<?x8xf32>
    %gb = dtc.sum_to %d : tensor<?x8xf32> -> tensor<8xf32>
    %gw = dtc.matmul %d, %x {transpose_lhs = true} : tensor<?x8xf32>, tensor<?x4xf32> -> tensor<8x4xf32>
    dtc.apply_gradient @w1, %gw : tensor<8x4xf32>
    dtc.apply_gradient @b1, %gb : tensor<8xf32>
    return %l : tensor<f32>
  }
}

// -----

// A gradient shared by two parameters (or read elsewhere) is copied first,
// because all-reduces work in place; the copies are made right where the
// gradient is defined, before anything can change it.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[G:.*]] = dtc.neg
// CHECK-NEXT: %[[C2:.*]] = dtc.copy %[[G]] : tensor<4xf32>
// CHECK-NEXT: %[[C1:.*]] = dtc.copy %[[G]] : tensor<4xf32>
// CHECK: %[[R1:.*]] = dtc.all_reduce %[[C1]]
// CHECK: dtc.apply_gradient @p, %[[R1]]
// CHECK: %[[R2:.*]] = dtc.all_reduce %[[C2]]
// CHECK: dtc.apply_gradient @q, %[[R2]]
module {
  dtc.param @p : tensor<4xf32>
  dtc.param @q : tensor<4xf32>
  func.func @train_step(%x: tensor<?x4xf32>, %y: tensor<?xi32>) -> tensor<f32> {
    %p = dtc.param_ref @p : tensor<4xf32>
    %c = dtc.constant {value = 1.0 : f32} : tensor<4xf32>
    %g = dtc.neg %c : tensor<4xf32>
    %s = dtc.reduce_sum %p {axis = 0 : i64} : tensor<4xf32> -> tensor<f32>
    dtc.apply_gradient @p, %g : tensor<4xf32>
    dtc.apply_gradient @q, %g : tensor<4xf32>
    return %s : tensor<f32>
  }
}

