#!/usr/bin/python3
"""Distributed parity: the seed MLP, models.py's CNN (convolutions,
pooling, dropout) and its CNN with batch normalization, trained by dtc on 2 ranks (mpirun) against PyTorch
DistributedDataParallel (gloo) on 2 ranks, 100 steps, the same initial
parameters and batches (shuffle off; both shard as DistributedSampler: rank
r takes samples r, r+2, ...), batch 32 per rank. The CNN's dropout masks
are dtc's, each rank's its own (dropout_mask.py), applied on PyTorch's side.
Batch normalization: each rank normalizes with its own batch's statistics
and keeps its own running statistics (DDP's default, no SyncBatchNorm; DDP
broadcasts rank 0's buffers before each forward, which in training changes
nothing rank 0 saves); rank 0's running statistics and num_batches_tracked
are compared with the parameters.
Compares the global mean loss of every step and the final parameters, with
the per-model tolerances of models.py (2e-5 and 2e-4).
usage: ddp.py DTC EXAMPLES_DIR WORKDIR"""
import os, socket, sys
import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from common import save_safetensors, load_safetensors, run, read_losses
from models import CNN_DSL, conv_init, fashion, linear_init, cnn_bn_case
from dropout_mask import keep_mask, step_seed

STEPS, BATCH, WORLD = 100, 32, 2
F = torch.nn.functional

class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(784, 500)
        self.fc2 = torch.nn.Linear(500, 10)
    def forward(self, x, step, rank):
        return self.fc2(F.relu(self.fc1(x)))

class CNN(torch.nn.Module):
    """models.py's CNN_DSL (seed 5: the dropout masks' run seed)."""
    def __init__(self):
        super().__init__()
        nn = torch.nn
        self.c1 = nn.Conv2d(1, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 16, (3, 2), stride=(1, 2), padding=(1, 0), groups=2)
        self.fc1 = nn.Linear(16 * 7 * 3, 32)
        self.fc2 = nn.Linear(32, 10)
    def forward(self, x, step, rank):
        h = F.max_pool2d(F.relu(self.c1(x)), 2)
        h = F.avg_pool2d(F.relu(self.c2(h)), 2)
        h = F.relu(self.fc1(torch.flatten(h, 1)))
        m = torch.tensor(keep_mask(step_seed(5, step, rank), 0, h.numel(), 0.3).reshape(tuple(h.shape)))
        return self.fc2(h * m / 0.7)

class CNNBN(torch.nn.Module):
    """models.py's CNN_BN_DSL (seed 9)."""
    def __init__(self):
        super().__init__()
        nn = torch.nn
        self.c1 = nn.Conv2d(1, 8, 3, padding=1, bias=False)
        self.n1 = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 16, 3)
        self.n2 = nn.BatchNorm2d(16, momentum=0.2)
        self.fc1 = nn.Linear(16 * 6 * 6, 32)
        self.n3 = nn.BatchNorm1d(32, eps=0.001)
        self.fc2 = nn.Linear(32, 10)
    def forward(self, x, step, rank):
        h = F.avg_pool2d(torch.tanh(self.n1(self.c1(x))), 2)
        h = F.avg_pool2d(torch.tanh(self.n2(self.c2(h))), 2)
        h = torch.tanh(self.n3(self.fc1(torch.flatten(h, 1))))
        m = torch.tensor(keep_mask(step_seed(9, step, rank), 0, h.numel(), 0.2).reshape(tuple(h.shape)))
        return self.fc2(h * m / 0.8)

def worker(rank, port, kind, init, q):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD)
    model = {"mlp": MLP, "cnn": CNN, "cnn_bn": CNNBN}[kind]()
    model.load_state_dict({k: torch.tensor(v) for k, v in init.items()}, strict=True)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    lr = 0.01 if kind == "mlp" else 0.02
    opt = torch.optim.SGD(ddp.parameters(), lr=lr, momentum=0.9)
    x, y = fashion(STEPS * BATCH * WORLD)
    if kind != "mlp":
        x = x.reshape(-1, 1, 28, 28)
    x, y = x[rank::WORLD], y[rank::WORLD]
    losses = []
    for s in range(STEPS):
        opt.zero_grad()
        loss = F.cross_entropy(ddp(x[s * BATCH:(s + 1) * BATCH], s + 1, rank),
                               y[s * BATCH:(s + 1) * BATCH])
        loss.backward()
        opt.step()
        l = loss.detach().clone()
        dist.all_reduce(l)
        losses.append(l.item() / WORLD)
    if rank == 0:
        q.put((losses, {k: v.detach().numpy() for k, v in model.state_dict().items()}))
    dist.destroy_process_group()

def check(kind, dtc, dsl, init, work):
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, "init.safetensors")
    save_safetensors(path, init)
    exe = os.path.join(work, "train")
    run([dtc, dsl, "-o", exe])
    mpirun = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(WORLD)]
    if os.geteuid() == 0:
        mpirun.insert(1, "--allow-run-as-root")
    run([*mpirun, exe, "--init", path, "--shuffle", "off", "--batch", str(BATCH),
         "--max-steps", str(STEPS), "--eval", "off", "--quiet", "--threads", "1",
         "--metrics", os.path.join(work, "m.csv"), "--save", os.path.join(work, "out.safetensors")],
        timeout=300)
    dtc_losses = read_losses(os.path.join(work, "m.csv"))
    dtc_params = load_safetensors(os.path.join(work, "out.safetensors"))

    with socket.socket() as s:  # a free loopback port for gloo's rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, port, kind, init, q)) for r in range(WORLD)]
    for p in procs:
        p.start()
    ref_losses, ref_params = q.get(timeout=300)
    for p in procs:
        p.join(60)
    loss_err = max(abs(a - b) / (1 + abs(b)) for a, b in zip(dtc_losses, ref_losses))
    par_err = max(float(np.abs(dtc_params[k] - v).max()) / (1 + float(np.abs(v).max()))
                  for k, v in ref_params.items())
    ok = len(dtc_losses) == STEPS and loss_err <= 2e-5 and par_err <= 2e-4
    print(f"ddp_2ranks {kind:6s} {'ok' if ok else 'FAIL'} steps {len(dtc_losses)} loss[-1] "
          f"{dtc_losses[-1]:.5f}/{ref_losses[-1]:.5f} max loss err {loss_err:.1e} max param err {par_err:.1e}")
    return ok

def main():
    dtc, examples, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(5)
    mlp = {**linear_init(rng, 500, 784, "fc1"), **linear_init(rng, 10, 500, "fc2")}
    cnn = {**conv_init(rng, 8, 1, 3, 3, "c1"), **conv_init(rng, 16, 4, 3, 2, "c2"),
           **linear_init(rng, 32, 16 * 7 * 3, "fc1"), **linear_init(rng, 10, 32, "fc2")}
    cnn_dsl = os.path.join(work, "parity_cnn.dsl")
    with open(cnn_dsl, "w") as f:
        f.write(CNN_DSL)
    bn_dsl, cnn_bn = cnn_bn_case(rng, 0.02, work)[:2]
    results = [check("mlp", dtc, os.path.join(examples, "mlp.dsl"), mlp, os.path.join(work, "mlp")),
               check("cnn", dtc, cnn_dsl, cnn, os.path.join(work, "cnn")),
               check("cnn_bn", dtc, bn_dsl, cnn_bn, os.path.join(work, "cnn_bn"))]
    print(f"{sum(results)} passed, {len(results) - sum(results)} failed")
    return 0 if all(results) else 1

if __name__ == "__main__":
    sys.exit(main())
