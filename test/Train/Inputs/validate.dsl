model validate
input x: f32[B, 6]
label y: i32[B]
h = linear(x, 8, act=tanh)
o = linear(h, 3)
loss = cross_entropy(o, y)
metric accuracy = accuracy(o, y)
train {
  data = synthetic(train=100, test=20)
  batch = 10
  epochs = 2
  validation = 0.2
}
