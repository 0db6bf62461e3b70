input x: f32[B, 4]
label y: i32[B]
block ff(a) {
  fc = linear(a, 4)
  return fc
}
h = ff(x)
h = ff(x)
