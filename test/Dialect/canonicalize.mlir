// RUN: dtc-opt %s --canonicalize --split-input-file | FileCheck %s --enable-var-scope

// A transposed operand is read in place by the GEMM.
// CHECK-LABEL: func.func @transpose_into_matmul
// CHECK-NOT: dtc.transpose
// CHECK: %[[M:.*]] = dtc.matmul %arg0, %arg1 {transpose_lhs = true, transpose_rhs = true} : tensor<3x5xf32>, tensor<4x3xf32> -> tensor<5x4xf32>
// CHECK: return %[[M]]
func.func @transpose_into_matmul(%a: tensor<3x5xf32>, %b: tensor<4x3xf32>) -> tensor<5x4xf32> {
  %at = dtc.transpose %a {perm = array<i64: 1, 0>} : tensor<3x5xf32> -> tensor<5x3xf32>
  %bt = dtc.transpose %b {perm = array<i64: 1, 0>} : tensor<4x3xf32> -> tensor<3x4xf32>
  %m = dtc.matmul %at, %bt : tensor<5x3xf32>, tensor<3x4xf32> -> tensor<5x4xf32>
  return %m : tensor<5x4xf32>
}

// -----

// Only a swap of the two axes is a transposed GEMM operand; an identity
// permutation is not (whatever order the patterns and folders run in).
// RUN: dtc-opt %s --canonicalize=top-down=false --split-input-file | FileCheck %s --check-prefix=BOTTOMUP
// BOTTOMUP-LABEL: func.func @identity_perm
// BOTTOMUP: dtc.matmul %arg0, %arg1 : tensor<5x3xf32>, tensor<3x4xf32> -> tensor<5x4xf32>
func.func @identity_perm(%a: tensor<5x3xf32>, %b: tensor<3x4xf32>) -> tensor<5x4xf32> {
  %at = dtc.transpose %a {perm = array<i64: 0, 1>} : tensor<5x3xf32> -> tensor<5x3xf32>
  %m = dtc.matmul %at, %b : tensor<5x3xf32>, tensor<3x4xf32> -> tensor<5x4xf32>
  return %m : tensor<5x4xf32>
}

// -----

// Over leading dimensions, a swap of the last two is read in place too; a
// permutation that moves a leading dimension is not, nor a transposed lhs
// that a broadcast 2-D rhs cannot take.
// CHECK-LABEL: func.func @batched_transpose_into_matmul
// CHECK: %[[T:.*]] = dtc.transpose %arg0 {perm = array<i64: 0, 2, 1>}
// CHECK: dtc.matmul %arg0, %arg1 {transpose_lhs = true} : tensor<2x5x3xf32>, tensor<2x5x4xf32> -> tensor<2x3x4xf32>
// CHECK: %[[P:.*]] = dtc.transpose %arg0 {perm = array<i64: 1, 0, 2>}
// CHECK: dtc.matmul %[[P]], %arg3 : tensor<5x2x3xf32>, tensor<5x3x4xf32> -> tensor<5x2x4xf32>
// CHECK: dtc.matmul %[[T]], %arg2 : tensor<2x3x5xf32>, tensor<5x4xf32> -> tensor<2x3x4xf32>
func.func @batched_transpose_into_matmul(%a: tensor<2x5x3xf32>, %b: tensor<2x5x4xf32>, %w: tensor<5x4xf32>, %c: tensor<5x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<5x2x4xf32>, tensor<2x3x4xf32>) {
  %at = dtc.transpose %a {perm = array<i64: 0, 2, 1>} : tensor<2x5x3xf32> -> tensor<2x3x5xf32>
  %m = dtc.matmul %at, %b : tensor<2x3x5xf32>, tensor<2x5x4xf32> -> tensor<2x3x4xf32>
  %ap = dtc.transpose %a {perm = array<i64: 1, 0, 2>} : tensor<2x5x3xf32> -> tensor<5x2x3xf32>
  %p = dtc.matmul %ap, %c : tensor<5x2x3xf32>, tensor<5x3x4xf32> -> tensor<5x2x4xf32>
  %r = dtc.matmul %at, %w : tensor<2x3x5xf32>, tensor<5x4xf32> -> tensor<2x3x4xf32>
  return %m, %p, %r : tensor<2x3x4xf32>, tensor<5x2x4xf32>, tensor<2x3x4xf32>
}

// -----

// CHECK-LABEL: func.func @identities
// CHECK-NEXT: return %arg0
func.func @identities(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %zero = dtc.constant {value = 0.0 : f32} : tensor<f32>
  %one = dtc.constant {value = 1.0 : f32} : tensor<f32>
  %0 = dtc.add %x, %zero : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xf32>
  %1 = dtc.mul %one, %0 : tensor<f32>, tensor<2x3xf32> -> tensor<2x3xf32>
  %2 = dtc.div %1, %one : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xf32>
  %3 = dtc.sub %2, %zero : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xf32>
  %4 = dtc.neg %3 : tensor<2x3xf32>
  %5 = dtc.neg %4 : tensor<2x3xf32>
  %6 = dtc.transpose %5 {perm = array<i64: 1, 0>} : tensor<2x3xf32> -> tensor<3x2xf32>
  %7 = dtc.transpose %6 {perm = array<i64: 1, 0>} : tensor<3x2xf32> -> tensor<2x3xf32>
  %8 = dtc.reshape %7 : tensor<2x3xf32> -> tensor<6xf32>
  %9 = dtc.reshape %8 : tensor<6xf32> -> tensor<2x3xf32>
  %10 = dtc.broadcast_to %9 : tensor<2x3xf32> -> tensor<2x3xf32>
  %11 = dtc.sum_to %10 : tensor<2x3xf32> -> tensor<2x3xf32>
  return %11 : tensor<2x3xf32>
}

// -----

// Adding zero that broadcasts the operand is not an identity.
// CHECK-LABEL: func.func @broadcasting_zero
// CHECK: dtc.add
func.func @broadcasting_zero(%x: tensor<3xf32>) -> tensor<2x3xf32> {
  %zero = dtc.constant {value = 0.0 : f32} : tensor<2x3xf32>
  %0 = dtc.add %x, %zero : tensor<3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// CSE merges identical parameter reads and pure ops.
// RUN: dtc-opt %s --cse --split-input-file | FileCheck %s --check-prefix=CSE
// CSE-LABEL: func.func @cse
// CSE-COUNT-1: dtc.param_ref
// CSE-COUNT-1: dtc.tanh
dtc.param @w : tensor<3xf32>
func.func @cse() -> (tensor<3xf32>, tensor<3xf32>) {
  %a = dtc.param_ref @w : tensor<3xf32>
  %b = dtc.param_ref @w : tensor<3xf32>
  %c = dtc.tanh %a : tensor<3xf32>
  %d = dtc.tanh %b : tensor<3xf32>
  return %c, %d : tensor<3xf32>, tensor<3xf32>
}
