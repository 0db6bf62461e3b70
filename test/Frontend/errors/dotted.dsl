# RUN: not dtc %s -o %t.train 2>&1 | FileCheck %s
# A dotted name is a layer's parameter: it names nothing before its layer.
input x: f32[B, 6]
label y: i32[B]
h = x @ transpose(fc.weight)
# CHECK: dotted.dsl:5:19: error: unknown name 'fc.weight' (a dotted name is a layer's parameter, usable after the layer that declares it)
fc = linear(x, 3)
loss = cross_entropy(fc, y)
