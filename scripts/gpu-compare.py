#!/usr/bin/env python3
"""Compares a training run with the CPU's run of the same program, same
initialization and batch order (scripts/gpu-check.sh): RUN-MODEL.{csv,log,
safetensors} against cpu-MODEL.*, in the current directory.

Gates (fp32; cuBLAS and dtc's CUDA kernels sum in other orders than the
CPU's GEMMs and kernels, and the difference grows as training goes on; the reasons are
in gpu-check.sh's header):
  - the same number of steps, every loss finite;
  - step 1 (from identical parameters): loss within 1e-4 relative;
  - every step: loss within 1e-3 relative;
  - the final evaluation: loss within 0.5% relative, accuracy within 0.005.
The largest parameter difference at the end is printed, not gated.
Exit 0 when every gate holds, 1 when one does not, 2 when a file is missing.
usage: gpu-compare.py MODEL RUN"""
import csv, json, math, re, struct, sys

STEP1_RTOL, STEP_RTOL, EVAL_LOSS_RTOL, EVAL_ACC_ATOL = 1e-4, 1e-3, 5e-3, 5e-3


def losses(path):
    with open(path) as f:
        return [float(r["loss"]) for r in csv.DictReader(f)]


def final_eval(path):
    """The last evaluation's numbers: test_* or val_* from an epoch line."""
    found = {}
    for line in open(path):
        if line.startswith("epoch ") or line.startswith("step "):
            for k, v in re.findall(r"\b((?:test|val)_(?:loss|accuracy)) ([-+0-9.eEnainf]+)", line):
                found[k.split("_", 1)[1]] = float(v)
    return found


def params(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    out = {}
    for k, v in header.items():
        if v.get("dtype", "F32") != "F32":
            continue
        a, b = v["data_offsets"]
        out[k] = struct.unpack(f"<{(b - a) // 4}f", data[a:b])
    return out


def main():
    m, run = sys.argv[1], sys.argv[2]
    try:
        a, b = losses(f"{run}-{m}.csv"), losses(f"cpu-{m}.csv")
        ea, eb = final_eval(f"{run}-{m}.log"), final_eval(f"cpu-{m}.log")
    except (OSError, KeyError, ValueError) as e:
        print(f"{m} ({run}): cannot read the runs' output: {e}")
        return 2
    bad = []
    if len(a) != len(b) or not a:
        bad.append(f"steps {len(a)} vs {len(b)}")
    if not all(math.isfinite(x) for x in a + b):
        bad.append("a loss that is not finite")
    rel = [abs(x - y) / max(abs(y), 1e-12) for x, y in zip(a, b)] or [math.inf]
    for i, r in enumerate(rel):
        if r > (STEP1_RTOL if i == 0 else STEP_RTOL):
            bad.append(f"step {i + 1}: loss {a[i]:.6f} vs {b[i]:.6f} (rel {r:.1e})")
            break
    if "loss" not in ea or "loss" not in eb:
        bad.append("no final evaluation")
    else:
        if abs(ea["loss"] - eb["loss"]) > EVAL_LOSS_RTOL * abs(eb["loss"]):
            bad.append(f"final evaluation loss {ea['loss']:.4f} vs {eb['loss']:.4f}")
        if "accuracy" in eb and abs(ea.get("accuracy", -1) - eb["accuracy"]) > EVAL_ACC_ATOL:
            bad.append(f"final evaluation accuracy {ea.get('accuracy')} vs {eb['accuracy']}")
    worst = max(rel)
    line = (f"{m} ({run} vs cpu): {len(a)} steps; step 1 rel diff {rel[0]:.1e}, worst {worst:.1e} "
            f"at step {rel.index(worst) + 1}; loss first {a[0] if a else math.nan:.5f}/"
            f"{b[0] if b else math.nan:.5f} last {a[-1] if a else math.nan:.5f}/"
            f"{b[-1] if b else math.nan:.5f}")
    if "loss" in ea and "loss" in eb:
        line += f"; final eval loss {ea['loss']:.4f}/{eb['loss']:.4f}"
        if "accuracy" in eb:
            line += f" accuracy {ea.get('accuracy', math.nan):.4f}/{eb['accuracy']:.4f}"
    print(line)
    try:
        pa, pb = params(f"{run}-{m}.safetensors"), params(f"cpu-{m}.safetensors")
        d = max((abs(x - y), k) for k in pb for x, y in zip(pa.get(k, ()), pb[k]))
        print(f"{m} ({run} vs cpu): largest parameter difference {d[0]:.2e} ({d[1]}; not gated)")
    except (OSError, ValueError, KeyError) as e:
        print(f"{m} ({run} vs cpu): parameters not compared: {e}")
    if bad:
        print(f"{m} ({run}): differs from the CPU beyond the tolerance: {'; '.join(bad)}")
        return 1
    print(f"{m} ({run}): agrees with the CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
