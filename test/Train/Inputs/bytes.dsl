# A byte-level model whose table has 100 rows: bytes from 100 up are ids it
# cannot look up.
model bytes
input ids: i32[B, 4]
label y: i32[B, 4]
wte = embedding(ids, 100, 8)
logits = linear(wte, 128)
loss = cross_entropy(logits, y)
train {
  data = text("corpus.txt", block=4)
  batch = 2
}
