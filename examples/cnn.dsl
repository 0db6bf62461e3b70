# A two-convolution network for Fashion-MNIST, the images fed as
# [B, 1, 28, 28]: conv 32 3x3 -> relu -> max pool -> conv 64 3x3 -> relu ->
# max pool -> flatten -> linear 128 -> linear 10. Parameter names and layouts
# are torch.nn's (c1.weight [32, 1, 3, 3], ...), so a checkpoint loads into
# the same nn.Module.
model cnn

input x: f32[B, 1, 28, 28]
label y: i32[B]

c1 = conv2d(x, 32, 3, padding=1, act=relu)    # [B, 32, 28, 28]
p1 = max_pool2d(c1, 2)                        # [B, 32, 14, 14]
c2 = conv2d(p1, 64, 3, padding=1, act=relu)   # [B, 64, 14, 14]
p2 = max_pool2d(c2, 2)                        # [B, 64, 7, 7]
fc1 = linear(flatten(p2), 128, act=relu)
fc2 = linear(fc1, 10)
loss = cross_entropy(fc2, y)
metric accuracy = accuracy(fc2, y)

train {
  data = fashion_mnist("/usr/share/datasets/fashion-mnist")
  batch = 64
  epochs = 10
  optimizer = sgd(lr=0.01, momentum=0.9)
  seed = 1
}
