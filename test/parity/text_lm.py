#!/usr/bin/python3
"""Parity of small byte-level language models with PyTorch on text data:
i32 token ids [B, T], embedding, cross_entropy over [B, T, V] against the
next token of each (with and without ignore_index), a head tied to the
embedding's table, and text() windows.

The same initial parameters (written here, read with --init), the same
batches (--shuffle off: window i holds tokens i*T .. i*T+T-1 of the text
and its labels the token after each; batch j is windows j*B .. j*B+B-1),
AdamW. Every step's loss, the final parameters and the validation loss (the
text's last tenth, in consecutive windows) must match.

Tolerances (fp32, different summation orders): step losses within 2e-5 x
(1 + |loss|), final parameters within 2e-4 x (1 + max |w|) per tensor, the
validation loss within 1e-4 (train prints 4 decimals), each step's accuracy
metric within one token in B * T (an arg-max near a tie may flip). --control changes the reference
instead: its labels are the tokens themselves (no shift), or, in the ignore
case, nothing is ignored: every case must then fail.
usage: text_lm.py DTC WORKDIR [--control]"""
import csv, os, sys
import numpy as np
import torch
from common import save_safetensors, load_safetensors, compile_model, run, read_losses

T, B, STEPS = 16, 8, 30
F = torch.nn.functional
torch.set_num_threads(1)

def corpus(rng):
    words = ("the of and to in is that it for on with as was at by this be from or an "
             "compiler gradient bucket rank overlap window token caf\u00e9 na\u00efve").split()
    lines = []
    while sum(len(l) + 1 for l in lines) < 24000:
        lines.append(" ".join(rng.choice(words, rng.integers(3, 12))).capitalize() + ".")
    return ("\n".join(lines) + "\n").encode("utf-8")

MODELS = {
    # name: (DSL body, torch forward of (params, ids), ignore_index or None)
    "plain": ("""
wte = embedding(ids, 256, 24)
h = layer_norm(wte)
fc = linear(h, 48, act=gelu_tanh)
logits = linear(fc, 256)
loss = cross_entropy(logits, y)
metric acc = accuracy(logits, y)
""", lambda p, ids: F.linear(F.gelu(F.linear(F.layer_norm(F.embedding(ids, p["wte.weight"]), (24,),
                                                            p["h.weight"], p["h.bias"]),
                                               p["fc.weight"], p["fc.bias"]), approximate="tanh"),
                             p["logits.weight"], p["logits.bias"]), None),
    # spaces (32) are not predicted: the mean is over the other tokens
    "ignore": ("""
wte = embedding(ids, 256, 24)
fc = linear(wte, 48, act=relu)
logits = linear(fc, 256)
loss = cross_entropy(logits, y, ignore_index=32)
metric acc = accuracy(logits, y, ignore_index=32)
""", lambda p, ids: F.linear(F.relu(F.linear(F.embedding(ids, p["wte.weight"]), p["fc.weight"],
                                             p["fc.bias"])), p["logits.weight"], p["logits.bias"]), 32),
    # GPT-2's tied head: the logits read the embedding's table again
    "tied": ("""
wte = embedding(ids, 256, 24)
h = layer_norm(wte)
fc = linear(h, 24, act=tanh)
logits = fc @ transpose(wte.weight)
loss = cross_entropy(logits, y)
""", lambda p, ids: torch.tanh(F.linear(F.layer_norm(F.embedding(ids, p["wte.weight"]), (24,),
                                                     p["h.weight"], p["h.bias"]),
                                        p["fc.weight"], p["fc.bias"])) @ p["wte.weight"].T, None),
}

def init_params(rng, name):
    p = {"wte.weight": rng.normal(0, 1, (256, 24)).astype(np.float32)}
    def lin(prefix, out, inp):
        b = 1 / np.sqrt(inp)
        p[prefix + ".weight"] = rng.uniform(-b, b, (out, inp)).astype(np.float32)
        p[prefix + ".bias"] = rng.uniform(-b, b, (out,)).astype(np.float32)
    if name in ("plain", "tied"):
        p["h.weight"] = rng.uniform(0.5, 1.5, 24).astype(np.float32)  # not the ones default
        p["h.bias"] = rng.normal(0, 0.1, 24).astype(np.float32)
    lin("fc", 24 if name == "tied" else 48, 24)
    if name != "tied":
        lin("logits", 256, 48)
    return p

