# RUN: dtc %s --emit=mlir | FileCheck %s --enable-var-scope
# RUN: dtc %s --emit=cpp | FileCheck %s --check-prefix=CPP
# RUN: dtc %s --target=cuda --emit=cpp | FileCheck %s --check-prefix=CUDA
# layer_norm as torch.nn.LayerNorm(D): `<name>.weight` ones and
# `<name>.bias` zeros [D], over the last dimension of any rank, eps 1e-5 by
# default; gelu(x, approximate="tanh") and act=gelu_tanh. Lowered to one
# runtime call over the [rows, D] view on each target.
input x: f32[B, 4, 6]
label y: i32[B]
n1 = layer_norm(x)
g = gelu(n1, approximate="tanh")
fc = linear(flatten(g), 8, act=gelu_tanh)
n2 = layer_norm(fc, eps=1e-3)
out = linear(n2, 3)
loss = cross_entropy(out, y)
# CHECK: dtc.param @n1.weight : tensor<6xf32> {a = 1.000000e+00 : f64, init = #dtc.init<constant>}
# CHECK: dtc.param @n1.bias : tensor<6xf32>
# CHECK: dtc.param @n2.weight : tensor<8xf32>
# CHECK: %[[Y:.*]], %{{.*}}, %{{.*}} = dtc.layer_norm %arg0, %{{.*}}, %{{.*}} {eps = 1.000000e-05 : f64} : tensor<?x4x6xf32>, tensor<6xf32>, tensor<?x4xf32>
# CHECK: dtc.gelu_tanh %[[Y]] : tensor<?x4x6xf32>
# CHECK: dtc.gelu_tanh %{{.*}} : tensor<?x8xf32>
# CHECK: dtc.layer_norm %{{.*}} {eps = 1.000000e-03 : f64} : tensor<?x8xf32>, tensor<8xf32>, tensor<?xf32>
# CPP: x0 * (1.0f / (1.0f + expf(-1.5957691216057308f * (x0 + 0.044715f * x0 * x0 * x0))))
# CPP-LABEL: trainStep
# CPP: dtc::kern::layerNorm(c, const_cast<float *>(a.x), {{.*}}, B*4, 6, 9.99999975e-06f);
# CPP: dtc::kern::layerNorm(c, {{.*}}, B, 8, 0.00100000005f);
# CPP: dtc::kern::layerNormGrad(c, {{.*}}, B, 8);
# CPP: dtc::kern::layerNormGrad(c, const_cast<float *>(a.x), {{.*}}, B*4, 6);
# CUDA: dtc::cuda::layerNorm(c,
# CUDA: dtc::cuda::layerNormGrad(c,
