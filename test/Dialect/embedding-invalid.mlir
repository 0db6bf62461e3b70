// RUN: dtc-opt %s -split-input-file -verify-diagnostics
// The verifiers of embeddings and of cross_entropy over sequences.

func.func @table_rank(%ids: tensor<?x5xi32>, %w: tensor<11xf32>) {
  // expected-error @+2 {{embedding needs a table [num, dim], got [11]}}
  // expected-error @+1 {{failed to infer returned types}}
  %e = dtc.embedding %ids, %w : tensor<?x5xi32>, tensor<11xf32> -> tensor<?x5xf32>
  return
}

// -----

func.func @result(%ids: tensor<?x5xi32>, %w: tensor<11x4xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<?x5x4xf32>' are incompatible with return type(s) of operation 'tensor<?x4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %e = dtc.embedding %ids, %w : tensor<?x5xi32>, tensor<11x4xf32> -> tensor<?x4xf32>
  return
}

// -----

func.func @grad_dy(%ids: tensor<?x5xi32>, %dy: tensor<?x5x3xf32>) {
  // expected-error @+1 {{dy must be 'tensor<?x5x4xf32>', the ids' shape with the table's dim, got 'tensor<?x5x3xf32>'}}
  %g = dtc.embedding_grad %ids, %dy : tensor<?x5xi32>, tensor<?x5x3xf32> -> tensor<11x4xf32>
  return
}

// -----

func.func @grad_table(%ids: tensor<?x5xi32>, %dy: tensor<?x5x4xf32>) {
  // expected-error @+1 {{result must be a table [num, dim], got 'tensor<?x4xf32>'}}
  %g = dtc.embedding_grad %ids, %dy : tensor<?x5xi32>, tensor<?x5x4xf32> -> tensor<?x4xf32>
  return
}

// -----

func.func @sequence_labels(%l: tensor<?x5x11xf32>, %y: tensor<?x4xi32>) {
  // expected-error @+2 {{cross_entropy needs logits [N, ..., C] and labels [N, ...] of the logits' shape without C, got [B, 5, 11] and [B, 4]}}
  // expected-error @+1 {{failed to infer returned types}}
  %loss = dtc.cross_entropy %l, %y : tensor<?x5x11xf32>, tensor<?x4xi32> -> tensor<f32>
  return
}
