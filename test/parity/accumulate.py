#!/usr/bin/python3
"""Gradient accumulation (the recipe's accumulate = K, train --accumulate K)
against the large-batch run, on the GPT of gpt.py (layer norms, attention,
AdamW with clipping and warmup + cosine; no dropout, so that the two runs
compute the same function):

1. K = 3 micro-batches of 2 against one batch of 6, one rank: the loss of
   every step and the final parameters (--shuffle off: the same windows in
   each step). Tolerances (summation order only): losses 2e-6 x (1 + |l|),
   parameters 2e-5 x (1 + max |w|) per tensor.
2. K = 3 micro-batches of 2 on 2 ranks against one batch of 12 on one rank.
3. The control: batch 2 without accumulation must be far from it (else the
   comparison could not fail).
4. Exact resume: K = 3 stopped by --max-steps after 4 of 8 steps and resumed
   from its checkpoint ends bit-identical to the run that was not stopped.
usage: accumulate.py DTC WORKDIR"""
import filecmp, os, sys
import numpy as np
from common import save_safetensors, load_safetensors, compile_model, run, read_losses
import gpt

STEPS, K, B = 8, 3, 2

def worst(got, want):
    return max(float(np.abs(got[k] - v).max()) / (1 + float(np.abs(v).max()))
               for k, v in want.items())

def main():
    dtc, work = sys.argv[1:3]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(7)
    words = "gradient accumulation sums the micro batches before one optimizer step".split()
    corpus = os.path.join(work, "corpus.txt")
    with open(corpus, "wb") as f:
        f.write((" ".join(rng.choice(words, 2000)) + "\n").encode())
    ckpt = os.path.join(work, "init.safetensors")
    save_safetensors(ckpt, gpt.init(rng))
    source = gpt.dsl(f"adamw(lr={gpt.LR}, weight_decay=0.1)", corpus)
    source = source.replace("  validation = 0\n", f"  validation = 0\n  accumulate = {K}\n")
    assert f"accumulate = {K}" in source
    exe = compile_model(dtc, source, work, "gpt_accumulate")

    def train(name, batch, accumulate, ranks=1, extra=()):
        d = os.path.join(work, name)
        os.makedirs(d, exist_ok=True)
        cmd = [exe, "--init", ckpt, "--shuffle", "off", "--max-steps", str(STEPS), "--threads", "1",
               "--eval", "off", "--quiet", "--batch", str(batch), "--accumulate", str(accumulate),
               "--decay-steps", str(STEPS), "--metrics", os.path.join(d, "m.csv"),
               "--save", os.path.join(d, "out.safetensors"), *extra]
        if ranks > 1:
            cmd = ["timeout", "300", "mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to",
                   "none", "-np", str(ranks)] + cmd
        run(cmd)
        return read_losses(os.path.join(d, "m.csv")), load_safetensors(os.path.join(d, "out.safetensors"))

    results = []
    def compare(what, got, want, ltol=2e-6, ptol=2e-5):
        lerr = max(abs(a - b) / (1 + abs(b)) for a, b in zip(got[0], want[0]))
        perr = worst(got[1], want[1])
        ok = len(got[0]) == len(want[0]) == STEPS and lerr <= ltol and perr <= ptol
        results.append(ok)
        print(f"{what} {'ok  ' if ok else 'FAIL'} loss[0] {got[0][0]:.6f}/{want[0][0]:.6f} "
              f"loss[-1] {got[0][-1]:.6f}/{want[0][-1]:.6f} worst loss err {lerr:.1e}, "
              f"param err {perr:.1e}")
        return lerr, perr

    accumulated = train("k3", B, K)
    large = train("b6", B * K, 1)
    compare(f"{K} x {B} against {B * K}, 1 rank", accumulated, large)
    accumulated2 = train("k3_r2", B, K, ranks=2)
    large2 = train("b12", 2 * B * K, 1)
    compare(f"{K} x {B} on 2 ranks against {2 * B * K} on 1", accumulated2, large2)
    small = train("b2", B, 1)
    lerr = max(abs(a - b) / (1 + abs(b)) for a, b in zip(small[0], large[0]))
    perr = worst(small[1], large[1])
    ok = perr > 100 * 2e-5
    results.append(ok)
    print(f"control: batch {B} without accumulation against {B * K} {'ok  ' if ok else 'FAIL'} "
          f"(must differ) loss err {lerr:.1e}, param err {perr:.1e}")

    # Exact resume with accumulation: stopped after 4 steps, resumed to 8.
    d = os.path.join(work, "resume")
    os.makedirs(d, exist_ok=True)
    ck = os.path.join(d, "ck.safetensors")
    base = [exe, "--shuffle", "off", "--threads", "1", "--eval", "off", "--quiet",
            "--batch", str(B), "--decay-steps", str(STEPS), "--checkpoint", ck]
    run(base + ["--init", ckpt, "--max-steps", str(STEPS // 2)])
    run(base + ["--resume", ck, "--max-steps", str(STEPS), "--save", os.path.join(d, "out.safetensors")])
    same = filecmp.cmp(os.path.join(d, "out.safetensors"),
                       os.path.join(work, "k3", "out.safetensors"), shallow=False)
    resumed = load_safetensors(os.path.join(d, "out.safetensors"))
    results.append(same)
    print(f"resume after {STEPS // 2} of {STEPS} steps {'ok  ' if same else 'FAIL'} "
          f"(bit-identical parameters; worst difference {worst(resumed, accumulated[1]):.1e})")
    failed = len(results) - sum(results)
    print(f"{len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0

if __name__ == "__main__":
    sys.exit(main())
