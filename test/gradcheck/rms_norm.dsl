# Gradient check: RMS norm over the last dimension of a 3-D input and of a
# 2-D one, SiLU, and LLaMA's SwiGLU feed-forward (silu(a) * b).
input x: f32[B, 4, 6]
label y: i32[B]
l1 = linear(x, 5)
n1 = rms_norm(l1)
gate = linear(n1, 7, bias=false)
up = linear(n1, 7, bias=false)
h = silu(gate) * up
n2 = rms_norm(flatten(h), eps=1e-3)
fc = linear(n2, 3)
loss = cross_entropy(fc, y)
train {
  data = synthetic(train=64, test=16)
  batch = 8
}
