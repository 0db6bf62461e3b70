// RUN: dtc-opt %s --split-input-file --dtc-attention-qkv-packed | FileCheck %s
// RUN: dtc-opt %s --split-input-file --dtc-attention-qkv-packed | dtc-opt | FileCheck %s
// torch's block, tokens-first: q, k, v the slices of one projection
// [B, T, 3C] (split, each reshaped to [B, T, H, D]); backward concatenates
// dq, dk, dv (reshaped back) into the projection's gradient. The attention
// reads the projection as [B, T, 3, H, D], its gradient writes dqkv of that
// shape; the split, the concatenation and their reshapes go.

// CHECK-LABEL: func.func @block
// CHECK-SAME: (%[[X:.*]]: tensor<?x6x24xf32>, %[[G:.*]]: tensor<?x6x2x4xf32>)
// CHECK-NEXT: %[[P:.*]] = dtc.reshape %[[X]] : tensor<?x6x24xf32> -> tensor<?x6x3x2x4xf32>
// CHECK-NOT: dtc.split
// CHECK: %[[O:.*]], %[[L:.*]] = dtc.attention_qkvpacked %[[P]] {causal, scale = 5.000000e-01 : f64} : tensor<?x6x3x2x4xf32> -> tensor<?x6x2x4xf32>, tensor<?x2x6xf32>
// CHECK-NEXT: %[[D:.*]] = dtc.attention_qkvpacked_grad %[[P]], %[[O]], %[[L]], %[[G]] {causal, scale = 5.000000e-01 : f64} : tensor<?x6x3x2x4xf32>, tensor<?x6x2x4xf32>, tensor<?x2x6xf32>
// CHECK-NEXT: %[[DX:.*]] = dtc.reshape %[[D]] : tensor<?x6x3x2x4xf32> -> tensor<?x6x24xf32>
// CHECK-NOT: dtc.concat
// CHECK: return %[[O]], %[[DX]]
func.func @block(%x: tensor<?x6x24xf32>, %g: tensor<?x6x2x4xf32>) -> (tensor<?x6x2x4xf32>, tensor<?x6x24xf32>) {
  %s:3 = dtc.split %x {axis = 2 : i64} : tensor<?x6x24xf32> -> tensor<?x6x8xf32>, tensor<?x6x8xf32>, tensor<?x6x8xf32>
  %q = dtc.reshape %s#0 : tensor<?x6x8xf32> -> tensor<?x6x2x4xf32>
  %k = dtc.reshape %s#1 : tensor<?x6x8xf32> -> tensor<?x6x2x4xf32>
  %v = dtc.reshape %s#2 : tensor<?x6x8xf32> -> tensor<?x6x2x4xf32>
  %o, %lse = dtc.attention %q, %k, %v {causal, scale = 0.5 : f64, tokens_first} : tensor<?x6x2x4xf32>, tensor<?x6x2x4xf32>, tensor<?x6x2x4xf32> -> tensor<?x6x2x4xf32>, tensor<?x2x6xf32>
  %dq, %dk, %dv = dtc.attention_grad %q, %k, %v, %o, %lse, %g {causal, scale = 0.5 : f64, tokens_first} : tensor<?x6x2x4xf32>, tensor<?x6x2x4xf32>, tensor<?x6x2x4xf32>, tensor<?x6x2x4xf32>, tensor<?x2x6xf32>
  %rv = dtc.reshape %dv : tensor<?x6x2x4xf32> -> tensor<?x6x8xf32>
  %rk = dtc.reshape %dk : tensor<?x6x2x4xf32> -> tensor<?x6x8xf32>
  %rq = dtc.reshape %dq : tensor<?x6x2x4xf32> -> tensor<?x6x8xf32>
  %dx = dtc.concat %rq, %rk, %rv {axis = 2 : i64} : tensor<?x6x8xf32>, tensor<?x6x8xf32>, tensor<?x6x8xf32> -> tensor<?x6x24xf32>
  return %o, %dx : tensor<?x6x2x4xf32>, tensor<?x6x24xf32>
}

// -----

