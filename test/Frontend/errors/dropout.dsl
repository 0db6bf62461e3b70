# RUN: not dtc %s -o %t.train 2>&1 | FileCheck %s
# RUN: test ! -e %t.train
input x: f32[B, 4]
label y: i32[B]
d = dropout(x, 1.5)
# CHECK: dropout.dsl:5:16: error: dropout probability has to be between 0 and 1, but got 1.5
e = dropout(x, q=0.1)
# CHECK: dropout.dsl:7:16: error: dropout() has no argument 'q' (expected x p)
loss = cross_entropy(x, y)
