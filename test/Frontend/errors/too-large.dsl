# RUN: not dtc %s -o %t.train 2>&1 | FileCheck %s
input x: f32[B, 4]
label y: i32[B]
param w: f32[4194304, 4194304, 4194304]
r = reshape(x, [B, 111620, 429509837, 384773])
loss = cross_entropy(x, y)
# CHECK: too-large.dsl:4:10: error: tensor too large: more than 2^40 elements (per sample)
# CHECK: too-large.dsl:5:5: error: tensor too large: more than 2^40 elements (per sample)
