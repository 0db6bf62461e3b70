#!/usr/bin/python3
"""train --predict against PyTorch on the same checkpoint: a CNN classifier
(conv2d, batch normalization, which prediction computes with the running
statistics, max pooling, dropout, which prediction turns off), loaded into a
torch.nn module with load_state_dict(strict=True) and run in eval mode, and
a regression model, trained a few steps by dtc and saved; the same inputs given as a
NumPy float32 array, as CSV, and as IDX / NumPy uint8 pixels (scaled by
1/255, as training reads IDX). dtc's CSV must hold PyTorch's classes (the
first arg-max) and softmax probabilities, or its outputs, to 1e-5.
Controls: the same comparison against a model with one weight, or one
running mean, changed must fail. usage: predict.py DTC WORKDIR"""
import gzip, os, struct, sys
import numpy as np
import torch
from common import compile_model, load_safetensors, run

F = torch.nn.functional
CNN = """model pcnn
input x: f32[B, 1, 6, 6]
label y: i32[B]
c = conv2d(x, 4, 3, padding=1)
n = batch_norm(c, act=relu)
p = max_pool2d(n, 2)
d = dropout(flatten(p), 0.4)
o = linear(d, 5)
loss = cross_entropy(o, y)
train {
  data = synthetic(train=64, test=8)
  batch = 16
  optimizer = sgd(lr=0.1)
}
"""
REG = """model preg
input x: f32[B, 36]
label t: f32[B, 2]
h = linear(x, 7, act=tanh)
o = linear(h, 2)
loss = mse(o, t)
train {
  data = synthetic(train=64, test=8)
  batch = 16
  optimizer = sgd(lr=0.05)
}
"""

class TorchCNN(torch.nn.Module):
    """CNN as torch.nn modules: dtc's checkpoint is its state_dict."""
    def __init__(self):
        super().__init__()
        self.c = torch.nn.Conv2d(1, 4, 3, padding=1)
        self.n = torch.nn.BatchNorm2d(4)
        self.o = torch.nn.Linear(36, 5)
        self.d = torch.nn.Dropout(0.4)
    def forward(self, x):
        h = F.max_pool2d(F.relu(self.n(self.c(x))), 2)
        return self.o(self.d(torch.flatten(h, 1)))

def torch_cnn(p, x):
    m = TorchCNN()
    m.load_state_dict({k: torch.tensor(v) for k, v in p.items()}, strict=True)
    m.eval()
    with torch.no_grad():
        return torch.softmax(m(torch.tensor(x)), -1).numpy()

def torch_reg(p, x):
    t = lambda k: torch.tensor(p[k])
    h = torch.tanh(F.linear(torch.tensor(x).reshape(len(x), -1), t("h.weight"), t("h.bias")))
    return F.linear(h, t("o.weight"), t("o.bias")).numpy()

def write_idx_gz(path, pixels):
    dims = pixels.shape
    head = struct.pack(">I", 0x0800 | len(dims)) + b"".join(struct.pack(">I", d) for d in dims)
    with gzip.open(path, "wb") as f:
        f.write(head + pixels.astype(np.uint8).tobytes())

def read_csv(path):
    with open(path) as f:
        header = f.readline().strip().split(",")
    return header, np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)

def main():
    dtc, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(3)
    failures = 0

    def check(name, got, want, tol=1e-5):
        nonlocal failures
        err = float(np.abs(got - want).max())
        ok = err <= tol
        failures += not ok
        print(f"{name:34s} {'ok  ' if ok else 'FAIL'} max |dtc - torch| {err:.1e}")
        return ok

    # The classifier.
    exe = compile_model(dtc, CNN, work, "pcnn")
    st = os.path.join(work, "pcnn.safetensors")
    run([exe, "--max-steps", "3", "--quiet", "--threads", "1", "--save", st])
    params = load_safetensors(st)
    x = rng.normal(size=(37, 1, 6, 6)).astype(np.float32)
    pixels = rng.integers(0, 256, size=(37, 6, 6)).astype(np.uint8)
    inputs = {
        "float32 .npy": (x, lambda path: np.save(path, x), "in.npy"),
        "CSV": (x, lambda path: np.savetxt(path, x.reshape(37, 36), delimiter=",", fmt="%.9g"),
                "in.csv"),
        "IDX pixels (gzip)": (pixels[:, None] / np.float32(255),
                              lambda path: write_idx_gz(path, pixels), "in-idx3-ubyte.gz"),
        "uint8 .npy": (pixels[:, None] / np.float32(255), lambda path: np.save(path, pixels),
                       "in-u8.npy"),
    }
    for what, (values, write, file) in inputs.items():
        path, out = os.path.join(work, file), os.path.join(work, file + ".csv")
        write(path)
        run([exe, "--predict", path, "--init", st, "--output", out, "--quiet"])
        header, rows = read_csv(out)
        assert header == ["class"] + [f"p{j}" for j in range(5)], header
        probs = torch_cnn(params, values.astype(np.float32))
        check(f"classifier, {what}: probabilities", rows[:, 1:], probs)
        failures += not np.array_equal(rows[:, 0].astype(int), probs.argmax(1))
    # Control: another weight, other probabilities.
    bias = params["o.bias"].copy()
    bias[0] += np.float32(0.5)  # (one class: softmax ignores a shift of them all)
    other = dict(params, **{"o.bias": bias})
    _, rows = read_csv(os.path.join(work, "in.npy.csv"))
    if float(np.abs(rows[:, 1:] - torch_cnn(other, x)).max()) <= 1e-5:
        print("FAIL control: a changed bias went unnoticed")
        failures += 1
    else:
        print("ok   control: a changed bias changes the probabilities")
    mean = params["n.running_mean"].copy()
    mean[1] += np.float32(0.5)
    other = dict(params, **{"n.running_mean": mean})
    if float(np.abs(rows[:, 1:] - torch_cnn(other, x)).max()) <= 1e-5:
        print("FAIL control: a changed running mean went unnoticed")
        failures += 1
    else:
        print("ok   control: a changed running mean changes the probabilities")
    if int(params["n.num_batches_tracked"]) != 3:
        print(f"FAIL n.num_batches_tracked is {params['n.num_batches_tracked']}, not the 3 steps")
        failures += 1

    # The regression model: its outputs.
    exe = compile_model(dtc, REG, work, "preg")
    st = os.path.join(work, "preg.safetensors")
    run([exe, "--max-steps", "4", "--quiet", "--threads", "1", "--save", st])
    path, out = os.path.join(work, "reg.npy"), os.path.join(work, "reg.csv")
    xr = rng.normal(size=(21, 36)).astype(np.float32)
    np.save(path, xr)
    run([exe, "--predict", path, "--init", st, "--output", out, "--quiet"])
    header, rows = read_csv(out)
    assert header == ["y0", "y1"], header
    check("regression, float32 .npy: outputs", rows, torch_reg(load_safetensors(st), xr))
    print("PASS" if failures == 0 else f"{failures} failed")
    return 1 if failures else 0

if __name__ == "__main__":
    sys.exit(main())
