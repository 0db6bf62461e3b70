block ff(a) {
  fc = linear(a, 4)
}
