// RUN: dtc-opt %s --dtc-autodiff --split-input-file | FileCheck %s --enable-var-scope
// Gradients of the broadcasting binary ops are summed back to each operand's
// shape with dtc.sum_to.

// CHECK-LABEL: func.func @train_step
// CHECK: %[[X:.*]] = dtc.param_ref @x : tensor<3x4xf32>
// CHECK: %[[B:.*]] = dtc.param_ref @b : tensor<4xf32>
// CHECK: %[[DY:.*]] = dtc.broadcast_to %{{.*}} : tensor<3x1xf32> -> tensor<3x4xf32>
// CHECK: %[[DB:.*]] = dtc.sum_to %[[DY]] : tensor<3x4xf32> -> tensor<4xf32>
// CHECK: dtc.apply_gradient @x, %[[DY]] : tensor<3x4xf32>
// CHECK: dtc.apply_gradient @b, %[[DB]] : tensor<4xf32>
module {
  dtc.param @x : tensor<3x4xf32>
  dtc.param @b : tensor<4xf32>
  func.func @forward(%in: tensor<?x4xf32>, %y: tensor<?xi32>) -> tensor<f32> {
    %x = dtc.param_ref @x : tensor<3x4xf32>
    %b = dtc.param_ref @b : tensor<4xf32>
    %s = dtc.add %x, %b : tensor<3x4xf32>, tensor<4xf32> -> tensor<3x4xf32>
    %r = dtc.reduce_sum %s {axis = 1 : i64} : tensor<3x4xf32> -> tensor<3xf32>
    %l = dtc.reduce_sum %r {axis = 0 : i64} : tensor<3xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// sub: -dy for the right operand; mul: dy * other; div: dy / r and
// -dy * y / r. A parameter read twice gets the sum of both gradients.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[A:.*]] = dtc.param_ref @a : tensor<4xf32>
// CHECK: %[[C:.*]] = dtc.param_ref @c : tensor<3x1xf32>
// CHECK: %[[M:.*]] = dtc.mul %[[A]], %[[C]] : tensor<4xf32>, tensor<3x1xf32> -> tensor<3x4xf32>
// CHECK: %[[Q:.*]] = dtc.div %[[M]], %[[C]]
// CHECK: %[[D:.*]] = dtc.sub %[[Q]], %[[A]]
// CHECK: %[[DY:.*]] = dtc.broadcast_to %{{.*}} : tensor<3x1xf32> -> tensor<3x4xf32>
// sub, right operand:
// CHECK: %[[N:.*]] = dtc.neg %[[DY]]
// CHECK: %[[DA1:.*]] = dtc.sum_to %[[N]] : tensor<3x4xf32> -> tensor<4xf32>
// div, left operand dy / r:
// CHECK: %[[DQ:.*]] = dtc.div %[[DY]], %[[C]]
// div, right operand -dy * y / r:
// CHECK: %[[T:.*]] = dtc.mul %[[DY]], %[[Q]]
// CHECK: %[[T2:.*]] = dtc.div %[[T]], %[[C]]
// CHECK: %[[T3:.*]] = dtc.neg %[[T2]]
// CHECK: %[[DC1:.*]] = dtc.sum_to %[[T3]] : tensor<3x4xf32> -> tensor<3x1xf32>
// mul: dy * other, summed to each operand:
// CHECK: %[[MA:.*]] = dtc.mul %[[DQ]], %[[C]]
// CHECK: %[[DA2:.*]] = dtc.sum_to %[[MA]] : tensor<3x4xf32> -> tensor<4xf32>
// CHECK: %[[MC:.*]] = dtc.mul %[[DQ]], %[[A]]
// CHECK: %[[DC2:.*]] = dtc.sum_to %[[MC]] : tensor<3x4xf32> -> tensor<3x1xf32>
// CHECK: %[[GA:.*]] = dtc.add %[[DA1]], %[[DA2]]
// CHECK: %[[GC:.*]] = dtc.add %[[DC1]], %[[DC2]]
// CHECK: dtc.apply_gradient @a, %[[GA]] : tensor<4xf32>
// CHECK: dtc.apply_gradient @c, %[[GC]] : tensor<3x1xf32>
module {
  dtc.param @a : tensor<4xf32>
  dtc.param @c : tensor<3x1xf32>
  func.func @forward(%in: tensor<?x4xf32>, %y: tensor<?xi32>) -> tensor<f32> {
    %a = dtc.param_ref @a : tensor<4xf32>
    %c = dtc.param_ref @c : tensor<3x1xf32>
    %m = dtc.mul %a, %c : tensor<4xf32>, tensor<3x1xf32> -> tensor<3x4xf32>
    %q = dtc.div %m, %c : tensor<3x4xf32>, tensor<3x1xf32> -> tensor<3x4xf32>
    %d = dtc.sub %q, %a : tensor<3x4xf32>, tensor<4xf32> -> tensor<3x4xf32>
    %r = dtc.reduce_sum %d {axis = 1 : i64} : tensor<3x4xf32> -> tensor<3xf32>
    %l = dtc.reduce_sum %r {axis = 0 : i64} : tensor<3xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
