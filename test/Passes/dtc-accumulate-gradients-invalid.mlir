// RUN: dtc-opt %s -split-input-file -verify-diagnostics --dtc-accumulate-gradients

// expected-error @+1 {{'dtc.accumulate' is the micro-batches per optimizer step, >= 2, got 1}}
module attributes {dtc.accumulate = 1 : i64} {
}

// -----

module attributes {dtc.accumulate = 2 : i64} {
  dtc.param @w1 : tensor<8xf32>
  // expected-error @+1 {{dtc-accumulate-gradients runs before the all-reduces are inserted and the updates grouped}}
  func.func @train_step(%g: tensor<8xf32>) {
    %r = dtc.all_reduce %g : tensor<8xf32>
    dtc.apply_gradient @w1, %r : tensor<8xf32>
    return
  }
}

// -----

module attributes {dtc.accumulate = 2 : i64} {
  dtc.param @w1 : tensor<8xf32>
  func.func @train_step(%g: tensor<4xf32>) {
    // expected-error @+1 {{'dtc.take_accumulated' op type 'tensor<4xf32>' does not match parameter type 'tensor<8xf32>'}}
    %t = dtc.take_accumulated @w1, %g : tensor<4xf32>
    return
  }
}
