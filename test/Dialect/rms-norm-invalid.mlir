// RUN: dtc-opt %s -split-input-file -verify-diagnostics
// RMS norm's verifier: the normalized dimension, the weight's and rstd's
// shapes, eps.

func.func @batch_last(%x: tensor<?xf32>, %c: tensor<3xf32>) {
  // expected-error @+1 {{'dtc.rms_norm' op normalizes the last dimension of its input, which needs one that is not the batch, got 'tensor<?xf32>'}}
  %y, %r = dtc.rms_norm %x, %c {eps = 1.0e-06 : f64} : tensor<?xf32>, tensor<3xf32>, tensor<f32>
  return
}

// -----

func.func @weight(%x: tensor<?x4xf32>, %c: tensor<3xf32>) {
  // expected-error @+1 {{'dtc.rms_norm' op weight must be [4], the input's last dimension, got 'tensor<3xf32>'}}
  %y, %r = dtc.rms_norm %x, %c {eps = 1.0e-06 : f64} : tensor<?x4xf32>, tensor<3xf32>, tensor<?xf32>
  return
}

// -----

func.func @rstd(%x: tensor<?x2x4xf32>, %c: tensor<4xf32>) {
  // expected-error @+1 {{'dtc.rms_norm' op rstd must be the input's shape without its last dimension, got 'tensor<?xf32>'}}
  %y, %r = dtc.rms_norm %x, %c {eps = 1.0e-06 : f64} : tensor<?x2x4xf32>, tensor<4xf32>, tensor<?xf32>
  return
}

// -----

func.func @eps(%x: tensor<?x4xf32>, %c: tensor<4xf32>) {
  // expected-error @+1 {{'dtc.rms_norm' op eps must be > 0}}
  %y, %r = dtc.rms_norm %x, %c {eps = 0.0 : f64} : tensor<?x4xf32>, tensor<4xf32>, tensor<?xf32>
  return
}
