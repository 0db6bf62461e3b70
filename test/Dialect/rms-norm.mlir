// RUN: dtc-opt %s | dtc-opt | FileCheck %s --check-prefix=PARSE
// RUN: dtc-opt %s --dtc-autodiff | FileCheck %s --enable-var-scope
// RMS norm round-trips, and its gradient is one dtc.rms_norm_grad from the
// input, the result's gradient, each row's rstd and the weight (rstd's own
// gradient is zero and unused). SiLU's gradient is its helper op.

// PARSE: %{{.*}}, %{{.*}} = dtc.rms_norm %{{.*}}, %{{.*}} {eps = 9.9999999999999995E-7 : f64} : tensor<?x4x8xf32>, tensor<8xf32>, tensor<?x4xf32>
// PARSE: dtc.silu %{{.*}} : tensor<?x4x8xf32>

// CHECK-LABEL: func.func @train_step
// CHECK: %[[W:.*]] = dtc.param_ref @n.weight
// CHECK: %[[Y:.*]], %[[R:.*]] = dtc.rms_norm %arg0, %[[W]] {eps = 9.9999999999999995E-7 : f64}
// CHECK: %[[G:.*]] = dtc.silu %[[Y]]
// CHECK: %[[DY:.*]] = dtc.silu_grad %[[Y]], %{{.*}} : tensor<?x4x8xf32>
// CHECK: %[[DX:.*]], %[[DW:.*]] = dtc.rms_norm_grad %arg0, %[[DY]], %[[R]], %[[W]] : tensor<?x4x8xf32>, tensor<8xf32>, tensor<?x4xf32>
// CHECK: dtc.apply_gradient @n.weight, %[[DW]]
module {
  dtc.param @n.weight : tensor<8xf32>
  func.func @forward(%x: tensor<?x4x8xf32>, %l: tensor<?xi32>) -> tensor<f32> {
    %w = dtc.param_ref @n.weight : tensor<8xf32>
    %y, %r = dtc.rms_norm %x, %w {eps = 1.0e-06 : f64} : tensor<?x4x8xf32>, tensor<8xf32>, tensor<?x4xf32>
    %g = dtc.silu %y : tensor<?x4x8xf32>
    %s = dtc.reduce_sum %g {axis = 2 : i64} : tensor<?x4x8xf32> -> tensor<?x4xf32>
    %q = dtc.reduce_sum %s {axis = 1 : i64} : tensor<?x4xf32> -> tensor<?xf32>
    %t = dtc.reduce_sum %q {axis = 0 : i64} : tensor<?xf32> -> tensor<f32>
    return %t : tensor<f32>
  }
}
