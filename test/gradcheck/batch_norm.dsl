# Gradient check: batch_norm on [B, C, H, W] (after a convolution, with a
# fused tanh) and on [B, C] (other momentum and eps).
input x: f32[B, 12]
label y: i32[B]
r = reshape(x, [B, 2, 2, 3])
c1 = conv2d(r, 4, [2, 2], padding=[1, 0])
n1 = batch_norm(c1, act=tanh)
fc = linear(flatten(n1), 6)
n2 = batch_norm(fc, momentum=0.2, eps=0.001)
out = linear(n2, 3)
loss = cross_entropy(out, y)
train {
  data = synthetic(train=64, test=16)
  batch = 8
}
