// RUN: dtc-opt %s -split-input-file -verify-diagnostics
// split's and concat's verifiers.

func.func @split_sizes(%x: tensor<?x6xf32>) {
  // expected-error @+1 {{'dtc.split' op results join into 'tensor<?x5xf32>', not the input's 'tensor<?x6xf32>'}}
  %a, %b = dtc.split %x {axis = 1 : i64} : tensor<?x6xf32> -> tensor<?x2xf32>, tensor<?x3xf32>
  return
}

// -----

func.func @split_batch(%x: tensor<?x6xf32>) {
  // expected-error @+1 {{cannot split or concatenate along the batch dimension B}}
  %a, %b = dtc.split %x {axis = 0 : i64} : tensor<?x6xf32> -> tensor<?x6xf32>, tensor<?x6xf32>
  return
}

// -----

func.func @concat_shapes(%a: tensor<?x2x3xf32>, %b: tensor<?x4x3xf32>) {
  // expected-error @+1 {{tensors joined along axis 2 must have the same shape elsewhere, got [B, 2, 3] and [B, 4, 3]}}
  %c = dtc.concat %a, %b {axis = 2 : i64} : tensor<?x2x3xf32>, tensor<?x4x3xf32> -> tensor<?x2x6xf32>
  return
}

// -----

func.func @concat_result(%a: tensor<?x2xf32>, %b: tensor<?x3xf32>) {
  // expected-error @+1 {{'dtc.concat' op result must be 'tensor<?x5xf32>', got 'tensor<?x6xf32>'}}
  %c = dtc.concat %a, %b {axis = 1 : i64} : tensor<?x2xf32>, tensor<?x3xf32> -> tensor<?x6xf32>
  return
}
