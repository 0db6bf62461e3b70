# Gradient check: mean squared error on real-valued targets.
input x: f32[B, 6]
label t: f32[B, 3]
h = linear(x, 8, act=tanh)
p = linear(h, 3)
loss = mse(p, t)
train {
  data = synthetic(train=64, test=16)
  batch = 8
  optimizer = adam(lr=0.01)
}
