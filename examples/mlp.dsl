# The network of the classic PyTorch DDP example, trained on Fashion-MNIST:
# Linear(784, 500) -> ReLU -> Linear(500, 10), cross-entropy, SGD + momentum.
model mlp

input x: f32[B, 784]        # B: the batch dimension
label y: i32[B]             # class indices 0..9

fc1 = linear(x, 500, act=relu)
fc2 = linear(fc1, 10)
loss = cross_entropy(fc2, y)
metric accuracy = accuracy(fc2, y)

train {
  data = fashion_mnist("/usr/share/datasets/fashion-mnist")
  batch = 64
  epochs = 1
  optimizer = sgd(lr=0.01, momentum=0.9)
  seed = 1
}
