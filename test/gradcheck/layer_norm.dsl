# Gradient check: layer norm over the last dimension of a 3-D input and of
# a 2-D one, and the tanh GELU.
input x: f32[B, 4, 6]
label y: i32[B]
l1 = linear(x, 5)
n1 = layer_norm(l1)
g = gelu(n1, approximate="tanh")
n2 = layer_norm(flatten(g), eps=1e-3)
fc = linear(n2, 3)
loss = cross_entropy(fc, y)
train {
  data = synthetic(train=64, test=16)
  batch = 8
}
