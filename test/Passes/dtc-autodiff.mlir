// RUN: dtc-opt %s --dtc-autodiff | FileCheck %s --enable-var-scope
// The seed MLP: @train_step is @forward, then the backward pass in reverse
// order, then one update per parameter in declaration order. @forward stays.

// CHECK-LABEL: func.func @forward
// CHECK-NOT: dtc.apply_gradient
// CHECK: return

// CHECK-LABEL: func.func @train_step(%{{.*}}: tensor<?x784xf32>, %{{.*}}: tensor<?xi32>) -> (tensor<f32>, tensor<f32>)
// CHECK: %[[W1:.*]] = dtc.param_ref @fc1.weight
// CHECK: %[[H:.*]] = dtc.matmul %arg0, %[[W1]] {transpose_rhs = true}
// CHECK: %[[B1:.*]] = dtc.param_ref @fc1.bias
// CHECK: %[[A:.*]] = dtc.add %[[H]], %[[B1]]
// CHECK: %[[R:.*]] = dtc.relu %[[A]]
// CHECK: %[[W2:.*]] = dtc.param_ref @fc2.weight
// CHECK: %[[O:.*]] = dtc.matmul %[[R]], %[[W2]] {transpose_rhs = true}
// CHECK: %[[B2:.*]] = dtc.param_ref @fc2.bias
// CHECK: %[[L:.*]] = dtc.add %[[O]], %[[B2]]
// CHECK: %[[LOSS:.*]] = dtc.cross_entropy %[[L]], %arg1
// CHECK: %[[ACC:.*]] = dtc.accuracy %[[L]], %arg1
// CHECK: %[[SEED:.*]] = dtc.grad_seed : tensor<f32>
// CHECK: %[[DL:.*]] = dtc.cross_entropy_grad %[[L]], %arg1, %[[SEED]]
// CHECK: %[[DB2:.*]] = dtc.sum_to %[[DL]] : tensor<?x10xf32> -> tensor<10xf32>
// CHECK: %[[DR:.*]] = dtc.matmul %[[DL]], %[[W2]] : tensor<?x10xf32>, tensor<10x500xf32> -> tensor<?x500xf32>
// CHECK: %[[DW2:.*]] = dtc.matmul %[[DL]], %[[R]] {transpose_lhs = true} : tensor<?x10xf32>, tensor<?x500xf32> -> tensor<10x500xf32>
// CHECK: %[[DA:.*]] = dtc.relu_grad %[[R]], %[[DR]]
// CHECK: %[[DB1:.*]] = dtc.sum_to %[[DA]] : tensor<?x500xf32> -> tensor<500xf32>
// CHECK: %[[DW1:.*]] = dtc.matmul %[[DA]], %arg0 {transpose_lhs = true} : tensor<?x500xf32>, tensor<?x784xf32> -> tensor<500x784xf32>
// CHECK: dtc.apply_gradient @fc1.weight, %[[DW1]]
// CHECK: dtc.apply_gradient @fc1.bias, %[[DB1]]
// CHECK: dtc.apply_gradient @fc2.weight, %[[DW2]]
// CHECK: dtc.apply_gradient @fc2.bias, %[[DB2]]
// CHECK: return %[[LOSS]], %[[ACC]]
module {
  dtc.param @fc1.weight : tensor<500x784xf32> {a = -0.0357 : f64, b = 0.0357 : f64, init = #dtc.init<uniform>}
  dtc.param @fc1.bias : tensor<500xf32>
  dtc.param @fc2.weight : tensor<10x500xf32>
  dtc.param @fc2.bias : tensor<10xf32>
  func.func @forward(%x: tensor<?x784xf32>, %y: tensor<?xi32>) -> (tensor<f32>, tensor<f32>) {
    %w1 = dtc.param_ref @fc1.weight : tensor<500x784xf32>
    %0 = dtc.matmul %x, %w1 {transpose_rhs = true} : tensor<?x784xf32>, tensor<500x784xf32> -> tensor<?x500xf32>
    %b1 = dtc.param_ref @fc1.bias : tensor<500xf32>
    %1 = dtc.add %0, %b1 : tensor<?x500xf32>, tensor<500xf32> -> tensor<?x500xf32>
    %2 = dtc.relu %1 : tensor<?x500xf32>
    %w2 = dtc.param_ref @fc2.weight : tensor<10x500xf32>
    %3 = dtc.matmul %2, %w2 {transpose_rhs = true} : tensor<?x500xf32>, tensor<10x500xf32> -> tensor<?x10xf32>
    %b2 = dtc.param_ref @fc2.bias : tensor<10xf32>
    %4 = dtc.add %3, %b2 : tensor<?x10xf32>, tensor<10xf32> -> tensor<?x10xf32>
    %5 = dtc.cross_entropy %4, %y : tensor<?x10xf32>, tensor<?xi32> -> tensor<f32>
    %6 = dtc.accuracy %4, %y : tensor<?x10xf32>, tensor<?xi32> -> tensor<f32>
    return %5, %6 : tensor<f32>, tensor<f32>
  }
}
