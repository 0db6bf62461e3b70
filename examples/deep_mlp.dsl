# A deeper network: 784-1024-1024-10 with GELU, trained with AdamW.
model deep_mlp

input x: f32[B, 784]
label y: i32[B]

fc1 = linear(x, 1024, act=gelu)
fc2 = linear(fc1, 1024, act=gelu)
fc3 = linear(fc2, 10)
loss = cross_entropy(fc3, y)
metric accuracy = accuracy(fc3, y)

train {
  data = fashion_mnist("/usr/share/datasets/fashion-mnist")
  batch = 64
  epochs = 1
  optimizer = adamw(lr=0.001, weight_decay=0.01)
  seed = 1
}
