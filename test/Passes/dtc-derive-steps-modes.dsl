# RUN: dtc %s --emit=mlir-opt | FileCheck %s
# Train and eval modes: @eval_step computes dropout's evaluation form (its
# input passes through); @train_step and @grad_step keep the training form
# and its gradient. @eval_step also exports the logits of the cross_entropy,
# the rows `train --predict` reads.
input x: f32[B, 8]
label y: i32[B]
h = linear(x, 6, act=relu)
d = dropout(h, 0.4)
o = linear(d, 3)
loss = cross_entropy(o, y)
# CHECK-LABEL: func.func @eval_step
# CHECK-NOT: dtc.dropout
# CHECK: dtc.cross_entropy %[[O:[0-9]+]],
# CHECK: dtc.export_prediction %[[O]] : tensor<?x3xf32>
# CHECK-NEXT: return
# CHECK-LABEL: func.func @train_step
# CHECK: dtc.dropout %{{.*}}p = 4.000000e-01 : f64, salt = 0 : i64
# CHECK: dtc.dropout_grad
# CHECK-LABEL: func.func @grad_step
# CHECK: dtc.dropout
# CHECK: dtc.dropout_grad
