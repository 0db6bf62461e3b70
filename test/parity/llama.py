#!/usr/bin/python3
"""LLaMA-style parity (issue 33): the block of examples/llama.dsl at a small
size (pre-norm RMSNorm, causal self-attention, the SwiGLU feed-forward
silu(w1 x) * w3 x -> w2, no biases, an untied output head, learned
positions) written with the DSL's builtins, against an independent PyTorch
implementation of the same model (torch 1.13 has no nn.RMSNorm: its formula,
x * rsqrt(mean(x^2) + eps) * weight, written out), from the same
initialization (--init) and the same batches (--shuffle off).

1. One step: the loss and every parameter's gradient (dtc: one SGD step of
   lr 1, the gradient = before - after).
2. 20 AdamW steps with gradient clipping and warmup + cosine: every step's
   loss and the final parameters, on 1 rank and on 2 (mpirun; rank r takes
   windows r, r+2, ... of each global batch) against one PyTorch process on
   the global batch.

Tolerances as parity/gpt.py's: loss 1e-5 x (1 + |loss|), gradients 1e-5 x
(1 + max |g|) per tensor; over the steps losses 2e-5 x (1 + |loss|) and
parameters 1e-4 x (1 + max |w|). --control runs the reference with the
SwiGLU's gate and up projection swapped, then with a norm that subtracts
the mean (layer norm without bias): every check must then fail.
usage: llama.py DTC WORKDIR [--control]"""
import csv, os, sys, warnings
import numpy as np
import torch
import common
from common import (save_safetensors, load_safetensors, compile_model, run, read_losses,
                    text_batches, reference_adamw, worst, check_language_model)

warnings.filterwarnings("ignore", category=UserWarning)  # SequentialLR's
F = torch.nn.functional
torch.set_num_threads(1)
V, T, C, H, L, B = 256, 16, 32, 4, 2, 4
# DECAY = STEPS: past it torch's cosine rises again, dtc's stays at min_lr.
STEPS, LR, MIN_LR, WARMUP, DECAY, CLIP = 20, 3e-3, 3e-4, 5, 20, 1.0
HID = 88  # the SwiGLU's hidden width

def dsl(optimizer, text):
    layers = "\n".join(f"h{i} = layer({'x' if i == 0 else f'h{i - 1}'})" for i in range(L))
    return f"""model llama_parity
input ids: i32[B, {T}]
label y: i32[B, {T}]

block attention(x) {{
  wq = linear(x, {C}, bias=false)
  wk = linear(x, {C}, bias=false)
  wv = linear(x, {C}, bias=false)
  qh = transpose(reshape(wq, [B, {T}, {H}, {C // H}]), 1, 2)
  kh = transpose(reshape(wk, [B, {T}, {H}, {C // H}]), 1, 2)
  vh = transpose(reshape(wv, [B, {T}, {H}, {C // H}]), 1, 2)
  a = scaled_dot_product_attention(qh, kh, vh, is_causal=true)
  wo = linear(reshape(transpose(a, 1, 2), [B, {T}, {C}]), {C}, bias=false)
  return wo
}}

block feed_forward(x) {{
  w1 = linear(x, {HID}, bias=false)
  w3 = linear(x, {HID}, bias=false)
  w2 = linear(silu(w1) * w3, {C}, bias=false)
  return w2
}}

block layer(x) {{
  attention_norm = rms_norm(x)
  attention = attention(attention_norm)
  h = x + attention
  ffn_norm = rms_norm(h)
  feed_forward = feed_forward(ffn_norm)
  return h + feed_forward
}}

tok = embedding(ids, {V}, {C})
pos = embedding(arange({T}), {T}, {C})
x = tok + pos
{layers}
norm = rms_norm(h{L - 1})
output = linear(norm, {V}, bias=false)
loss = cross_entropy(output, y)

train {{
  data = text("{text}", block={T})
  batch = {B}
  optimizer = {optimizer}
  schedule = cosine(warmup={WARMUP}, decay_steps={DECAY}, min_lr={MIN_LR})
  clip_grad_norm = {CLIP}
  validation = 0
}}
"""

