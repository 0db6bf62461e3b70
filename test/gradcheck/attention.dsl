# Gradient check: causal multi-head attention over a [B, 6, 8] input (q, k,
# v from one projection, split, the heads moved forward), and a full one
# with its own scale whose keys and values have another length and width.
input x: f32[B, 6, 8]
label y: i32[B]
qkv = linear(x, 24)
q, k, v = split(qkv, 3, axis=-1)
qh = transpose(reshape(q, [B, 6, 2, 4]), 1, 2)
kh = transpose(reshape(k, [B, 6, 2, 4]), 1, 2)
vh = transpose(reshape(v, [B, 6, 2, 4]), 1, 2)
a = scaled_dot_product_attention(qh, kh, vh, is_causal=true)
o = reshape(transpose(a, 1, 2), [B, 6, 8])
k2 = linear(x, 12)
v2 = linear(x, 6)
f = scaled_dot_product_attention(qh, reshape(k2, [B, 2, 9, 4]), reshape(v2, [B, 2, 9, 2]), scale=0.5)
fc = linear(concat([flatten(o), flatten(f)], axis=1), 3)
loss = cross_entropy(fc, y)
train {
  data = synthetic(train=64, test=16)
  batch = 4
}
