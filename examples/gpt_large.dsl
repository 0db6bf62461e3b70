# A GPT of 302 M parameters, GPT-2 medium's shape (24 layers of width 1024,
# 16 heads, an MLP of 4096) on byte tokens (a vocabulary of 256) in a context
# of 64: the model that sharded data parallelism exists for. Replicated, with
# AdamW each rank would hold 16 bytes a parameter (4.8 GB) before any
# activation; its recipe shards the parameters, gradients and optimizer
# state over 4 ranks (ZeRO stage 3), which this 2-core machine runs
# (oversubscribed) in about a quarter of that each:
#   dtc examples/gpt_large.dsl --report -o gpt_large
#   mpirun -np 4 ./gpt_large --max-steps 10
# (benchmarks/gpt_large.sh measures it; the same blocks as examples/gpt.dsl.)
model gpt_large

input ids: i32[B, 64]
label y: i32[B, 64]

block attention(x) {
  c_attn = linear(x, 3072)                 # q, k and v at once
  q, k, v = split(c_attn, 3)
  qh = transpose(reshape(q, [B, 64, 16, 64]), 1, 2)    # [B, heads, T, 64]
  kh = transpose(reshape(k, [B, 64, 16, 64]), 1, 2)
  vh = transpose(reshape(v, [B, 64, 16, 64]), 1, 2)
  a = scaled_dot_product_attention(qh, kh, vh, is_causal=true)
  c_proj = linear(reshape(transpose(a, 1, 2), [B, 64, 1024]), 1024)
  return c_proj
}

block mlp(x) {
  c_fc = linear(x, 4096, act=gelu_tanh)
  c_proj = linear(c_fc, 1024)
  return c_proj
}

block layer(x) {
  ln_1 = layer_norm(x)
  attn = attention(ln_1)
  h = x + attn
  ln_2 = layer_norm(h)
  mlp = mlp(ln_2)
  return h + mlp
}

wte = embedding(ids, 256, 1024, init=normal(0, 0.02))
wpe = embedding(arange(64), 64, 1024, init=normal(0, 0.02))
h0 = layer(wte + wpe)
h1 = layer(h0)
h2 = layer(h1)
h3 = layer(h2)
h4 = layer(h3)
h5 = layer(h4)
h6 = layer(h5)
h7 = layer(h6)
h8 = layer(h7)
h9 = layer(h8)
h10 = layer(h9)
h11 = layer(h10)
h12 = layer(h11)
h13 = layer(h12)
h14 = layer(h13)
h15 = layer(h14)
h16 = layer(h15)
h17 = layer(h16)
h18 = layer(h17)
h19 = layer(h18)
h20 = layer(h19)
h21 = layer(h20)
h22 = layer(h21)
h23 = layer(h22)
ln_f = layer_norm(h23)
logits = ln_f @ transpose(wte.weight)    # the tied head
loss = cross_entropy(logits, y)

train {
  data = text("/usr/share/games/fortunes", block=64)
  batch = 2
  optimizer = adamw(lr=0.0001, beta2=0.95, weight_decay=0.1)
  schedule = constant(warmup=3)
  clip_grad_norm = 1.0
  shard = parameters
  ranks = 4
  seed = 1
}
