#!/usr/bin/python3
"""The reference: the seed MLP in PyTorch eager (the DDP example's network),
one process, trained for one epoch on Fashion-MNIST with the same recipe as
examples/mlp.dsl. Prints 'epoch_seconds S steps N test_accuracy A'. Timing
covers the training loop only, after the data is decoded into memory."""
import gzip, os, sys, time
import numpy as np
import torch
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from idx import idx  # noqa: E402


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/datasets/fashion-mnist"
    threads = int(os.environ.get("BENCH_THREADS", "2"))
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    xs = torch.from_numpy(idx(f"{root}/train-images-idx3-ubyte.gz").reshape(-1, 784).astype(np.float32) / 255)
    ys = torch.from_numpy(idx(f"{root}/train-labels-idx1-ubyte.gz").astype(np.int64))
    xt = torch.from_numpy(idx(f"{root}/t10k-images-idx3-ubyte.gz").reshape(-1, 784).astype(np.float32) / 255)
    yt = torch.from_numpy(idx(f"{root}/t10k-labels-idx1-ubyte.gz").astype(np.int64))
    model = torch.nn.Sequential(torch.nn.Linear(784, 500), torch.nn.ReLU(), torch.nn.Linear(500, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    perm = torch.randperm(len(xs))
    steps = 0
    start = time.perf_counter()
    for i in range(0, len(xs), 64):
        idx_ = perm[i:i + 64]
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(xs[idx_]), ys[idx_])
        loss.backward()
        opt.step()
        steps += 1
    seconds = time.perf_counter() - start
    with torch.no_grad():
        acc = (model(xt).argmax(1) == yt).float().mean().item()
    print(f"epoch_seconds {seconds:.3f} steps {steps} test_accuracy {acc:.4f}")

if __name__ == "__main__":
    main()
