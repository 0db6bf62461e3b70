"""Shared helpers of the PyTorch parity tests: safetensors I/O (no extra
package needed), compiling DSL text with dtc and running the train program."""
import json, os, struct, subprocess
import numpy as np

def save_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        # int64 arrays stay I64 (num_batches_tracked); the rest is F32
        a = np.array(t, dtype=np.int64 if np.asarray(t).dtype == np.int64 else np.float32)
        header[name] = {"dtype": "I64" if a.dtype == np.int64 else "F32", "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        blobs.append(a.tobytes())
        offset += a.nbytes
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))

def load_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    types = {"F32": np.float32, "I64": np.int64}
    return {k: np.frombuffer(data[v["data_offsets"][0]:v["data_offsets"][1]],
                             dtype=types[v["dtype"]]).reshape(v["shape"]).copy()
            for k, v in header.items()}

def dtc_flags():
    """Extra dtc options of every compile of a parity run (DTC_FLAGS in the
    environment: the suites run again with --layout=channels-last)."""
    return os.environ.get("DTC_FLAGS", "").split()

def compile_model(dtc, source, workdir, name, extra=()):
    os.makedirs(workdir, exist_ok=True)
    dsl = os.path.join(workdir, name + ".dsl")
    with open(dsl, "w") as f:
        f.write(source)
    exe = os.path.join(workdir, name)
    subprocess.run([dtc, *dtc_flags(), dsl, "-o", exe, *extra], check=True)
    return exe

def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r.stdout

def read_losses(metrics_csv):
    import csv
    with open(metrics_csv) as f:
        return [float(r["loss"]) for r in csv.DictReader(f)]

def fortunes_corpus(path, size):
    """The first `size` bytes of English in Debian's fortunes (its files in
    name order, the strfile indexes and links left out): the same bytes on
    every machine with the package, for the tests' and the GPU check's text
    data. Writes them to path once; returns path."""
    if not os.path.exists(path):
        out, root = bytearray(), "/usr/share/games/fortunes"
        for name in sorted(os.listdir(root)):
            p = os.path.join(root, name)
            if name.endswith((".dat", ".u8")) or not os.path.isfile(p) or os.path.islink(p):
                continue
            with open(p, "rb") as f:
                out += f.read()
            if len(out) >= size:
                break
        with open(path, "wb") as f:
            f.write(bytes(out[:size]))
    return path


# The references of the language-model parity tests (gpt.py, llama.py):
# byte windows, one step's gradients, AdamW steps with warmup + cosine and
# clipping as the DSL's recipe runs them, and the worst relative error.
def text_batches(tokens, T, batch):
    """Window i: tokens i*T .. i*T+T-1, labelled with the token after each
    (train --shuffle off); `batch` windows a batch."""
    import torch
    n = (len(tokens) - 1) // T
    ids = np.stack([tokens[i * T:i * T + T] for i in range(n)]).astype(np.int64)
    lab = np.stack([tokens[i * T + 1:i * T + T + 1] for i in range(n)]).astype(np.int64)
    return [(torch.tensor(ids[j:j + batch]), torch.tensor(lab[j:j + batch]))
            for j in range(0, n - batch + 1, batch)]

def reference_grads(params, loss_of):
    """loss_of(p) at params, and every parameter's gradient."""
    import torch
    p = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    loss = loss_of(p)
    loss.backward()
    return loss.item(), {k: v.grad.numpy() for k, v in p.items()}

def cosine_schedule(opt, warmup, decay, min_lr):
    """dtc's cosine schedule on a torch optimizer: LinearLR warmup from
    lr / warmup to lr, then CosineAnnealingLR to min_lr at step `decay`."""
    import torch
    S = torch.optim.lr_scheduler
    warm = S.LinearLR(opt, start_factor=1.0 / warmup, end_factor=1.0, total_iters=warmup - 1)
    cos = S.CosineAnnealingLR(opt, T_max=decay - warmup, eta_min=min_lr)
    return S.SequentialLR(opt, [warm, cos], milestones=[warmup])

