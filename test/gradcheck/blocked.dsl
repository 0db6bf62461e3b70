# Gradient check: convolutions, batch norm and pooling on 16 channels, the
# ones dtc --layout=blocked holds blocked (a first convolution of 3
# channels writing blocked, then blocked to blocked, a strided one out of
# the blocks); run again with DTC_FLAGS=--layout=blocked (test/CMakeLists.txt).
input x: f32[B, 75]
label y: i32[B]
r = reshape(x, [B, 3, 5, 5])
c1 = conv2d(r, 16, 3, padding=1)
n1 = batch_norm(c1, act=relu)
m = max_pool2d(n1, 2, stride=1)
c2 = conv2d(m, 16, 3, padding=1, act=tanh)
a = avg_pool2d(c2, 2, stride=1, padding=1)
c3 = conv2d(a, 4, 2, stride=2)
fc = linear(flatten(c3), 3)
loss = cross_entropy(fc, y)
train {
  data = synthetic(train=64, test=16)
  batch = 8
}
