# A byte-level LLaMA-style model in the size of examples/gpt.dsl (4 layers,
# 4 heads, 128 dimensions, a context of 64 tokens): pre-norm blocks with
# RMSNorm (torch.nn.RMSNorm, LLaMA's eps 1e-6), causal self-attention and a
# SwiGLU feed-forward (silu(w1 x) * w3 x, then w2), no biases anywhere, an
# output head of its own. Positions are learned embeddings: dtc has no
# rotary embedding yet. Parameter names follow LLaMA's modules inside a
# layer (h0.attention.wq.weight, h0.feed_forward.w1.weight, ...), laid out
# as torch.nn's. Trained on
# Debian's fortunes, its last tenth held out:
#   dtc examples/llama.dsl -o llama && ./llama --max-steps 2000
model llama

input ids: i32[B, 64]
label y: i32[B, 64]

block attention(x) {
  wq = linear(x, 128, bias=false)
  wk = linear(x, 128, bias=false)
  wv = linear(x, 128, bias=false)
  qh = transpose(reshape(wq, [B, 64, 4, 32]), 1, 2)   # [B, heads, T, 32]
  kh = transpose(reshape(wk, [B, 64, 4, 32]), 1, 2)
  vh = transpose(reshape(wv, [B, 64, 4, 32]), 1, 2)
  a = scaled_dot_product_attention(qh, kh, vh, is_causal=true)
  wo = linear(reshape(transpose(a, 1, 2), [B, 64, 128]), 128, bias=false)
  return wo
}

block feed_forward(x) {
  w1 = linear(x, 344, bias=false)          # the gate
  w3 = linear(x, 344, bias=false)          # the up projection
  w2 = linear(silu(w1) * w3, 128, bias=false)
  return w2
}

block layer(x) {
  attention_norm = rms_norm(x)
  attention = attention(attention_norm)
  h = x + attention
  ffn_norm = rms_norm(h)
  feed_forward = feed_forward(ffn_norm)
  return h + feed_forward
}

tok_embeddings = embedding(ids, 256, 128, init=normal(0, 0.02))
pos_embeddings = embedding(arange(64), 64, 128, init=normal(0, 0.02))
h0 = layer(tok_embeddings + pos_embeddings)
h1 = layer(h0)
h2 = layer(h1)
h3 = layer(h2)
norm = rms_norm(h3)
output = linear(norm, 256, bias=false)
loss = cross_entropy(output, y)

train {
  data = text("/usr/share/games/fortunes", block=64)
  batch = 12
  optimizer = adamw(lr=0.001, beta2=0.99, weight_decay=0.1)
  schedule = cosine(warmup=100, decay_steps=2000, min_lr=0.0001)
  clip_grad_norm = 1.0
  seed = 1
}
