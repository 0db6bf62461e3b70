// RUN: dtc-opt %s -split-input-file -verify-diagnostics --dtc-derive-steps

// expected-error @+1 {{dtc-derive-steps needs @forward and @train_step (run dtc-autodiff first)}}
module {
  func.func @forward(%x: tensor<f32>) -> tensor<f32> {
    return %x : tensor<f32>
  }
}
