# RUN: not dtc %s -o %t.train 2>&1 | FileCheck %s
# RUN: test ! -e %t.train
input x: f32[B, 4]
label y: i32[B]
a = batch_norm(x, momentum=1.5)
# CHECK: batch_norm.dsl:5:28: error: batch_norm() momentum must be in [0, 1], got 1.5
b = batch_norm(x, eps=0)
# CHECK: batch_norm.dsl:7:23: error: batch_norm() eps must be > 0, got 0
c = batch_norm(x, affine=false)
# CHECK: batch_norm.dsl:9:19: error: batch_norm() has no argument 'affine' (expected x momentum eps act)
d = batch_norm(sum(x, axis=1))
# CHECK: batch_norm.dsl:11:16: error: batch_norm needs an input [N, C], [N, C, L] or [N, C, H, W], got [B]
loss = cross_entropy(batch_norm(x), y)
# CHECK: batch_norm.dsl:13:22: error: batch_norm() must be assigned to a name (the name of its parameters and buffers), as in 'n1 = batch_norm(c1)'
