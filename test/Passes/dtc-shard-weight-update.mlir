// RUN: dtc-opt %s --dtc-shard-weight-update | FileCheck %s --enable-var-scope
// RUN: dtc-opt %s --dtc-shard-weight-update=inflight=1 | FileCheck %s --check-prefix=EARLY
// RUN: sed 's/<gradients, ranks = 2>/<optimizer, ranks = 3>/' %s | dtc-opt --dtc-shard-weight-update | FileCheck %s --check-prefix=STAGE1
// RUN: sed 's/, ranks = 2>/, ranks = 0>/' %s | not dtc-opt --dtc-shard-weight-update 2>&1 | FileCheck %s --check-prefix=NORANKS
// RUN: sed 's/<gradients, ranks = 2>/<parameters, ranks = 2>/' %s | dtc-opt --dtc-shard-weight-update | FileCheck %s --check-prefix=STAGE3
// RUN: sed 's/dtc.shard = #dtc.shard<gradients, ranks = 2>, //' %s | dtc-opt --dtc-shard-weight-update | FileCheck %s --check-prefix=REPLICATED
// RUN: dtc-opt %s --dtc-shard-weight-update=carry=false | FileCheck %s --check-prefix=NOCARRY
//
// Stage 2 (gradients) at 2 ranks: each bucket's all-reduce becomes a
// reduce-scatter started where the all-reduce started, into a shard of its
// own (bucket 0: 24 + 8 floats, 16 a rank; bucket 1: 32, 16 a rank); the
// updates become one shard_update a bucket after the last wait, each
// followed by its all-gather's start, in the order of the buckets' first
// reads in forward (bucket 1's @w1 first). The step leaves the gathers in
// flight (carried): it waits for the previous step's gather of a bucket
// before its first read of the bucket's parameters, so that they overlap
// forward.

// CHECK:      %[[W1:.*]] = dtc.param_ref @w1
// CHECK-NEXT: %[[B1:.*]] = dtc.param_ref @b1
// CHECK-NEXT: dtc.param_ref @w2
// CHECK-NEXT: dtc.all_gather_wait {bucket = 1 : i64}
// CHECK-NEXT: dtc.matmul %arg0, %[[W1]]
// CHECK-NEXT: dtc.all_gather_wait {bucket = 0 : i64}
// CHECK-NEXT: dtc.add %{{.*}}, %[[B1]]
// CHECK:      %[[GW2:.*]] = dtc.matmul %{{.*}}, %{{.*}} {transpose_lhs = true} : tensor<?x3xf32>, tensor<?x8xf32> -> tensor<3x8xf32>
// CHECK:      %[[GB1:.*]] = dtc.sum_to
// CHECK-NEXT: %[[R0:.*]], %[[S0:.*]] = dtc.reduce_scatter_start(%[[GW2]], %[[GB1]]) {bucket = 0 : i64} : tensor<3x8xf32>, tensor<8xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[GW1:.*]] = dtc.matmul %{{.*}}, %arg0 {transpose_lhs = true}
// CHECK-NEXT: %[[R1:.*]], %[[S1:.*]] = dtc.reduce_scatter_start(%[[GW1]]) {bucket = 1 : i64} : tensor<8x4xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[SUM0:.*]] = dtc.reduce_scatter_wait %[[R0]], %[[S0]], (%[[GW2]], %[[GB1]]) {bucket = 0 : i64}
// CHECK-NEXT: %[[SUM1:.*]] = dtc.reduce_scatter_wait %[[R1]], %[[S1]], (%[[GW1]]) {bucket = 1 : i64}
// CHECK-NEXT: dtc.shard_update [@w1](%[[SUM1]]) {bucket = 1 : i64} : tensor<16xf32>
// CHECK-NEXT: dtc.all_gather_start [@w1] {bucket = 1 : i64, carried}
// CHECK-NEXT: dtc.shard_update [@w2, @b1](%[[SUM0]]) {bucket = 0 : i64} : tensor<16xf32>
// CHECK-NEXT: dtc.all_gather_start [@w2, @b1] {bucket = 0 : i64, carried}
// CHECK-NEXT: return
// CHECK-NOT:  dtc.all_reduce
// CHECK-NOT:  dtc.apply_gradient

