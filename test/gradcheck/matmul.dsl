# Gradient check: matmul (operators and layer sugar), transposed operands.
input x: f32[B, 5]
label y: i32[B]
param w: f32[7, 5] = he_uniform()
param v: f32[4, 6] = glorot_normal()
h = tanh(matmul(x, transpose(w)))
fc = linear(h, 6, act=sigmoid)
o = fc @ transpose(v)
loss = cross_entropy(o, y)
train {
  data = synthetic(train=64, test=16)
  batch = 8
}