def init(rng):
    """N(0, 0.02) weights; the norms' weights around 1 (perturbed, so that
    their gradients show)."""
    p = {"tok.weight": rng.normal(0, 0.02, (V, C)), "pos.weight": rng.normal(0, 0.02, (T, C)),
         "output.weight": rng.normal(0, 0.02, (V, C))}
    def lin(name, out, inp):
        p[name + ".weight"] = rng.normal(0, 0.02, (out, inp))
    def norm(name):
        p[name + ".weight"] = 1 + rng.normal(0, 0.1, (C,))
    for i in range(L):
        norm(f"h{i}.attention_norm")
        for w in ("wq", "wk", "wv", "wo"):
            lin(f"h{i}.attention.{w}", C, C)
        norm(f"h{i}.ffn_norm")
        lin(f"h{i}.feed_forward.w1", HID, C)
        lin(f"h{i}.feed_forward.w3", HID, C)
        lin(f"h{i}.feed_forward.w2", C, HID)
    norm("norm")
    return {k: v.astype(np.float32) for k, v in p.items()}

def rms_norm(x, w, eps=1e-6, mean=False):
    if mean:  # the control: a layer norm without bias
        x = x - x.mean(-1, keepdim=True)
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w

def forward(p, ids, swap=False, mean=False):
    """An independent LLaMA-style forward (written out)."""
    t = ids.shape[1]
    x = F.embedding(ids, p["tok.weight"]) + p["pos.weight"][:t]
    for i in range(L):
        pre = f"h{i}."
        h = rms_norm(x, p[pre + "attention_norm.weight"], mean=mean)
        q, k, v = (F.linear(h, p[pre + f"attention.{w}.weight"]).view(-1, t, H, C // H).transpose(1, 2)
                   for w in ("wq", "wk", "wv"))
        s = q @ k.transpose(-2, -1) * (C // H) ** -0.5
        s = s.masked_fill(~torch.ones(t, t, dtype=torch.bool).tril(), float("-inf"))
        a = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(-1, t, C)
        x = x + F.linear(a, p[pre + "attention.wo.weight"])
        h = rms_norm(x, p[pre + "ffn_norm.weight"], mean=mean)
        g, u = F.linear(h, p[pre + "feed_forward.w1.weight"]), F.linear(h, p[pre + "feed_forward.w3.weight"])
        if swap:
            g, u = u, g
        x = x + F.linear(F.silu(g) * u, p[pre + "feed_forward.w2.weight"])
    return F.linear(rms_norm(x, p["norm.weight"], mean=mean), p["output.weight"])

def batches(tokens, batch):
    return text_batches(tokens, T, batch)

def loss_of(p, xb, yb, variant):
    return F.cross_entropy(forward(p, xb, **variant).reshape(-1, V), yb.reshape(-1))

def reference_grads(params, data, variant):
    return common.reference_grads(params, lambda p: loss_of(p, *data[0], variant))

def reference_train(params, data, variant):
    return reference_adamw(params, lambda p, s: loss_of(p, *data[s], variant), STEPS, LR, 0.1,
                           WARMUP, DECAY, MIN_LR, CLIP)

def main():
    dtc, work = sys.argv[1:3]
    control = "--control" in sys.argv
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(13)
    words = "the attention of tokens is all you need to train a small model on bytes".split()
    text = (" ".join(rng.choice(words, 3000)) + "\n").encode()
    corpus = os.path.join(work, "corpus.txt")
    with open(corpus, "wb") as f:
        f.write(text)
    tokens = np.frombuffer(text, dtype=np.uint8)
    params = init(rng)
    ckpt = os.path.join(work, "init.safetensors")
    save_safetensors(ckpt, params)
    variants = [{"swap": True}, {"mean": True}] if control else [{}]
    results = []

    # 1. One step's loss and gradients; 2, 3. AdamW with clipping and the
    # schedule, on 1 and 2 ranks.
    checks, exe = check_language_model(dtc, dsl, corpus, work, "llama", ckpt, params,
                                     lambda b: batches(tokens, b), B,
                                     variants, reference_grads, reference_train, STEPS, LR)
    results += checks
    failed = sum(results) if control else len(results) - sum(results)
    print(f"{len(results) - failed} passed, {failed} failed" +
          (" (control: every check must fail)" if control else ""))
    return 1 if failed else 0

if __name__ == "__main__":
    sys.exit(main())
