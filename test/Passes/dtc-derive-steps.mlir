// RUN: dtc-opt %s --dtc-derive-steps | FileCheck %s
// RUN: dtc-opt %s --dtc-derive-steps | dtc-opt --dtc-derive-steps | FileCheck %s
// @forward becomes @eval_step; @grad_step is @train_step with each update an
// export at its parameter's place in the packed vector (fc.weight: 12
// floats at 0, fc.bias at 12) and without the collectives; @train_step is
// the traced step. Deriving again changes nothing.

// CHECK-LABEL: func.func @eval_step
// CHECK-SAME: dtc.outputs = ["loss"]
// CHECK-NOT: dtc.traced
// CHECK: dtc.cross_entropy
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: dtc.traced
// CHECK: dtc.all_reduce
// CHECK: dtc.apply_gradient @fc.weight
// CHECK-LABEL: func.func @grad_step
// CHECK-NOT: dtc.traced
// CHECK-NOT: dtc.all_reduce
// CHECK: %[[GW:.*]] = dtc.matmul {{.*}}transpose_lhs = true
// CHECK-NOT: dtc.all_reduce
// CHECK: dtc.export_gradient @fc.weight, %[[GW]] at 0 : tensor<3x4xf32>
// CHECK: dtc.export_gradient @fc.bias, %{{.*}} at 12 : tensor<3xf32>
// CHECK-NOT: dtc.apply_gradient
// CHECK: return
// CHECK-NOT: func.func @forward
module attributes {dtc.model = "tiny", dtc.optimizer = #dtc.optimizer<sgd, lr = 0.01, weight_decay = 0.0>, dtc.recipe = #dtc.recipe<>, dtc.source = "tiny.dsl"} {
  dtc.param @fc.weight : tensor<3x4xf32> {a = -5.000000e-01 : f64, b = 5.000000e-01 : f64, init = #dtc.init<uniform>}
  dtc.param @fc.bias : tensor<3xf32> {a = -5.000000e-01 : f64, b = 5.000000e-01 : f64, init = #dtc.init<uniform>}
  func.func @forward(%arg0: tensor<?x4xf32> {dtc.name = "x"}, %arg1: tensor<?xi32> {dtc.name = "y"}) -> tensor<f32> attributes {dtc.outputs = ["loss"]} {
    %0 = dtc.param_ref @fc.weight : tensor<3x4xf32>
    %1 = dtc.matmul %arg0, %0 {transpose_rhs = true} : tensor<?x4xf32>, tensor<3x4xf32> -> tensor<?x3xf32>
    %2 = dtc.param_ref @fc.bias : tensor<3xf32>
    %3 = dtc.add %1, %2 : tensor<?x3xf32>, tensor<3xf32> -> tensor<?x3xf32>
    %4 = dtc.cross_entropy %3, %arg1 : tensor<?x3xf32>, tensor<?xi32> -> tensor<f32>
    return %4 : tensor<f32>
  }
  func.func @train_step(%arg0: tensor<?x4xf32> {dtc.name = "x"}, %arg1: tensor<?xi32> {dtc.name = "y"}) -> tensor<f32> attributes {dtc.outputs = ["loss"]} {
    %0 = dtc.param_ref @fc.weight : tensor<3x4xf32>
    %1 = dtc.matmul %arg0, %0 {transpose_rhs = true} : tensor<?x4xf32>, tensor<3x4xf32> -> tensor<?x3xf32>
    %2 = dtc.param_ref @fc.bias : tensor<3xf32>
    %3 = dtc.add %1, %2 : tensor<?x3xf32>, tensor<3xf32> -> tensor<?x3xf32>
    %4 = dtc.cross_entropy %3, %arg1 : tensor<?x3xf32>, tensor<?xi32> -> tensor<f32>
    %5 = dtc.grad_seed : tensor<f32>
    %6 = dtc.cross_entropy_grad %3, %arg1, %5 : (tensor<?x3xf32>, tensor<?xi32>, tensor<f32>) -> tensor<?x3xf32>
    %7 = dtc.sum_to %6 : tensor<?x3xf32> -> tensor<3xf32>
    %8 = dtc.matmul %6, %arg0 {transpose_lhs = true} : tensor<?x3xf32>, tensor<?x4xf32> -> tensor<3x4xf32>
    %9 = dtc.all_reduce %8 : tensor<3x4xf32>
    dtc.apply_gradient @fc.weight, %9 : tensor<3x4xf32>
    %10 = dtc.all_reduce %7 : tensor<3xf32>
    dtc.apply_gradient @fc.bias, %10 : tensor<3xf32>
    return %4 : tensor<f32>
  }
}

