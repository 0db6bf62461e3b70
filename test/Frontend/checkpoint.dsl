# checkpoint(...) around a block instance (torch.utils.checkpoint): the
# front end lists it in the module's dtc.checkpoint, and dtc-rematerialize
# recomputes that instance's forward in backward whatever the --remat
# policy (here: none), and no other instance's; --remat=blocks does every
# top-level instance.
# RUN: dtc %s --emit=mlir | FileCheck %s
# CHECK: module attributes {dtc.checkpoint = ["h1"]
# RUN: dtc %s --emit=mlir-opt > %t.mlir
# RUN: sed -n '/func.func @train_step/,/return/p' %t.mlir | sed -n '/grad_seed/,$p' | grep -o 'dtc.block = "[^"]*"' | sort | uniq -c | FileCheck %s --check-prefix=BACKWARD
# BACKWARD-NOT: "h0"
# BACKWARD:     3 dtc.block = "h1"
# RUN: dtc %s --emit=mlir-opt --remat=blocks | sed -n '/func.func @train_step/,/return/p' | sed -n '/grad_seed/,$p' | grep -o 'dtc.block = "[^"]*"' | sort | uniq -c | FileCheck %s --check-prefix=BLOCKS
# BLOCKS: 3 dtc.block = "h0"
# BLOCKS: 3 dtc.block = "h1"
#
# The same ops on the same operands: training with the checkpoint is bit
# for bit training without it (control: the learning rate x 1.01 differs).
# RUN: rm -rf %t.d && mkdir -p %t.d
# RUN: sed 's/checkpoint(layer(h0))/layer(h0)/' %s > %t.d/plain.dsl
# RUN: dtc %s -o %t.d/ck && dtc %t.d/plain.dsl -o %t.d/plain
# RUN: %t.d/ck --epochs 2 --quiet --save %t.d/ck.st > /dev/null
# RUN: %t.d/plain --epochs 2 --quiet --save %t.d/plain.st > /dev/null
# RUN: cmp %t.d/ck.st %t.d/plain.st
# RUN: %t.d/ck --epochs 2 --quiet --lr 0.0101 --save %t.d/control.st > /dev/null
# RUN: not cmp -s %t.d/control.st %t.d/plain.st
#
# Only a block instance can be checkpointed, and it must be assigned.
# RUN: sed 's/h1 = checkpoint(layer(h0))/h1 = checkpoint(linear(h0, 8))/' %s > %t.d/layer.dsl
# RUN: not dtc %t.d/layer.dsl --emit=mlir 2>&1 | FileCheck %s --check-prefix=LAYER
# LAYER: layer.dsl:[[#@LINE+13]]:17: error: checkpoint() takes a block instance, as in 'h0 = checkpoint(layer(x))'
# RUN: sed 's/^out = linear(h1, 3)/out = linear(checkpoint(layer(h1)), 3)/' %s > %t.d/unassigned.dsl
# RUN: not dtc %t.d/unassigned.dsl --emit=mlir 2>&1 | FileCheck %s --check-prefix=UNASSIGNED
# UNASSIGNED: error: block 'layer' must be assigned to a name
model tiny
input x: f32[B, 8]
label y: i32[B]
block layer(x) {
  h = linear(x, 8, act=tanh)
  o = linear(h, 8)
  return x + o
}
h0 = layer(x)
h1 = checkpoint(layer(h0))
out = linear(h1, 3)
loss = cross_entropy(out, y)
train {
  data = synthetic(train=64, test=16)
  batch = 16
  optimizer = adam(lr=0.01)
  seed = 3
}
