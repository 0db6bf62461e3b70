# RUN: not dtc %s -o %t.train 2>&1 | FileCheck %s
input x: f32[B, 4]
label y: i32[B]
h = linear(x, 3) $ 2
# CHECK: bad-char.dsl:4:18: error: invalid character '$'
