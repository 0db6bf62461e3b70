# RUN: not dtc %s -o %t.train 2>&1 | FileCheck %s
# A decay that would end before the warmup does (the rate at min_lr right
# after it) is refused where it is written; decay_steps = 0 (the run's last
# step) and decay_steps = warmup are not (as train's --decay-steps:
# runtime.Options.ADecayShorterThanTheWarmupIsRefused).
input x: f32[B, 4]
label y: i32[B]
loss = cross_entropy(x, y)
train {
  schedule = cosine(warmup=100, decay_steps=50)
}
# CHECK: schedule-decay.dsl:10:14: error: schedule: decay_steps 50 is shorter than warmup 100: the decay would be over before the warmup ends, the rate dropping to min_lr at once after it; give decay_steps of at least 100, or 0 for the run's last step
