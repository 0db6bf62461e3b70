# RUN: not dtc %s -o %t.train 2>&1 | FileCheck %s
# RUN: not dtc %S/Inputs/block-return.dsl -o %t.train 2>&1 | FileCheck %s --check-prefix=RETURN
# RUN: not dtc %S/Inputs/block-twice.dsl -o %t.train 2>&1 | FileCheck %s --check-prefix=TWICE
# Blocks: located errors.
input x: f32[B, 4]
label y: i32[B]
block ff(a, b) {
  fc = linear(a, 4)
  return fc * b + x
}
# CHECK: block.dsl:9:19: error: unknown name 'x'
block deep(a) {
  d = deep(a)
  return d
}
block bad(a) {
  loss = mean(a)
  return a
}
f0 = ff(x, 2.0)
f1 = ff(x)
# CHECK: block.dsl:21:6: error: ff() needs the argument 'b'
s = 3 * ff(x, 1.0)
# CHECK: block.dsl:23:9: error: block 'ff' must be assigned to a name (the prefix of its parameters), as in 'h0 = ff(x)'
d0 = deep(x)
# CHECK: block.dsl:13:7: error: block 'deep' instantiates itself
b0 = bad(x)
# CHECK: block.dsl:17:3: error: a block holds assignments and its return; inputs, labels, parameters, the loss and metrics belong to the model
g0 = ff(x, 1.0)
g0b = ff(g0, 1.0)
o = linear(g0b, 3)
loss = cross_entropy(o, y)
# RETURN: block-return.dsl:3:1: error: block 'ff' ends without 'return': a block gives one value
# TWICE: block-twice.dsl:8:5: error: 'h' already names parameters (h.fc.bias): every instance of a block needs a name of its own
