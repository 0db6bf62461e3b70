# A byte-level bigram model: each position's logits depend on its token
# only (as they would under causal attention, on the tokens up to it).
model bigram
input ids: i32[B, 8]
label y: i32[B, 8]
wte = embedding(ids, 128, 16)
logits = linear(wte, 128)
loss = cross_entropy(logits, y)
train {
  data = text("corpus.txt", block=8)
  batch = 4
  optimizer = adam(lr=0.05)
}
