#!/usr/bin/python3
"""The reference for examples/gpt.dsl: the same byte-level GPT (4 layers, 4
heads, 128 dimensions, context 64, GPT-2's blocks, the head tied to the
token embedding) in PyTorch, on the same text (Debian's fortunes: the
files in path order, symbolic links and files with a NUL byte skipped, the
last tenth held out), the same recipe (AdamW lr 1e-3, betas (0.9, 0.99),
weight decay 0.1 on every parameter as dtc's, 100 warmup steps then cosine
to 1e-4 at step 2000, gradients clipped to norm 1.0, batch 12 per rank),
random windows per step as nanoGPT's get_batch, under
DistributedDataParallel (gloo) at RANKS ranks. Prints the training
loop's seconds and tokens/s, then the loss on the held-out windows
(consecutive, as dtc evaluates them; --no-eval: not evaluated), then each
rank's peak resident set (max_rss_mb R0,R1,...). --zero: AdamW wrapped in
torch.distributed.optim.ZeroRedundancyOptimizer (ZeRO stage 1: each rank
holds and updates the optimizer state of its partition of the parameters,
then broadcasts them).
usage: torch_gpt.py STEPS RANKS [TEXT_DIR] [--zero] [--no-eval]"""
import argparse, math, os, resource, socket, sys, time
import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

F = torch.nn.functional
V, T, C, H, L, BATCH = 256, 64, 128, 4, 4, 12


def read_text(path):
    if os.path.isfile(path):
        return open(path, "rb").read()
    parts = []
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for f in sorted(files):
            p = os.path.join(root, f)
            if os.path.islink(p):
                continue
            b = open(p, "rb").read()
            if b"\0" not in b:
                parts.append((p, b))
    return b"".join(b for _, b in sorted(parts))


class Attention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = torch.nn.Linear(C, 3 * C)
        self.c_proj = torch.nn.Linear(C, C)
        # (not a buffer: DDP broadcasts buffers, and gloo has no bool)
        self.mask = torch.ones(T, T, dtype=torch.bool).tril()

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = (z.view(b, t, H, C // H).transpose(1, 2) for z in self.c_attn(x).split(C, -1))
        s = (q @ k.transpose(-2, -1)) * (C // H) ** -0.5
        a = torch.softmax(s.masked_fill(~self.mask[:t, :t], float("-inf")), -1) @ v
        return self.c_proj(a.transpose(1, 2).reshape(b, t, C))


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c_fc = torch.nn.Linear(C, 4 * C)
        self.c_proj = torch.nn.Linear(4 * C, C)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.attn = torch.nn.LayerNorm(C), Attention()
        self.ln_2, self.mlp = torch.nn.LayerNorm(C), Mlp()

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt(torch.nn.Module):
    """State-dict keys as examples/gpt.dsl's parameters (h0.attn.c_attn.weight ...)."""
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = torch.nn.Embedding(V, C), torch.nn.Embedding(T, C)
        for i in range(L):
            setattr(self, f"h{i}", Layer())
        self.ln_f = torch.nn.LayerNorm(C)
        torch.nn.init.normal_(self.wte.weight, 0, 0.02)
        torch.nn.init.normal_(self.wpe.weight, 0, 0.02)

    def forward(self, ids):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
        for i in range(L):
            x = getattr(self, f"h{i}")(x)
        return self.ln_f(x) @ self.wte.weight.T


def lr_at(step):  # 1-based, as dtc's cosine(warmup=100, decay_steps=2000, min_lr=1e-4)
    if step <= 100:
        return 1e-3 * step / 100
    p = min(1.0, (step - 1 - 100) / (2000 - 100))
    return 1e-4 + (1e-3 - 1e-4) * 0.5 * (1 + math.cos(math.pi * p))


def worker(rank, world, port, steps, path, zero, evaluate, q):
    torch.set_num_threads(max(1, (os.cpu_count() or 2) // world))
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    torch.manual_seed(1)
    data = torch.tensor(np.frombuffer(read_text(path), dtype=np.uint8).astype(np.int64))
    val = int(0.1 * len(data))
    train, held = data[:len(data) - val], data[len(data) - val:]
    model = torch.nn.parallel.DistributedDataParallel(Gpt())
    hyper = dict(lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1)
    if zero:  # (its step() copies param_groups' lr to the wrapped AdamW)
        from torch.distributed.optim import ZeroRedundancyOptimizer
        opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW, **hyper)
    else:
        opt = torch.optim.AdamW(model.parameters(), **hyper)
    gen = torch.Generator().manual_seed(1000 + rank)
    dist.barrier()
    start = time.perf_counter()
    for step in range(1, steps + 1):
        ix = torch.randint(len(train) - T, (BATCH,), generator=gen)
        x = torch.stack([train[i:i + T] for i in ix])
        y = torch.stack([train[i + 1:i + 1 + T] for i in ix])
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        opt.zero_grad()
        F.cross_entropy(model(x).reshape(-1, V), y.reshape(-1)).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    dist.barrier()
    seconds = time.perf_counter() - start
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    loss = float("nan")
    if rank == 0 and evaluate:
        n = (len(held) - 1) // T
        xs = torch.stack([held[i * T:i * T + T] for i in range(n)])
        ys = torch.stack([held[i * T + 1:i * T + T + 1] for i in range(n)])
        with torch.no_grad():
            loss = sum(F.cross_entropy(model.module(xs[i:i + BATCH]).reshape(-1, V),
                                       ys[i:i + BATCH].reshape(-1)).item() * len(xs[i:i + BATCH])
                       for i in range(0, n, BATCH)) / n
    q.put((rank, seconds, loss, rss))
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(usage=__doc__.rsplit("usage: ", 1)[1])
    ap.add_argument("steps", type=int)
    ap.add_argument("world", type=int)
    ap.add_argument("path", nargs="?", default="/usr/share/games/fortunes")
    ap.add_argument("--zero", action="store_true")
    ap.add_argument("--no-eval", dest="evaluate", action="store_false")
    a = ap.parse_args()
    steps, world, path = a.steps, a.world, a.path
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, world, port, steps, path, a.zero, a.evaluate, q)) for r in range(world)]
    for p in procs:
        p.start()
    got = sorted(q.get() for _ in procs)
    for p in procs:
        p.join()
    _, seconds, loss, _ = got[0]
    tokens = steps * BATCH * T * world
    print(f"train_seconds {seconds:.3f} tokens/s {tokens / seconds:.0f} val_loss {loss:.4f} "
          f"max_rss_mb {','.join(f'{g[3]:.1f}' for g in got)}")


if __name__ == "__main__":
    main()
