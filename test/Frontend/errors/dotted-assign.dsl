# RUN: not dtc %s -o %t.train 2>&1 | FileCheck %s
# A dotted name is a layer's parameter: it cannot be assigned.
input x: f32[B, 6]
label y: i32[B]
fc = linear(x, 3)
fc.weight = fc * 2
# CHECK: dotted-assign.dsl:6:1: error: 'fc.weight' cannot be assigned: a dotted name is a layer's parameter
loss = cross_entropy(fc, y)
