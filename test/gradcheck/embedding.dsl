# Gradient check: token ids through two embeddings (one table also read by
# a tied head), a sequence cross_entropy over [B, T, V] with ignore_index
# (spaces), on text data.
input ids: i32[B, 6]
label y: i32[B, 6]
wte = embedding(ids, 256, 5)
pe = embedding(ids, 256, 5, init=normal(0, 0.5))
h = layer_norm(wte * pe)
logits = h @ transpose(wte.weight)
loss = cross_entropy(logits, y, ignore_index=32)
train {
  data = text("/usr/share/games/fortunes/debian", block=6)
  batch = 4
}
