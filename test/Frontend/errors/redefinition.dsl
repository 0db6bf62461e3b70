# RUN: not dtc %s -o %t.train 2>&1 | FileCheck %s
input x: f32[B, 4]
label y: i32[B]
h = linear(x, 3)
h = relu(h)
loss = cross_entropy(h, y)
# CHECK: redefinition.dsl:5:1: error: redefinition of 'h' (first defined at line 4)
