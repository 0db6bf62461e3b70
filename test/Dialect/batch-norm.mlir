// RUN: dtc-opt %s -verify-diagnostics | FileCheck %s
// RUN: dtc-opt %s --dtc-autodiff | FileCheck %s --check-prefix=GRAD
// RUN: dtc-opt %s --dtc-autodiff --dtc-derive-steps | FileCheck %s --check-prefix=EVAL
// Batch normalization: buffers, the training op and its statistics' update,
// its gradient (the running statistics take none, update_running_stats is
// not differentiated) and its evaluation form.

// CHECK: dtc.buffer @n.running_var : tensor<3xf32> {value = 1.000000e+00 : f64}
// CHECK: dtc.buffer @n.num_batches_tracked : tensor<i64>
// CHECK: %{{.*}}, %[[M:.*]], %[[V:.*]] = dtc.batch_norm %arg0, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {eps = 1.000000e-05 : f64} : tensor<?x3x4x4xf32>, tensor<3xf32>
// CHECK: dtc.update_running_stats @n.running_mean, @n.running_var, @n.num_batches_tracked(%arg0, %[[M]], %[[V]]) {momentum = 1.000000e-01 : f64} : tensor<?x3x4x4xf32>, tensor<3xf32>

// GRAD-LABEL: func.func @train_step
// GRAD: %[[Y:.*]], %[[M:.*]], %[[V:.*]] = dtc.batch_norm %arg0, %[[W:[0-9]+]]
// GRAD: dtc.update_running_stats
// GRAD: %{{.*}}, %[[DW:.*]], %[[DB:.*]] = dtc.batch_norm_grad %arg0, %{{.*}}, %[[M]], %[[V]], %[[W]] {eps = 1.000000e-05 : f64}
// GRAD-DAG: dtc.apply_gradient @n.weight, %[[DW]]
// GRAD-DAG: dtc.apply_gradient @n.bias, %[[DB]]
// GRAD-NOT: dtc.apply_gradient @n.running

// EVAL-LABEL: func.func @eval_step
// EVAL: %[[RM:.*]] = dtc.param_ref @n.running_mean
// EVAL: %[[RV:.*]] = dtc.param_ref @n.running_var
// EVAL: dtc.batch_norm_inference %arg0, %{{.*}}, %{{.*}}, %[[RM]], %[[RV]] {eps = 1.000000e-05 : f64} : tensor<?x3x4x4xf32>, tensor<3xf32>
// EVAL-NOT: dtc.update_running_stats
// EVAL-NOT: dtc.batch_norm
// EVAL: return
// EVAL-LABEL: func.func @train_step
module {
  dtc.param @n.weight : tensor<3xf32> {a = 1.0 : f64, init = #dtc.init<constant>}
  dtc.param @n.bias : tensor<3xf32>
  dtc.buffer @n.running_mean : tensor<3xf32>
  dtc.buffer @n.running_var : tensor<3xf32> {value = 1.0 : f64}
  dtc.buffer @n.num_batches_tracked : tensor<i64>
  func.func @forward(%x: tensor<?x3x4x4xf32>, %y: tensor<?x3x4x4xf32>) -> tensor<f32> {
    %w = dtc.param_ref @n.weight : tensor<3xf32>
    %b = dtc.param_ref @n.bias : tensor<3xf32>
    %rm = dtc.param_ref @n.running_mean : tensor<3xf32>
    %rv = dtc.param_ref @n.running_var : tensor<3xf32>
    %o, %m, %v = dtc.batch_norm %x, %w, %b, %rm, %rv {eps = 1.0e-05 : f64} : tensor<?x3x4x4xf32>, tensor<3xf32>
    dtc.update_running_stats @n.running_mean, @n.running_var, @n.num_batches_tracked(%x, %m, %v) {momentum = 0.1 : f64} : tensor<?x3x4x4xf32>, tensor<3xf32>
    %l = dtc.mse %o, %y : tensor<?x3x4x4xf32>, tensor<?x3x4x4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
