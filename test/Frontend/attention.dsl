# RUN: dtc %s --emit=mlir | FileCheck %s
# RUN: dtc %s --emit=cpp | FileCheck %s --check-prefix=CPP
# RUN: dtc %s --target=cuda --emit=cpp | FileCheck %s --check-prefix=CUDA
# scaled_dot_product_attention as F.scaled_dot_product_attention on
# [B, H, T, D]: one fused dtc.attention (is_causal, scale 1/sqrt(D) unless
# given), lowered to one kernel call over B*H heads on each target, and one
# for its gradient.
input x: f32[B, 8, 12]
label y: i32[B]
qkv = linear(x, 36)
q, k, v = split(qkv, 3)
qh = transpose(reshape(q, [B, 8, 3, 4]), 1, 2)
kh = transpose(reshape(k, [B, 8, 3, 4]), 1, 2)
vh = transpose(reshape(v, [B, 8, 3, 4]), 1, 2)
a = scaled_dot_product_attention(qh, kh, vh, is_causal=true)
b = scaled_dot_product_attention(qh, kh, vh, scale=0.125)
out = linear(flatten(a + b), 5)
loss = cross_entropy(out, y)
# CHECK: dtc.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 5.000000e-01 : f64} : tensor<?x3x8x4xf32>, tensor<?x3x8x4xf32>, tensor<?x3x8x4xf32> -> tensor<?x3x8x4xf32>, tensor<?x3x8xf32>
# CHECK: dtc.attention %{{.*}}, %{{.*}}, %{{.*}} {scale = 1.250000e-01 : f64}
# CPP-LABEL: trainStep
# CPP: dtc::kern::attention(c, {{.*}}, B*3, 1, 4, 4, 8, 8, 4, 4, true, 0.5f);
# CPP: dtc::kern::attention(c, {{.*}}, B*3, 1, 4, 4, 8, 8, 4, 4, false, 0.125f);
# CPP: dtc::kern::attentionGrad(c, {{.*}}, B*3, 1, 4, 4, 8, 8, 4, 4, false, 0.125f);
# CPP: dtc::kern::attentionGrad(c, {{.*}}, B*3, 1, 4, 4, 8, 8, 4, 4, true, 0.5f);
# CUDA: dtc::cuda::attention(c,
# CUDA: dtc::cuda::attentionGrad(c,
