// RUN: dtc-opt %s -split-input-file -verify-diagnostics
// The typed attributes' verifiers, and where each dtc.* attribute may stand.

// expected-error @+1 {{invalid value 0.0 for lr (expected > 0)}}
module attributes {dtc.optimizer = #dtc.optimizer<sgd, lr = 0.0, weight_decay = 0.0>} {}

// -----

// expected-error @+1 {{invalid value 1.0 for momentum (expected in [0, 1))}}
module attributes {dtc.optimizer = #dtc.optimizer<sgd, lr = 0.1, weight_decay = 0.0, momentum = 1.0>} {}

// -----

// expected-error @+1 {{beta1, beta2 and eps are Adam's, not sgd's}}
module attributes {dtc.optimizer = #dtc.optimizer<sgd, lr = 0.1, weight_decay = 0.0, beta1 = 0.5>} {}

// -----

// expected-error @+1 {{momentum, dampening and nesterov are sgd's, not adam's}}
module attributes {dtc.optimizer = #dtc.optimizer<adam, lr = 0.1, weight_decay = 0.0, momentum = 0.5>} {}

// -----

// expected-error @+1 {{nesterov needs momentum > 0 and dampening = 0}}
module attributes {dtc.optimizer = #dtc.optimizer<sgd, lr = 0.1, weight_decay = 0.0, nesterov = true>} {}

// -----

// expected-error @+1 {{'dir' belongs to idx data, which needs it}}
module attributes {dtc.recipe = #dtc.recipe<data = idx>} {}

// -----

// expected-error @+1 {{the batch must be >= 1, got 0}}
module attributes {dtc.recipe = #dtc.recipe<batch = 0>} {}

// -----

// expected-error @+1 {{'train_size' and 'test_size' belong to synthetic data}}
module attributes {dtc.recipe = #dtc.recipe<data = csv, train = "a.csv", test_size = 3>} {}

// -----

// expected-error @+1 {{'dtc.recipe' must be #dtc.recipe, got {data = "idx"}}}
module attributes {dtc.recipe = {data = "idx"}} {}

// -----

// expected-error @+1 {{unknown dtc attribute 'dtc.fold_momentum'}}
module attributes {dtc.fold_momentum} {}

// -----

// expected-error @+1 {{#dtc.persistent: the block (8 bytes) is smaller than its parameters (64)}}
module attributes {dtc.persistent = #dtc.persistent<param_bytes = 64, bytes = 8>} {}

// -----

module {
  // expected-error @+1 {{'dtc.placement' belongs on a dtc.param, dtc.buffer, dtc.accumulate_gradient or dtc.take_accumulated, not on 'func.func'}}
  func.func @f() attributes {dtc.placement = #dtc.placement<offset = 0, state_offset = 0>} {
    return
  }
}

// -----

module {
  // expected-error @+1 {{'dtc.arena' belongs on a step function, not on 'builtin.module'}}
  module attributes {dtc.arena = #dtc.arena<per_sample = 0, fixed = 0, naive_per_sample = 0, naive_fixed = 0>} {}
}

// -----

// expected-error @+1 {{#dtc.arena: fixed must be >= 0, got -4}}
func.func @f() attributes {dtc.arena = #dtc.arena<per_sample = 0, fixed = -4, naive_per_sample = 0, naive_fixed = 0>} {
  return
}

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'dtc.offsets' has 2 offsets for 1 results}}
  %0 = dtc.relu %x {dtc.offsets = array<i64: 0, 64>} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'dtc.offsets': offsets are >= 0, or -1 for a result without a buffer of its own}}
  %0 = dtc.relu %x {dtc.offsets = array<i64: -2>} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'dtc.bucket_plan' belongs on a gradient collective, not on 'dtc.relu'}}
  %0 = dtc.relu %x {dtc.bucket_plan = #dtc.bucket_plan<offset = 0, count = 4>} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{#dtc.bucket_plan: count must be >= 1, got 0}}
  %0 = dtc.all_reduce %x {dtc.bucket_plan = #dtc.bucket_plan<offset = 0, count = 0>} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{'dtc.outputs' names 2 outputs of a function with 1 results}}
func.func @f(%x: tensor<f32>) -> tensor<f32> attributes {dtc.outputs = ["loss", "accuracy"]} {
  return %x : tensor<f32>
}

// -----

// expected-error @+1 {{unknown dtc argument attribute 'dtc.label'}}
func.func @f(%x: tensor<f32> {dtc.label = "x"}) -> tensor<f32> {
  return %x : tensor<f32>
}

// -----

// expected-error @+1 {{validation is a fraction in [0, 1), got 1.0}}
module attributes {dtc.recipe = #dtc.recipe<validation = 1.0>} {}

// -----

// expected-error @+1 {{step_size must be >= 1, got 0}}
module attributes {dtc.schedule = #dtc.schedule<kind = step, step_size = 0>} {}

// -----

// expected-error @+1 {{gamma must be in [0, 1], got 2}}
module attributes {dtc.schedule = #dtc.schedule<kind = step, gamma = 2.0>} {}

// -----

// expected-error @+1 {{decay_steps 10 is shorter than warmup 20: the decay would be over before the warmup ends}}
module attributes {dtc.schedule = #dtc.schedule<kind = linear, warmup = 20, decay_steps = 10>} {}

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'dtc.in_place' belongs on a dtc.fused, not on 'dtc.relu'}}
  %0 = dtc.relu %x {dtc.in_place = array<i64: 0>} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// One entry per result.
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'dtc.in_place' has 2 entries for 1 results}}
  %0 = dtc.fused(%x) {dtc.in_place = array<i64: 0, -1>} : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%i: tensor<4xf32>):
    %r = dtc.neg %i : tensor<4xf32>
    dtc.yield %r : tensor<4xf32>
  }
  return %0 : tensor<4xf32>
}

// -----

// A result over an input of another type (a broadcast bias).
func.func @f(%x: tensor<2x4xf32>, %b: tensor<4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'dtc.in_place': result #0 overwrites an input of its own type, each at most once (its index), or none (-1); got 1}}
  %0 = dtc.fused(%x, %b) {dtc.in_place = array<i64: 1>} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> {
  ^bb0(%i: tensor<2x4xf32>, %j: tensor<4xf32>):
    %r = dtc.add %i, %j : tensor<2x4xf32>, tensor<4xf32> -> tensor<2x4xf32>
    dtc.yield %r : tensor<2x4xf32>
  }
  return %0 : tensor<2x4xf32>
}

// -----

// Two results over one input.
func.func @f(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  // expected-error @+1 {{'dtc.in_place': result #1 overwrites an input of its own type, each at most once (its index), or none (-1); got 0}}
  %0:2 = dtc.fused(%x) {dtc.in_place = array<i64: 0, 0>} : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  ^bb0(%i: tensor<4xf32>):
    %r = dtc.neg %i : tensor<4xf32>
    %s = dtc.exp %i : tensor<4xf32>
    dtc.yield %r, %s : tensor<4xf32>, tensor<4xf32>
  }
  return %0#0, %0#1 : tensor<4xf32>, tensor<4xf32>
}

// -----

// dtc.block (the block instance an op computes) names an instance.
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'dtc.block' must be a non-empty string, got ""}}
  %0 = dtc.neg %x {dtc.block = ""} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{'dtc.block' belongs on an op of a step, not on 'func.func'}}
