# RUN: not dtc %s -o %t.train 2>&1 | FileCheck %s
input x: f32[B, 4]
label y: i32[B]
fc = linear(x, 3)
loss = mse(fc, y)
# CHECK: type.dsl:5:16: error: the target must be an f32 tensor, but it is i32 (labels or token ids); only embedding, cross_entropy and accuracy take i32
