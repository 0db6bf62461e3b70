#!/usr/bin/env python3
"""The PyTorch references on a GPU for scripts/gpu-check.sh: the seed MLP
(784-500-10, ReLU, SGD lr 0.01 momentum 0.9, batch 64), examples/cnn.dsl
(benchmarks/torch_cnn.py's modules, batch 64, SGD with momentum) and
examples/gpt.dsl (4 layers, 4 heads, 128 dimensions, context 64, the head
tied to the token embedding; AdamW with its warmup + cosine schedule set each
step and gradients clipped to norm 1.0; batch 12), each trained in MODE
(eager, or compile: torch.compile(model), the optimizer step eager with its
default foreach kernels) on data already in GPU memory: Fashion-MNIST from
DATA_DIR, the GPT's consecutive 64-token windows of CORPUS. fp32 without
TF32, as dtc by default. After 20 warm-up steps (compilation included),
times STEPS[model] steps (the steps dtc's rate is measured over in
gpu-check.sh) and prints, flushed as each model ends,
  'MODEL MODE RATE images/s (N steps)'   (tokens/s for the GPT)
usage: torch_gpu.py eager|compile DATA_DIR CORPUS [MODEL...]"""
import math, os, sys, time
import numpy as np
import torch
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from idx import idx  # noqa: E402

F = torch.nn.functional
nn = torch.nn
STEPS = {"mlp": 1900, "cnn": 900, "gpt": 900}
V, T, C, H, L = 256, 64, 128, 4, 4


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn, self.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = (z.view(b, t, H, C // H).transpose(1, 2) for z in self.c_attn(x).split(C, -1))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(a.transpose(1, 2).reshape(b, t, C))


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.attn, self.ln_2 = nn.LayerNorm(C), Attention(), nn.LayerNorm(C)
        self.c_fc, self.c_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.c_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        self.h = nn.ModuleList(Layer() for _ in range(L))
        self.ln_f = nn.LayerNorm(C)
        nn.init.normal_(self.wte.weight, 0, 0.02)
        nn.init.normal_(self.wpe.weight, 0, 0.02)

    def forward(self, ids):
        x = self.wte(ids) + self.wpe.weight[: ids.shape[1]]
        for layer in self.h:
            x = layer(x)
        return self.ln_f(x) @ self.wte.weight.T


def lr_at(step):  # 1-based, as dtc's cosine(warmup=100, decay_steps=2000, min_lr=1e-4)
    if step <= 100:
        return 1e-3 * step / 100
    p = min(1.0, (step - 1 - 100) / (2000 - 100))
    return 1e-4 + (1e-3 - 1e-4) * 0.5 * (1 + math.cos(math.pi * p))


def setup(name, data, corpus, dev):
    """(model, optimizer, batches: a function of the step, per-step samples, unit, clip, schedule)"""
    if name in ("mlp", "cnn"):
        shape = (-1, 784) if name == "mlp" else (-1, 1, 28, 28)
        xs = torch.from_numpy(idx(f"{data}/train-images-idx3-ubyte.gz").reshape(shape)
                              .astype(np.float32) / 255).to(dev)
        ys = torch.from_numpy(idx(f"{data}/train-labels-idx1-ubyte.gz").astype(np.int64)).to(dev)
        if name == "mlp":
            model = nn.Sequential(nn.Linear(784, 500), nn.ReLU(), nn.Linear(500, 10))
        else:
            from torch_cnn import cnn_model
            model = cnn_model()
        model = model.to(dev).train()
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        n = xs.shape[0] // 64
        batch = lambda i: (xs[(i % n) * 64:(i % n) * 64 + 64], ys[(i % n) * 64:(i % n) * 64 + 64])
        return model, opt, batch, 64, "images/s", False
    text = np.frombuffer(open(corpus, "rb").read(), dtype=np.uint8).astype(np.int64)
    train = torch.from_numpy(text[: len(text) - len(text) // 10]).to(dev)
    n = (len(train) - 1) // T
    xs = train[: n * T].view(n, T)
    ys = train[1: n * T + 1].view(n, T)
    model = Gpt().to(dev).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1)
    nb = n // 12
    batch = lambda i: (xs[(i % nb) * 12:(i % nb) * 12 + 12], ys[(i % nb) * 12:(i % nb) * 12 + 12])
    return model, opt, batch, 12 * T, "tokens/s", True


def run(name, mode, data, corpus):
    torch.manual_seed(1)
    dev = torch.device("cuda")
    model, opt, batch, per, unit, gpt = setup(name, data, corpus, dev)
    fwd = torch.compile(model) if mode == "compile" else model

    def step(i):
        x, y = batch(i)
        if gpt:
            for g in opt.param_groups:
                g["lr"] = lr_at(i + 1)
        opt.zero_grad(set_to_none=True)
        out = fwd(x)
        loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        loss.backward()
        if gpt:
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    for i in range(20):  # warm-up (and compilation)
        step(i)
    torch.cuda.synchronize()
    steps = STEPS[name]
    t = time.perf_counter()
    for i in range(20, 20 + steps):
        loss = step(i)
    torch.cuda.synchronize()
    rate = steps * per / (time.perf_counter() - t)
    assert math.isfinite(loss.item()), f"{name}: the loss is not finite"
    print(f"{name} {mode} {rate:.0f} {unit} ({steps} steps)", flush=True)


def main():
    mode, data, corpus = sys.argv[1], sys.argv[2], sys.argv[3]
    assert mode in ("eager", "compile"), mode
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    status = 0
    for name in sys.argv[4:] or ["mlp", "cnn", "gpt"]:
        try:
            run(name, mode, data, corpus)
        except Exception as e:  # e.g. no Triton / C compiler for torch.compile
            print(f"{name} {mode}: failed: {type(e).__name__}: {str(e)[:300]}", flush=True)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
