# RUN: not dtc %s -o %t.train 2>&1 | FileCheck %s
# RUN: test ! -e %t.train
input x: f32[B, 784]
label y: i32[B]
param w: f32[784, 10] = glorot_uniform()
param b: f32[12]
logits = x @ w + b
loss = cross_entropy(logits, y)
# CHECK: shape.dsl:7:16: error: shapes [B, 10] and [12] do not broadcast
# CHECK-NEXT: logits = x @ w + b
# CHECK-NEXT: {{^               \^$}}