// The evaluation step waits for the gathers too (a run may evaluate
// between two steps).
// CHECK-LABEL: func.func @eval_step
// CHECK:      dtc.all_gather_wait {bucket = 1 : i64}
// CHECK-NEXT: dtc.matmul %arg0, %{{.*}} {transpose_rhs = true}

// Without carry, the gathers' waits end the step and no other function waits.
// NOCARRY:      %[[G1:.*]] = dtc.all_gather_start [@w1] {bucket = 1 : i64}
// NOCARRY:      %[[G0:.*]] = dtc.all_gather_start [@w2, @b1] {bucket = 0 : i64}
// NOCARRY-NEXT: dtc.all_gather_wait %[[G1]] {bucket = 1 : i64}
// NOCARRY-NEXT: dtc.all_gather_wait %[[G0]] {bucket = 0 : i64}
// NOCARRY-NEXT: return
// NOCARRY-NOT:  dtc.all_gather_wait

// One reduce-scatter in flight: bucket 0's wait moves before bucket 1's
// first gradient, so that bucket 1 can reuse bucket 0's memory.
// EARLY:      dtc.reduce_scatter_start({{.*}}) {bucket = 0 : i64}
// EARLY-NEXT: dtc.reduce_scatter_wait {{.*}} {bucket = 0 : i64}
// EARLY-NEXT: dtc.matmul %{{.*}}, %arg0 {transpose_lhs = true}
// EARLY-NEXT: dtc.reduce_scatter_start({{.*}}) {bucket = 1 : i64}
// EARLY-NEXT: dtc.reduce_scatter_wait {{.*}} {bucket = 1 : i64}

// Stage 1 (optimizer) at 3 ranks: in place (the gradients stay whole),
// where the all-reduce waited; 32 floats pad to 3 shards of 12 (16-byte
// aligned shards).
// STAGE1:      dtc.reduce_scatter_start({{.*}}) {bucket = 0 : i64, in_place} : tensor<3x8xf32>, tensor<8xf32> -> tensor<12xf32>
// STAGE1:      dtc.reduce_scatter_start({{.*}}) {bucket = 1 : i64, in_place} : tensor<8x4xf32> -> tensor<12xf32>
// STAGE1-NEXT: dtc.reduce_scatter_wait {{.*}} {bucket = 0 : i64}
// STAGE1-NEXT: dtc.reduce_scatter_wait {{.*}} {bucket = 1 : i64}

// NORANKS: error: sharding (gradients) plans the shards for a world size: give it with dtc --ranks N or the recipe's ranks = N
// Stage 3 (parameters): the reads become views into the buckets gathered
// whole, in the order of their first reads (bucket 1's @w1 first), each
// gather started once the one before it was waited for (prefetch 1); the
// updates of the shards (in the same order), no all-gather after them.
// (This step has no dtc.grad_seed: one phase; dtc-shard-parameters.test
// has both.)
// STAGE3:      %[[R1:.*]], %[[G1:.*]] = dtc.gather_params_start [@w1] {bucket = 1 : i64} : tensor<32xf32>
// STAGE3:      %[[B1:.*]] = dtc.gather_params_wait %[[R1]], %[[G1]] {bucket = 1 : i64} : tensor<32xf32>
// STAGE3-NEXT: %[[R0:.*]], %[[G0:.*]] = dtc.gather_params_start [@w2, @b1] {bucket = 0 : i64} : tensor<32xf32>
// STAGE3-NEXT: %[[W1:.*]] = dtc.param_view @w1 in %[[B1]][0] : tensor<32xf32> -> tensor<8x4xf32>
// STAGE3-NEXT: dtc.matmul %arg0, %[[W1]]
// STAGE3-NEXT: %[[B0:.*]] = dtc.gather_params_wait %[[R0]], %[[G0]] {bucket = 0 : i64}
// STAGE3-NEXT: dtc.param_view @b1 in %[[B0]][24] : tensor<32xf32> -> tensor<8xf32>
// STAGE3-NEXT: dtc.param_view @w2 in %[[B0]][0] : tensor<32xf32> -> tensor<3x8xf32>
// STAGE3-NOT:  dtc.param_ref
// STAGE3:      dtc.shard_update [@w1]
// STAGE3-NEXT: dtc.shard_update [@w2, @b1]
// STAGE3-NEXT: return

