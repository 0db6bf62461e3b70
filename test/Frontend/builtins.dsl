# RUN: dtc %s --emit=mlir | FileCheck %s --enable-var-scope
# The remaining builtins: reshape with the batch symbol, transpose, max,
# softmax, exp/log/sqrt/tanh/sigmoid/relu, mse, keepdims, the operators.
input img: f32[B, 2, 3]
label t: f32[B, 3]
param w: f32[3, 3] = he_normal()
param v: f32[3] = uniform(-0.1, 0.1)
flat = reshape(img, [B, 6])
back = reshape(flat, [B, 3, 2])
tr = transpose(w)
p = sum(back, axis=2) @ tr
q = sigmoid(tanh(relu(p))) + sqrt(exp(v)) / log(v * v + 2)
m = max(q, axis=1, keepdims=true)
s = softmax(q - m)
loss = mse(s, t)
# CHECK: dtc.param @w : tensor<3x3xf32> {init = #dtc.init<he_normal>}
# CHECK: dtc.param @v : tensor<3xf32> {a = -1.000000e-01 : f64, b = 1.000000e-01 : f64, init = #dtc.init<uniform>}
# CHECK: dtc.reshape %arg0 : tensor<?x2x3xf32> -> tensor<?x6xf32>
# CHECK: dtc.reshape %{{.*}} : tensor<?x6xf32> -> tensor<?x3x2xf32>
# CHECK: dtc.transpose %{{.*}} {perm = array<i64: 1, 0>} : tensor<3x3xf32> -> tensor<3x3xf32>
# CHECK: dtc.reduce_sum %{{.*}} {axis = 2 : i64} : tensor<?x3x2xf32> -> tensor<?x3xf32>
# CHECK: dtc.matmul
# CHECK: dtc.relu
# CHECK: dtc.tanh
# CHECK: dtc.sigmoid
# CHECK: dtc.exp
# CHECK: dtc.sqrt
# CHECK: dtc.mul
# CHECK: dtc.add
# CHECK: dtc.log
# CHECK: dtc.div
# CHECK: dtc.add
# CHECK: %[[MX:.*]] = dtc.reduce_max %{{.*}} {axis = 1 : i64} : tensor<?x3xf32> -> tensor<?xf32>
# CHECK: %[[K:.*]] = dtc.reshape %[[MX]] : tensor<?xf32> -> tensor<?x1xf32>
# CHECK: dtc.sub %{{.*}}, %[[K]] : tensor<?x3xf32>, tensor<?x1xf32> -> tensor<?x3xf32>
# CHECK: dtc.softmax %{{.*}} {axis = 1 : i64}
# CHECK: dtc.mse %{{.*}}, %arg1 : tensor<?x3xf32>, tensor<?x3xf32> -> tensor<f32>
