// RUN: dtc-opt %s -split-input-file -verify-diagnostics
// Layer norm's verifier: the normalized dimension, the weight's and the
// statistics' shapes, eps.

func.func @batch_last(%x: tensor<?xf32>, %c: tensor<3xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{'dtc.layer_norm' op normalizes the last dimension of its input, which needs one that is not the batch, got 'tensor<?xf32>'}}
  %y, %m, %r = dtc.layer_norm %x, %c, %c {eps = 1.0e-05 : f64} : tensor<?xf32>, tensor<3xf32>, tensor<f32>
  return
}

// -----

func.func @weight(%x: tensor<?x4xf32>, %c: tensor<3xf32>, %s: tensor<?xf32>) {
  // expected-error @+1 {{'dtc.layer_norm' op weight and bias must be [4], the input's last dimension, got 'tensor<3xf32>'}}
  %y, %m, %r = dtc.layer_norm %x, %c, %c {eps = 1.0e-05 : f64} : tensor<?x4xf32>, tensor<3xf32>, tensor<?xf32>
  return
}

// -----

func.func @stats(%x: tensor<?x2x4xf32>, %c: tensor<4xf32>) {
  // expected-error @+1 {{'dtc.layer_norm' op mean and rstd must be the input's shape without its last dimension, got 'tensor<?xf32>'}}
  %y, %m, %r = dtc.layer_norm %x, %c, %c {eps = 1.0e-05 : f64} : tensor<?x2x4xf32>, tensor<4xf32>, tensor<?xf32>
  return
}

// -----

func.func @eps(%x: tensor<?x4xf32>, %c: tensor<4xf32>) {
  // expected-error @+1 {{'dtc.layer_norm' op eps must be > 0}}
  %y, %m, %r = dtc.layer_norm %x, %c, %c {eps = 0.0 : f64} : tensor<?x4xf32>, tensor<4xf32>, tensor<?xf32>
  return
}
