# RUN: dtc %s --emit=mlir-runtime | FileCheck %s
# RUN: dtc %s --emit=cpp | FileCheck %s --check-prefix=CPP
# Dropout lowered to runtime calls with the step's seed (StepArgs::rngSeed)
# and the op's salt; none in the evaluation step.
input x: f32[B, 8]
label y: i32[B]
h = linear(x, 8)
d = dropout(h, 0.5)
o = linear(d, 3)
loss = cross_entropy(o, y)
# CHECK-LABEL: func.func @eval_step()
# CHECK-NOT: dtcrt.dropout
# CHECK-LABEL: func.func @train_step()
# CHECK: %[[P:.*]] = dtcrt.constant 5.000000e-01 : f32
# CHECK: %[[S:.*]] = dtcrt.step_seed
# CHECK: %[[SALT:.*]] = dtcrt.constant 0 : i64
# CHECK: dtcrt.dropout(%{{.*}}, %{{.*}}, %{{.*}}, %[[P]], %[[S]], %[[SALT]])
# CHECK: dtcrt.dropout_grad
# CPP: dtc::kern::dropout(c, v{{[0-9]+}}, v{{[0-9]+}}, B*8, 0.5f, a.rngSeed, 0);
# CPP: dtc::kern::dropoutGrad(c, v{{[0-9]+}}, v{{[0-9]+}}, B*8, 0.5f, a.rngSeed, 0);
