#!/usr/bin/python3
"""Equivalences with a stated tolerance, each with a control that must fail
(docs/runtime.md, "Options that observe a run, and options that change it").

threads  --threads 1 against --threads 2, 10 steps of the seed MLP, the GPT
         and the CNN: within 1e-5 x (1 + max |w|) per tensor. The GEMM engine
         splits a product over the threads by blocks of its output, never
         along its sum, so the MLP and the GPT train bit-identical parameters
         on this machine (printed when so; a host whose GEMM kernels block a
         sum by the size of their share may not). The CNN's convolutions
         split the batch over the threads and sum the shares' weight
         gradients in share order, which depends on their number (measured:
         1.1e-6). Control: --lr 1% larger at --threads 1 (measured: 2e-3 on
         the CNN).
accumulate
         The seed MLP compiled with accumulate = 2, --batch 32, against batch
         64 without accumulation: one epoch of 1001 samples, shuffle off (16
         steps, the last of 41 samples: 32 + 9). The gradient of 64 samples
         is the sum of two sums over 32 (the GEMMs' order over the batch):
         atol 1e-6 + rtol 1e-5, distributed/equivalence.sh's tolerance for
         2 ranks x 32 against 1 x 64. Control: --lr 0.0101 (1% larger).

The other equivalences have their tests: 2 ranks x 32 against 1 x 64
(distributed.equivalence, with its control), accumulation on the GPT at 1 and
2 ranks (parity.accumulate), resuming at another number of ranks
(resume.other_rank_counts, with its control).

usage: equivalences.py DTC EXAMPLES_DIR WORKDIR threads|accumulate
"""
import os, shutil, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "parity"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np
from common import load_safetensors
from invariance import difference, run, text_corpus


def relative(got, want):
    """The largest |got - want| / (1 + max |want|) over the float tensors."""
    worst, where = 0.0, ""
    for k, v in want.items():
        if v.dtype != np.float32:
            continue
        d = float(np.abs(got[k].astype(np.float64) - v).max()) / (1 + float(np.abs(v).max()))
        if d >= worst:
            worst, where = d, k
    return worst, where


def within(got, want, atol, rtol):
    """Every element within atol + rtol |want|; the worst excess's tensor."""
    bad = [k for k, v in want.items()
           if not np.all(np.abs(got[k].astype(np.float64) - v) <= atol + rtol * np.abs(v))]
    return not bad, bad


def main():
    dtc, examples, work, which = sys.argv[1:5]
    work = os.path.abspath(work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    failures = []

    def compile(name, source):
        exe = os.path.join(work, name)
        subprocess.run([dtc, *os.environ.get("DTC_FLAGS", "").split(), source, "-o", exe],
                       check=True)
        return exe

    def train(exe, name, opts):
        out = os.path.join(work, name + ".st")
        run([exe, *opts, "--save", out], os.path.join(work, name + ".log"))
        return load_safetensors(out)

    if which == "threads":
        tol = 1e-5
        for model in ("mlp", "gpt", "cnn"):
            exe = compile(model, os.path.join(examples, model + ".dsl"))
            # (the GPT's rate warmed up within the steps, as in invariance.py)
            data = ["--data", "text:" + text_corpus(work), "--warmup-steps", "2",
                    "--decay-steps", "40"] if model == "gpt" else []
            common = ["--max-steps", "10", "--quiet", "--eval", "off", *data]
            one = train(exe, f"{model}-t1", common + ["--threads", "1"])
            two = train(exe, f"{model}-t2", common + ["--threads", "2"])
            lr = {"mlp": 0.01, "gpt": 0.001, "cnn": 0.01}[model] * 1.01
            control = train(exe, f"{model}-control", common + ["--threads", "1", "--lr", repr(lr)])
            err, where = relative(two, one)
            ok = err <= tol
            exact = difference(two, one) is None
            print(f"equivalence.threads: {model}: --threads 2 against --threads 1, 10 steps: "
                  f"{'bit-identical' if exact else f'{err:.3g} x (1 + max |w|) in {where}'} "
                  f"({'within' if ok else 'OUTSIDE'} {tol:g})")
            cerr, cwhere = relative(control, one)
            cok = cerr > tol
            print(f"equivalence.threads: {model}: control --lr {lr!r}: "
                  f"{'told apart' if cok else 'NOT TOLD APART'} ({cerr:.3g} in {cwhere})")
            if not ok:
                failures.append(f"{model}: --threads 2 against --threads 1")
            if not cok:
                failures.append(f"{model}: the control (--lr 1% larger) was not told apart")
    elif which == "accumulate":
        with open(os.path.join(examples, "mlp.dsl")) as f:
            text = f.read()
        source = os.path.join(work, "mlp_accumulate.dsl")
        with open(source, "w") as f:
            f.write(text.replace("train {\n", "train {\n  accumulate = 2\n", 1))
        exe = compile("mlp-accumulate", source)
        common = ["--shuffle", "off", "--eval", "off", "--threads", "1", "--quiet",
                  "--data", "synthetic:1001,0", "--epochs", "1"]
        big = train(exe, "batch64", common + ["--batch", "64", "--accumulate", "1"])
        acc = train(exe, "accumulate2x32", common + ["--batch", "32"])
        control = train(exe, "control", common + ["--batch", "64", "--accumulate", "1",
                                                  "--lr", "0.0101"])
        ok, bad = within(acc, big, 1e-6, 1e-5)
        cok = not within(control, big, 1e-6, 1e-5)[0]
        err, where = relative(acc, big)
        print(f"equivalence.accumulate: mlp: accumulate = 2 x batch 32 against batch 64: "
              f"{'within' if ok else 'OUTSIDE'} atol 1e-6 + rtol 1e-5 "
              f"(largest {err:.3g} x (1 + max |w|) in {where}){'' if ok else ': ' + ', '.join(bad)}")
        print(f"equivalence.accumulate: mlp: control --lr 0.0101: "
              f"{'told apart' if cok else 'NOT TOLD APART'}")
        if not ok:
            failures.append("accumulate = 2 x batch 32 against batch 64")
        if not cok:
            failures.append("the control (--lr 0.0101) was not told apart")
    else:
        sys.exit(f"unknown equivalence {which}")

    if failures:
        print(f"FAIL equivalence.{which}: " + "; ".join(failures))
        return 1
    print(f"PASS equivalence.{which}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
