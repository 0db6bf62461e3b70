# RUN: dtc %s --emit=mlir | FileCheck %s --enable-var-scope
# RUN: dtc %s --emit=mlir-opt | FileCheck %s --check-prefix=GRAD --enable-var-scope
# A layer's parameter read again by its full name (weight tying: GPT-2's
# output head reuses the token embedding's weight): one more read of the
# same dtc.param, whose gradient adds both uses' before its one update.
input x: f32[B, 6]
label y: i32[B]
enc = linear(x, 4)
h = enc @ enc.weight
logits = h @ transpose(enc.weight)
loss = cross_entropy(logits, y)
# CHECK: dtc.param @enc.weight : tensor<4x6xf32>
# CHECK: %[[W0:.*]] = dtc.param_ref @enc.weight : tensor<4x6xf32>
# CHECK: %[[W1:.*]] = dtc.param_ref @enc.weight : tensor<4x6xf32>
# CHECK: dtc.matmul %{{.*}}, %[[W1]] : tensor<?x4xf32>, tensor<4x6xf32> -> tensor<?x6xf32>
# CHECK: %[[W2:.*]] = dtc.param_ref @enc.weight : tensor<4x6xf32>
# GRAD-LABEL: func.func @train_step
# GRAD: dtc.update_group
# GRAD-SAME: @enc.weight
