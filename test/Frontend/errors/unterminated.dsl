# RUN: not dtc %s -o %t.train 2>&1 | FileCheck %s
input x: f32[B, 784]
label y: i32[B]
h = linear(x, 10
# CHECK: unterminated.dsl:6:1: error: expected ',' or ')', got end of file
