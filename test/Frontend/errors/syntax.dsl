# RUN: rm -f %t.train
# RUN: not dtc %s -o %t.train 2>&1 | FileCheck %s
# RUN: test ! -e %t.train
input x: f32[B, 784]
label y: i32[B]
h = linear(x 10)
loss = cross_entropy(h, y)
# CHECK: syntax.dsl:6:14: error: expected ',' or ')', got a number '10'
# CHECK-NEXT: h = linear(x 10)
# CHECK-NEXT: {{^             \^$}}
