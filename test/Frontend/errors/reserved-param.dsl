# RUN: not dtc %s -o %t.train 2>&1 | FileCheck %s
# A parameter named __metadata__ would collide with the safetensors metadata
# of every checkpoint: refused when compiling, not when saving at the end.
input x: f32[B, 4]
label y: i32[B]
param __metadata__: f32[4, 3] = zeros()
loss = cross_entropy(x @ __metadata__, y)
# CHECK: reserved-param.dsl:6:7: error: '__metadata__' cannot name a parameter: checkpoints (safetensors) keep their metadata under that key
