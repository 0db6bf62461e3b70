# RUN: not dtc %s -o %t.train 2>&1 | FileCheck %s
# RUN: test ! -e %t.train
input x: f32[B, 784]
label y: i32[B]
h = linear(x, 10)
loss = cross_entropy(hh, y)
# CHECK: unknown-name.dsl:6:22: error: unknown name 'hh'
# CHECK-NEXT: loss = cross_entropy(hh, y)
# CHECK-NEXT: {{^                     \^$}}
