#!/usr/bin/python3
"""GPT parity in the manner of llm.c's test_gpt2: a GPT-2-style byte-level
model (pre-norm blocks of causal self-attention and a tanh-GELU MLP, learned
position embeddings, the head tied to the token embedding) written with the
DSL's builtins and blocks, against an independent PyTorch implementation of
the same model, from the same initialization (a safetensors file dtc reads
with --init) and the same batches (--shuffle off: window i holds tokens
i*T .. i*T+T-1, its labels the token after each).

1. One step: the loss and every parameter's gradient (dtc: one SGD step of
   lr 1 with the same initialization, the gradient = before - after).
2. 24 AdamW steps with the recipe's gradient clipping (clip_grad_norm_ to
   1.0 after the all-reduce) and warmup + cosine schedule: every step's loss
   and the final parameters.
3. The same 24 steps on 2 ranks (mpirun; rank r takes windows r, r+2, ...
   of each global batch) against one PyTorch process on the global batch
   (DDP's averaged gradient is the global batch's mean gradient).
4. Greedy generation (train --sample N --temperature 0) from the
   initialization with its matrices 25x larger: each token the arg-max of the reference's logits at the last
   position of the context (cropped to T), logit gap <= 1e-5 x (1 + max |l|).

Tolerances (fp32, different summation orders): loss 1e-5 x (1 + |loss|);
gradients 1e-5 x (1 + max |g|) per tensor (measured 6e-8); over 24 steps,
losses 2e-5 x (1 + |loss|) and parameters 1e-4 x (1 + max |w|) per tensor
(measured 1e-6 and 9e-6). The logits are not compared on their own: the
loss and every gradient are functions of them. --control runs
the reference with a wrong attention scale (1/D for 1/sqrt(D)) and then
without the causal mask: every check must then fail.
usage: gpt.py DTC WORKDIR [--control]"""
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
STEPS, LR, MIN_LR, WARMUP, DECAY, CLIP = 24, 3e-3, 3e-4, 5, 24, 1.0

def dsl(optimizer, text):
    layers = "\n".join(f"h{i} = layer({'x' if i == 0 else f'h{i - 1}'})" for i in range(L))
    return f"""model gpt_parity
input ids: i32[B, {T}]
label y: i32[B, {T}]

block attention(x) {{
  c_attn = linear(x, {3 * C})
  q, k, v = split(c_attn, 3)
  qh = transpose(reshape(q, [B, {T}, {H}, {C // H}]), 1, 2)
  kh = transpose(reshape(k, [B, {T}, {H}, {C // H}]), 1, 2)
  vh = transpose(reshape(v, [B, {T}, {H}, {C // H}]), 1, 2)
  a = scaled_dot_product_attention(qh, kh, vh, is_causal=true)
  c_proj = linear(reshape(transpose(a, 1, 2), [B, {T}, {C}]), {C})
  return c_proj
}}

block mlp(x) {{
  c_fc = linear(x, {4 * C}, act=gelu_tanh)
  c_proj = linear(c_fc, {C})
  return c_proj
}}

block layer(x) {{
  ln_1 = layer_norm(x)
  attn = attention(ln_1)
  h = x + attn
  ln_2 = layer_norm(h)
  mlp = mlp(ln_2)
  return h + mlp
}}

wte = embedding(ids, {V}, {C})
wpe = embedding(arange({T}), {T}, {C})
x = wte + wpe
{layers}
ln_f = layer_norm(h{L - 1})
logits = ln_f @ transpose(wte.weight)
loss = cross_entropy(logits, y)

train {{
  data = text("{text}", block={T})
  batch = {B}
  optimizer = {optimizer}
  schedule = cosine(warmup={WARMUP}, decay_steps={DECAY}, min_lr={MIN_LR})
  clip_grad_norm = {CLIP}
  validation = 0
}}
"""

def init(rng, T=T, C=C, L=L):
    """GPT-2's initialization: N(0, 0.02) weights, zero biases, ones and
    zeros for the layer norms (perturbed, so that their gradients show).
    T, C, L: another size of the model (zero.py: examples/gpt.dsl's)."""
    p = {"wte.weight": rng.normal(0, 0.02, (V, C)), "wpe.weight": rng.normal(0, 0.02, (T, C))}
    def lin(name, out, inp):
        p[name + ".weight"] = rng.normal(0, 0.02, (out, inp))
        p[name + ".bias"] = rng.normal(0, 0.01, (out,))
    def ln(name):
        p[name + ".weight"] = 1 + rng.normal(0, 0.1, (C,))
        p[name + ".bias"] = rng.normal(0, 0.1, (C,))
    for i in range(L):
        ln(f"h{i}.ln_1")
        lin(f"h{i}.attn.c_attn", 3 * C, C)
        lin(f"h{i}.attn.c_proj", C, C)
        ln(f"h{i}.ln_2")
        lin(f"h{i}.mlp.c_fc", 4 * C, C)
        lin(f"h{i}.mlp.c_proj", C, 4 * C)
    ln("ln_f")
    return {k: v.astype(np.float32) for k, v in p.items()}

