// RUN: dtc-opt %s -split-input-file -verify-diagnostics | FileCheck %s
// RUN: dtc-opt %s -split-input-file -verify-diagnostics --dtc-autodiff | FileCheck %s --check-prefix=GRAD
// dropout and its gradient: the same p and salt, so the same mask.

// CHECK-LABEL: func.func @forward
// CHECK: dtc.dropout %{{.*}} {p = 2.500000e-01 : f64, salt = 3 : i64} : tensor<?x4xf32>
// GRAD-LABEL: func.func @train_step
// GRAD: %[[D:.*]] = dtc.dropout %{{.*}} {p = 2.500000e-01 : f64, salt = 3 : i64}
// GRAD: dtc.dropout_grad %{{.*}} {p = 2.500000e-01 : f64, salt = 3 : i64} : tensor<?x4xf32>
module {
  dtc.param @w : tensor<4xf32>
  func.func @forward(%x: tensor<?x4xf32>, %y: tensor<?xi32>) -> tensor<f32> {
    %w = dtc.param_ref @w : tensor<4xf32>
    %h = dtc.mul %x, %w : tensor<?x4xf32>, tensor<4xf32> -> tensor<?x4xf32>
    %d = dtc.dropout %h {p = 0.25 : f64, salt = 3 : i64} : tensor<?x4xf32>
    %l = dtc.cross_entropy %d, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

func.func @bad_p(%x: tensor<?x4xf32>) {
  // expected-error @+1 {{'dtc.dropout' op p must be in [0, 1], got 1.5}}
  %d = dtc.dropout %x {p = 1.5 : f64, salt = 0 : i64} : tensor<?x4xf32>
  return
}