func.func @g() attributes {dtc.block = "h0"} {
  return
}

// -----

// dtc.checkpoint (checkpoint(...) in the DSL) lists block instances.
// expected-error @+1 {{'dtc.checkpoint' must be an array of block instance names, got ["h0", ""]}}
module attributes {dtc.checkpoint = ["h0", ""]} {
}

// -----

// expected-error @+1 {{'dtc.checkpoint' belongs on the module, not on 'func.func'}}
func.func @h() attributes {dtc.checkpoint = ["h0"]} {
  return
}

// -----

// dtc.prediction (dtc-predict): times finite and >= 0, ranks and batch >= 1.
// expected-error @+1 {{#dtc.prediction: comm_seconds must be finite and >= 0, got -1}}
module attributes {dtc.prediction = #dtc.prediction<step_seconds = 1.0, compute_seconds = 1.0, comm_seconds = -1.0, peak_bytes = 10, ranks = 1, batch = 1>} {
}

// -----

// expected-error @+1 {{#dtc.prediction: reference_seconds must be finite and >= 0, got -1}}
module attributes {dtc.prediction = #dtc.prediction<step_seconds = 1.0, compute_seconds = 1.0, comm_seconds = 0.0, peak_bytes = 10, ranks = 1, batch = 1, reference_seconds = -1.0>} {
}

// -----

// expected-error @+1 {{#dtc.prediction: ranks and batch must be >= 1}}
module attributes {dtc.prediction = #dtc.prediction<step_seconds = 1.0, compute_seconds = 1.0, comm_seconds = 0.0, peak_bytes = 10, ranks = 0, batch = 1>} {
}
