// RUN: dtc-opt %s --dtc-autodiff --split-input-file | FileCheck %s --enable-var-scope
// Gradients of the unary elementwise ops, as dtc-autodiff builds them from
// each op's GradientOpInterface.

// CHECK-LABEL: func.func @train_step
// CHECK: %[[W:.*]] = dtc.param_ref @w
// CHECK: %[[Y:.*]] = dtc.tanh %[[W]]
// CHECK: %[[SEED:.*]] = dtc.grad_seed : tensor<f32>
// CHECK: %[[YY:.*]] = dtc.mul %[[Y]], %[[Y]]
// CHECK: %[[D:.*]] = dtc.sub %{{.*}}, %[[YY]]
// CHECK: %[[G:.*]] = dtc.mul %{{.*}}, %[[D]]
// CHECK: dtc.apply_gradient @w, %[[G]] : tensor<4xf32>
module {
  dtc.param @w : tensor<4xf32>
  func.func @forward(%x: tensor<?x4xf32>, %y: tensor<?xi32>) -> tensor<f32> {
    %w = dtc.param_ref @w : tensor<4xf32>
    %t = dtc.tanh %w : tensor<4xf32>
    %s = dtc.reduce_sum %t {axis = 0 : i64} : tensor<4xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// relu: the gradient reads the result (y > 0 exactly where x > 0).
// CHECK-LABEL: func.func @train_step
// CHECK: %[[R:.*]] = dtc.relu %{{.*}} : tensor<4xf32>
// CHECK: dtc.relu_grad %[[R]], %{{.*}} : tensor<4xf32>
module {
  dtc.param @w : tensor<4xf32>
  func.func @forward(%x: tensor<?x4xf32>, %y: tensor<?xi32>) -> tensor<f32> {
    %w = dtc.param_ref @w : tensor<4xf32>
    %t = dtc.relu %w : tensor<4xf32>
    %s = dtc.reduce_sum %t {axis = 0 : i64} : tensor<4xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// sigmoid: dy * y * (1 - y); exp: dy * y; log: dy / x; sqrt: dy * 0.5 / y;
// gelu: gelu_grad(x, dy); neg: -dy.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[S:.*]] = dtc.sigmoid
// CHECK: %[[E:.*]] = dtc.exp %[[S]]
// CHECK: %[[L:.*]] = dtc.log %[[E]]
// CHECK: %[[Q:.*]] = dtc.sqrt %[[L]]
// CHECK: %[[DY:.*]] = dtc.broadcast_to
// CHECK: %[[DNEG:.*]] = dtc.neg %[[DY]]
// CHECK: %[[DGELU:.*]] = dtc.gelu_grad %[[Q]], %[[DNEG]]
// CHECK: %[[HALF:.*]] = dtc.constant {value = 5.000000e-01 : f32}
// CHECK: %[[T:.*]] = dtc.mul %[[DGELU]], %[[HALF]]
// CHECK: %[[DSQRT:.*]] = dtc.div %[[T]], %[[Q]]
// CHECK: %[[DLOG:.*]] = dtc.div %[[DSQRT]], %[[E]]
// CHECK: %[[DEXP:.*]] = dtc.mul %[[DLOG]], %[[E]]
// CHECK: %[[OMS:.*]] = dtc.sub %{{.*}}, %[[S]]
// CHECK: %[[T2:.*]] = dtc.mul %[[DEXP]], %[[S]]
// CHECK: %[[DSIG:.*]] = dtc.mul %[[T2]], %[[OMS]]
// CHECK: dtc.apply_gradient @w, %[[DSIG]]
module {
  dtc.param @w : tensor<4xf32>
  func.func @forward(%x: tensor<?x4xf32>, %y: tensor<?xi32>) -> tensor<f32> {
    %w = dtc.param_ref @w : tensor<4xf32>
    %a = dtc.sigmoid %w : tensor<4xf32>
    %b = dtc.exp %a : tensor<4xf32>
    %c = dtc.log %b : tensor<4xf32>
    %d = dtc.sqrt %c : tensor<4xf32>
    %e = dtc.gelu %d : tensor<4xf32>
    %f = dtc.neg %e : tensor<4xf32>
    %s = dtc.reduce_sum %f {axis = 0 : i64} : tensor<4xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}
