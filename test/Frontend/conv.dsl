# RUN: dtc %s --emit=mlir | FileCheck %s --enable-var-scope
# conv2d, pooling, flatten and global average pooling as the frontend builds
# them: torch.nn.Conv2d's parameter names, layout and initialization
# (U(+-1/sqrt(fan_in)), fan_in = 1 * 3 * 3 = 9, then 4 / 2 * 1 * 2 = 4), the
# bias an operand of the convolution (its kernel adds it), int-or-pair
# arguments.
input x: f32[B, 1, 28, 28]
label y: i32[B]
c1 = conv2d(x, 4, 3, padding=1, act=relu)
c2 = conv2d(c1, 6, [1, 2], stride=[2, 1], dilation=[1, 3], groups=2, bias=false)
p = max_pool2d(c2, 2)
a = avg_pool2d(c1, 3, stride=2, padding=1, count_include_pad=false)
g = adaptive_avg_pool2d(a, 1)
h1 = linear(flatten(p), 10)
h2 = linear(flatten(g), 10)
loss = cross_entropy(h1 + h2, y)
# CHECK: dtc.param @c1.weight : tensor<4x1x3x3xf32> {a = -0.33333333333333331 : f64, b = 0.33333333333333331 : f64, init = #dtc.init<uniform>}
# CHECK: dtc.param @c1.bias : tensor<4xf32> {a = -0.33333333333333331 : f64, b = 0.33333333333333331 : f64, init = #dtc.init<uniform>}
# CHECK: dtc.param @c2.weight : tensor<6x2x1x2xf32> {a = -5.000000e-01 : f64, b = 5.000000e-01 : f64, init = #dtc.init<uniform>}
# CHECK-NOT: dtc.param @c2.bias
# CHECK: %[[W1:.*]] = dtc.param_ref @c1.weight
# CHECK: %[[B1:.*]] = dtc.param_ref @c1.bias
# CHECK: %[[C1:.*]] = dtc.conv2d %arg0, %[[W1]], %[[B1]] {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : tensor<?x1x28x28xf32>, tensor<4x1x3x3xf32>, tensor<4xf32> -> tensor<?x4x28x28xf32>
# CHECK: %[[R:.*]] = dtc.relu %[[C1]]
# CHECK: dtc.conv2d %[[R]], %{{.*}} {dilation = array<i64: 1, 3>, groups = 2 : i64, padding = array<i64: 0, 0>, stride = array<i64: 2, 1>} : tensor<?x4x28x28xf32>, tensor<6x2x1x2xf32> -> tensor<?x6x14x25xf32>
# CHECK: dtc.max_pool2d %{{.*}} {kernel = array<i64: 2, 2>, padding = array<i64: 0, 0>, stride = array<i64: 2, 2>} : tensor<?x6x14x25xf32> -> tensor<?x6x7x12xf32>
# CHECK: dtc.avg_pool2d %[[R]] {count_include_pad = false, kernel = array<i64: 3, 3>, padding = array<i64: 1, 1>, stride = array<i64: 2, 2>} : tensor<?x4x28x28xf32> -> tensor<?x4x14x14xf32>
# CHECK: dtc.reshape %{{.*}} : tensor<?x4x14x14xf32> -> tensor<?x4x196xf32>
# CHECK: dtc.reduce_mean %{{.*}} {axis = 2 : i64} : tensor<?x4x196xf32> -> tensor<?x4xf32>
# CHECK: dtc.reshape %{{.*}} : tensor<?x4xf32> -> tensor<?x4x1x1xf32>
# CHECK: dtc.reshape %{{.*}} : tensor<?x6x7x12xf32> -> tensor<?x504xf32>
