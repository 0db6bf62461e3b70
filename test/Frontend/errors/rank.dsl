# RUN: not dtc %s -o %t.train 2>&1 | FileCheck %s
input x: f32[B, 1, 1, 1, 1, 1, 2]
label y: i32[B]
loss = cross_entropy(x, y)
# CHECK: rank.dsl:2:10: error: tensors have at most 6 dimensions, got 7
