# RUN: dtc %s --emit=mlir-runtime | FileCheck %s
# RUN: dtc %s --emit=cpp | FileCheck %s --check-prefix=CPP
# Batch normalization lowered to runtime calls on [n, channels, inner]; the
# running statistics updated where they live (the persistent block, after
# the parameters), the counter through an int64_t pointer; the evaluation
# step normalizes with them and updates nothing. The ReLU is the kernels':
# the gradient reads the activated result for its mask.
input x: f32[B, 3, 4, 4]
label y: i32[B]
n = batch_norm(x, act=relu)
o = linear(flatten(n), 2)
loss = cross_entropy(o, y)
# CHECK-LABEL: func.func @eval_step()
# CHECK: %[[RM:.*]] = dtcrt.buffer persistent[576]
# CHECK: %[[RV:.*]] = dtcrt.buffer persistent[640]
# CHECK: dtcrt.batch_norm_inference(%{{.*}}, %{{.*}}, %{{.*}}, %[[RM]], %[[RV]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}})
# CHECK-NOT: dtcrt.update_running_stats
# CHECK-LABEL: func.func @train_step()
# CHECK: dtcrt.batch_norm(
# CHECK: %[[C:.*]] = dtcrt.buffer persistent[704] : !dtcrt.ptr<i64>
# CHECK: dtcrt.update_running_stats(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[C]], %{{.*}}, %{{.*}}, %{{.*}})
# CHECK: dtcrt.batch_norm_grad(
# CPP-LABEL: static void evalStep(
# CPP: dtc::kern::batchNormInference(c, {{.*}}, B, 3, 16, 9.99999975e-06f, true, 1);
# CPP-LABEL: static void trainStep(
# CPP: dtc::kern::batchNorm(c, [[X:.*]], [[W:v[0-9]+]], v{{[0-9]+}}, [[Y:v[0-9]+]], v{{[0-9]+}}, v{{[0-9]+}}, B, 3, 16, 9.99999975e-06f, true, 1);
# CPP: int64_t *v{{[0-9]+}} = reinterpret_cast<int64_t *>(P + 704);
# CPP: dtc::kern::updateRunningStats(c, {{.*}}, 3, B*16, 0.100000001f);
# CPP: dtc::kern::batchNormGrad(c, [[X]], v{{[0-9]+}}, v{{[0-9]+}}, v{{[0-9]+}}, [[W]], [[Y]], {{.*}}, B, 3, 16, 9.99999975e-06f, 1);
# CPP: static const dtc::rt::BufferSpec kBuffers[] = {
# CPP-NEXT: {"n.running_mean", dtc::rt::ElementType::F32, 1, {3, 0, 0, 0, 0, 0}, 3, 576, 0},
# CPP-NEXT: {"n.running_var", dtc::rt::ElementType::F32, 1, {3, 0, 0, 0, 0, 0}, 3, 640, 1},
# CPP-NEXT: {"n.num_batches_tracked", dtc::rt::ElementType::I64, 0, {0, 0, 0, 0, 0, 0}, 1, 704, 0},
# CPP: s.numBuffers = 3;
# CPP: s.bufferBytes = 192;
