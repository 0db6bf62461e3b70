# RUN: dtc %s --emit=mlir-runtime | FileCheck %s --enable-var-scope
# RUN: dtc %s --emit=cpp | FileCheck %s --check-prefix=CPP
# RUN: dtc %s --target=cuda --emit=cpp | FileCheck %s --check-prefix=CUDA
# RUN: dtc %s --layout=channels-last --emit=mlir-runtime | FileCheck %s --check-prefix=NHWC
# RUN: not dtc %s --layout=channels-last --target=cuda --emit=cpp 2>&1 | FileCheck %s --check-prefix=NOCUDA
# Convolution and pooling lowered to runtime calls: the window as a host
# array in dtc::rt::Window2d's order (C, H, W, O, kH, kW, sH, sW, pH, pW,
# dH, dW, groups, Ho, Wo, channelsLast), the batch as the sample count, the convolution's
# columns in its planned scratch (fixed[0]), the bias added by the
# convolution and its gradient made by the weight's, count_include_pad as a
# flag. Without a bias, a null pointer.
input x: f32[B, 1, 8, 8]
label y: i32[B]
c = conv2d(x, 2, 3, stride=[1, 2], padding=1)
m = max_pool2d(c, 2)
c2 = conv2d(m, 2, 1, bias=false)
a = avg_pool2d(c2, 2, count_include_pad=false)
loss = cross_entropy(flatten(a), y)
train {
  data = synthetic(train=16, test=0)
}
# CHECK-LABEL: func.func @eval_step()
# CHECK: %[[X:.*]] = dtcrt.step_arg input
# CHECK: %[[W:.*]] = dtcrt.buffer persistent[0]
# CHECK: %[[B:.*]] = dtcrt.buffer persistent[128]
# CHECK: %[[Y:.*]] = dtcrt.buffer per_sample[0]
# CHECK: %[[COLS:.*]] = dtcrt.buffer fixed[0]
# CHECK: %[[N:.*]] = dtcrt.size 1 batched
# CHECK: %[[WIN:.*]] = dtcrt.array [1, 8, 8, 2, 3, 3, 1, 2, 1, 1, 1, 1, 1, 8, 4, 0] : !dtcrt.array<i64>
# CHECK: dtcrt.conv2d(%[[X]], %[[W]], %[[B]], %[[Y]], %[[COLS]], %[[N]], %[[WIN]])
# CHECK: dtcrt.array [2, 8, 4, 2, 2, 2, 2, 2, 0, 0, 1, 1, 1, 4, 2, 0]
# CHECK: dtcrt.max_pool2d
# CHECK: %[[F:.*]] = dtcrt.constant false
# CHECK: dtcrt.avg_pool2d(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[F]])
# CHECK-LABEL: func.func @train_step()
# CHECK: dtcrt.avg_pool2d_grad
# CHECK: %[[NULL:.*]] = dtcrt.null : <f32>
# CHECK: dtcrt.conv2d_grad_weight(%{{.*}}, %{{.*}}, %{{.*}}, %[[NULL]],
# CHECK: dtcrt.max_pool2d_grad
# CHECK: %[[DW:.*]] = dtcrt.buffer fixed
# CHECK: %[[DB:.*]] = dtcrt.buffer fixed
# CHECK: dtcrt.conv2d_grad_weight(%{{.*}}, %{{.*}}, %[[DW]], %[[DB]],
# CHECK-NOT: dtcrt.conv2d_grad_input
# CHECK: return
# CPP: const int64_t [[S:s[0-9]+]][] = {1, 8, 8, 2, 3, 3, 1, 2, 1, 1, 1, 1, 1, 8, 4, 0};
# CPP-NEXT: dtc::kern::conv2d(c, const_cast<float *>(a.x), v{{[0-9]+}}, v{{[0-9]+}}, v{{[0-9]+}}, v{{[0-9]+}}, B, [[S]]);
# CPP: dtc::kern::conv2d(c, v{{[0-9]+}}, v{{[0-9]+}}, nullptr, v{{[0-9]+}}, v{{[0-9]+}}, B, s{{[0-9]+}});
# CPP: dtc::kern::avgPool2d(c, v{{[0-9]+}}, v{{[0-9]+}}, B, s{{[0-9]+}}, false);
# CPP: dtc::kern::maxPool2dGrad(
# CPP: dtc::kern::conv2dGradWeight(
# CUDA: dtc::cuda::conv2d(c,
# CUDA: dtc::cuda::conv2dGradWeight(c,

# channels last: the input transposed to NHWC first, the windows with the
# same NCHW sizes and the flag set, one transpose back before the flatten.
# NHWC-LABEL: func.func @eval_step()
# NHWC: dtcrt.permute
# NHWC: dtcrt.array [1, 8, 8, 2, 3, 3, 1, 2, 1, 1, 1, 1, 1, 8, 4, 1] : !dtcrt.array<i64>
# NHWC: dtcrt.conv2d
# NHWC: dtcrt.array [2, 8, 4, 2, 2, 2, 2, 2, 0, 0, 1, 1, 1, 4, 2, 1]
# NHWC: dtcrt.max_pool2d
# NHWC: dtcrt.avg_pool2d
# NHWC: dtcrt.permute
# NOCUDA: window.dsl:14:5: error: backend contract: the CUDA kernels are NCHW only: this op is planned channels-last
