# RUN: not dtc %s -o %t.train 2>&1 | FileCheck %s
# The loss and a metric over the same class labels must agree on the number
# of classes (the labels index one set of them).
input x: f32[B, 4]
label y: i32[B]
h = linear(x, 10)
g = linear(x, 5)
loss = cross_entropy(h, y)
metric accuracy = accuracy(g, y)
# CHECK: classes-disagree.dsl:9:28: error: accuracy() gets logits of 5 classes, but cross_entropy() at line 8 gets 10; the class labels index one set of classes
