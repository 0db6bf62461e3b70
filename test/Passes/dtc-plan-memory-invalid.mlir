// RUN: dtc-opt %s --dtc-plan-memory=alignment=24 --verify-diagnostics

// expected-error @+1 {{alignment must be a power of two >= 16}}
module {
  dtc.param @w : tensor<4xf32>
}
