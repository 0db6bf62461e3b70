# Gradient check: dropout (two, with their own masks). The check's losses
# are those of the gradient step, whose masks stay the same.
input x: f32[B, 12]
label y: i32[B]
h = linear(x, 16, act=relu)
d = dropout(h, 0.3)
e = dropout(d, p=0.2)
o = linear(e, 3)
loss = cross_entropy(o, y)
train {
  data = synthetic(train=64, test=16)
  batch = 8
}
