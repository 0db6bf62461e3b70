// RUN: dtc-opt %s --split-input-file --verify-diagnostics

func.func @broadcast_mismatch(%a: tensor<?x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+2 {{shapes [B, 3] and [4] do not broadcast}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtc.add %a, %b : tensor<?x3xf32>, tensor<4xf32> -> tensor<?x3xf32>
  return
}

// -----

func.func @batch_against_fixed(%a: tensor<?x3xf32>, %b: tensor<5x3xf32>) {
  // expected-error @+2 {{shapes [B, 3] and [5, 3] do not broadcast}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtc.add %a, %b : tensor<?x3xf32>, tensor<5x3xf32> -> tensor<?x3xf32>
  return
}

// -----

func.func @wrong_result(%a: tensor<3xf32>, %b: tensor<3xf32>) {
  // expected-error @+2 {{'dtc.mul' op inferred type(s) 'tensor<3xf32>' are incompatible with return type(s) of operation 'tensor<4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtc.mul %a, %b : tensor<3xf32>, tensor<3xf32> -> tensor<4xf32>
  return
}

// -----

func.func @matmul_inner(%a: tensor<?x3xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+2 {{matmul inner dimensions differ: [B, 3] x [4, 5]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtc.matmul %a, %b : tensor<?x3xf32>, tensor<4x5xf32> -> tensor<?x5xf32>
  return
}

// -----

func.func @matmul_rank(%a: tensor<4xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+2 {{matmul needs operands of at least 2 dimensions, got [4] and [4, 5]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtc.matmul %a, %b : tensor<4xf32>, tensor<4x5xf32> -> tensor<5xf32>
  return
}

// -----

func.func @matmul_leading(%a: tensor<?x3x4xf32>, %b: tensor<2x4x5xf32>) {
  // expected-error @+2 {{matmul operands need the same leading (batch) dimensions, or a 2-D rhs, got [B, 3, 4] and [2, 4, 5]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtc.matmul %a, %b : tensor<?x3x4xf32>, tensor<2x4x5xf32> -> tensor<?x3x5xf32>
  return
}

// -----

func.func @matmul_lhs_broadcast(%a: tensor<3x4xf32>, %b: tensor<?x4x5xf32>) {
  // expected-error @+2 {{matmul operands need the same leading (batch) dimensions, or a 2-D rhs, got [3, 4] and [B, 4, 5]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtc.matmul %a, %b : tensor<3x4xf32>, tensor<?x4x5xf32> -> tensor<?x3x5xf32>
  return
}

// -----

func.func @matmul_broadcast_transposed(%a: tensor<?x4x3xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+2 {{matmul with a 2-D rhs broadcast over the lhs's leading dimensions cannot transpose the lhs, got [B, 4, 3]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtc.matmul %a, %b {transpose_lhs = true} : tensor<?x4x3xf32>, tensor<4x5xf32> -> tensor<?x3x5xf32>
  return
}

// -----

func.func @matmul_contract_flags(%a: tensor<?x4x3xf32>, %b: tensor<?x4x5xf32>) {
  // expected-error @+2 {{matmul contract_batch needs operands of the same leading dimensions, the lhs transposed and the rhs not, got [B, 4, 3] and [B, 4, 5]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtc.matmul %a, %b {contract_batch} : tensor<?x4x3xf32>, tensor<?x4x5xf32> -> tensor<3x5xf32>
  return
}

// -----

func.func @matmul_contract_rows(%a: tensor<?x4x3xf32>, %b: tensor<?x2x5xf32>) {
  // expected-error @+2 {{matmul contract_batch needs operands of the same leading dimensions}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtc.matmul %a, %b {contract_batch, transpose_lhs = true} : tensor<?x4x3xf32>, tensor<?x2x5xf32> -> tensor<3x5xf32>
  return
}

// -----

func.func @reshape_count(%a: tensor<?x6xf32>) {
  // expected-error @+1 {{cannot reshape [B, 6] to [B, 4]: the number of elements differs}}
  %0 = dtc.reshape %a : tensor<?x6xf32> -> tensor<?x4xf32>
  return
}

// -----

func.func @transpose_perm(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{transpose axes are not a permutation}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtc.transpose %a {perm = array<i64: 0, 0>} : tensor<2x3xf32> -> tensor<2x2xf32>
  return
}

// -----

func.func @reduce_axis(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{axis 2 is out of range for a rank-2 tensor}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtc.reduce_sum %a {axis = 2 : i64} : tensor<2x3xf32> -> tensor<2xf32>
  return
}

// -----

func.func @softmax_axis(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{axis 5 is out of range for a rank-2 tensor}}
  %0 = dtc.softmax %a {axis = 5 : i64} : tensor<2x3xf32>
  return
}

// -----

func.func @xent_shapes(%a: tensor<?x3xf32>, %y: tensor<4xi32>) {
  // expected-error @+2 {{cross_entropy needs logits [N, ..., C] and labels [N, ...] of the logits' shape without C, got [B, 3] and [4]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtc.cross_entropy %a, %y : tensor<?x3xf32>, tensor<4xi32> -> tensor<f32>
  return
}

// -----

func.func @labels_f32(%a: tensor<?x3xf32>, %y: tensor<?xf32>) {
  // expected-error @+1 {{operand #1 must be ranked tensor of 32-bit signless integer values}}
  %0 = dtc.accuracy %a, %y : tensor<?x3xf32>, tensor<?xf32> -> tensor<f32>
  return
}

// -----

func.func @broadcast_to_bad(%a: tensor<3xf32>) {
  // expected-error @+1 {{cannot broadcast [3] to [2, 4]}}
  %0 = dtc.broadcast_to %a : tensor<3xf32> -> tensor<2x4xf32>
  return
}

// -----

func.func @sum_to_bad(%a: tensor<2x4xf32>) {
  // expected-error @+1 {{cannot sum [2, 4] to [3]: the result must broadcast to the operand}}
  %0 = dtc.sum_to %a : tensor<2x4xf32> -> tensor<3xf32>
  return
}

// -----

// expected-error @+2 {{expected ::dtc::InitKind to be one of: zeros, constant, uniform, normal, glorot_uniform, glorot_normal, he_uniform, he_normal}}
// expected-error @+1 {{failed to parse Dtc_InitKindAttr parameter 'value'}}
dtc.param @w : tensor<3xf32> {init = #dtc.init<ones>}

// -----

// expected-error @+1 {{parameter shape must be static, got [B, 3]}}
dtc.param @w : tensor<?x3xf32>

// -----

// expected-error @+1 {{parameter name '__metadata__' cannot be a checkpoint key}}
dtc.param @__metadata__ : tensor<3xf32>

// -----

// expected-error @+1 {{parameter name 'optimizer/w/exp_avg' cannot be a checkpoint key}}
dtc.param @"optimizer/w/exp_avg" : tensor<3xf32>

// -----

func.func @missing_param() {
  // expected-error @+1 {{'nope' is not a dtc.param of this module}}
  %0 = dtc.param_ref @nope : tensor<3xf32>
  return
}

// -----

dtc.param @w : tensor<3xf32>
func.func @param_type() {
  // expected-error @+1 {{type 'tensor<4xf32>' does not match parameter type 'tensor<3xf32>'}}
  %0 = dtc.param_ref @w : tensor<4xf32>
  return
}

// -----

func.func @fused_not_elementwise(%a: tensor<2x3xf32>) {
  %0 = dtc.fused(%a) : (tensor<2x3xf32>) -> tensor<2x3xf32> {
  ^bb0(%i: tensor<2x3xf32>):
    // expected-error @+1 {{is not elementwise and cannot be in a fused body}}
    %s = dtc.softmax %i {axis = 1 : i64} : tensor<2x3xf32>
    dtc.yield %s : tensor<2x3xf32>
  }
  return
}

// -----

func.func @fused_yield_types(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{body must yield values of the result types}}
  %0 = dtc.fused(%a) : (tensor<2x3xf32>) -> tensor<3x2xf32> {
  ^bb0(%i: tensor<2x3xf32>):
    dtc.yield %i : tensor<2x3xf32>
  }
  return
}

// -----

func.func @softmax_grad_axis(%y: tensor<2x3xf32>) {
  // expected-error @+1 {{axis 7 is out of range for a rank-2 tensor}}
  %0 = dtc.softmax_grad %y, %y {axis = 7 : i64} : tensor<2x3xf32>
  return
}

// -----

func.func @max_grad_shapes(%x: tensor<2x3xf32>, %y: tensor<3xf32>) {
  // expected-error @+1 {{y must be the reduction of x over the axis}}
  %0 = dtc.reduce_max_grad %x, %y, %y {axis = 1 : i64} : (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @xent_grad_type(%l: tensor<?x3xf32>, %y: tensor<?xi32>, %d: tensor<f32>) {
  // expected-error @+1 {{result must have the logits' type}}
  %0 = dtc.cross_entropy_grad %l, %y, %d : (tensor<?x3xf32>, tensor<?xi32>, tensor<f32>) -> tensor<?x4xf32>
  return
}

// -----

// A prediction is [B, ...]: the batch, then static dimensions ([B, k], or a
// language model's [B, T, V]).
func.func @prediction_static_batch(%l: tensor<4x3xf32>) {
  // expected-error @+1 {{exports a prediction [B, ...] (the batch, then static dimensions), got [4, 3]}}
  dtc.export_prediction %l : tensor<4x3xf32>
  return
}

// -----

func.func @prediction_rank(%l: tensor<?xf32>) {
  // expected-error @+1 {{exports a prediction [B, ...] (the batch, then static dimensions), got [B]}}
  dtc.export_prediction %l : tensor<?xf32>
  return
}

// -----

// A gradient scale (the clip factor) cannot apply to folded momentum, whose
// sums the all-reduce takes before the factor exists.
module {
  dtc.param @w : tensor<3xf32>
  func.func @scaled_folded(%g: tensor<3xf32>, %c: tensor<f32>) {
    // expected-error @+1 {{'dtc.update_group' op cannot scale folded momentum}}
    dtc.update_group [@w](%g) * %c {momentum_folded} : tensor<3xf32>
    return
  }
}
