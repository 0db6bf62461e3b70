// RUN: dtc-opt %s --dtc-fuse-elementwise --split-input-file | FileCheck %s --enable-var-scope
// RUN: dtc-opt %s --dtc-fuse-elementwise=chains=false --split-input-file | FileCheck %s --check-prefix=NOFUSE --enable-var-scope

// A bias add + relu chain becomes one kernel; the matmul stays outside.
// CHECK-LABEL: func.func @bias_relu
// CHECK: %[[M:.*]] = dtc.matmul
// CHECK: %[[F:.*]] = dtc.fused(%[[M]], %arg1) : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf32> {
// CHECK: ^bb0(%[[A:.*]]: tensor<?x8xf32>, %[[B:.*]]: tensor<8xf32>):
// CHECK:   %[[S:.*]] = dtc.add %[[A]], %[[B]]
// CHECK:   %[[R:.*]] = dtc.relu %[[S]]
// CHECK:   dtc.yield %[[R]] : tensor<?x8xf32>
// CHECK: }
// CHECK: return %[[F]]
// Without chains (dtc --no-fuse): a one-op kernel each.
// NOFUSE-LABEL: func.func @bias_relu
// NOFUSE: %[[M:.*]] = dtc.matmul
// NOFUSE: %[[F1:.*]] = dtc.fused(%[[M]], %arg1)
// NOFUSE-NEXT: ^bb0
// NOFUSE-NEXT: dtc.add
// NOFUSE-NEXT: dtc.yield
// NOFUSE: %[[F2:.*]] = dtc.fused(%[[F1]])
// NOFUSE-NEXT: ^bb0
// NOFUSE-NEXT: dtc.relu
// NOFUSE-NEXT: dtc.yield
// NOFUSE: return %[[F2]]
func.func @bias_relu(%x: tensor<?x4xf32>, %b: tensor<8xf32>, %w: tensor<8x4xf32>) -> tensor<?x8xf32> {
  %m = dtc.matmul %x, %w {transpose_rhs = true} : tensor<?x4xf32>, tensor<8x4xf32> -> tensor<?x8xf32>
  %a = dtc.add %m, %b : tensor<?x8xf32>, tensor<8xf32> -> tensor<?x8xf32>
  %r = dtc.relu %a : tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}

// -----

// A value also used outside the chain becomes a second result; splat
// constants are cloned into the body.
// CHECK-LABEL: func.func @multi_output
// CHECK: %[[F:.*]]:2 = dtc.fused(%arg0) : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
// CHECK:   %[[T:.*]] = dtc.tanh
// CHECK:   %[[C:.*]] = dtc.constant {value = 2.000000e+00 : f32}
// CHECK:   %[[M:.*]] = dtc.mul %[[T]], %[[C]]
// CHECK:   dtc.yield %[[T]], %[[M]]
// CHECK: %[[S:.*]] = dtc.reduce_sum %[[F]]#0
// CHECK: return %[[F]]#1, %[[S]]
func.func @multi_output(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<f32>) {
  %t = dtc.tanh %x : tensor<4xf32>
  %c = dtc.constant {value = 2.0 : f32} : tensor<f32>
  %m = dtc.mul %t, %c : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  %s = dtc.reduce_sum %t {axis = 0 : i64} : tensor<4xf32> -> tensor<f32>
  return %m, %s : tensor<4xf32>, tensor<f32>
}

// -----

// Different iteration spaces are different kernels; a chain is not fused
// across a use that comes before its end (the fused op would not dominate it).
// CHECK-LABEL: func.func @no_fusion_across
// CHECK: %[[F1:.*]] = dtc.fused(%arg0)
// CHECK:   dtc.exp
// CHECK: %[[S:.*]] = dtc.reduce_sum %[[F1]]
// CHECK: %[[F2:.*]] = dtc.fused(%[[F1]], %[[S]])
// CHECK:   dtc.sub
// CHECK: %[[F3:.*]] = dtc.fused(%[[S]])
// CHECK:   dtc.log
func.func @no_fusion_across(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<f32>) {
  %e = dtc.exp %x : tensor<4xf32>
  %s = dtc.reduce_sum %e {axis = 0 : i64} : tensor<4xf32> -> tensor<f32>
  %d = dtc.sub %e, %s : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  %l = dtc.log %s : tensor<f32>
  return %d, %l : tensor<4xf32>, tensor<f32>
}

// -----

// A chain nobody reads is dead code and disappears.
// CHECK-LABEL: func.func @dead
// CHECK-NOT: dtc.fused
// CHECK: return %arg0
func.func @dead(%x: tensor<4xf32>) -> tensor<4xf32> {
  %t = dtc.tanh %x : tensor<4xf32>
  %e = dtc.exp %t : tensor<4xf32>
  return %x : tensor<4xf32>
}
