# RUN: dtc %s --emit=mlir-opt | FileCheck %s --check-prefix=PLAN
# RUN: dtc %s --emit=mlir-opt --report -o /dev/null | FileCheck %s --check-prefix=REPORT
# RUN: dtc %s --emit=mlir-runtime | FileCheck %s --check-prefix=RT
# RUN: dtc %s --emit=cpp | FileCheck %s --check-prefix=CPP
# RUN: dtc %s --target=cuda --emit=cpp | FileCheck %s --check-prefix=CUDA
# torch's attention block (one projection split into q, k, v, the heads
# transposed): after dtc-attention-tokens-first and dtc-attention-qkv-packed
# the attention reads the projection as [B, T, 3, H, D] and its gradient
# writes the projection's gradient: no split, no concatenation in any step.
# The kernels get the three slices (4 and 8 floats past the projection's
# start: H D = 4) with rows 3 H D = 12 floats apart, and write the
# gradient's three slices likewise. The FLOPs of the report count it as
# the attention it stands for (6 products of 2 Tq Tk D a head, half of
# them causal: 6 x 2 x 8 heads x 6 x 6 x 2 / 2 at batch 4).
input x: f32[B, 6, 4]
label y: i32[B]
c_attn = linear(x, 12)
q, k, v = split(c_attn, 3)
qh = transpose(reshape(q, [B, 6, 2, 2]), 1, 2)
kh = transpose(reshape(k, [B, 6, 2, 2]), 1, 2)
vh = transpose(reshape(v, [B, 6, 2, 2]), 1, 2)
a = scaled_dot_product_attention(qh, kh, vh, is_causal=true)
out = linear(flatten(transpose(a, 1, 2)), 3)
loss = cross_entropy(out, y)
train {
  data = synthetic(train=16, test=0)
  batch = 4
}
# PLAN-NOT: dtc.split
# PLAN-NOT: dtc.concat
# PLAN-LABEL: func.func @train_step
# PLAN: %[[P:.*]] = dtc.reshape %{{.*}} : tensor<?x6x12xf32> -> tensor<?x6x3x2x2xf32>
# PLAN: %[[O:.*]], %[[L:.*]] = dtc.attention_qkvpacked %[[P]] {causal
# PLAN: dtc.attention_qkvpacked_grad %[[P]], %[[O]], %[[L]], %{{.*}} {causal
# REPORT: attention FLOPs per training step (batch 4): 3456
# RT-LABEL: func.func @train_step
# RT: %[[K:.*]] = dtcrt.offset %[[Q:.*]][4]
# RT: %[[V:.*]] = dtcrt.offset %[[Q]][8]
# RT: dtcrt.attention(%[[Q]], %[[K]], %[[V]],
# RT: %[[K2:.*]] = dtcrt.offset %[[Q]][4]
# RT: %[[V2:.*]] = dtcrt.offset %[[Q]][8]
# RT: %[[DK:.*]] = dtcrt.offset %[[DQ:.*]][4]
# RT: %[[DV:.*]] = dtcrt.offset %[[DQ]][8]
# RT: dtcrt.attention_grad(%[[Q]], %[[K2]], %[[V2]], %{{.*}}, %{{.*}}, %{{.*}}, %[[DQ]], %[[DK]], %[[DV]],
# CPP-LABEL: trainStep
# CPP: dtc::kern::attention(c, {{.*}}, B*2, 2, 12, 12, 6, 6, 2, 2, true,
# CPP: dtc::kern::attentionGrad(c, {{.*}}, B*2, 2, 12, 12, 6, 6, 2, 2, true,
# CUDA: dtc::cuda::attention(c, {{.*}}, B*2, 2, 12, 12, 6, 6, 2, 2, true,
# CUDA: dtc::cuda::attentionGrad(c, {{.*}}, B*2, 2, 12, 12, 6, 6, 2, 2, true,
