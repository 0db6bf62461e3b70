// RUN: dtc-opt %s --dtc-plan-memory=report --split-input-file --verify-diagnostics | FileCheck %s --enable-var-scope

// Buffers are reused once dead: %b gets a place of its own (%a is still
// read by %c), %c is written over %a, an input of its type whose last use
// it is (dtc.in_place: result 0 over input 0; the kernel reads each element
// before it writes it), and %d over %c. The batched buffers live in the
// per-sample region (offsets in bytes per sample), the fixed ones in the
// fixed region. The reshape aliases %d. SGD with momentum keeps one state
// buffer per parameter, after them all.
// CHECK: dtc.param @w {{.*}}dtc.placement = #dtc.placement<offset = 0, state_offset = 64>
// CHECK-LABEL: func.func @chain
// CHECK-SAME: dtc.arena = #dtc.arena<per_sample = 32, fixed = 128, naive_per_sample = 64, naive_fixed = 192>
// CHECK: dtc.fused{{.*}}dtc.offsets = array<i64: 0>
// CHECK-NOT: dtc.in_place
// CHECK: dtc.fused{{.*}}dtc.offsets = array<i64: 16>
// CHECK-NOT: dtc.in_place
// CHECK: dtc.fused{{.*}}{dtc.in_place = array<i64: 0>, dtc.offsets = array<i64: 0>}
// CHECK: dtc.fused{{.*}}{dtc.in_place = array<i64: 0>, dtc.offsets = array<i64: 0>}
// CHECK: dtc.reshape
// CHECK-NOT: dtc.offsets
// CHECK: dtc.reduce_sum{{.*}}dtc.offsets = array<i64: 0>
module attributes {dtc.optimizer = #dtc.optimizer<sgd, lr = 0.01, weight_decay = 0.0, momentum = 0.9>} {
  dtc.param @w : tensor<4xf32>
  // expected-remark @+1 {{arena 32 B/sample + 128 B (without reuse: 64 B/sample + 192 B)}}
  func.func @chain(%x: tensor<?x4xf32>, %y: tensor<?xi32>) -> tensor<f32> {
    %a = dtc.fused(%x) : (tensor<?x4xf32>) -> tensor<?x4xf32> {
    ^bb0(%i: tensor<?x4xf32>):
      %0 = dtc.exp %i : tensor<?x4xf32>
      dtc.yield %0 : tensor<?x4xf32>
    }
    %b = dtc.fused(%a) : (tensor<?x4xf32>) -> tensor<?x4xf32> {
    ^bb0(%i: tensor<?x4xf32>):
      %0 = dtc.tanh %i : tensor<?x4xf32>
      dtc.yield %0 : tensor<?x4xf32>
    }
    %c = dtc.fused(%a, %b) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32> {
    ^bb0(%i: tensor<?x4xf32>, %j: tensor<?x4xf32>):
      %0 = dtc.add %i, %j : tensor<?x4xf32>, tensor<?x4xf32> -> tensor<?x4xf32>
      dtc.yield %0 : tensor<?x4xf32>
    }
    %d = dtc.fused(%c) : (tensor<?x4xf32>) -> tensor<?x4xf32> {
    ^bb0(%i: tensor<?x4xf32>):
      %0 = dtc.neg %i : tensor<?x4xf32>
      dtc.yield %0 : tensor<?x4xf32>
    }
    %r = dtc.reshape %d : tensor<?x4xf32> -> tensor<?x2x2xf32>
    %s = dtc.reduce_sum %r {axis = 0 : i64} : tensor<?x2x2xf32> -> tensor<2x2xf32>
    %t = dtc.reduce_sum %s {axis = 0 : i64} : tensor<2x2xf32> -> tensor<2xf32>
    %u = dtc.reduce_sum %t {axis = 0 : i64} : tensor<2xf32> -> tensor<f32>
    return %u : tensor<f32>
  }
}

// -----