def forward(p, ids, scale=None, causal=True, H=H):
    """An independent GPT-2 forward (nanoGPT's, written out); the width and
    the layers are p's, H the heads."""
    t, C = ids.shape[1], p["wte.weight"].shape[1]
    L = sum(1 for k in p if k.endswith(".ln_1.weight"))
    x = F.embedding(ids, p["wte.weight"]) + p["wpe.weight"][:t]
    for i in range(L):
        pre = f"h{i}."
        h = F.layer_norm(x, (C,), p[pre + "ln_1.weight"], p[pre + "ln_1.bias"])
        qkv = F.linear(h, p[pre + "attn.c_attn.weight"], p[pre + "attn.c_attn.bias"])
        q, k, v = (z.view(-1, t, H, C // H).transpose(1, 2) for z in qkv.split(C, -1))
        s = q @ k.transpose(-2, -1) * (scale if scale else (C // H) ** -0.5)
        if causal:
            s = s.masked_fill(~torch.ones(t, t, dtype=torch.bool).tril(), float("-inf"))
        a = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(-1, t, C)
        x = x + F.linear(a, p[pre + "attn.c_proj.weight"], p[pre + "attn.c_proj.bias"])
        h = F.layer_norm(x, (C,), p[pre + "ln_2.weight"], p[pre + "ln_2.bias"])
        m = F.gelu(F.linear(h, p[pre + "mlp.c_fc.weight"], p[pre + "mlp.c_fc.bias"]),
                   approximate="tanh")
        x = x + F.linear(m, p[pre + "mlp.c_proj.weight"], p[pre + "mlp.c_proj.bias"])
    x = F.layer_norm(x, (C,), p["ln_f.weight"], p["ln_f.bias"])
    return x @ p["wte.weight"].T

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
    variants = [{"scale": 1.0 / (C // H)}, {"causal": False}] if control else [{}]
    results = []

    # 1. One step's loss and gradients; 2, 3. AdamW with clipping and the
    # schedule, on 1 and 2 ranks.
    checks, exe = check_language_model(dtc, dsl, corpus, work, "gpt", ckpt, params,
                                     lambda b: batches(tokens, b), B,
                                     variants, reference_grads, reference_train, STEPS, LR)
    results += checks
    # 4. Generation (--sample, greedy): every token dtc picks is the arg-max
    # of the reference's logits at the last position of its context, the
    # text so far cropped to its last T tokens (nanoGPT's generate); ties
    # within the tolerance count as agreement. From the initialization with
    # its matrices 25x larger (24 steps only teach the model spaces; this
    # one's logits depend on every position it attends to).
    trained = os.path.join(work, "sample_init.safetensors")
    save_safetensors(trained, {k: v * 25 if v.ndim == 2 else v for k, v in params.items()})
    prompt, n_new = b"the attention", 40
    sample_txt = os.path.join(work, "sample.txt")
    run([exe, "--init", trained, "--sample", str(n_new), "--prompt", prompt.decode(),
         "--temperature", "0", "--quiet", "--output", sample_txt])
    with open(sample_txt, "rb") as f:
        sample = f.read()
    trained_p = {k: torch.tensor(v) for k, v in load_safetensors(trained).items()}
    for variant in variants:
        gap = 0.0
        with torch.no_grad():
            for n in range(len(prompt), len(sample)):
                ctx = torch.tensor([list(sample[max(0, n - T):n])], dtype=torch.int64)
                logits = forward(trained_p, ctx, **variant)[0, -1]
                gap = max(gap, float(logits.max() - logits[sample[n]]) /
                          (1 + float(logits.abs().max())))
        ok = sample.startswith(prompt) and len(sample) == len(prompt) + n_new and gap <= 1e-5
        results.append(ok)
        print(f"sample {variant or ''} {'ok  ' if ok else 'FAIL'} {sample[len(prompt):]!r}, worst "
              f"logit gap to the reference's arg-max {gap:.1e}")
    failed = sum(results) if control else len(results) - sum(results)
    print(f"{len(results) - failed} passed, {failed} failed" +
          (" (control: every check must fail)" if control else ""))
    return 1 if failed else 0

if __name__ == "__main__":
    sys.exit(main())