def windows(tokens, begin, end, shift):
    """Consecutive windows of [begin, end): inputs and the labels `shift` on."""
    n = (end - begin - 1) // T
    ids = np.stack([tokens[begin + i * T: begin + i * T + T] for i in range(n)])
    lab = np.stack([tokens[begin + i * T + shift: begin + i * T + T + shift] for i in range(n)])
    return torch.tensor(ids, dtype=torch.int64), torch.tensor(lab, dtype=torch.int64)

def reference(params, forward, ignore, tokens, control):
    n = len(tokens)
    val = int(np.floor(0.1 * n))
    shift = 0 if control and ignore is None else 1
    ign = -100 if control else (ignore if ignore is not None else -100)
    x, y = windows(tokens, 0, n - val, shift)
    p = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    opt = torch.optim.AdamW(list(p.values()), lr=0.003)
    losses, accs = [], []
    def loss_of(xb, yb):
        logits = forward(p, xb)
        return F.cross_entropy(logits.reshape(-1, 256), yb.reshape(-1), ignore_index=ign)
    for s in range(STEPS):
        opt.zero_grad()
        xb, yb = x[s * B:(s + 1) * B], y[s * B:(s + 1) * B]
        loss = loss_of(xb, yb)
        with torch.no_grad():
            keep = yb != ign
            accs.append(float((forward(p, xb).argmax(-1) == yb)[keep].float().mean()))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    # Evaluation: batch means weighted by their windows, as dtc averages
    xv, yv = windows(tokens, n - val, n, shift)
    with torch.no_grad():
        total = sum(loss_of(xv[i:i + B], yv[i:i + B]).item() * len(xv[i:i + B])
                    for i in range(0, len(xv), B))
    return losses, accs, {k: v.detach().numpy() for k, v in p.items()}, total / len(xv)

def check(dtc, work, name, tokens, control):
    body, forward, ignore = MODELS[name]
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    text = os.path.join(d, "corpus.txt")
    with open(text, "wb") as f:
        f.write(tokens.tobytes())
    src = (f"model lm_{name}\ninput ids: i32[B, {T}]\nlabel y: i32[B, {T}]\n{body}\n"
           f'train {{\n  data = text("{text}", block={T})\n  batch = {B}\n'
           "  optimizer = adamw(lr=0.003)\n}\n")
    exe = compile_model(dtc, src, d, "lm")
    params = init_params(np.random.default_rng(5), name)
    init = os.path.join(d, "init.safetensors")
    save_safetensors(init, params)
    out = run([exe, "--init", init, "--shuffle", "off", "--max-steps", str(STEPS), "--threads", "1",
               "--metrics", os.path.join(d, "m.csv"), "--save", os.path.join(d, "out.safetensors")])
    val = [float(w.split()[0]) for w in out.split("val_loss ")[1:]][-1]
    losses = read_losses(os.path.join(d, "m.csv"))
    with open(os.path.join(d, "m.csv")) as f:
        accs = [float(r["acc"]) for r in csv.DictReader(f)] if "acc" in body else []
    got = load_safetensors(os.path.join(d, "out.safetensors"))
    ref_losses, ref_accs, ref_params, ref_val = reference(params, forward, ignore, tokens, control)
    loss_err = max(abs(a - b) / (1 + abs(b)) for a, b in zip(losses, ref_losses))
    par_err = max(float(np.abs(got[k] - v).max()) / (1 + float(np.abs(v).max()))
                  for k, v in ref_params.items())
    val_err = abs(val - ref_val)
    acc_err = max((abs(a - b) for a, b in zip(accs, ref_accs)), default=0.0)
    ok = (len(losses) == STEPS and loss_err <= 2e-5 and par_err <= 2e-4 and val_err <= 1e-4 and
          acc_err <= 1.001 / (B * T))
    print(f"{name:8s} {'ok  ' if ok else 'FAIL'} loss[0] {losses[0]:.5f}/{ref_losses[0]:.5f} "
          f"loss[-1] {losses[-1]:.5f}/{ref_losses[-1]:.5f} val {val:.4f}/{ref_val:.4f} "
          f"max errors: loss {loss_err:.1e} param {par_err:.1e} val {val_err:.1e} acc {acc_err:.1e}")
    return ok

def main():
    dtc, work = sys.argv[1:3]
    control = "--control" in sys.argv
    tokens = np.frombuffer(corpus(np.random.default_rng(11)), dtype=np.uint8)
    assert tokens.max() >= 128  # UTF-8: tokens above ASCII
    failed = 0
    for name in MODELS:
        ok = check(dtc, work, name, tokens, control)
        failed += ok if control else not ok
    print(f"{len(MODELS) - failed} passed, {failed} failed" +
          (" (control: every case must fail)" if control else ""))
    return 1 if failed else 0

if __name__ == "__main__":
    sys.exit(main())