// Never in place: over a broadcast input (%bias, of another type), over an
// input whose storage another input reads too (%v, also read as %w, a view
// of it), over a step argument or a parameter (not the arena's).
// CHECK-LABEL: func.func @not_in_place
// CHECK-NOT: dtc.in_place
// CHECK: return
module {
  dtc.param @p : tensor<4xf32>
  // expected-remark @+1 {{arena 32 B/sample + 64 B (without reuse: 32 B/sample + 64 B)}}
  func.func @not_in_place(%x: tensor<?x4xf32>, %y: tensor<?xi32>) -> tensor<?x4xf32> {
    %p = dtc.param_ref @p : tensor<4xf32>
    %bias = dtc.fused(%p) : (tensor<4xf32>) -> tensor<4xf32> {
    ^bb0(%i: tensor<4xf32>):
      %0 = dtc.neg %i : tensor<4xf32>
      dtc.yield %0 : tensor<4xf32>
    }
    %v = dtc.fused(%x, %bias) : (tensor<?x4xf32>, tensor<4xf32>) -> tensor<?x4xf32> {
    ^bb0(%i: tensor<?x4xf32>, %j: tensor<4xf32>):
      %0 = dtc.add %i, %j : tensor<?x4xf32>, tensor<4xf32> -> tensor<?x4xf32>
      dtc.yield %0 : tensor<?x4xf32>
    }
    %r = dtc.reshape %v : tensor<?x4xf32> -> tensor<?x2x2xf32>
    %w = dtc.reshape %r : tensor<?x2x2xf32> -> tensor<?x4xf32>
    %z = dtc.fused(%v, %w) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32> {
    ^bb0(%i: tensor<?x4xf32>, %j: tensor<?x4xf32>):
      %0 = dtc.mul %i, %j : tensor<?x4xf32>, tensor<?x4xf32> -> tensor<?x4xf32>
      dtc.yield %0 : tensor<?x4xf32>
    }
    return %z : tensor<?x4xf32>
  }
}

// -----

// Adam keeps two state buffers per parameter after all parameters.
// CHECK-LABEL: module attributes
// CHECK-SAME: dtc.persistent = #dtc.persistent<param_bytes = 128, bytes = 256>
// CHECK: dtc.param @a {{.*}}dtc.placement = #dtc.placement<offset = 0, state_offset = 128>
// CHECK: dtc.param @b {{.*}}dtc.placement = #dtc.placement<offset = 64, state_offset = 192>
module attributes {dtc.optimizer = #dtc.optimizer<adam, lr = 0.001, weight_decay = 0.0>} {
  dtc.param @a : tensor<4xf32>
  dtc.param @b : tensor<2x2xf32>
}

// -----

