# Gradient check: matmul over leading dimensions (torch.matmul semantics),
# linear on a 3-D input, transpose/permute of batch tensors.
input x: f32[B, 4, 6]
label y: i32[B]
param w: f32[6, 5] = glorot_normal()
param v: f32[3, 5] = glorot_normal()
param u: f32[4] = glorot_normal()
l1 = linear(x, 5, act=tanh)            # [B, 4, 5]  a 2-D weight on every row
s = l1 @ transpose(l1, 1, 2)           # [B, 4, 4]  batched, the rhs transposed
p = x @ w                              # [B, 4, 5]
q = permute(p, [0, 2, 1])              # [B, 5, 4]
r = tanh(q @ s)                        # [B, 5, 4]
m = v @ r                              # [B, 3, 4]  the 2-D lhs broadcast
z = r @ u                              # [B, 5]     a 1-D rhs
fc = linear(flatten(m), 3)
fz = linear(z, 3)
o = fc + fz
loss = cross_entropy(o, y)
train {
  data = synthetic(train=64, test=16)
  batch = 8
}
