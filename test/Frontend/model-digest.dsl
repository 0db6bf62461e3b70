# dtc.model_digest: the model and its recipe, but for their sharding and
# the file's name; a program of the same digest resumes another's training
# state (docs/runtime.md). The same under --shard/--ranks, the recipe's
# shard and another file name; another when the model changes.
# RUN: dtc %s --emit=mlir | grep -o 'dtc.model_digest = [-0-9]*' > %t.plain
# RUN: dtc %s --emit=mlir --shard=gradients --ranks 4 | grep -o 'dtc.model_digest = [-0-9]*' > %t.sharded
# RUN: sed 's/^  seed = 3$/  seed = 3\n  shard = optimizer\n  ranks = 2/' %s > %t.recipe.dsl
# RUN: grep -q 'ranks = 2' %t.recipe.dsl
# RUN: dtc %t.recipe.dsl --emit=mlir | grep -o 'dtc.model_digest = [-0-9]*' > %t.recipe
# RUN: diff %t.plain %t.sharded
# RUN: diff %t.plain %t.recipe
# RUN: sed 's/act=relu/act=tanh/' %s > %t.tanh.dsl
# RUN: dtc %t.tanh.dsl --emit=mlir | grep -o 'dtc.model_digest = [-0-9]*' > %t.tanh
# RUN: not diff %t.plain %t.tanh
# RUN: sed 's/lr=0.01/lr=0.02/' %s > %t.lr.dsl
# RUN: dtc %t.lr.dsl --emit=mlir | grep -o 'dtc.model_digest = [-0-9]*' > %t.lr
# RUN: not diff %t.plain %t.lr
model digest_test
input x: f32[B, 4]
label y: i32[B]
h = linear(x, 8, act=relu)
out = linear(h, 3)
loss = cross_entropy(out, y)
train {
  optimizer = sgd(lr=0.01)
  seed = 3
}
