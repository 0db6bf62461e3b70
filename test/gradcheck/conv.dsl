# Gradient check: conv2d (padding, stride, dilation, groups), max and average
# pooling (overlapping windows, padding), global average pooling, flatten.
input x: f32[B, 12]
label y: i32[B]
r = reshape(x, [B, 2, 2, 3])
c1 = conv2d(r, 4, [2, 2], padding=[1, 0], act=tanh)
c2 = conv2d(c1, 4, 2, stride=[2, 1], dilation=[1, 2], groups=2, padding=1)
m = max_pool2d(c2, 2, stride=1)
a = avg_pool2d(c1, [2, 1], stride=1, padding=[1, 0])
g = adaptive_avg_pool2d(a, 1)
fc = linear(flatten(m), 3)
gl = linear(flatten(g), 3)
loss = cross_entropy(fc + gl, y)
train {
  data = synthetic(train=64, test=16)
  batch = 8
}
