#!/usr/bin/python3
"""Distributed parity: the seed MLP trained by dtc on 2 ranks (mpirun)
against PyTorch DistributedDataParallel (gloo) on 2 ranks, 100 steps, the
same initial parameters and batches (shuffle off; both shard as
DistributedSampler: rank r takes samples r, r+2, ...), batch 32 per rank.
Compares the global mean loss of every step and the final parameters, with
the per-model tolerances of models.py (2e-5 and 2e-4).
usage: ddp.py DTC EXAMPLES_DIR WORKDIR"""
import os, socket, sys
import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from common import save_safetensors, load_safetensors, run, read_losses
from models import fashion, linear_init

STEPS, BATCH, WORLD = 100, 32, 2
F = torch.nn.functional

class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(784, 500)
        self.fc2 = torch.nn.Linear(500, 10)
    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))

def worker(rank, port, init, out, q):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD)
    model = MLP()
    model.load_state_dict({k: torch.tensor(v) for k, v in init.items()})
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    x, y = fashion(STEPS * BATCH * WORLD)
    x, y = x[rank::WORLD], y[rank::WORLD]
    losses = []
    for s in range(STEPS):
        opt.zero_grad()
        loss = F.cross_entropy(ddp(x[s * BATCH:(s + 1) * BATCH]), y[s * BATCH:(s + 1) * BATCH])
        loss.backward()
        opt.step()
        l = loss.detach().clone()
        dist.all_reduce(l)
        losses.append(l.item() / WORLD)
    if rank == 0:
        q.put((losses, {k: v.detach().numpy() for k, v in model.state_dict().items()}))
    dist.destroy_process_group()

def main():
    dtc, examples, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(5)
    init = {**linear_init(rng, 500, 784, "fc1"), **linear_init(rng, 10, 500, "fc2")}
    path = os.path.join(work, "init.safetensors")
    save_safetensors(path, init)
    exe = os.path.join(work, "train")
    run([dtc, os.path.join(examples, "mlp.dsl"), "-o", exe])
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
    procs = [ctx.Process(target=worker, args=(r, port, init, None, q)) for r in range(WORLD)]
    for p in procs:
        p.start()
    ref_losses, ref_params = q.get(timeout=300)
    for p in procs:
        p.join(60)
    loss_err = max(abs(a - b) / (1 + abs(b)) for a, b in zip(dtc_losses, ref_losses))
    par_err = max(float(np.abs(dtc_params[k] - v).max()) / (1 + float(np.abs(v).max()))
                  for k, v in ref_params.items())
    ok = len(dtc_losses) == STEPS and loss_err <= 2e-5 and par_err <= 2e-4
    print(f"ddp_2ranks {'ok' if ok else 'FAIL'} steps {len(dtc_losses)} loss[-1] {dtc_losses[-1]:.5f}/"
          f"{ref_losses[-1]:.5f} max loss err {loss_err:.1e} max param err {par_err:.1e}")
    print(f"{int(ok)} passed, {int(not ok)} failed")
    return 0 if ok else 1

if __name__ == "__main__":
    sys.exit(main())
