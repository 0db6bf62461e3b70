# RUN: not dtc %s -o %t.train 2>&1 | FileCheck %s
input x: f32[B, 784]
label y: i32[B]
param w: f32[748, 10]
loss = cross_entropy(x @ w, y)
# CHECK: matmul-shape.dsl:5:24: error: matmul inner dimensions differ: [B, 784] x [748, 10]
