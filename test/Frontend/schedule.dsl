# RUN: dtc %s --emit=mlir | FileCheck %s
# RUN: dtc %s --emit=cpp | FileCheck %s --check-prefix=CPP
# The recipe's learning-rate schedule: a module attribute the generated
# program's recipe carries (train --lr-schedule and its options override it).
input x: f32[B, 4]
label y: i32[B]
fc = linear(x, 3)
loss = cross_entropy(fc, y)
train {
  optimizer = adamw(lr=3e-4)
  schedule = cosine(warmup=100, decay_steps=2000, min_lr=3e-5)
}
# CHECK: dtc.schedule = #dtc.schedule<kind = cosine, warmup = 100, decay_steps = 2000, min_lr = 3.0e-05>
# CPP: s.recipe.schedule.kind = 1;
# CPP: s.recipe.schedule.warmup = 100;
# CPP: s.recipe.schedule.decaySteps = 2000;
# CPP: s.recipe.schedule.minLr = 3.0000000000000001e-05;
