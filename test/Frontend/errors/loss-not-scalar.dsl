# RUN: not dtc %s -o %t.train 2>&1 | FileCheck %s
input x: f32[B, 4]
label y: f32[B, 4]
p = linear(x, 4)
loss = (p - y) * (p - y)
# CHECK: loss-not-scalar.dsl:5:16: error: the loss must be a scalar (f32[]), got [B, 4]; reduce it with mean() or sum()
