// RUN: dtc-opt %s -split-input-file -verify-diagnostics --dtc-verify-backend-contract
// The contract between planning and emission: each violation gets its own
// diagnostic at its op. The first module keeps it.

module attributes {dtc.optimizer = #dtc.optimizer<sgd, lr = 0.1, weight_decay = 0.0>,
                   dtc.recipe = #dtc.recipe<>,
                   dtc.persistent = #dtc.persistent<param_bytes = 64, bytes = 64>} {
  dtc.param @w : tensor<4xf32> {dtc.placement = #dtc.placement<offset = 0, state_offset = 64>}
  func.func @eval_step(%x: tensor<?x4xf32>, %y: tensor<?xi32>) -> tensor<f32>
      attributes {dtc.arena = #dtc.arena<per_sample = 16, fixed = 64, naive_per_sample = 16, naive_fixed = 64>} {
    %w = dtc.param_ref @w : tensor<4xf32>
    %0 = dtc.fused(%x, %w) {dtc.offsets = array<i64: 0>} : (tensor<?x4xf32>, tensor<4xf32>) -> tensor<?x4xf32> {
    ^bb0(%a: tensor<?x4xf32>, %b: tensor<4xf32>):
      %1 = dtc.add %a, %b : tensor<?x4xf32>, tensor<4xf32> -> tensor<?x4xf32>
      dtc.yield %1 : tensor<?x4xf32>
    }
    %r = dtc.reshape %0 : tensor<?x4xf32> -> tensor<?x2x2xf32>
    %s = dtc.reduce_sum %r {axis = 0 : i64, dtc.offsets = array<i64: 0>} : tensor<?x2x2xf32> -> tensor<2x2xf32>
    %t = dtc.reduce_sum %s {axis = 0 : i64, dtc.offsets = array<i64: 16>} : tensor<2x2xf32> -> tensor<2xf32>
    %u = dtc.reduce_sum %t {axis = 0 : i64, dtc.offsets = array<i64: 32>} : tensor<2xf32> -> tensor<f32>
    return %u : tensor<f32>
  }
  func.func @train_step(%x: tensor<?x4xf32>, %y: tensor<?xi32>) -> tensor<f32>
      attributes {dtc.arena = #dtc.arena<per_sample = 0, fixed = 64, naive_per_sample = 0, naive_fixed = 64>} {
    %w = dtc.param_ref @w : tensor<4xf32>
    %g = dtc.fused(%w) {dtc.offsets = array<i64: 0>} : (tensor<4xf32>) -> tensor<4xf32> {
    ^bb0(%a: tensor<4xf32>):
      %1 = dtc.neg %a : tensor<4xf32>
      dtc.yield %1 : tensor<4xf32>
    }
    %l = dtc.constant {value = 0.0 : f32, dtc.offsets = array<i64: 32>} : tensor<f32>
    %s = dtc.all_reduce %g {dtc.bucket_plan = #dtc.bucket_plan<offset = 0, count = 4>} : tensor<4xf32>
    dtc.update_group [@w] (%s) : tensor<4xf32>
    return %l : tensor<f32>
  }
  func.func @grad_step(%x: tensor<?x4xf32>, %y: tensor<?xi32>) -> tensor<f32>
      attributes {dtc.arena = #dtc.arena<per_sample = 0, fixed = 64, naive_per_sample = 0, naive_fixed = 64>} {
    %l = dtc.constant {value = 0.0 : f32, dtc.offsets = array<i64: 32>} : tensor<f32>
    %w = dtc.param_ref @w : tensor<4xf32>
    dtc.export_gradient @w, %w at 0 : tensor<4xf32>
    return %l : tensor<f32>
  }
}

// -----

// expected-error @+5 {{backend contract: the module has no dtc.recipe}}
// expected-error @+4 {{backend contract: the module has no dtc.persistent (run dtc-plan-memory)}}
// expected-error @+3 {{backend contract: the module has no @train_step}}
// expected-error @+2 {{backend contract: the module has no @grad_step}}
// expected-error @+1 {{backend contract: the module has no @eval_step}}
module attributes {dtc.optimizer = #dtc.optimizer<adam, lr = 0.1, weight_decay = 0.0>} {
}

// -----

// expected-error @+3 {{backend contract: the module has no @train_step}}
// expected-error @+2 {{backend contract: the module has no @grad_step}}
// expected-error @+1 {{backend contract: the module has no @eval_step}}
module attributes {dtc.optimizer = #dtc.optimizer<adam, lr = 0.1, weight_decay = 0.0>,
                   dtc.recipe = #dtc.recipe<>,
                   dtc.persistent = #dtc.persistent<param_bytes = 64, bytes = 96>} {
  // expected-error @+1 {{backend contract: parameter 'a' has no dtc.placement}}
  dtc.param @a : tensor<4xf32>
  // expected-error @+1 {{backend contract: parameter 'b' lies outside the parameters of the persistent block}}
  dtc.param @b : tensor<4xf32> {dtc.placement = #dtc.placement<offset = 64, state_offset = 64>}
  // expected-error @+1 {{backend contract: the optimizer state of 'c' lies outside the persistent block}}
  dtc.param @c : tensor<8xf32> {dtc.placement = #dtc.placement<offset = 0, state_offset = 64>}
  // expected-error @+1 {{backend contract: the optimizer state of 'd' overlaps the parameters}}
  dtc.param @d : tensor<2xf32> {dtc.placement = #dtc.placement<offset = 16, state_offset = 32>}
}

// -----

// expected-error @+1 {{backend contract: the module has no @grad_step}}
module attributes {dtc.optimizer = #dtc.optimizer<sgd, lr = 0.1, weight_decay = 0.0>,
                   dtc.recipe = #dtc.recipe<>,
                   dtc.persistent = #dtc.persistent<param_bytes = 0, bytes = 0>} {
  // expected-error @+1 {{backend contract: @eval_step has no dtc.arena (run dtc-plan-memory)}}
  func.func @eval_step(%x: tensor<?x4xf32>, %y: tensor<?xi32>) -> tensor<f32> {
    %0 = dtc.reduce_sum %x {axis = 1 : i64} : tensor<?x4xf32> -> tensor<?xf32>
    %1 = dtc.reduce_sum %0 {axis = 0 : i64} : tensor<?xf32> -> tensor<f32>
    return %1 : tensor<f32>
  }
  func.func @train_step(%x: tensor<?x4xf32>, %y: tensor<?xi32>) -> tensor<f32>
      attributes {dtc.arena = #dtc.arena<per_sample = 8, fixed = 16, naive_per_sample = 8, naive_fixed = 16>} {
    // expected-error @+1 {{backend contract: elementwise ops are emitted only inside dtc.fused (run dtc-fuse-elementwise)}}
    %n = dtc.neg %x {dtc.offsets = array<i64: 0>} : tensor<?x4xf32>
    // expected-error @+1 {{backend contract: result #0 has no buffer (dtc.offsets; run dtc-plan-memory)}}
    %0 = dtc.reduce_sum %n {axis = 1 : i64} : tensor<?x4xf32> -> tensor<?xf32>
    // expected-error @+1 {{backend contract: result #0 ends at byte 20, past its arena region (16)}}
    %1 = dtc.reduce_sum %0 {axis = 0 : i64, dtc.offsets = array<i64: 16>} : tensor<?xf32> -> tensor<f32>
    return %1 : tensor<f32>
  }
}

// -----

// expected-error @+1 {{backend contract: the module has no @grad_step}}
module attributes {dtc.optimizer = #dtc.optimizer<sgd, lr = 0.1, weight_decay = 0.0>,
                   dtc.recipe = #dtc.recipe<>,
                   dtc.persistent = #dtc.persistent<param_bytes = 0, bytes = 0>} {
  func.func @eval_step(%x: tensor<?x4xf32>, %y: tensor<?xi32>) -> tensor<f32>
      attributes {dtc.arena = #dtc.arena<per_sample = 0, fixed = 16, naive_per_sample = 0, naive_fixed = 16>} {
    %c = dtc.constant {value = 1.0 : f32, dtc.offsets = array<i64: 0>} : tensor<f32>
    return %c : tensor<f32>
  }
  func.func @train_step(%x: tensor<?x4xf32>, %y: tensor<?xi32>) -> tensor<f32>
      attributes {dtc.arena = #dtc.arena<per_sample = 0, fixed = 64, naive_per_sample = 0, naive_fixed = 64>} {
    %a0 = dtc.constant {value = 1.0 : f32, dtc.offsets = array<i64: 0>} : tensor<4xf32>
    %a = dtc.constant {value = 1.0 : f32, dtc.offsets = array<i64: 16>} : tensor<4xf32>
    %b = dtc.constant {value = 1.0 : f32, dtc.offsets = array<i64: 32>} : tensor<4xf32>
    // expected-error @+1 {{backend contract: a gradient collective has no dtc.bucket_plan (run dtc-plan-memory)}}
    %r = dtc.all_reduce %a0 : tensor<4xf32>
    // expected-error @+2 {{backend contract: the bucket ends at byte 80, past the fixed region (64)}}
    // expected-error @+1 {{backend contract: gradient #0 of the bucket lies outside it}}
    %s:2 = dtc.all_reduce_bucket(%a, %b) {bucket = 0 : i64, dtc.bucket_plan = #dtc.bucket_plan<offset = 48, count = 8>} : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
    %c0 = dtc.constant {value = 1.0 : f32, dtc.offsets = array<i64: 60>} : tensor<f32>
    return %c0 : tensor<f32>
  }
}
