# RUN: not dtc %s -o %t.train 2>&1 | FileCheck %s
input x: f32[784, B]
label y: i32[B]
# CHECK: batch-dim.dsl:2:19: error: the batch dimension 'B' must be the first dimension