// The gradients concatenated in another order (k, q, v): the forward reads
// the packed projection, the gradient stays as it is and keeps the split.
// CHECK-LABEL: func.func @other_order
// CHECK: dtc.split
// CHECK: dtc.attention_qkvpacked %
// CHECK: dtc.attention_grad
// CHECK: dtc.concat
func.func @other_order(%x: tensor<?x6x24xf32>, %g: tensor<?x6x2x4xf32>) -> (tensor<?x6x2x4xf32>, tensor<?x6x24xf32>) {
  %s:3 = dtc.split %x {axis = 2 : i64} : tensor<?x6x24xf32> -> tensor<?x6x8xf32>, tensor<?x6x8xf32>, tensor<?x6x8xf32>
  %q = dtc.reshape %s#0 : tensor<?x6x8xf32> -> tensor<?x6x2x4xf32>
  %k = dtc.reshape %s#1 : tensor<?x6x8xf32> -> tensor<?x6x2x4xf32>
  %v = dtc.reshape %s#2 : tensor<?x6x8xf32> -> tensor<?x6x2x4xf32>
  %o, %lse = dtc.attention %q, %k, %v {causal, scale = 0.5 : f64, tokens_first} : tensor<?x6x2x4xf32>, tensor<?x6x2x4xf32>, tensor<?x6x2x4xf32> -> tensor<?x6x2x4xf32>, tensor<?x2x6xf32>
  %dq, %dk, %dv = dtc.attention_grad %q, %k, %v, %o, %lse, %g {causal, scale = 0.5 : f64, tokens_first} : tensor<?x6x2x4xf32>, tensor<?x6x2x4xf32>, tensor<?x6x2x4xf32>, tensor<?x6x2x4xf32>, tensor<?x2x6xf32>
  %rv = dtc.reshape %dv : tensor<?x6x2x4xf32> -> tensor<?x6x8xf32>
  %rk = dtc.reshape %dk : tensor<?x6x2x4xf32> -> tensor<?x6x8xf32>
  %rq = dtc.reshape %dq : tensor<?x6x2x4xf32> -> tensor<?x6x8xf32>
  %dx = dtc.concat %rk, %rq, %rv {axis = 2 : i64} : tensor<?x6x8xf32>, tensor<?x6x8xf32>, tensor<?x6x8xf32> -> tensor<?x6x24xf32>
  return %o, %dx : tensor<?x6x2x4xf32>, tensor<?x6x24xf32>
}

// -----

// Kept: head-major operands (not tokens-first); q and k swapped (k, q, v
// from the split); slices of a split of the tokens, not the features.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: attention_qkvpacked
// CHECK: return
func.func @kept(%x: tensor<?x6x24xf32>, %y: tensor<?x18x8xf32>, %h: tensor<?x2x6x4xf32>) -> (tensor<?x2x6x4xf32>, tensor<?x6x2x4xf32>, tensor<?x6x2x4xf32>) {
  %o1, %l1 = dtc.attention %h, %h, %h {scale = 0.5 : f64} : tensor<?x2x6x4xf32>, tensor<?x2x6x4xf32>, tensor<?x2x6x4xf32> -> tensor<?x2x6x4xf32>, tensor<?x2x6xf32>
  %s:3 = dtc.split %x {axis = 2 : i64} : tensor<?x6x24xf32> -> tensor<?x6x8xf32>, tensor<?x6x8xf32>, tensor<?x6x8xf32>
  %q = dtc.reshape %s#0 : tensor<?x6x8xf32> -> tensor<?x6x2x4xf32>
  %k = dtc.reshape %s#1 : tensor<?x6x8xf32> -> tensor<?x6x2x4xf32>
  %v = dtc.reshape %s#2 : tensor<?x6x8xf32> -> tensor<?x6x2x4xf32>
  %o2, %l2 = dtc.attention %k, %q, %v {scale = 0.5 : f64, tokens_first} : tensor<?x6x2x4xf32>, tensor<?x6x2x4xf32>, tensor<?x6x2x4xf32> -> tensor<?x6x2x4xf32>, tensor<?x2x6xf32>
  %t:3 = dtc.split %y {axis = 1 : i64} : tensor<?x18x8xf32> -> tensor<?x6x8xf32>, tensor<?x6x8xf32>, tensor<?x6x8xf32>
  %tq = dtc.reshape %t#0 : tensor<?x6x8xf32> -> tensor<?x6x2x4xf32>
  %tk = dtc.reshape %t#1 : tensor<?x6x8xf32> -> tensor<?x6x2x4xf32>
  %tv = dtc.reshape %t#2 : tensor<?x6x8xf32> -> tensor<?x6x2x4xf32>
  %o3, %l3 = dtc.attention %tq, %tk, %tv {scale = 0.5 : f64, tokens_first} : tensor<?x6x2x4xf32>, tensor<?x6x2x4xf32>, tensor<?x6x2x4xf32> -> tensor<?x6x2x4xf32>, tensor<?x2x6xf32>
  return %o1, %o2, %o3 : tensor<?x2x6x4xf32>, tensor<?x6x2x4xf32>, tensor<?x6x2x4xf32>
}
