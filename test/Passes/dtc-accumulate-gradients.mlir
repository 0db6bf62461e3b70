// RUN: dtc-opt %s --split-input-file --dtc-accumulate-gradients | FileCheck %s --enable-var-scope
// With dtc.accumulate on the module, @accumulate_step is @train_step with its
// updates made dtc.accumulate_gradient (no update, nothing else changes),
// and in @train_step each gradient becomes dtc.take_accumulated of it right
// where it is made (before the next gradient's op), so that the all-reduce
// inserted later averages the sum and starts as early as before. Without
// the attribute nothing changes.

// CHECK-LABEL: func.func @train_step
// CHECK: %[[G1:.*]] = dtc.mul %arg0, %arg0
// CHECK-NEXT: %[[T1:.*]] = dtc.take_accumulated @w1, %[[G1]] : tensor<8x4xf32>
// CHECK-NEXT: %[[G2:.*]] = dtc.add %arg1, %arg1
// CHECK-NEXT: %[[T2:.*]] = dtc.take_accumulated @b1, %[[G2]] : tensor<8xf32>
// CHECK-NEXT: dtc.apply_gradient @w1, %[[T1]] : tensor<8x4xf32>
// CHECK-NEXT: dtc.apply_gradient @b1, %[[T2]] : tensor<8xf32>
// CHECK-NEXT: return
// CHECK-LABEL: func.func @accumulate_step
// CHECK: %[[A1:.*]] = dtc.mul %arg0, %arg0
// CHECK-NEXT: %[[A2:.*]] = dtc.add %arg1, %arg1
// CHECK-NEXT: dtc.accumulate_gradient @w1, %[[A1]] : tensor<8x4xf32>
// CHECK-NEXT: dtc.accumulate_gradient @b1, %[[A2]] : tensor<8xf32>
// CHECK-NEXT: return
// CHECK-NOT: dtc.apply_gradient
// CHECK-NOT: dtc.take_accumulated
module attributes {dtc.accumulate = 3 : i64, dtc.optimizer = #dtc.optimizer<sgd, lr = 0.1, weight_decay = 0.0>} {
  dtc.param @w1 : tensor<8x4xf32>
  dtc.param @b1 : tensor<8xf32>
  func.func @train_step(%a: tensor<8x4xf32>, %b: tensor<8xf32>) {
    %g1 = dtc.mul %a, %a : tensor<8x4xf32>, tensor<8x4xf32> -> tensor<8x4xf32>
    %g2 = dtc.add %b, %b : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
    dtc.apply_gradient @w1, %g1 : tensor<8x4xf32>
    dtc.apply_gradient @b1, %g2 : tensor<8xf32>
    return
  }
}

// -----

// CHECK-LABEL: func.func @train_step
// CHECK-NOT: dtc.take_accumulated
// CHECK-NOT: @accumulate_step
module attributes {dtc.optimizer = #dtc.optimizer<sgd, lr = 0.1, weight_decay = 0.0>} {
  dtc.param @w1 : tensor<8x4xf32>
  func.func @train_step(%g: tensor<8x4xf32>) {
    dtc.apply_gradient @w1, %g : tensor<8x4xf32>
    return
  }
}
