// RUN: dtc-opt %s | dtc-opt | FileCheck %s --check-prefix=PARSE
// RUN: dtc-opt %s --dtc-autodiff | FileCheck %s --enable-var-scope
// Layer norm round-trips, and its gradient is one dtc.layer_norm_grad from
// the input, the result's gradient, the statistics and the weight (the
// statistics' own gradients are zero and unused). The tanh GELU's gradient
// is its helper op.

// PARSE: %{{.*}}, %{{.*}}, %{{.*}} = dtc.layer_norm %{{.*}}, %{{.*}}, %{{.*}} {eps = 1.000000e-05 : f64} : tensor<?x4x8xf32>, tensor<8xf32>, tensor<?x4xf32>
// PARSE: dtc.gelu_tanh %{{.*}} : tensor<?x4x8xf32>

// CHECK-LABEL: func.func @train_step
// CHECK: %[[W:.*]] = dtc.param_ref @n.weight
// CHECK: %[[Y:.*]], %[[M:.*]], %[[R:.*]] = dtc.layer_norm %arg0, %[[W]], %{{.*}} {eps = 1.000000e-05 : f64}
// CHECK: %[[G:.*]] = dtc.gelu_tanh %[[Y]]
// CHECK: %[[DY:.*]] = dtc.gelu_tanh_grad %[[Y]], %{{.*}} : tensor<?x4x8xf32>
// CHECK: %[[DX:.*]], %[[DW:.*]], %[[DB:.*]] = dtc.layer_norm_grad %arg0, %[[DY]], %[[M]], %[[R]], %[[W]] : tensor<?x4x8xf32>, tensor<8xf32>, tensor<?x4xf32>
// CHECK-DAG: dtc.apply_gradient @n.weight, %[[DW]]
// CHECK-DAG: dtc.apply_gradient @n.bias, %[[DB]]
module {
  dtc.param @n.weight : tensor<8xf32>
  dtc.param @n.bias : tensor<8xf32>
  func.func @forward(%x: tensor<?x4x8xf32>, %l: tensor<?xi32>) -> tensor<f32> {
    %w = dtc.param_ref @n.weight : tensor<8xf32>
    %b = dtc.param_ref @n.bias : tensor<8xf32>
    %y, %m, %r = dtc.layer_norm %x, %w, %b {eps = 1.0e-05 : f64} : tensor<?x4x8xf32>, tensor<8xf32>, tensor<?x4xf32>
    %g = dtc.gelu_tanh %y : tensor<?x4x8xf32>
    %s = dtc.reduce_sum %g {axis = 2 : i64} : tensor<?x4x8xf32> -> tensor<?x4xf32>
    %q = dtc.reduce_sum %s {axis = 1 : i64} : tensor<?x4xf32> -> tensor<?xf32>
    %t = dtc.reduce_sum %q {axis = 0 : i64} : tensor<?xf32> -> tensor<f32>
    return %t : tensor<f32>
  }
}
