# RUN: not dtc %s -o %t.train 2>&1 | FileCheck %s
input x: f32[B, 4]
label y: i32[B]
h = linear(x, 3)
loss = cross_entropy(h, y)
train {
  batch = 0
  optimizer = sgd(lr=0.1, momentom=0.9)
  shuffle = 3
  validation = 1.5
}
# CHECK: recipe.dsl:7:11: error: expected an integer from 1 to 2^40 for the batch size
# CHECK: recipe.dsl:8:27: error: sgd() has no argument 'momentom' (expected lr momentum dampening weight_decay nesterov)
# CHECK: recipe.dsl:9:3: error: unknown train setting 'shuffle' (expected data, batch, epochs, optimizer, lr, schedule, clip_grad_norm, accumulate, shard, ranks, seed, validation)
# CHECK: recipe.dsl:10:16: error: validation is the fraction of the training set held out, in [0, 1), got 1.5
