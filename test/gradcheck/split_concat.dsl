# Gradient check: split and concat (q, k, v of one linear, joined again in
# another order; one piece unused).
input x: f32[B, 4, 6]
label y: i32[B]
qkv = linear(x, 12)
q, k, v = split(qkv, 3, axis=-1)
a, b = split(x, 2, axis=1)
s = concat([tanh(v), q * k, reshape(b, [B, 4, 3])], axis=2)
fc = linear(flatten(s), 3)
loss = cross_entropy(fc, y)
train {
  data = synthetic(train=64, test=16)
  batch = 8
}
