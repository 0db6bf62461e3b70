#!/usr/bin/python3
"""Compares the parameters in two safetensors checkpoints written by train.
usage: compare_safetensors.py A B (--exact | --rtol R --atol A)
Prints the largest differences; exits 1 if they exceed the tolerance."""
import argparse, json, struct, sys
import numpy as np

def load(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    # F32 parameters and buffers, and I64 counters (num_batches_tracked).
    types = {"F32": np.float32, "I64": np.int64}
    return {k: np.frombuffer(data[v["data_offsets"][0]:v["data_offsets"][1]],
                             dtype=types[v.get("dtype", "F32")]).reshape(v["shape"])
            for k, v in header.items()}

def main():
    p = argparse.ArgumentParser()
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--exact", action="store_true")
    p.add_argument("--rtol", type=float, default=0.0)
    p.add_argument("--atol", type=float, default=0.0)
    p.add_argument("--differ", action="store_true",
                   help="expect the checkpoints to differ (a control)")
    args = p.parse_args()
    a, b = load(args.a), load(args.b)
    if a.keys() != b.keys():
        print(f"FAIL: different parameters: {sorted(a)} vs {sorted(b)}")
        return 1
    ok, worst = True, 0.0
    for k in sorted(a):
        d = np.abs(a[k].astype(np.float64) - b[k].astype(np.float64))
        rel = d / np.maximum(np.abs(b[k]), 1e-12)
        within = np.array_equal(a[k], b[k]) if args.exact else \
            bool(np.all(d <= args.atol + args.rtol * np.abs(b[k])))
        worst = max(worst, float(d.max()))
        print(f"{k:24s} max_abs_diff {d.max():.3e} max_rel_diff {rel.max():.3e} "
              f"{'ok' if within else 'DIFFERS'}")
        ok &= within
    if args.differ:
        print("PASS: the checkpoints differ, as expected" if not ok else
              "FAIL: the checkpoints are identical")
        return 0 if not ok else 1
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1

if __name__ == "__main__":
    sys.exit(main())
