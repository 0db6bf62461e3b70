# RUN: dtc %s --layout=blocked --emit=cpp | FileCheck %s
# RUN: %if avx512 && gemm-onednn %{ dtc %s --emit=cpp | FileCheck %s %}
# RUN: dtc %s --layout=nchw --emit=cpp | FileCheck %s --check-prefix=NCHW
# RUN: dtc %s --gemm=openblas --emit=cpp | FileCheck %s --check-prefix=NCHW
# RUN: not dtc %s --layout=blocked --target=cuda --emit=cpp 2>&1 | FileCheck %s --check-prefix=NOCUDA
# RUN: not dtc %s --layout=nhwc --emit=cpp 2>&1 | FileCheck %s --check-prefix=UNKNOWN
# dtc --layout=blocked (dtc-blocked-layout): the 16-channel activations
# nChw16c. The windows' last value is the layout's flags (2: x blocked, 4:
# the result blocked): the convolution of the 3-channel input writes
# blocked (4), the pooling is blocked on both sides (6); batch norm runs on
# [n, 16, H W] in lanes of 16, its update counts N H W per channel, its
# gradient takes the pooling's (dtc-fuse-max-pool-grad, blocked); one
# permute back to NCHW before the flatten, none between the ops. The
# default (auto) is blocked only with oneDNN on an AVX-512 host: with
# --gemm=openblas, NCHW.
input x: f32[B, 3, 8, 8]
label y: i32[B]
c = conv2d(x, 16, 3, padding=1)
n = batch_norm(c, act=relu)
m = max_pool2d(n, 2)
o = linear(flatten(m), 2)
loss = cross_entropy(o, y)
train {
  data = synthetic(train=16, test=0)
}
# CHECK-LABEL: static void trainStep(
# CHECK: {3, 8, 8, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 8, 8, 4};
# CHECK-NEXT: dtc::kern::conv2d(
# CHECK-NOT: dtc::kern::permute(
# CHECK: dtc::kern::batchNorm(c, {{.*}}, B, 16, 64, 9.99999975e-06f, true, 16);
# CHECK: dtc::kern::updateRunningStats(c, {{.*}}, 16, B*64, 0.100000001f);
# CHECK-NOT: dtc::kern::permute(
# CHECK: {16, 8, 8, 16, 2, 2, 2, 2, 0, 0, 1, 1, 1, 4, 4, 6};
# CHECK-NEXT: dtc::kern::maxPool2d(
# CHECK: dtc::kern::permute(
# CHECK: dtc::kern::permute(
# CHECK-NOT: dtc::kern::permute(
# CHECK: {16, 8, 8, 16, 2, 2, 2, 2, 0, 0, 1, 1, 1, 4, 4, 6};
# CHECK-NEXT: dtc::kern::batchNormGradMaxPool(c, {{.*}}, B, 16, 64, 9.99999975e-06f, 16, s{{[0-9]+}});
# CHECK: dtc::kern::conv2dGradWeight(
# NCHW-LABEL: static void trainStep(
# NCHW: dtc::kern::batchNorm(c, {{.*}}, B, 16, 64, 9.99999975e-06f, true, 1);
# NCHW: dtc::kern::batchNormGradMaxPool(c, {{.*}}, B, 16, 64, 9.99999975e-06f, 1, s{{[0-9]+}});
# NOCUDA: blocked.dsl:[[@LINE-26]]:5: error: backend contract: the CUDA kernels are NCHW only: this op is planned blocked (nChw16c)
# UNKNOWN: error: unknown layout 'nhwc' (expected auto, nchw, channels-last, blocked)
