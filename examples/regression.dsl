# Regression with explicit parameters and mean squared error: a two-layer
# network fitted to a synthetic target (use --data train.csv,test.csv for your
# own data: 2 target columns, then 16 feature columns per row).
model regression

input x: f32[B, 16]
label t: f32[B, 2]

param w1: f32[16, 32] = he_normal()
param b1: f32[32] = zeros()
param w2: f32[32, 2] = glorot_uniform()
param b2: f32[2] = zeros()

h = tanh(x @ w1 + b1)
p = h @ w2 + b2
loss = mse(p, t)

train {
  data = synthetic(train=4096, test=512)
  batch = 32
  epochs = 5
  optimizer = sgd(lr=0.05, momentum=0.9, nesterov=true, weight_decay=0.0001)
  seed = 2
}