// Gradients of one bucket are produced directly into one contiguous block
// (members 16-byte aligned) that the collective reduces in place; the wait's
// results alias it; the block is freed after the last update reads it.
// CHECK-LABEL: func.func @buckets
// CHECK: %[[A:.*]] = dtc.fused{{.*}}dtc.offsets = array<i64: 0>
// CHECK: %[[B:.*]] = dtc.fused{{.*}}dtc.offsets = array<i64: 16>
// CHECK: dtc.all_reduce_start(%[[A]], %[[B]]) {bucket = 0 : i64, dtc.bucket_plan = #dtc.bucket_plan<offset = 0, count = 8>}
// CHECK: %[[C:.*]] = dtc.fused{{.*}}dtc.offsets = array<i64: 64>
// CHECK: dtc.all_reduce_start(%[[C]]) {bucket = 1 : i64, dtc.bucket_plan = #dtc.bucket_plan<offset = 64, count = 4>}
// Bucket 0's block is free again once its updates are done:
// CHECK: dtc.constant {dtc.offsets = array<i64: 0>
// CHECK: return
module {
  dtc.param @a : tensor<3xf32>
  dtc.param @b : tensor<2xf32>
  dtc.param @c : tensor<4xf32>
  // expected-remark @+1 {{arena 0 B/sample + 128 B (without reuse: 0 B/sample + 192 B)}}
  func.func @buckets(%x: tensor<?x4xf32>, %y: tensor<?xi32>) -> tensor<f32> {
    %pa = dtc.param_ref @a : tensor<3xf32>
    %pb = dtc.param_ref @b : tensor<2xf32>
    %pc = dtc.param_ref @c : tensor<4xf32>
    %ga = dtc.fused(%pa) : (tensor<3xf32>) -> tensor<3xf32> {
    ^bb0(%i: tensor<3xf32>):
      %0 = dtc.neg %i : tensor<3xf32>
      dtc.yield %0 : tensor<3xf32>
    }
    %gb = dtc.fused(%pb) : (tensor<2xf32>) -> tensor<2xf32> {
    ^bb0(%i: tensor<2xf32>):
      %0 = dtc.neg %i : tensor<2xf32>
      dtc.yield %0 : tensor<2xf32>
    }
    %s0 = dtc.all_reduce_start(%ga, %gb) {bucket = 0 : i64} : tensor<3xf32>, tensor<2xf32>
    %gc = dtc.fused(%pc) : (tensor<4xf32>) -> tensor<4xf32> {
    ^bb0(%i: tensor<4xf32>):
      %0 = dtc.neg %i : tensor<4xf32>
      dtc.yield %0 : tensor<4xf32>
    }
    %s1 = dtc.all_reduce_start(%gc) {bucket = 1 : i64} : tensor<4xf32>
    %w0:2 = dtc.all_reduce_wait %s0, (%ga, %gb) {bucket = 0 : i64} : (tensor<3xf32>, tensor<2xf32>) -> (tensor<3xf32>, tensor<2xf32>)
    dtc.apply_gradient @a, %w0#0 : tensor<3xf32>
    dtc.apply_gradient @b, %w0#1 : tensor<2xf32>
    %w1 = dtc.all_reduce_wait %s1, (%gc) {bucket = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    dtc.apply_gradient @c, %w1 : tensor<4xf32>
    %l = dtc.constant {value = 0.0 : f32} : tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Placed once every live range is known (greedy by size), not in program
// order: best fit would put %a at 0 and %b at 16, and %c (32 bytes, after
// %a has died but while %b is read) finds no hole of its size below %b and
// grows the region to 64. Placing the largest first puts %c at 0, %a (dead
// before %c is made) at 0 too, and %b at 32: 48 bytes a sample.
// CHECK-LABEL: func.func @fragmented
// CHECK-SAME: dtc.arena = #dtc.arena<per_sample = 48,
// CHECK: dtc.matmul {{.*}}dtc.offsets = array<i64: 0>
// CHECK: dtc.matmul {{.*}}dtc.offsets = array<i64: 32>
// CHECK: dtc.matmul {{.*}}dtc.offsets = array<i64: 0>
module {
  dtc.param @w : tensor<4x4xf32>
  dtc.param @w8 : tensor<8x4xf32>
  // expected-remark @+1 {{arena 48 B/sample + 0 B (without reuse: 64 B/sample + 0 B)}}
  func.func @fragmented(%x: tensor<?x4xf32>) -> tensor<?x8xf32> {
    %w = dtc.param_ref @w : tensor<4x4xf32>
    %w8 = dtc.param_ref @w8 : tensor<8x4xf32>
    %a = dtc.matmul %x, %w {transpose_rhs = true} : tensor<?x4xf32>, tensor<4x4xf32> -> tensor<?x4xf32>
    %b = dtc.matmul %a, %w {transpose_rhs = true} : tensor<?x4xf32>, tensor<4x4xf32> -> tensor<?x4xf32>
    %c = dtc.matmul %b, %w8 {transpose_rhs = true} : tensor<?x4xf32>, tensor<8x4xf32> -> tensor<?x8xf32>
    return %c : tensor<?x8xf32>
  }
}
