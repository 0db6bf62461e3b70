// RUN: dtc-opt %s --verify-roundtrip | FileCheck %s
// Every dtc op parses, verifies and prints back.

// CHECK: dtc.param @"layer one.weight" : tensor<3x4xf32> {a = -1.000000e-01 : f64, b = 1.000000e-01 : f64, init = #dtc.init<uniform>}
dtc.param @"layer one.weight" : tensor<3x4xf32> {a = -0.1 : f64, b = 0.1 : f64, init = #dtc.init<uniform>}
dtc.param @b : tensor<3xf32>

// CHECK-LABEL: func.func @all_ops
func.func @all_ops(%x: tensor<?x4xf32>, %y: tensor<?xi32>, %t: tensor<?x3xf32>) -> (tensor<f32>, tensor<f32>, tensor<f32>) {
  // CHECK: dtc.param_ref @"layer one.weight" : tensor<3x4xf32>
  %w = dtc.param_ref @"layer one.weight" : tensor<3x4xf32>
  %b = dtc.param_ref @b : tensor<3xf32>
  // CHECK: dtc.constant {value = 2.500000e-01 : f32} : tensor<f32>
  %c = dtc.constant {value = 0.25 : f32} : tensor<f32>
  %bs = dtc.batch_size : tensor<f32>
  // CHECK: dtc.matmul %{{.*}}, %{{.*}} {transpose_rhs = true} : tensor<?x4xf32>, tensor<3x4xf32> -> tensor<?x3xf32>
  %m = dtc.matmul %x, %w {transpose_rhs = true} : tensor<?x4xf32>, tensor<3x4xf32> -> tensor<?x3xf32>
  // Batched over leading dimensions, a 2-D rhs on every row, and the
  // leading dimensions contracted.
  // CHECK: dtc.matmul %{{.*}}, %{{.*}} {transpose_rhs = true} : tensor<?x2x5x4xf32>, tensor<?x2x6x4xf32> -> tensor<?x2x5x6xf32>
  %bq = dtc.reshape %x : tensor<?x4xf32> -> tensor<?x1x1x4xf32>
  %bb = dtc.broadcast_to %bq : tensor<?x1x1x4xf32> -> tensor<?x2x5x4xf32>
  %bk = dtc.broadcast_to %bq : tensor<?x1x1x4xf32> -> tensor<?x2x6x4xf32>
  %bm = dtc.matmul %bb, %bk {transpose_rhs = true} : tensor<?x2x5x4xf32>, tensor<?x2x6x4xf32> -> tensor<?x2x5x6xf32>
  // CHECK: dtc.matmul %{{.*}}, %{{.*}} {transpose_rhs = true} : tensor<?x2x5x4xf32>, tensor<3x4xf32> -> tensor<?x2x5x3xf32>
  %rows = dtc.matmul %bb, %w {transpose_rhs = true} : tensor<?x2x5x4xf32>, tensor<3x4xf32> -> tensor<?x2x5x3xf32>
  // CHECK: dtc.matmul %{{.*}}, %{{.*}} {contract_batch, transpose_lhs = true} : tensor<?x2x5x4xf32>, tensor<?x2x5x3xf32> -> tensor<4x3xf32>
  %dw = dtc.matmul %bb, %rows {contract_batch, transpose_lhs = true} : tensor<?x2x5x4xf32>, tensor<?x2x5x3xf32> -> tensor<4x3xf32>
  %a = dtc.add %m, %b : tensor<?x3xf32>, tensor<3xf32> -> tensor<?x3xf32>
  %s = dtc.sub %a, %c : tensor<?x3xf32>, tensor<f32> -> tensor<?x3xf32>
  %p = dtc.mul %s, %s : tensor<?x3xf32>, tensor<?x3xf32> -> tensor<?x3xf32>
  %d = dtc.div %p, %bs : tensor<?x3xf32>, tensor<f32> -> tensor<?x3xf32>
  %u0 = dtc.neg %d : tensor<?x3xf32>
  %u1 = dtc.relu %u0 : tensor<?x3xf32>
  %u2 = dtc.tanh %u1 : tensor<?x3xf32>
  %u3 = dtc.sigmoid %u2 : tensor<?x3xf32>
  %u4 = dtc.gelu %u3 : tensor<?x3xf32>
  %u5 = dtc.exp %u4 : tensor<?x3xf32>
  %u6 = dtc.log %u5 : tensor<?x3xf32>
  %u7 = dtc.sqrt %u6 : tensor<?x3xf32>
  %g0 = dtc.relu_grad %u7, %u6 : tensor<?x3xf32>
  %g1 = dtc.gelu_grad %g0, %u6 : tensor<?x3xf32>
  // The derivatives dtc-derivatives-in-forward computes in the forward:
  // CHECK: dtc.gelu_deriv %{{.*}} : tensor<?x3xf32>
  // CHECK: dtc.gelu_tanh_deriv %{{.*}} : tensor<?x3xf32>
  %dg = dtc.gelu_deriv %u3 : tensor<?x3xf32>
  %dt = dtc.gelu_tanh_deriv %dg : tensor<?x3xf32>
  %bc = dtc.broadcast_to %b : tensor<3xf32> -> tensor<?x3xf32>
  %st = dtc.sum_to %bc : tensor<?x3xf32> -> tensor<3xf32>
  %r = dtc.reshape %g1 : tensor<?x3xf32> -> tensor<?x3x1xf32>
  %tr = dtc.transpose %w {perm = array<i64: 1, 0>} : tensor<3x4xf32> -> tensor<4x3xf32>
  %rs = dtc.reduce_sum %r {axis = 2 : i64} : tensor<?x3x1xf32> -> tensor<?x3xf32>
  %rm = dtc.reduce_mean %rs {axis = 0 : i64} : tensor<?x3xf32> -> tensor<3xf32>
  %rx = dtc.reduce_max %tr {axis = 1 : i64} : tensor<4x3xf32> -> tensor<4xf32>
  %rg = dtc.reduce_max_grad %tr, %rx, %rx {axis = 1 : i64} : (tensor<4x3xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4x3xf32>
  %sm = dtc.softmax %a {axis = 1 : i64} : tensor<?x3xf32>
  %ls = dtc.log_softmax %a {axis = 1 : i64} : tensor<?x3xf32>
  %smg = dtc.softmax_grad %sm, %a {axis = 1 : i64} : tensor<?x3xf32>
  %lsg = dtc.log_softmax_grad %ls, %a {axis = 1 : i64} : tensor<?x3xf32>
  %ce = dtc.cross_entropy %a, %y : tensor<?x3xf32>, tensor<?xi32> -> tensor<f32>
  %ceg = dtc.cross_entropy_grad %a, %y, %ce : (tensor<?x3xf32>, tensor<?xi32>, tensor<f32>) -> tensor<?x3xf32>
  %mse = dtc.mse %a, %t : tensor<?x3xf32>, tensor<?x3xf32> -> tensor<f32>
  %mg = dtc.mse_grad %a, %t, %mse : (tensor<?x3xf32>, tensor<?x3xf32>, tensor<f32>) -> tensor<?x3xf32>
  %acc = dtc.accuracy %a, %y : tensor<?x3xf32>, tensor<?xi32> -> tensor<f32>
  // CHECK: dtc.apply_gradient @b, %{{.*}} : tensor<3xf32>
  dtc.apply_gradient @b, %st : tensor<3xf32>
  // A gradient scaled as the update reads it (the clip factor):
  // CHECK: dtc.apply_gradient @b, %{{.*}} * %[[CE:.*]] : tensor<3xf32>
  // CHECK: dtc.update_group [@b, @b](%{{.*}}, %{{.*}}) * %[[CE]] : tensor<3xf32>, tensor<3xf32>
  dtc.apply_gradient @b, %st * %ce : tensor<3xf32>
  dtc.update_group [@b, @b](%st, %st) * %ce : tensor<3xf32>, tensor<3xf32>
  // CHECK: dtc.fused(%{{.*}}, %{{.*}}) : (tensor<?x3xf32>, tensor<3xf32>) -> tensor<?x3xf32> {
  // CHECK: dtc.yield %{{.*}} : tensor<?x3xf32>
  %f = dtc.fused(%a, %b) : (tensor<?x3xf32>, tensor<3xf32>) -> tensor<?x3xf32> {
  ^bb0(%i: tensor<?x3xf32>, %j: tensor<3xf32>):
    %k = dtc.constant {value = 1.0 : f32} : tensor<f32>
    %0 = dtc.add %i, %j : tensor<?x3xf32>, tensor<3xf32> -> tensor<?x3xf32>
    %1 = dtc.mul %0, %k : tensor<?x3xf32>, tensor<f32> -> tensor<?x3xf32>
    dtc.yield %1 : tensor<?x3xf32>
  }
  return %ce, %mse, %acc : tensor<f32>, tensor<f32>, tensor<f32>
}

// Gradient accumulation and a language model's prediction [B, T, V].
// CHECK-LABEL: func.func @accumulation
func.func @accumulation(%g: tensor<3xf32>, %l: tensor<?x5x7xf32>) {
  // CHECK: dtc.accumulate_gradient @b, %{{.*}} : tensor<3xf32>
  dtc.accumulate_gradient @b, %g : tensor<3xf32>
  // CHECK: %{{.*}} = dtc.take_accumulated @b, %{{.*}} : tensor<3xf32>
  %t = dtc.take_accumulated @b, %g : tensor<3xf32>
  // CHECK: dtc.export_prediction %{{.*}} : tensor<?x5x7xf32>
  dtc.export_prediction %l : tensor<?x5x7xf32>
  dtc.apply_gradient @b, %t : tensor<3xf32>
  return
}
