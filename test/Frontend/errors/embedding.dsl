# RUN: not dtc %s -o %t.train 2>&1 | FileCheck %s
# Token ids, embeddings and sequence losses: located errors.
input ids: i32[B, 6]
label y: i32[B, 6]
x = linear(ids, 4)
# CHECK: embedding.dsl:5:12: error: the input of linear() must be an f32 tensor, but it is i32 (labels or token ids); only embedding, cross_entropy and accuracy take i32
e1 = embedding(ids, 0, 4)
# CHECK: embedding.dsl:7:21: error: expected an integer from 1 to 2^40 for num_embeddings
e2 = embedding(ids, 10, 4, init=glorot(1))
# CHECK: embedding.dsl:9:33: error: unknown initializer 'glorot'
loss = cross_entropy(embedding(ids, 10, 4), y)
# CHECK: embedding.dsl:11:22: error: embedding() must be assigned to a name (the name of its table), as in 'wte = embedding(ids, 256, 128)'
e3 = embedding(ids, 10, 4)
f = embedding(e3, 3, 4)
# CHECK: embedding.dsl:14:15: error: embedding() looks up i32 ids, got an f32 tensor [B, 6, 4]
l3 = linear(e3, 10)
loss = cross_entropy(l3, ids, ignore_index=1.5)
# CHECK: embedding.dsl:17:44: error: expected an integer from -2147483648 to 2^40 for ignore_index
m = cross_entropy(e3, l3)
# CHECK: embedding.dsl:19:23: error: expected i32 class labels, got an f32 tensor [B, 6, 10]
n = accuracy(l3, ids, 3)
# CHECK: embedding.dsl:21:23: error: accuracy() takes at most 2 positional arguments
k = cross_entropy(l3, ids, ignore=3)
# CHECK: embedding.dsl:23:28: error: cross_entropy() has no argument 'ignore'
