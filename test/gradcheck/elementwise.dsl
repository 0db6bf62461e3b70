# Gradient check: every elementwise op, with numpy broadcasting.
input x: f32[B, 6]
label y: i32[B]
param w: f32[6, 4] = glorot_uniform()
param b: f32[4] = uniform(-0.5, 0.5)
param s: f32[1, 4] = normal(1, 0.1)
h = x @ w + b
a = tanh(h) * s + sigmoid(h) - gelu(h) / (exp(h * 0.3) + 1)
c = sqrt(sigmoid(a) + 0.5) + log(exp(a) + 2) - neg(relu(h + 0.25))
loss = cross_entropy(c, y)
train {
  data = synthetic(train=64, test=16)
  batch = 8
  seed = 3
}
