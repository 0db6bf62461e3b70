// RUN: dtc-opt %s | dtc-opt | FileCheck %s
// The typed attributes of the recipe, the optimizer and the plan print and
// parse back (defaults elided), and doubles keep every bit.

// CHECK: module attributes {dtc.optimizer = #dtc.optimizer<sgd, lr = 0.1, weight_decay = 0.0, momentum = 0.9, nesterov = true>,
// CHECK-SAME: dtc.persistent = #dtc.persistent<param_bytes = 64, bytes = 128>,
// CHECK-SAME: dtc.recipe = #dtc.recipe<data = idx, dir = "/data", batch = 32, seed = 3, validation = 0.1>}
module attributes {
    dtc.optimizer = #dtc.optimizer<sgd, lr = 0.1, weight_decay = 0.0, momentum = 0.9, nesterov = true>,
    dtc.recipe = #dtc.recipe<data = idx, dir = "/data", batch = 32, seed = 3, validation = 0.1>,
    dtc.persistent = #dtc.persistent<param_bytes = 64, bytes = 128>} {
  // CHECK: dtc.param @w : tensor<4xf32> {dtc.placement = #dtc.placement<offset = 0, state_offset = 64>, init = #dtc.init<he_normal>}
  dtc.param @w : tensor<4xf32> {init = #dtc.init<he_normal>, dtc.placement = #dtc.placement<offset = 0, state_offset = 64>}
  // CHECK: func.func @f
  // CHECK-SAME: dtc.arena = #dtc.arena<per_sample = 16, fixed = 0, naive_per_sample = 16, naive_fixed = 0>
  func.func @f(%x: tensor<?x4xf32>) -> tensor<?x4xf32> attributes {
      dtc.arena = #dtc.arena<per_sample = 16, fixed = 0, naive_per_sample = 16, naive_fixed = 0>} {
    // CHECK: dtc.relu %{{.*}} {dtc.offsets = array<i64: 0>}
    %0 = dtc.relu %x {dtc.offsets = array<i64: 0>} : tensor<?x4xf32>
    return %0 : tensor<?x4xf32>
  }
}

// -----
// CHECK: #dtc.optimizer<adamw, lr = 0.00030000000000000003, weight_decay = 0.1, beta2 = 0.95, eps = 1.0e-06>
// CHECK: #dtc.recipe<data = synthetic, train_size = 100>
module attributes {
    dtc.optimizer = #dtc.optimizer<adamw, lr = 0.00030000000000000003, weight_decay = 0.1, beta2 = 0.95, eps = 1.0e-6>,
    dtc.recipe = #dtc.recipe<data = synthetic, train_size = 100>} {
}

// -----
// The schedule: defaults elided, doubles exact.
// CHECK: dtc.schedule = #dtc.schedule<kind = cosine, warmup = 100, min_lr = 1.0e-05>
// CHECK: dtc.schedule = #dtc.schedule<kind = step, step_size = 30, gamma = 0.5>
module attributes {dtc.schedule = #dtc.schedule<kind = cosine, warmup = 100, min_lr = 1.0e-5>} {
}
module attributes {dtc.schedule = #dtc.schedule<kind = step, step_size = 30, gamma = 0.5>} {
}
