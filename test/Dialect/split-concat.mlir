// RUN: dtc-opt %s | dtc-opt | FileCheck %s --check-prefix=PARSE
// RUN: dtc-opt %s --dtc-autodiff | FileCheck %s --enable-var-scope
// split and concat round-trip; each is the other's gradient (an unused
// piece's gradient is a zero, broadcast to its batch shape).

// PARSE: %{{.*}}:3 = dtc.split %{{.*}} {axis = 2 : i64} : tensor<?x4x12xf32> -> tensor<?x4x4xf32>, tensor<?x4x4xf32>, tensor<?x4x4xf32>
// PARSE: dtc.concat %{{.*}}, %{{.*}} {axis = 2 : i64} : tensor<?x4x4xf32>, tensor<?x4x4xf32> -> tensor<?x4x8xf32>

// CHECK-LABEL: func.func @train_step
// CHECK: %[[S:.*]]:3 = dtc.split %[[X:.*]] {axis = 2 : i64}
// CHECK: %[[C:.*]] = dtc.concat %[[S]]#2, %[[S]]#0 {axis = 2 : i64}
// CHECK: %[[DC:.*]]:2 = dtc.split %{{.*}} {axis = 2 : i64} : tensor<?x4x8xf32> -> tensor<?x4x4xf32>, tensor<?x4x4xf32>
// CHECK: %[[Z:.*]] = dtc.broadcast_to %{{.*}} : tensor<f32> -> tensor<?x4x4xf32>
// CHECK: dtc.concat %[[DC]]#1, %[[Z]], %[[DC]]#0 {axis = 2 : i64} : tensor<?x4x4xf32>, tensor<?x4x4xf32>, tensor<?x4x4xf32> -> tensor<?x4x12xf32>
module {
  dtc.param @w : tensor<12x6xf32>
  func.func @forward(%x: tensor<?x4x6xf32>, %l: tensor<?xi32>) -> tensor<f32> {
    %w = dtc.param_ref @w : tensor<12x6xf32>
    %qkv = dtc.matmul %x, %w {transpose_rhs = true} : tensor<?x4x6xf32>, tensor<12x6xf32> -> tensor<?x4x12xf32>
    %q, %k, %v = dtc.split %qkv {axis = 2 : i64} : tensor<?x4x12xf32> -> tensor<?x4x4xf32>, tensor<?x4x4xf32>, tensor<?x4x4xf32>
    %c = dtc.concat %v, %q {axis = 2 : i64} : tensor<?x4x4xf32>, tensor<?x4x4xf32> -> tensor<?x4x8xf32>
    %s = dtc.reduce_sum %c {axis = 2 : i64} : tensor<?x4x8xf32> -> tensor<?x4xf32>
    %r = dtc.reduce_sum %s {axis = 1 : i64} : tensor<?x4xf32> -> tensor<?xf32>
    %t = dtc.reduce_sum %r {axis = 0 : i64} : tensor<?xf32> -> tensor<f32>
    return %t : tensor<f32>
  }
}
