#!/usr/bin/python3
"""The reference job: PyTorch DistributedDataParallel (gloo) training one
epoch of Fashion-MNIST, batch 64 per rank, DistributedSampler shuffle, SGD
lr 0.01 momentum 0.9 (the DDP example), for the seed MLP or the deeper model
(AdamW), or the CNN (examples/cnn.dsl: two convolutions, SGD as the MLP's; the
images as [64, 1, 28, 28]). Timing covers the training loop only, after the data is decoded into
memory. Prints 'epoch_seconds S'. usage: torch_ddp.py mlp|deep_mlp|cnn RANKS"""
import gzip, os, socket, sys, time
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
        return cnn_model(), lambda ps: torch.optim.SGD(ps, lr=0.01, momentum=0.9)
    if name == "mlp":
        m = torch.nn.Sequential(torch.nn.Linear(784, 500), torch.nn.ReLU(), torch.nn.Linear(500, 10))
        return m, lambda ps: torch.optim.SGD(ps, lr=0.01, momentum=0.9)
    m = torch.nn.Sequential(torch.nn.Linear(784, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 1024),
                            torch.nn.GELU(), torch.nn.Linear(1024, 10))
    return m, lambda ps: torch.optim.AdamW(ps, lr=0.001, weight_decay=0.01)

def worker(rank, world, port, name, q):
    torch.set_num_threads(max(1, (os.cpu_count() or 2) // world))
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    torch.manual_seed(1)
    root = "/usr/share/datasets/fashion-mnist"
    shape = (-1, 1, 28, 28) if name == "cnn" else (-1, 784)
    x = torch.tensor(idx(f"{root}/train-images-idx3-ubyte.gz").reshape(shape).astype(np.float32) / 255)
    y = torch.tensor(idx(f"{root}/train-labels-idx1-ubyte.gz").astype(np.int64))
    model, make_opt = model_for(name)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = make_opt(ddp.parameters())
    sampler = torch.utils.data.DistributedSampler(range(len(x)), num_replicas=world, rank=rank, shuffle=True, seed=1)
    order = torch.tensor(list(iter(sampler)))
    dist.barrier()
    start = time.perf_counter()
    for i in range(0, len(order), 64):
        b = order[i:i + 64]
        opt.zero_grad()
        F.cross_entropy(ddp(x[b]), y[b]).backward()
        opt.step()
    dist.barrier()
    if rank == 0:
        q.put(time.perf_counter() - start)
    dist.destroy_process_group()

def main():
    name, world = sys.argv[1], int(sys.argv[2])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, world, port, name, q)) for r in range(world)]
    for p in procs:
        p.start()
    seconds = q.get(timeout=900)
    for p in procs:
        p.join(60)
    print(f"epoch_seconds {seconds:.3f}")

if __name__ == "__main__":
    main()
