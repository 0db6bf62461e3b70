#!/usr/bin/python3
"""The GPU check's CPU reference is what a CPU build trains.

scripts/gpu-check.sh compares CUDA against the CPU steps of the same
--target=cuda program (--device cpu). Those CPU steps are compiled with the
CUDA target's pipeline: dtc leaves the max-pool/batch-norm gradient pair
unfused there (fuseMaxPoolGrad: the CUDA kernels take them apart), and the
program is linked by nvcc. This test shows that the difference does not
reach the numbers: MODEL is compiled for --target=cpu and for --target=cuda
with the bundle's host options (scripts/gpu-bundle.sh: --static-libs,
-O2 -march=x86-64-v3, so the same GEMM engine, OpenBLAS, and no vector
math library in either), both train 20 steps from the same --init with
--shuffle off at --threads 2, and every step's loss, metric and learning
rate (--metrics) and every saved parameter and buffer must be bit-identical.
The GPT is compiled as the check compiles it (accumulate = 2, run with its
schedule in the 20 steps). A control (the CPU build at a learning rate one
part in a million larger) must be told apart.

A default CPU build (dtc model.dsl, no --static-libs) differs from both on
purpose, by its host options alone: oneDNN instead of OpenBLAS, glibc's
vector math, -march=native and, with oneDNN on AVX-512, blocked activations
(the engines and layouts have their own tests: gemm, layout, parity.*).

Skipped (exit 77) where nvcc or the CUDA runtime is missing, as
nvcc_build.sh is.
usage: cpu_reference.py DTC EXAMPLES_DIR WORKDIR MODEL"""
import os, shutil, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "parity"))
from common import fortunes_corpus, load_safetensors  # noqa: E402

STEPS = 20
FLAGS = ["--cuda-arch=sm_90", "--static-libs", "--cxx-flags=-O2 -march=x86-64-v3"]
LR = {"mlp": 0.01, "cnn": 0.01, "gpt": 0.001}


def corpus(work):
    """120 kB of the fortunes (test/invariance's corpus)."""
    return fortunes_corpus(os.path.join(work, "corpus.txt"), 120_000)


def run(cmd, log):
    with open(log, "w") as f:
        r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {r.returncode}:\n{open(log).read()[-3000:]}")


def metrics(path):
    """The CSV without its measurements (wall-clock time, resident memory)
    and dtc's predictions of them."""
    rows = [line.rstrip("\n").split(",") for line in open(path)]
    drop = {"seconds", "peak_bytes", "predicted_step_seconds", "predicted_peak_bytes"}
    keep = [i for i, name in enumerate(rows[0]) if name not in drop]
    return [[r[i] for i in keep] for r in rows]


def difference(a, b):
    if a.keys() != b.keys():
        return f"other tensors: {sorted(set(a) ^ set(b))}"
    differ = [k for k in sorted(a) if a[k].tobytes() != b[k].tobytes()]
    if not differ:
        return None
    worst = max(differ, key=lambda k: float(abs(a[k].astype("f8") - b[k].astype("f8")).max()))
    return (f"{len(differ)} of {len(a)} tensors differ, the largest difference "
            f"{float(abs(a[worst].astype('f8') - b[worst].astype('f8')).max()):.3g} in {worst}")


def main():
    dtc, examples, work, model = sys.argv[1:5]
    if not shutil.which("nvcc") and not os.access("/usr/local/cuda/bin/nvcc", os.X_OK):
        print("SKIP: nvcc not found (install the CUDA toolkit to build the CUDA target)")
        return 77
    if os.environ.get("DTC_CUDA_RUNTIME", "1") == "0":
        print("SKIP: this dtc was built without the CUDA runtime (e.g. the sanitizer build)")
        return 77
    work = os.path.abspath(work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    src = os.path.join(examples, model + ".dsl")
    data, extra = [], []
    if model == "gpt":
        text = open(src).read()
        assert "train {\n" in text
        src = os.path.join(work, "gpt-acc.dsl")
        open(src, "w").write(text.replace("train {\n", "train {\n  accumulate = 2\n", 1))
        data = ["--data", "text:" + corpus(work)]
        extra = ["--accumulate", "2", "--warmup-steps", "5", "--decay-steps", str(STEPS)]
    exe = {}
    for target in ("cpu", "cuda"):
        exe[target] = os.path.join(work, f"{model}-{target}")
        run([dtc, src, f"--target={target}", *FLAGS, "-o", exe[target]],
            exe[target] + ".compile.log")
    init = os.path.join(work, "init.safetensors")
    run([exe["cpu"], "--epochs", "0", "--eval", "off", *data, "--save", init], init + ".log")
    common = ["--init", init, "--shuffle", "off", "--max-steps", str(STEPS), "--threads", "2",
              "--progress", "off", *data, *extra]
    results = {}
    for name, prog, more in (("cpu", exe["cpu"], ["--device", "cpu"]),
                             ("cuda", exe["cuda"], ["--device", "cpu"]),
                             ("control", exe["cpu"], ["--device", "cpu",
                                                      "--lr", repr(LR[model] * (1 + 1e-6))])):
        st, csv = os.path.join(work, name + ".safetensors"), os.path.join(work, name + ".csv")
        run([prog, *common, *more, "--save", st, "--metrics", csv], os.path.join(work, name + ".log"))
        results[name] = (load_safetensors(st), metrics(csv))
    ok = True
    d = difference(results["cuda"][0], results["cpu"][0])
    same_rows = results["cuda"][1] == results["cpu"][1]
    print(f"cuda.cpu_reference.{model}: --target=cuda --device cpu against --target=cpu, "
          f"{STEPS} steps: parameters {'bit-identical' if d is None else d}; "
          f"metrics {'identical' if same_rows else 'differ'}")
    ok &= d is None and same_rows and len(results["cpu"][1]) == STEPS + 1
    c = difference(results["control"][0], results["cpu"][0])
    print(f"cuda.cpu_reference.{model}: control (lr x (1 + 1e-6)): "
          f"{'told apart: ' + c if c else 'NOT told apart'}")
    ok &= c is not None
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
