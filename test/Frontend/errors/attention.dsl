# RUN: not dtc %s -o %t.train 2>&1 | FileCheck %s
# Attention's bad arguments: located errors.
input x: f32[B, 6, 8]
label y: i32[B]
h = reshape(x, [B, 6, 3, 3])
# CHECK: attention.dsl:5:5: error: cannot reshape [B, 6, 8] to [B, 6, 3, 3]: the number of elements differs
q = transpose(reshape(x, [B, 6, 2, 4]), 1, 2)
k = transpose(reshape(x, [B, 6, 4, 2]), 1, 2)
a = scaled_dot_product_attention(q, k, q)
# CHECK: attention.dsl:9:5: error: attention's q, k and v need the same leading (batch and head) dimensions, got [B, 2, 6, 4], [B, 4, 6, 2] and [B, 2, 6, 4]
k2 = reshape(x, [B, 2, 8, 3])
b = scaled_dot_product_attention(q, k2, k2, is_causal=true)
# CHECK: attention.dsl:12:5: error: attention's q and k need the same feature size D
k3 = reshape(x, [B, 2, 12, 2])
l = linear(k3, 4)
c = scaled_dot_product_attention(q, l, l, is_causal=true)
# CHECK: attention.dsl:16:5: error: a causal mask needs square scores (as many queries as keys), got 6 queries and 12 keys
d = scaled_dot_product_attention(q, q, q, attn_mask=q)
# CHECK: attention.dsl:18:53: error: scaled_dot_product_attention() takes no attn_mask (is_causal=true is the mask dtc has)
e = scaled_dot_product_attention(q, q, q, scale=-1)
# CHECK: attention.dsl:20:49: error: the scale must be > 0, got -1.000000e+00
f = scaled_dot_product_attention(q, q, reshape(x, [B, 2, 4, 6]))
# CHECK: attention.dsl:22:5: error: attention's k and v need the same number of keys Tk, got [B, 2, 6, 4] and [B, 2, 4, 6]
g = scaled_dot_product_attention(q, q, q, is_causal=1)
# CHECK: attention.dsl:24:53: error: expected true or false for is_causal
o = linear(flatten(x), 3)
loss = cross_entropy(o, y)
