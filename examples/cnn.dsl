# A two-convolution network for Fashion-MNIST, the images fed as
# [B, 1, 28, 28]: conv 32 3x3 -> batch norm -> relu -> max pool -> conv 64
# 3x3 -> batch norm -> relu -> max pool -> flatten -> linear 128 -> dropout
# -> linear 10. Parameter and buffer names and layouts are torch.nn's
# (c1.weight [32, 1, 3, 3], n1.running_mean [32], ...), so a checkpoint
# loads into the same nn.Module (benchmarks/torch_cnn.py has it).
model cnn

input x: f32[B, 1, 28, 28]
label y: i32[B]

c1 = conv2d(x, 32, 3, padding=1)              # [B, 32, 28, 28]
n1 = batch_norm(c1, act=relu)
p1 = max_pool2d(n1, 2)                        # [B, 32, 14, 14]
c2 = conv2d(p1, 64, 3, padding=1)             # [B, 64, 14, 14]
n2 = batch_norm(c2, act=relu)
p2 = max_pool2d(n2, 2)                        # [B, 64, 7, 7]
fc1 = linear(flatten(p2), 128, act=relu)
d = dropout(fc1, 0.3)
fc2 = linear(d, 10)
loss = cross_entropy(fc2, y)
metric accuracy = accuracy(fc2, y)

train {
  data = fashion_mnist("/usr/share/datasets/fashion-mnist")
  batch = 64
  epochs = 10
  optimizer = sgd(lr=0.01, momentum=0.9)
  seed = 1
}
