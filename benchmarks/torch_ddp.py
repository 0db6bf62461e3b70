#!/usr/bin/python3
"""The reference job: PyTorch DistributedDataParallel (gloo) training one
epoch of Fashion-MNIST, batch 64 per rank, DistributedSampler shuffle, SGD
lr 0.01 momentum 0.9 (the DDP example), for the seed MLP or the deeper model
(AdamW), or the CNN (examples/cnn.dsl: two convolutions, SGD as the MLP's; the
images as [64, 1, 28, 28]). Timing covers the training loop only, after the data is decoded into
memory. Prints 'epoch_seconds S steps N max_rss_mb R0,R1,...' (each rank's
peak resident set; 'train_seconds' instead of 'epoch_seconds' when
--max-steps cuts the epoch short). --zero: the optimizer wrapped in
torch.distributed.optim.ZeroRedundancyOptimizer (ZeRO stage 1: each rank
holds and updates the optimizer state of its partition of the parameters,
then broadcasts them). --max-steps N: stop after N steps.
usage: torch_ddp.py mlp|deep_mlp|cnn RANKS [--zero] [--max-steps N]"""
import argparse, gzip, os, resource, socket, sys, time
import numpy as np
import torch
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from idx import idx  # noqa: E402
import torch.distributed as dist
import torch.multiprocessing as mp

F = torch.nn.functional


def model_for(name):
    nn = torch.nn
    if name == "cnn":
        from torch_cnn import cnn_model
        return cnn_model(), torch.optim.SGD, dict(lr=0.01, momentum=0.9)
    if name == "mlp":
        m = torch.nn.Sequential(torch.nn.Linear(784, 500), torch.nn.ReLU(), torch.nn.Linear(500, 10))
        return m, torch.optim.SGD, dict(lr=0.01, momentum=0.9)
    m = torch.nn.Sequential(torch.nn.Linear(784, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 1024),
                            torch.nn.GELU(), torch.nn.Linear(1024, 10))
    return m, torch.optim.AdamW, dict(lr=0.001, weight_decay=0.01)

def worker(rank, world, port, name, zero, max_steps, q):
    torch.set_num_threads(max(1, (os.cpu_count() or 2) // world))
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    torch.manual_seed(1)
    root = "/usr/share/datasets/fashion-mnist"
    shape = (-1, 1, 28, 28) if name == "cnn" else (-1, 784)
    x = torch.tensor(idx(f"{root}/train-images-idx3-ubyte.gz").reshape(shape).astype(np.float32) / 255)
    y = torch.tensor(idx(f"{root}/train-labels-idx1-ubyte.gz").astype(np.int64))
    model, opt_class, hyper = model_for(name)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    if zero:
        from torch.distributed.optim import ZeroRedundancyOptimizer
        opt = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=opt_class, **hyper)
    else:
        opt = opt_class(ddp.parameters(), **hyper)
    sampler = torch.utils.data.DistributedSampler(range(len(x)), num_replicas=world, rank=rank, shuffle=True, seed=1)
    order = torch.tensor(list(iter(sampler)))
    if max_steps is not None:
        order = order[:max_steps * 64]
    dist.barrier()
    start = time.perf_counter()
    for i in range(0, len(order), 64):
        b = order[i:i + 64]
        opt.zero_grad()
        F.cross_entropy(ddp(x[b]), y[b]).backward()
        opt.step()
    dist.barrier()
    q.put((rank, time.perf_counter() - start, (len(order) + 63) // 64,
           resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))
    dist.destroy_process_group()

def main():
    ap = argparse.ArgumentParser(usage=__doc__.rsplit("usage: ", 1)[1])
    ap.add_argument("name", choices=["mlp", "deep_mlp", "cnn"])
    ap.add_argument("world", type=int)
    ap.add_argument("--zero", action="store_true")
    ap.add_argument("--max-steps", type=int)
    a = ap.parse_args()
    name, world = a.name, a.world
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, world, port, name, a.zero, a.max_steps, q)) for r in range(world)]
    for p in procs:
        p.start()
    got = sorted(q.get(timeout=900) for _ in procs)
    for p in procs:
        p.join(60)
    _, seconds, steps, _ = got[0]
    what = "epoch_seconds" if a.max_steps is None or steps < a.max_steps else "train_seconds"
    print(f"{what} {seconds:.3f} steps {steps} max_rss_mb {','.join(f'{g[3]:.1f}' for g in got)}")

if __name__ == "__main__":
    main()
