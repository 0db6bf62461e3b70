# RUN: not dtc %s -o %t.train 2>&1 | FileCheck %s
# A schedule's bad arguments: located errors.
input x: f32[B, 4]
label y: i32[B]
loss = cross_entropy(x, y)
train {
  schedule = step(min_lr=0.1)
}
# CHECK: schedule.dsl:7:19: error: step() has no argument 'min_lr' (expected warmup step_size gamma)
