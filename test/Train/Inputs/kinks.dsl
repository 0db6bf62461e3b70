# ReLU kinks for the gradient check: relu(b) at b = 0.005 is crossed by a
# step of 1e-2 (a smaller step is not); relu(c) at c = 0 sits on its kink.
model kinks
input x: f32[B, 4]
label t: f32[B, 3]
param w: f32[4, 3] = glorot_uniform()
param b: f32[3] = constant(0.005)
param c: f32[3] = zeros()
h = x @ w + relu(b) + relu(c)
loss = mse(h, t)
train {
  data = synthetic(train=64, test=0)
  batch = 16
  optimizer = sgd(lr=0.1)
}
