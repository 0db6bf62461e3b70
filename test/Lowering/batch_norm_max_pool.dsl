# RUN: dtc %s --emit=mlir-runtime | FileCheck %s --enable-var-scope
# RUN: dtc %s --emit=cpp | FileCheck %s --check-prefix=CPP
# RUN: dtc %s --no-fuse --emit=mlir-runtime | FileCheck %s --check-prefix=UNFUSED
# RUN: dtc %s --target=cuda --emit=cpp | FileCheck %s --check-prefix=CUDA
# conv -> batch_norm(relu) -> max_pool2d: on the CPU the pooling's gradient
# goes into the batch norm's (dtc-fuse-max-pool-grad), one call that takes
# the pooled gradient, the ReLU's result and the pooling's window
# [C, H, W, C, kH, kW, sH, sW, pH, pW, 1, 1, 1, Ho, Wo, 0]. --no-fuse and
# the CUDA target (its device steps and their host twins) keep the pair.
input x: f32[B, 1, 6, 6]
label y: i32[B]
c = conv2d(x, 4, 3, padding=1)
n = batch_norm(c, act=relu)
p = max_pool2d(n, 3, stride=2, padding=1)
o = linear(flatten(p), 2)
loss = cross_entropy(o, y)
train {
  data = synthetic(train=16, test=0)
}
# CHECK-LABEL: func.func @train_step()
# CHECK: dtcrt.batch_norm(%[[X:[0-9]+]], %[[W:[0-9]+]], %{{[0-9]+}}, %[[Y:[0-9]+]], %[[M:[0-9]+]], %[[V:[0-9]+]],
# CHECK-NOT: dtcrt.max_pool2d_grad
# CHECK: dtcrt.trace_begin "batch_norm_grad"
# CHECK: %[[WIN:.*]] = dtcrt.array [4, 6, 6, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, 3, 3, 0] : !dtcrt.array<i64>
# CHECK-NEXT: dtcrt.batch_norm_grad_max_pool(%[[X]], %{{[0-9]+}}, %[[M]], %[[V]], %[[W]], %[[Y]], %{{.*}}, %[[WIN]])
# CHECK-NOT: dtcrt.max_pool2d_grad
# CHECK: return
# CPP-LABEL: static void trainStep(
# CPP: dtc::kern::batchNormGradMaxPool(c, {{.*}}, B, 4, 36, 9.99999975e-06f, 1, s{{[0-9]+}});
# UNFUSED-LABEL: func.func @train_step()
# UNFUSED: dtcrt.max_pool2d_grad
# UNFUSED: dtcrt.batch_norm_grad(
# CUDA-LABEL: static void trainStepCuda(
# CUDA-NOT: batchNormGradMaxPool
# CUDA: dtc::cuda::maxPool2dGrad(c,
# CUDA: dtc::cuda::batchNormGrad(c,

# IR planned for the CPU (fused) does not print for the CUDA target, with a located error.
# RUN: rm -rf %t && mkdir -p %t
# RUN: dtc %s --emit=mlir-opt -o %t/planned.mlir
# RUN: not dtc %t/planned.mlir --target=cuda --emit=cpp 2>&1 | FileCheck %s --check-prefix=REFUSED
# REFUSED: planned.mlir:{{[0-9]+}}:{{[0-9]+}}: error: backend contract: the CUDA kernels have no fused max-pool and batch-norm gradient
