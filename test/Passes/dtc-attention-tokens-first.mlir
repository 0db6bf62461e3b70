// RUN: dtc-opt %s --dtc-attention-tokens-first | FileCheck %s
// RUN: dtc-opt %s --dtc-attention-tokens-first --canonicalize | FileCheck %s --check-prefix=CANON
// RUN: dtc-opt %s --dtc-attention-tokens-first | dtc-opt | FileCheck %s
// torch's attention block: q, k, v [B, T, H, D] each transposed to [B, H,
// T, D], the result transposed back; its gradient's dy transposed from the
// block's, dq, dk, dv transposed back. The attention and its gradient take
// the tokens-first tensors (tokens_first), their results swapped back;
// the canonicalizer then cancels every pair: no transpose is left.

// CHECK-LABEL: func.func @block
// CHECK: %[[O:.*]], %[[L:.*]] = dtc.attention %arg0, %arg1, %arg2 {causal, scale = 5.000000e-01 : f64, tokens_first} : tensor<?x6x2x4xf32>, tensor<?x6x2x4xf32>, tensor<?x6x2x4xf32> -> tensor<?x6x2x4xf32>, tensor<?x2x6xf32>
// CHECK: %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = dtc.attention_grad %arg0, %arg1, %arg2, %[[O]], %[[L]], %arg3 {causal, scale = 5.000000e-01 : f64, tokens_first} : tensor<?x6x2x4xf32>, tensor<?x6x2x4xf32>, tensor<?x6x2x4xf32>, tensor<?x6x2x4xf32>, tensor<?x2x6xf32>
// CANON-LABEL: func.func @block
// CANON-NOT: dtc.transpose
// CANON: %[[O:.*]], %[[L:.*]] = dtc.attention %arg0, %arg1, %arg2 {{.*}}tokens_first
// CANON-NOT: dtc.transpose
// CANON: %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = dtc.attention_grad %arg0, %arg1, %arg2, %[[O]], %[[L]], %arg3 {{.*}}tokens_first
// CANON-NOT: dtc.transpose
// CANON: return %[[O]], %[[DQ]], %[[DK]], %[[DV]]
func.func @block(%q: tensor<?x6x2x4xf32>, %k: tensor<?x6x2x4xf32>, %v: tensor<?x6x2x4xf32>,
                 %g: tensor<?x6x2x4xf32>) -> (tensor<?x6x2x4xf32>, tensor<?x6x2x4xf32>, tensor<?x6x2x4xf32>, tensor<?x6x2x4xf32>) {
  %qh = dtc.transpose %q {perm = array<i64: 0, 2, 1, 3>} : tensor<?x6x2x4xf32> -> tensor<?x2x6x4xf32>
  %kh = dtc.transpose %k {perm = array<i64: 0, 2, 1, 3>} : tensor<?x6x2x4xf32> -> tensor<?x2x6x4xf32>
  %vh = dtc.transpose %v {perm = array<i64: 0, 2, 1, 3>} : tensor<?x6x2x4xf32> -> tensor<?x2x6x4xf32>
  %o, %lse = dtc.attention %qh, %kh, %vh {causal, scale = 0.5 : f64} : tensor<?x2x6x4xf32>, tensor<?x2x6x4xf32>, tensor<?x2x6x4xf32> -> tensor<?x2x6x4xf32>, tensor<?x2x6xf32>
  %ob = dtc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<?x2x6x4xf32> -> tensor<?x6x2x4xf32>
  %dy = dtc.transpose %g {perm = array<i64: 0, 2, 1, 3>} : tensor<?x6x2x4xf32> -> tensor<?x2x6x4xf32>
  %dq, %dk, %dv = dtc.attention_grad %qh, %kh, %vh, %o, %lse, %dy {causal, scale = 0.5 : f64} : tensor<?x2x6x4xf32>, tensor<?x2x6x4xf32>, tensor<?x2x6x4xf32>, tensor<?x2x6x4xf32>, tensor<?x2x6xf32>
  %dqb = dtc.transpose %dq {perm = array<i64: 0, 2, 1, 3>} : tensor<?x2x6x4xf32> -> tensor<?x6x2x4xf32>
  %dkb = dtc.transpose %dk {perm = array<i64: 0, 2, 1, 3>} : tensor<?x2x6x4xf32> -> tensor<?x6x2x4xf32>
  %dvb = dtc.transpose %dv {perm = array<i64: 0, 2, 1, 3>} : tensor<?x2x6x4xf32> -> tensor<?x6x2x4xf32>
  return %ob, %dqb, %dkb, %dvb : tensor<?x6x2x4xf32>, tensor<?x6x2x4xf32>, tensor<?x6x2x4xf32>, tensor<?x6x2x4xf32>
}

// Kept as they are: q not a transpose (head-major from the start); a
// result read elsewhere than by a transpose back (a reduction), and a
// gradient whose dq goes to a sum with another gradient first.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: tokens_first
// CHECK: return
func.func @kept(%q: tensor<?x2x6x4xf32>, %k: tensor<?x6x2x4xf32>, %v: tensor<?x6x2x4xf32>,
                %g: tensor<?x2x6x4xf32>) -> (tensor<?x2x6x4xf32>, tensor<?x2x6x4xf32>, tensor<?x6x2x4xf32>) {
  %kh = dtc.transpose %k {perm = array<i64: 0, 2, 1, 3>} : tensor<?x6x2x4xf32> -> tensor<?x2x6x4xf32>
  %vh = dtc.transpose %v {perm = array<i64: 0, 2, 1, 3>} : tensor<?x6x2x4xf32> -> tensor<?x2x6x4xf32>
  %o1, %l1 = dtc.attention %q, %kh, %vh {scale = 0.5 : f64} : tensor<?x2x6x4xf32>, tensor<?x2x6x4xf32>, tensor<?x2x6x4xf32> -> tensor<?x2x6x4xf32>, tensor<?x2x6xf32>
  %qh = dtc.transpose %k {perm = array<i64: 0, 2, 1, 3>} : tensor<?x6x2x4xf32> -> tensor<?x2x6x4xf32>
  %o2, %l2 = dtc.attention %qh, %kh, %vh {scale = 0.5 : f64} : tensor<?x2x6x4xf32>, tensor<?x2x6x4xf32>, tensor<?x2x6x4xf32> -> tensor<?x2x6x4xf32>, tensor<?x2x6xf32>
  %dq, %dk, %dv = dtc.attention_grad %qh, %kh, %vh, %o2, %l2, %g {scale = 0.5 : f64} : tensor<?x2x6x4xf32>, tensor<?x2x6x4xf32>, tensor<?x2x6x4xf32>, tensor<?x2x6x4xf32>, tensor<?x2x6xf32>
  %sum = dtc.add %dq, %dk : tensor<?x2x6x4xf32>, tensor<?x2x6x4xf32> -> tensor<?x2x6x4xf32>
  %dvb = dtc.transpose %dv {perm = array<i64: 0, 2, 1, 3>} : tensor<?x2x6x4xf32> -> tensor<?x6x2x4xf32>
  %r = dtc.add %o1, %o2 : tensor<?x2x6x4xf32>, tensor<?x2x6x4xf32> -> tensor<?x2x6x4xf32>
  return %r, %sum, %dvb : tensor<?x2x6x4xf32>, tensor<?x2x6x4xf32>, tensor<?x6x2x4xf32>
}
