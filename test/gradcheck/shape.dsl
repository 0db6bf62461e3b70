# Gradient check: reshape and transpose of parameters and activations.
input x: f32[B, 6]
label y: i32[B]
param w: f32[2, 3, 4] = normal(0, 0.5)
k = reshape(transpose(w, [2, 0, 1]), [4, 6])   # [4, 6]
h = x @ transpose(k)                             # [B, 4]
g = reshape(reshape(h, [B, 2, 2]), [B, 4])
loss = cross_entropy(g * g, y)
train {
  data = synthetic(train=64, test=16)
  batch = 8
}
