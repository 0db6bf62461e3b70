# RUN: not dtc %s -o %t.train 2>&1 | FileCheck %s
# RUN: test ! -e %t.train
# Each bad convolution or pooling is reported where it is written.
input x: f32[B, 3, 8, 8]
label y: i32[B]
c1 = conv2d(x, 4, 9)
# CHECK: conv.dsl:6:6: error: conv2d: the kernel (9 with dilation) is larger than the padded input (8) in height
c2 = conv2d(x, 4, 3, groups=2)
# CHECK: conv.dsl:8:6: error: conv2d(): 3 input channels and 4 output channels must both be divisible by groups (2)
f = flatten(x)
c3 = conv2d(f, 4, 3)
# CHECK: conv.dsl:11:13: error: conv2d() needs an input [batch, channels, height, width], got [B, 192]
c4 = conv2d(x, 4, [3, 3, 3])
# CHECK: conv.dsl:13:19: error: expected an integer or a pair [h, w] for the kernel size, got 3 values
c5 = conv2d(x, 4, 3, stride=0)
# CHECK: conv.dsl:15:29: error: expected an integer from 1 to 2^40 for the stride
c6 = conv2d(x, 4, 3, paddin=1)
# CHECK: conv.dsl:17:22: error: conv2d() has no argument 'paddin'
z0 = relu(conv2d(x, 4, 3))
# CHECK: conv.dsl:19:11: error: conv2d() must be assigned to a name (the name of its parameters), as in 'c1 = conv2d(x, 32, 3)'
m1 = max_pool2d(x, 3, padding=2)
# CHECK: conv.dsl:21:6: error: max_pool2d: padding (2) must be at most half the kernel (3)
m2 = avg_pool2d(x, 9)
# CHECK: conv.dsl:23:6: error: avg_pool2d: the kernel (9 with dilation) is larger than the padded input (8) in height
g = adaptive_avg_pool2d(x, 2)
# CHECK: conv.dsl:25:28: error: adaptive_avg_pool2d() supports the output size 1 (global average pooling) only
z = flatten(max(max(max(x, axis=3), axis=2), axis=1))
# CHECK: conv.dsl:27:13: error: flatten() needs at least 2 dimensions, got [B]
loss = cross_entropy(flatten(x), y)
