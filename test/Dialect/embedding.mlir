// RUN: dtc-opt %s | dtc-opt | FileCheck %s --check-prefix=PARSE
// RUN: dtc-opt %s --dtc-autodiff | FileCheck %s --enable-var-scope
// An embedding round-trips; its gradient is one dtc.embedding_grad into the
// table (the i32 ids take none), and a cross_entropy over [B, T, V] logits
// against [B, T] labels keeps its ignore_index in its gradient.

// PARSE: dtc.embedding %arg0, %{{.*}} : tensor<?x5xi32>, tensor<11x4xf32> -> tensor<?x5x4xf32>
// PARSE: dtc.cross_entropy %{{.*}}, %arg1 {ignore_index = 3 : i64} : tensor<?x5x11xf32>, tensor<?x5xi32> -> tensor<f32>

// CHECK-LABEL: func.func @train_step
// CHECK: %[[W:.*]] = dtc.param_ref @wte.weight
// CHECK: %[[E:.*]] = dtc.embedding %arg0, %[[W]]
// CHECK: %[[L:.*]] = dtc.matmul %[[E]], %[[W]] {transpose_rhs = true}
// CHECK: %[[DL:.*]] = dtc.cross_entropy_grad %[[L]], %arg1, %{{.*}} {ignore_index = 3 : i64} : (tensor<?x5x11xf32>, tensor<?x5xi32>, tensor<f32>) -> tensor<?x5x11xf32>
// The tied table's two gradients: through the head and through the lookup.
// CHECK-DAG: %[[DE:.*]] = dtc.matmul %[[DL]], %[[W]] : tensor<?x5x11xf32>, tensor<11x4xf32> -> tensor<?x5x4xf32>
// CHECK-DAG: %[[DH:.*]] = dtc.matmul %[[DL]], %[[E]] {contract_batch, transpose_lhs = true}
// CHECK: %[[DT:.*]] = dtc.embedding_grad %arg0, %[[DE]] : tensor<?x5xi32>, tensor<?x5x4xf32> -> tensor<11x4xf32>
// CHECK: %[[SUM:.*]] = dtc.add %[[DH]], %[[DT]] : tensor<11x4xf32>, tensor<11x4xf32>
// CHECK: dtc.apply_gradient @wte.weight, %[[SUM]]
module {
  dtc.param @wte.weight : tensor<11x4xf32>
  func.func @forward(%ids: tensor<?x5xi32>, %y: tensor<?x5xi32>) -> tensor<f32> {
    %w = dtc.param_ref @wte.weight : tensor<11x4xf32>
    %e = dtc.embedding %ids, %w : tensor<?x5xi32>, tensor<11x4xf32> -> tensor<?x5x4xf32>
    %l = dtc.matmul %e, %w {transpose_rhs = true} : tensor<?x5x4xf32>, tensor<11x4xf32> -> tensor<?x5x11xf32>
    %loss = dtc.cross_entropy %l, %y {ignore_index = 3 : i64} : tensor<?x5x11xf32>, tensor<?x5xi32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}
