# Gradient check: sum, mean and max over each axis, the batch axis included.
input x: f32[B, 6]
label y: i32[B]
param w: f32[6, 12] = glorot_uniform()
param u: f32[3, 4] = normal(0, 1)
h = reshape(tanh(x @ w), [B, 3, 4])
a = max(h * u, axis=2)                  # [B, 3]
m = mean(h, axis=1)                     # [B, 4]
t = sum(h, axis=0, keepdims=true)       # [1, 3, 4]
bm = mean(m, axis=0)                    # [4], over the batch
fc = linear(a, 4)
logits = fc + m * bm + sum(t, axis=1)
loss = cross_entropy(logits, y) + mean(sum(u * u, axis=1)) * 0.1
train {
  data = synthetic(train=64, test=16)
  batch = 8
}
