// RUN: dtc-opt %s --split-input-file --verify-diagnostics

// In-place all-reduce of a value that is also read elsewhere.
func.func @shared(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %g = dtc.neg %x : tensor<4xf32>
  // expected-error @+1 {{reduces its operands in place, but one is also used by 'dtc.tanh'}}
  %r = dtc.all_reduce %g : tensor<4xf32>
  %t = dtc.tanh %g : tensor<4xf32>
  return %r, %t : tensor<4xf32>, tensor<4xf32>
}

// -----

func.func @mismatched_wait(%x: tensor<4xf32>) -> tensor<4xf32> {
  %g = dtc.neg %x : tensor<4xf32>
  %h = dtc.tanh %x : tensor<4xf32>
  %req = dtc.all_reduce_start(%g) {bucket = 0 : i64} : tensor<4xf32>
  // expected-error @+1 {{must wait for the same gradients and bucket as its start}}
  %r = dtc.all_reduce_wait %req, (%h) {bucket = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}
