# RUN: not dtc %s -o %t.train 2>&1 | FileCheck %s
input x: f32[B, 4]
label y: i32[B]
loss = cross_entropy(x, y)
train {
  schedule = exponential(gamma=0.9)
}
# CHECK: schedule-kind.dsl:6:14: error: expected a schedule: constant(...), cosine(...), linear(...) or step(...)
