// RUN: dtc-opt %s -verify-diagnostics | FileCheck %s
// RUN: dtc-opt %s --dtc-autodiff --dtc-derive-steps | FileCheck %s --check-prefix=STEPS
// Batch normalization with its ReLU in the kernel: the gradient reads the
// activated result for the mask; the evaluation form keeps the ReLU.

// CHECK: dtc.batch_norm %arg0, {{.*}} {eps = 1.000000e-05 : f64, relu}
// STEPS-LABEL: func.func @eval_step
// STEPS: dtc.batch_norm_inference {{.*}} {eps = 1.000000e-05 : f64, relu}
// STEPS-LABEL: func.func @train_step
// STEPS: %[[Y:.*]], %[[M:.*]], %[[V:.*]] = dtc.batch_norm {{.*}} relu}
// STEPS: dtc.batch_norm_grad %arg0, %{{.*}}, %[[M]], %[[V]], %{{.*}} relu(%[[Y]] : tensor<?x3xf32>)
module {
  dtc.param @n.weight : tensor<3xf32> {a = 1.0 : f64, init = #dtc.init<constant>}
  dtc.param @n.bias : tensor<3xf32>
  dtc.buffer @n.running_mean : tensor<3xf32>
  dtc.buffer @n.running_var : tensor<3xf32> {value = 1.0 : f64}
  dtc.buffer @n.num_batches_tracked : tensor<i64>
  func.func @forward(%x: tensor<?x3xf32>, %y: tensor<?x3xf32>) -> tensor<f32> {
    %w = dtc.param_ref @n.weight : tensor<3xf32>
    %b = dtc.param_ref @n.bias : tensor<3xf32>
    %rm = dtc.param_ref @n.running_mean : tensor<3xf32>
    %rv = dtc.param_ref @n.running_var : tensor<3xf32>
    %o, %m, %v = dtc.batch_norm %x, %w, %b, %rm, %rv {eps = 1.0e-05 : f64, relu} : tensor<?x3xf32>, tensor<3xf32>
    dtc.update_running_stats @n.running_mean, @n.running_var, @n.num_batches_tracked(%x, %m, %v) {momentum = 0.1 : f64} : tensor<?x3xf32>, tensor<3xf32>
    %l = dtc.mse %o, %y : tensor<?x3xf32>, tensor<?x3xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
