# Gradient check: softmax and log_softmax along both axes.
input x: f32[B, 5]
label y: i32[B]
fc = linear(x, 5)
p = softmax(fc, axis=1)
q = log_softmax(fc * p, axis=0)
loss = mean(neg(sum(log_softmax(q + p) * p, axis=1))) + cross_entropy(fc, y) * 0.5
train {
  data = synthetic(train=64, test=16)
  batch = 8
}
