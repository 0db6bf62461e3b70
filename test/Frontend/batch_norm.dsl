# RUN: dtc %s --emit=mlir | FileCheck %s
# batch_norm as the frontend builds it: torch.nn.BatchNorm's parameters
# (weight ones, bias zeros) and buffers (running_mean zeros, running_var
# ones, num_batches_tracked int64), its keywords and fused activation, on
# [B, C, H, W] (BatchNorm2d) and [B, C] (BatchNorm1d).
input x: f32[B, 2, 5, 5]
label y: i32[B]
n1 = batch_norm(x, act=relu)
h = linear(flatten(n1), 4)
n2 = batch_norm(h, momentum=0.3, eps=0.001, act=tanh)
loss = cross_entropy(n2, y)
# CHECK: dtc.param @n1.weight : tensor<2xf32> {a = 1.000000e+00 : f64, init = #dtc.init<constant>}
# CHECK: dtc.param @n1.bias : tensor<2xf32>
# CHECK: dtc.buffer @n1.running_mean : tensor<2xf32>
# CHECK: dtc.buffer @n1.running_var : tensor<2xf32> {value = 1.000000e+00 : f64}
# CHECK: dtc.buffer @n1.num_batches_tracked : tensor<i64>
# CHECK: dtc.buffer @n2.num_batches_tracked : tensor<i64>
# CHECK: %[[Y:.*]], %[[M:.*]], %[[V:.*]] = dtc.batch_norm %arg0, {{.*}} {eps = 1.000000e-05 : f64, relu} : tensor<?x2x5x5xf32>, tensor<2xf32>
# CHECK: dtc.update_running_stats @n1.running_mean, @n1.running_var, @n1.num_batches_tracked(%arg0, %[[M]], %[[V]]) {momentum = 1.000000e-01 : f64}
# CHECK-NOT: dtc.relu
# CHECK: dtc.reshape %[[Y]]
# CHECK: dtc.batch_norm {{.*}} {eps = 1.000000e-03 : f64} : tensor<?x4xf32>, tensor<4xf32>
# CHECK: dtc.update_running_stats @n2.running_mean, @n2.running_var, @n2.num_batches_tracked({{.*}}) {momentum = 3.000000e-01 : f64}
# CHECK: dtc.tanh
