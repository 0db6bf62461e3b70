# RUN: not dtc %s -o %t.train 2>&1 | FileCheck %s
# layer_norm and gelu's bad arguments: located errors.
input x: f32[B, 4]
label y: i32[B]
a = layer_norm(sum(x, axis=1))
# CHECK: layer-norm.dsl:5:16: error: layer_norm() normalizes the last dimension of an input [B, ..., D], got [B]
b = layer_norm(x, eps=0)
# CHECK: layer-norm.dsl:7:23: error: layer_norm() eps must be > 0, got 0
c = gelu(x, approximate="fast")
# CHECK: layer-norm.dsl:9:25: error: gelu's approximate is "none" or "tanh", got "fast"
loss = cross_entropy(layer_norm(x), y)
# CHECK: layer-norm.dsl:11:22: error: layer_norm() must be assigned to a name (the name of its parameters), as in 'ln1 = layer_norm(x)'
