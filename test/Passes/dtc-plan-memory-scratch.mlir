// RUN: dtc-opt %s --dtc-plan-memory --split-input-file | FileCheck %s --enable-var-scope
// RUN: dtc-opt %s --dtc-verify-backend-contract --split-input-file --verify-diagnostics=only-expected

// Scratch memory (ScratchOpInterface): the im2col columns of one sample,
// C kH kW Ho Wo floats (2 * 3 * 3 * 4 * 4 * 4 = 1152 bytes), placed in the
// fixed region while the op runs, where no live value is: here after %s
// (64 bytes, alive across the convolution); freed after it, so the second
// convolution's columns reuse the place.
// CHECK-LABEL: func.func @columns
// CHECK-SAME: dtc.arena = #dtc.arena<per_sample = 192, fixed = 1216, naive_per_sample = 384, naive_fixed = 2368>
// CHECK: dtc.reduce_sum{{.*}}dtc.offsets = array<i64: 0>
// CHECK: dtc.conv2d{{.*}}dtc.offsets = array<i64: 0>, dtc.scratch = 64 : i64
// CHECK: dtc.conv2d{{.*}}dtc.offsets = array<i64: 0>, dtc.scratch = 64 : i64
func.func @columns(%x: tensor<?x2x6x6xf32>, %w: tensor<3x2x3x3xf32>, %v: tensor<16x3xf32>) -> tensor<3xf32> {
  %s = dtc.reduce_sum %v {axis = 0 : i64} : tensor<16x3xf32> -> tensor<3xf32>
  %a = dtc.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<?x2x6x6xf32>, tensor<3x2x3x3xf32> -> tensor<?x3x4x4xf32>
  %b = dtc.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<?x2x6x6xf32>, tensor<3x2x3x3xf32> -> tensor<?x3x4x4xf32>
  return %s : tensor<3xf32>
}

// -----

// The contract: a convolution without its scratch is not planned.
module attributes {dtc.optimizer = #dtc.optimizer<sgd, lr = 0.1, weight_decay = 0.0>, dtc.recipe = #dtc.recipe<>,
                   dtc.persistent = #dtc.persistent<param_bytes = 0, bytes = 0>} {
  func.func @eval_step(%x: tensor<?x2x6x6xf32>, %y: tensor<?xi32>) -> tensor<?x3x4x4xf32>
      attributes {dtc.arena = #dtc.arena<per_sample = 192, fixed = 2048, naive_per_sample = 192, naive_fixed = 2048>} {
    %w = dtc.constant {value = 1.0 : f32, dtc.offsets = array<i64: 0>} : tensor<3x2x3x3xf32>
    // expected-error @+1 {{needs 1152 bytes of scratch memory and has no dtc.scratch (run dtc-plan-memory)}}
    %a = dtc.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64, dtc.offsets = array<i64: 0>} : tensor<?x2x6x6xf32>, tensor<3x2x3x3xf32> -> tensor<?x3x4x4xf32>
    // expected-error @+1 {{scratch ends at byte 3200, past the arena's fixed region (2048)}}
    %b = dtc.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64, dtc.offsets = array<i64: 0>, dtc.scratch = 2048 : i64} : tensor<?x2x6x6xf32>, tensor<3x2x3x3xf32> -> tensor<?x3x4x4xf32>
    return %b : tensor<?x3x4x4xf32>
  }
}
