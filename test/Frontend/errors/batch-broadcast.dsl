# RUN: not dtc %s -o %t.train 2>&1 | FileCheck %s
input x: f32[B, 4]
label y: i32[B]
param c: f32[3, 1]
fc = linear(x, 3)
s = sum(fc, axis=1)
u = s + c
loss = cross_entropy(fc, y) + mean(u)
# CHECK: batch-broadcast.dsl:7:7: error: broadcasting [B] with [3, 1] would move the batch dimension B away from the first dimension
