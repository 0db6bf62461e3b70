# Parameters so large that w +- 1e-2 rounds back to w in float32.
model large
input x: f32[B, 4]
label t: f32[B, 2]
param w: f32[4, 2] = constant(300000)
loss = mse(x @ w * 0.00001, t)
train {
  data = synthetic(train=64, test=0)
  batch = 16
  optimizer = sgd(lr=0.1)
}
