#!/usr/bin/python3
"""The reference for examples/cnn.dsl: the same network in PyTorch (torch.nn
modules: their default initialization; BatchNorm2d and Dropout in training
mode, evaluated in eval mode), the same recipe (SGD lr 0.01 momentum 0.9,
batch 64, the training set shuffled each epoch, EPOCHS epochs), on
Fashion-MNIST as [B, 1, 28, 28]. Prints one line per epoch:
'epoch E train_loss L test_loss T test_accuracy A seconds S'.
usage: torch_cnn.py [EPOCHS=10] [SEED=1]"""
import os, sys, time
import numpy as np
import torch
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from idx import idx  # noqa: E402

F = torch.nn.functional
nn = torch.nn

def cnn_model():
    """examples/cnn.dsl as torch.nn modules (also benchmarks/torch_ddp.py's)."""
    return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.3),
                         nn.Linear(128, 10))

def main():
    epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    torch.manual_seed(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
    root = "/usr/share/datasets/fashion-mnist"
    load = lambda n: torch.tensor(idx(f"{root}/{n}-images-idx3-ubyte.gz").reshape(-1, 1, 28, 28).astype(np.float32) / 255)
    x, xt = load("train"), load("t10k")
    y = torch.tensor(idx(f"{root}/train-labels-idx1-ubyte.gz").astype(np.int64))
    yt = torch.tensor(idx(f"{root}/t10k-labels-idx1-ubyte.gz").astype(np.int64))
    model = cnn_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for epoch in range(1, epochs + 1):
        start = time.perf_counter()
        model.train()
        order = torch.randperm(len(x))
        total, n = 0.0, 0
        for i in range(0, len(x), 64):
            b = order[i:i + 64]
            opt.zero_grad()
            loss = F.cross_entropy(model(x[b]), y[b])
            loss.backward()
            opt.step()
            total += loss.item() * len(b)
            n += len(b)
        model.eval()
        with torch.no_grad():
            logits = torch.cat([model(xt[i:i + 1000]) for i in range(0, len(xt), 1000)])
            test_loss = F.cross_entropy(logits, yt).item()
            acc = (logits.argmax(1) == yt).float().mean().item()
        print(f"epoch {epoch} train_loss {total / n:.4f} test_loss {test_loss:.4f} "
              f"test_accuracy {acc:.4f} seconds {time.perf_counter() - start:.2f}", flush=True)

if __name__ == "__main__":
    main()
