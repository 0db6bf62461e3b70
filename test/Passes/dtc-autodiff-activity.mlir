// RUN: dtc-opt %s --dtc-autodiff --canonicalize | FileCheck %s --enable-var-scope
// Only values that depend on a parameter are differentiated: a term of the
// loss computed from the data alone (here a non-differentiable accuracy)
// takes no gradient and is not an error, and the gradient of the input x
// (which buildGradients makes) is dead and canonicalized away.

// CHECK-LABEL: func.func @train_step
// CHECK: %[[L:.*]] = dtc.matmul %arg0, %{{.*}} {transpose_rhs = true}
// CHECK: %[[CE:.*]] = dtc.cross_entropy %[[L]], %arg1
// CHECK: %[[ACC:.*]] = dtc.accuracy %arg0, %arg1
// CHECK: dtc.cross_entropy_grad %[[L]], %arg1
// CHECK-NOT: dtc.matmul {{.*}} -> tensor<?x3xf32>
// CHECK: %[[DW:.*]] = dtc.matmul %{{.*}}, %arg0 {transpose_lhs = true}
// CHECK-NEXT: dtc.apply_gradient @w, %[[DW]]
module {
  dtc.param @w : tensor<3x3xf32>
  func.func @forward(%x: tensor<?x3xf32>, %y: tensor<?xi32>) -> tensor<f32> {
    %w = dtc.param_ref @w : tensor<3x3xf32>
    %l = dtc.matmul %x, %w {transpose_rhs = true} : tensor<?x3xf32>, tensor<3x3xf32> -> tensor<?x3xf32>
    %ce = dtc.cross_entropy %l, %y : tensor<?x3xf32>, tensor<?xi32> -> tensor<f32>
    %acc = dtc.accuracy %x, %y : tensor<?x3xf32>, tensor<?xi32> -> tensor<f32>
    %loss = dtc.add %ce, %acc : tensor<f32>, tensor<f32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}
