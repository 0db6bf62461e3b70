# A byte-level GPT in nanoGPT's shakespeare_char configuration (4 layers,
# 4 heads, 128 dimensions, a context of 64 tokens), GPT-2's architecture:
# pre-norm blocks of causal self-attention and a tanh-GELU MLP, learned
# position embeddings, the output head tied to the token embedding.
# Parameter names follow the module tree (h0.attn.c_attn.weight ...), laid
# out as torch.nn's. Trained on Debian's fortunes (about 2.6 MB of English),
# its last tenth held out:
#   dtc examples/gpt.dsl -o gpt && ./gpt --max-steps 2000
model gpt

input ids: i32[B, 64]
label y: i32[B, 64]

block attention(x) {
  c_attn = linear(x, 384)                 # q, k and v at once
  q, k, v = split(c_attn, 3)
  qh = transpose(reshape(q, [B, 64, 4, 32]), 1, 2)    # [B, heads, T, 32]
  kh = transpose(reshape(k, [B, 64, 4, 32]), 1, 2)
  vh = transpose(reshape(v, [B, 64, 4, 32]), 1, 2)
  a = scaled_dot_product_attention(qh, kh, vh, is_causal=true)
  c_proj = linear(reshape(transpose(a, 1, 2), [B, 64, 128]), 128)
  return c_proj
}

block mlp(x) {
  c_fc = linear(x, 512, act=gelu_tanh)
  c_proj = linear(c_fc, 128)
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

wte = embedding(ids, 256, 128, init=normal(0, 0.02))
wpe = embedding(arange(64), 64, 128, init=normal(0, 0.02))
h0 = layer(wte + wpe)
h1 = layer(h0)
h2 = layer(h1)
h3 = layer(h2)
ln_f = layer_norm(h3)
logits = ln_f @ transpose(wte.weight)    # the tied head
loss = cross_entropy(logits, y)

train {
  data = text("/usr/share/games/fortunes", block=64)
  batch = 12
  optimizer = adamw(lr=0.001, beta2=0.99, weight_decay=0.1)
  schedule = cosine(warmup=100, decay_steps=2000, min_lr=0.0001)
  clip_grad_norm = 1.0
  seed = 1
}
