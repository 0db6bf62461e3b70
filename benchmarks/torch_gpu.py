#!/usr/bin/env python3
"""The reference on a GPU: the seed MLP (784-500-10, ReLU, SGD lr 0.01
momentum 0.9, batch 64) in PyTorch eager and torch.compile, trained on the
same data already in GPU memory for STEPS steps after a warm-up; prints
'eager_steps_per_s X compile_steps_per_s Y' (compile: 0 when unavailable).
usage: torch_gpu.py DATA_DIR [STEPS]"""
import gzip, sys, time
import os
import numpy as np
import torch
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from idx import idx  # noqa: E402


def run(steps, compiled):
    torch.manual_seed(1)
    dev = torch.device("cuda")
    xs = torch.from_numpy(idx(f"{root}/train-images-idx3-ubyte.gz").reshape(-1, 784).astype(np.float32) / 255).to(dev)
    ys = torch.from_numpy(idx(f"{root}/train-labels-idx1-ubyte.gz").astype(np.int64)).to(dev)
    model = torch.nn.Sequential(torch.nn.Linear(784, 500), torch.nn.ReLU(), torch.nn.Linear(500, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    if compiled:
        step = torch.compile(step)
    n = xs.shape[0] // 64
    for i in range(20):  # warm-up (and compilation)
        step(xs[(i % n) * 64:(i % n) * 64 + 64], ys[(i % n) * 64:(i % n) * 64 + 64])
    torch.cuda.synchronize()
    t = time.perf_counter()
    for i in range(steps):
        j = i % n
        step(xs[j * 64:j * 64 + 64], ys[j * 64:j * 64 + 64])
    torch.cuda.synchronize()
    return steps / (time.perf_counter() - t)

root = sys.argv[1]
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
eager = run(steps, False)
try:
    comp = run(steps, True)
except Exception as e:  # no Triton / compiler on the machine
    print(f"torch.compile unavailable: {type(e).__name__}: {str(e)[:200]}", file=sys.stderr)
    comp = 0.0
print(f"eager_steps_per_s {eager:.0f} compile_steps_per_s {comp:.0f}")