// REPLICATED: dtc.all_reduce_start
// REPLICATED-NOT: dtc.reduce_scatter
module attributes {dtc.shard = #dtc.shard<gradients, ranks = 2>, dtc.optimizer = #dtc.optimizer<sgd, lr = 0.01, weight_decay = 0.0, momentum = 0.9>} {
  dtc.param @w1 : tensor<8x4xf32>
  dtc.param @b1 : tensor<8xf32>
  dtc.param @w2 : tensor<3x8xf32>
  func.func @train_step(%arg0: tensor<?x4xf32>, %arg1: tensor<?xi32>) -> tensor<f32> {
    %0 = dtc.constant {value = 1.000000e+00 : f32} : tensor<f32>
    %1 = dtc.param_ref @w1 : tensor<8x4xf32>
    %2 = dtc.param_ref @b1 : tensor<8xf32>
    %3 = dtc.param_ref @w2 : tensor<3x8xf32>
    %4 = dtc.matmul %arg0, %1 {transpose_rhs = true} : tensor<?x4xf32>, tensor<8x4xf32> -> tensor<?x8xf32>
    %5 = dtc.add %4, %2 : tensor<?x8xf32>, tensor<8xf32> -> tensor<?x8xf32>
    %6 = dtc.tanh %5 : tensor<?x8xf32>
    %7 = dtc.matmul %6, %3 {transpose_rhs = true} : tensor<?x8xf32>, tensor<3x8xf32> -> tensor<?x3xf32>
    %8 = dtc.cross_entropy %7, %arg1 : tensor<?x3xf32>, tensor<?xi32> -> tensor<f32>
    %9 = dtc.cross_entropy_grad %7, %arg1, %0 : (tensor<?x3xf32>, tensor<?xi32>, tensor<f32>) -> tensor<?x3xf32>
    %10 = dtc.matmul %9, %3 : tensor<?x3xf32>, tensor<3x8xf32> -> tensor<?x8xf32>
    %11 = dtc.matmul %9, %6 {transpose_lhs = true} : tensor<?x3xf32>, tensor<?x8xf32> -> tensor<3x8xf32>
    %12 = dtc.mul %6, %6 : tensor<?x8xf32>, tensor<?x8xf32> -> tensor<?x8xf32>
    %13 = dtc.sub %0, %12 : tensor<f32>, tensor<?x8xf32> -> tensor<?x8xf32>
    %14 = dtc.mul %10, %13 : tensor<?x8xf32>, tensor<?x8xf32> -> tensor<?x8xf32>
    %15 = dtc.sum_to %14 : tensor<?x8xf32> -> tensor<8xf32>
    %16 = dtc.all_reduce_start(%11, %15) {bucket = 0 : i64} : tensor<3x8xf32>, tensor<8xf32>
    %17 = dtc.matmul %14, %arg0 {transpose_lhs = true} : tensor<?x8xf32>, tensor<?x4xf32> -> tensor<8x4xf32>
    %18 = dtc.all_reduce_start(%17) {bucket = 1 : i64} : tensor<8x4xf32>
    %19:2 = dtc.all_reduce_wait %16, (%11, %15) {bucket = 0 : i64} : (tensor<3x8xf32>, tensor<8xf32>) -> (tensor<3x8xf32>, tensor<8xf32>)
    dtc.apply_gradient @w2, %19#0 : tensor<3x8xf32>
    dtc.apply_gradient @b1, %19#1 : tensor<8xf32>
    %20 = dtc.all_reduce_wait %18, (%17) {bucket = 1 : i64} : (tensor<8x4xf32>) -> tensor<8x4xf32>
    dtc.apply_gradient @w1, %20 : tensor<8x4xf32>
    return %8 : tensor<f32>
  }
  func.func @eval_step(%arg0: tensor<?x4xf32>) -> tensor<?x8xf32> {
    %0 = dtc.param_ref @w1 : tensor<8x4xf32>
    %1 = dtc.matmul %arg0, %0 {transpose_rhs = true} : tensor<?x4xf32>, tensor<8x4xf32> -> tensor<?x8xf32>
    return %1 : tensor<?x8xf32>
  }
}

