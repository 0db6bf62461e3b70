input x: f32[B, 6]
label y: i32[B]
loss = cross_entropy(linear(x, 3), y)
train {
  data = text("corpus.txt")
}
