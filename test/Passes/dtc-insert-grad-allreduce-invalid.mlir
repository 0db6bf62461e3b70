// RUN: dtc-opt %s --dtc-insert-grad-allreduce --verify-diagnostics

// The data-parallel passes need the training step.
// expected-error @below {{dtc-insert-grad-allreduce needs a func.func @train_step (run dtc-autodiff first)}}
module {
  func.func @forward(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
    return %x : tensor<?x4xf32>
  }
}
