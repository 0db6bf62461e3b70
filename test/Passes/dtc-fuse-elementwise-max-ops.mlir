// RUN: dtc-opt %s --dtc-fuse-elementwise=max-ops=2 | FileCheck %s
// RUN: dtc-opt %s --dtc-fuse-elementwise=max-ops=0 | FileCheck %s --check-prefix=NOLIMIT
// A chain longer than max-ops is split into kernels of max-ops ops, each
// reading the one before it.

// CHECK-LABEL: func.func @chain
// CHECK: %[[A:.*]] = dtc.fused(%arg0)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: dtc.tanh
// CHECK-NEXT: dtc.neg
// CHECK-NEXT: dtc.yield
// CHECK: %[[B:.*]] = dtc.fused(%[[A]])
// CHECK-NEXT: ^bb0
// CHECK-NEXT: dtc.tanh
// CHECK-NEXT: dtc.neg
// CHECK-NEXT: dtc.yield
// CHECK: %[[C:.*]] = dtc.fused(%[[B]])
// CHECK-NEXT: ^bb0
// CHECK-NEXT: dtc.tanh
// CHECK-NEXT: dtc.yield
// CHECK: return %[[C]]
// NOLIMIT-LABEL: func.func @chain
// NOLIMIT-COUNT-1: dtc.fused
// NOLIMIT-NOT: dtc.fused
func.func @chain(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %0 = dtc.tanh %x : tensor<?x4xf32>
  %1 = dtc.neg %0 : tensor<?x4xf32>
  %2 = dtc.tanh %1 : tensor<?x4xf32>
  %3 = dtc.neg %2 : tensor<?x4xf32>
  %4 = dtc.tanh %3 : tensor<?x4xf32>
  return %4 : tensor<?x4xf32>
}
