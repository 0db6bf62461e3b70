"""Prints a model whose steps are long: a linear layer, N alternating tanh
and scale ops (their backward runs through the whole chain), a classifier.
usage: chain.py N"""
import sys

n = int(sys.argv[1])
print("input x: f32[B, 8]\nlabel y: i32[B]\nh0 = linear(x, 8)")
for i in range(1, n + 1):
    print(f"h{i} = tanh(h{i - 1})" if i % 2 else f"h{i} = h{i - 1} * 0.5")
print(f"fc = linear(h{n}, 3)\nloss = cross_entropy(fc, y)")
