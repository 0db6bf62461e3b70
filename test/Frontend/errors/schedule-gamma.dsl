# RUN: not dtc %s -o %t.train 2>&1 | FileCheck %s
input x: f32[B, 4]
label y: i32[B]
loss = cross_entropy(x, y)
train {
  schedule = step(step_size=10, gamma=2)
}
# CHECK: schedule-gamma.dsl:6:14: error: schedule: gamma must be in [0, 1], got 2
