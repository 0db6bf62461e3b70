// RUN: dtc-opt %s --dtc-autodiff --split-input-file --verify-diagnostics

// expected-error @+1 {{dtc-autodiff needs a func.func @forward}}
module {
  func.func @model(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
    return %x : tensor<?x4xf32>
  }
}

// -----

module {
  // expected-error @+1 {{the loss (first result of @forward) must be a 0-d tensor}}
  func.func @forward(%x: tensor<?x4xf32>, %y: tensor<?xi32>) -> tensor<?x4xf32> {
    return %x : tensor<?x4xf32>
  }
}

// -----

module {
  dtc.param @w : tensor<4xf32>
  // expected-warning @+1 {{parameter 'unused' does not affect the loss; it is not trained}}
  dtc.param @unused : tensor<4xf32>
  func.func @forward(%x: tensor<?x4xf32>, %y: tensor<?xi32>) -> tensor<f32> {
    %w = dtc.param_ref @w : tensor<4xf32>
    %u = dtc.param_ref @unused : tensor<4xf32>
    %s = dtc.reduce_sum %w {axis = 0 : i64} : tensor<4xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

module {
  dtc.param @w : tensor<4xf32>
  func.func @forward(%x: tensor<?x4xf32>, %y: tensor<?xi32>) -> tensor<f32> {
    %w = dtc.param_ref @w : tensor<4xf32>
    %b = dtc.broadcast_to %w : tensor<4xf32> -> tensor<2x4xf32>
    %y2 = dtc.reduce_max_grad %b, %w, %w {axis = 0 : i64} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    // expected-error @-1 {{'dtc.reduce_max_grad' is not differentiable but the loss depends on it through a parameter}}
    %s = dtc.reduce_sum %y2 {axis = 0 : i64} : tensor<2x4xf32> -> tensor<4xf32>
    %t = dtc.reduce_sum %s {axis = 0 : i64} : tensor<4xf32> -> tensor<f32>
    return %t : tensor<f32>
  }
}