def reference_adamw(params, step_loss, steps, lr, weight_decay, warmup, decay, min_lr, clip):
    """`steps` AdamW steps of step_loss(p, s), clip_grad_norm_ to `clip`,
    LinearLR warmup then CosineAnnealingLR (dtc's cosine schedule): the
    losses and the final parameters."""
    import torch
    p = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    opt = torch.optim.AdamW(list(p.values()), lr=lr, weight_decay=weight_decay)
    sched = cosine_schedule(opt, warmup, decay, min_lr)
    losses = []
    for s in range(steps):
        opt.zero_grad()
        loss = step_loss(p, s)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(p.values()), clip)
        opt.step()
        sched.step()
        losses.append(loss.item())
    return losses, {k: v.detach().numpy() for k, v in p.items()}

def worst(got, want):
    """The largest error over tensors, relative to 1 + max |want|."""
    return max(float(np.abs(got[k] - v).max()) / (1 + float(np.abs(v).max())) for k, v in want.items())

def check_language_model(dtc, dsl, corpus, work, name, ckpt, params, batches, batch, variants,
                         reference_grads, reference_train, steps, lr):
    """The checks of a language model's parity test (gpt.py, llama.py), one
    result each: (1) one step's loss and gradients (SGD lr 1: the gradient is
    the change) against reference_grads; (2, 3) `steps` of AdamW with
    clipping and the schedule, at 1 and 2 ranks, each step's loss and the
    final parameters against reference_train. `dsl(optimizer, corpus)` is the
    model's source; batches(b) its data in batches of b. Returns the results
    and the AdamW program."""
    results = []
    exe = compile_model(dtc, dsl("sgd(lr=1.0)", corpus), work, f"{name}_sgd")
    out = os.path.join(work, "sgd.safetensors")
    run([exe, "--init", ckpt, "--shuffle", "off", "--max-steps", "1", "--threads", "1", "--eval", "off",
         "--quiet", "--lr-schedule", "constant", "--warmup-steps", "0", "--clip-grad-norm", "0",
         "--metrics", os.path.join(work, "sgd.csv"), "--save", out])
    after = load_safetensors(out)
    grads = {k: params[k] - after[k] for k in params}
    loss0 = read_losses(os.path.join(work, "sgd.csv"))[0]
    for variant in variants:
        ref_loss, ref_grads = reference_grads(params, batches(batch), variant)
        lerr, gerr = abs(loss0 - ref_loss) / (1 + abs(ref_loss)), worst(grads, ref_grads)
        ok = lerr <= 1e-5 and gerr <= 1e-5
        results.append(ok)
        print(f"one step {variant or ''} {'ok  ' if ok else 'FAIL'} loss {loss0:.6f}/{ref_loss:.6f} "
              f"err {lerr:.1e}, worst gradient err {gerr:.1e} over {len(grads)} tensors")

    exe = compile_model(dtc, dsl(f"adamw(lr={lr}, weight_decay=0.1)", corpus), work, f"{name}_adamw")
    for ranks in (1, 2):
        d = os.path.join(work, f"r{ranks}")
        os.makedirs(d, exist_ok=True)
        cmd = [exe, "--init", ckpt, "--shuffle", "off", "--max-steps", str(steps), "--threads", "1",
               "--eval", "off", "--quiet", "--metrics", os.path.join(d, "m.csv"),
               "--save", os.path.join(d, "out.safetensors")]
        if ranks > 1:
            cmd = ["timeout", "300", "mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to",
                   "none", "-np", str(ranks)] + cmd
        run(cmd)
        losses = read_losses(os.path.join(d, "m.csv"))
        got = load_safetensors(os.path.join(d, "out.safetensors"))
        for variant in variants:
            ref_losses, ref_params = reference_train(params, batches(batch * ranks), variant)
            lerr = max(abs(a - b) / (1 + abs(b)) for a, b in zip(losses, ref_losses))
            perr = worst(got, ref_params)
            ok = len(losses) == steps and lerr <= 2e-5 and perr <= 1e-4
            results.append(ok)
            print(f"adamw {ranks} rank(s) {variant or ''} {'ok  ' if ok else 'FAIL'} loss[0] "
                  f"{losses[0]:.5f}/{ref_losses[0]:.5f} loss[-1] {losses[-1]:.5f}/{ref_losses[-1]:.5f} "
                  f"worst loss err {lerr:.1e} param err {perr:.1e}")
    return results, exe
