// RUN: dtc-opt %s | dtc-opt | FileCheck %s --check-prefix=PARSE
// RUN: dtc-opt %s --dtc-autodiff | FileCheck %s --enable-var-scope
// Attention round-trips; its gradient is one dtc.attention_grad from q, k,
// v, the result, its row statistics and the result's gradient (the
// statistics' own gradient is unused).

// PARSE: %{{.*}}, %{{.*}} = dtc.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 5.000000e-01 : f64} : tensor<?x2x6x4xf32>, tensor<?x2x6x4xf32>, tensor<?x2x6x4xf32> -> tensor<?x2x6x4xf32>, tensor<?x2x6xf32>

// CHECK-LABEL: func.func @train_step
// CHECK: %[[Q:.*]] = dtc.broadcast_to
// CHECK: %[[O:.*]], %[[L:.*]] = dtc.attention %[[Q]], %arg0, %arg0 {causal, scale = 5.000000e-01 : f64}
// CHECK: %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = dtc.attention_grad %[[Q]], %arg0, %arg0, %[[O]], %[[L]], %{{.*}} {causal, scale = 5.000000e-01 : f64} : tensor<?x2x6x4xf32>, tensor<?x2x6x4xf32>, tensor<?x2x6x4xf32>, tensor<?x2x6x4xf32>, tensor<?x2x6xf32>
// CHECK: dtc.sum_to %[[DQ]] : tensor<?x2x6x4xf32> -> tensor<2x6x4xf32>
module {
  dtc.param @q : tensor<2x6x4xf32>
  func.func @forward(%x: tensor<?x2x6x4xf32>, %l: tensor<?xi32>) -> tensor<f32> {
    %q0 = dtc.param_ref @q : tensor<2x6x4xf32>
    %q = dtc.broadcast_to %q0 : tensor<2x6x4xf32> -> tensor<?x2x6x4xf32>
    %o, %lse = dtc.attention %q, %x, %x {causal, scale = 0.5 : f64} : tensor<?x2x6x4xf32>, tensor<?x2x6x4xf32>, tensor<?x2x6x4xf32> -> tensor<?x2x6x4xf32>, tensor<?x2x6xf32>
    %s = dtc.reduce_sum %o {axis = 3 : i64} : tensor<?x2x6x4xf32> -> tensor<?x2x6xf32>
    %s2 = dtc.reduce_sum %s {axis = 2 : i64} : tensor<?x2x6xf32> -> tensor<?x2xf32>
    %s3 = dtc.reduce_sum %s2 {axis = 1 : i64} : tensor<?x2xf32> -> tensor<?xf32>
    %t = dtc.reduce_sum %s3 {axis = 0 : i64} : tensor<?xf32> -> tensor<f32>
    return %t : tensor<f32>
  }
}
