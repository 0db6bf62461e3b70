#!/usr/bin/python3
"""Metamorphic tests: an option that only observes a run leaves what it
trains bit-identical (docs/runtime.md, "Options that observe a run").

A model is compiled once; a plain run of --max-steps 40 saves its parameters
and buffers; then each case runs the same training with one option (or a few,
where they go together) and its saved tensors must equal the plain run's bit
for bit. The plain runs evaluate nothing (--eval off), so that a case that
evaluates (--eval on, --eval-every) is compared with a run that never did.
Each case names its option in its result line and in the failure.
The control, a learning rate one part in a million larger, must be told
apart (else the comparison could not fail).

  1 rank:  --eval-every (test set; with --validation: the validation set),
           --eval on, --trace (all steps, and stopping after 5),
           --metrics, --checkpoint with --checkpoint-every and with
           --checkpoint-keep, --resume auto without a checkpoint yet,
           --progress on, --data-cache off, --log-interval, --quiet,
           --eval-every in a program compiled with accumulate = 2 (against
           its plain run), all of them at once, the same at --threads 2
           against a plain run at --threads 2, and the program compiled with
           a bucket per parameter and without overlap (the all-reduces'
           schedule, a no-op at 1 rank, orders no sum), and the programs
           compiled with recomputation (--remat=selective; the GPT also
           --remat=blocks): the same ops on the same operands
  2 ranks: --overlap on / off, --eval-every (test, validation), --metrics,
           --checkpoint, --comm-timeout, --trace, and the programs compiled
           with other bucket caps (--bucket-mb 0 --first-bucket-mb 0: a
           bucket per parameter; --bucket-mb 100: one bucket; --no-overlap):
           at 2 ranks a sum of two terms does not depend on the buckets that
           carry it; the GPT compiled with --remat=blocks

Models: the seed MLP and the CNN (batch norm, dropout) on Fashion-MNIST, and
the GPT (examples/gpt.dsl: attention, layer norm, embeddings, AdamW with
clipping and a warmup + cosine schedule) on a text of 120 kB with its last
tenth held out (text data has no test set: its evaluations are of the
validation split, the recipe's default for text).

usage: invariance.py DTC EXAMPLES_DIR WORKDIR MODEL [--ranks 2]
"""
import argparse, os, shutil, subprocess, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "parity"))
import numpy as np
from common import fortunes_corpus, load_safetensors

STEPS = 40
MPIRUN = ["timeout", "600", "mpirun", "--allow-run-as-root", "--oversubscribe",
          "--bind-to", "none"]

# Each model's recipe learning rate (the control's is one part in a million
# larger) and the data of its runs.
MODELS = {
    "mlp": {"lr": 0.01, "data": [], "text": False},
    "cnn": {"lr": 0.01, "data": [], "text": False},
    "gpt": {"lr": 0.001, "data": None, "text": True,
            # warmup and decay inside the 40 steps: the schedule is exercised
            "extra": ["--warmup-steps", "10", "--decay-steps", "40"]},
}


def text_corpus(work):
    """120 kB of English from Debian's fortunes, the same bytes in every run."""
    return fortunes_corpus(os.path.join(work, "corpus.txt"), 120_000)


def run(cmd, log):
    t = time.time()
    with open(log, "w") as f:
        r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        with open(log) as f:
            tail = f.read()[-3000:]
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{tail}")
    return time.time() - t


def difference(a, b):
    """None when a and b hold the same tensors bit for bit, else a line naming
    the largest difference."""
    if a.keys() != b.keys():
        return f"other tensors: {sorted(set(a) ^ set(b))}"
    worst, where, count = 0.0, "", 0
    for k in sorted(a):
        if a[k].shape != b[k].shape:
            return f"{k}: shape {a[k].shape} vs {b[k].shape}"
        if a[k].tobytes() == b[k].tobytes():
            continue
        count += 1
        d = float(np.abs(a[k].astype(np.float64) - b[k].astype(np.float64)).max())
        if d >= worst:
            worst, where = d, k
    if count == 0:
        return None
    return f"{count} of {len(a)} tensors differ, the largest difference {worst:.3g} in {where}"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dtc")
    p.add_argument("examples")
    p.add_argument("work")
    p.add_argument("model", choices=sorted(MODELS))
    p.add_argument("--ranks", type=int, default=1, choices=(1, 2))
    args = p.parse_args()
    m = MODELS[args.model]
    work = os.path.abspath(args.work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    suite = f"invariance.{args.model}" + ("_2ranks" if args.ranks > 1 else "")

    dsl = os.path.join(args.examples, args.model + ".dsl")
    extra_dtc = os.environ.get("DTC_FLAGS", "").split()

    def compile(name, flags=(), source=dsl):
        exe = os.path.join(work, name)
        subprocess.run([args.dtc, *extra_dtc, source, "-o", exe, *flags], check=True)
        return exe

    def with_accumulation():
        """The model with accumulate = 2 in its recipe (gradient accumulation
        is compiled in: @accumulate_step)."""
        with open(dsl) as f:
            text = f.read()
        assert "train {\n" in text
        path = os.path.join(work, args.model + "_accumulate.dsl")
        with open(path, "w") as f:
            f.write(text.replace("train {\n", "train {\n  accumulate = 2\n", 1))
        return compile(args.model + "-accumulate", source=path)

    exe = compile(args.model)
    data = ["--data", "text:" + text_corpus(work)] if m["text"] else []
    common = ["--max-steps", str(STEPS), "--threads", "1", *data, *m.get("extra", [])]
    launcher = MPIRUN + ["-np", str(args.ranks)] if args.ranks > 1 else []

    def train(name, opts, program=None, threads=None):
        d = os.path.join(work, name)
        os.makedirs(d, exist_ok=True)
        opts = [o.replace("@", d + "/") for o in opts]
        if "--eval" not in opts:  # the plain runs evaluate nothing (see the top)
            opts += ["--eval", "off"]
        cmd = [*launcher, program or exe, *common, *opts, "--save", os.path.join(d, "out.st")]
        if threads:
            cmd[cmd.index("--threads") + 1] = str(threads)
        seconds = run(cmd, os.path.join(d, "log.txt"))
        return load_safetensors(os.path.join(d, "out.st")), seconds

    plain, seconds = train("plain", [])
    print(f"{suite}: plain run, {STEPS} steps at {args.ranks} rank(s): {seconds:.1f} s", flush=True)
    baselines = {("plain", None): plain}

    def baseline(key, opts, threads=None, program=None):
        if (key, threads) not in baselines:
            baselines[(key, threads)] = train(f"plain-{key}-{threads or 1}", opts,
                                              program=program, threads=threads)[0]
        return baselines[(key, threads)]

    # (the option as the failure names it, its arguments, the baseline's key
    # and arguments, other program / threads)
    cases = []
    def case(what, opts, base=("plain", []), program=None, threads=None):
        cases.append((what, opts, base, program, threads))

    # At 1 and 2 ranks (the evaluations' batches go into the training's batch
    # slots; at 2 ranks each rank evaluates its part, with rank 0's buffers).
    if not m["text"]:
        case("--eval on --eval-every 15 (the test set)", ["--eval", "on", "--eval-every", "15"])
    case("--eval on --eval-every 15 with --validation 0.1 (the validation set)",
         ["--validation", "0.1", "--eval", "on", "--eval-every", "15"],
         base=("validation", ["--validation", "0.1"]))
    if args.ranks == 1:
        case("--eval on (the evaluation after the last step)", ["--eval", "on"])
        case("--trace (every step)", ["--trace", "@t.json", "--trace-steps", str(STEPS)])
        case("--trace --trace-steps 5 (stops mid-run)", ["--trace", "@t.json", "--trace-steps", "5"])
        case("--metrics", ["--metrics", "@m.csv"])
        case("--checkpoint --checkpoint-every 7", ["--checkpoint", "@ck.st", "--checkpoint-every", "7"])
        case("--checkpoint --checkpoint-every 5 --checkpoint-keep 3",
             ["--checkpoint", "@ck.st", "--checkpoint-every", "5", "--checkpoint-keep", "3"])
        case("--checkpoint --resume auto (no checkpoint yet: a fresh start)",
             ["--checkpoint", "@ck.st", "--resume", "auto"])
        case("--progress on", ["--progress", "on"])
        case("--data-cache off", ["--data-cache", "off"])
        case("--log-interval 7", ["--log-interval", "7"])
        case("--quiet", ["--quiet"])
        accumulating = with_accumulation()
        case("--eval on --eval-every 15 with accumulate = 2 (against accumulate = 2)",
             ["--eval", "on", "--eval-every", "15"],
             base=("accumulate", []), program=accumulating)
        everything = ["--eval", "on", "--eval-every", "9", "--trace", "@t.json", "--metrics", "@m.csv",
                      "--checkpoint", "@ck.st", "--checkpoint-every", "6", "--checkpoint-keep", "2",
                      "--progress", "on", "--data-cache", "off", "--log-interval", "3"]
        case("all of them at once", everything)
        # The same at 2 threads (the GEMMs split over them): runs repeat bit
        # for bit, and observing them changes nothing there either.
        case("all of them at once, --threads 2 (against a plain run at --threads 2)",
             everything, threads=2)
        # The schedule of the all-reduces (a no-op at 1 rank) orders no sum:
        # the clipping norm's included.
        prog = compile(args.model + "-unbucketed",
                       ["--bucket-mb", "0", "--first-bucket-mb", "0", "--no-overlap"])
        case("dtc --bucket-mb 0 --first-bucket-mb 0 --no-overlap", [], program=prog)
        # Recomputation (dtc-rematerialize) repeats the same ops on the same
        # operands: the same bits, dropout's masks and batch norm's
        # statistics included.
        for policy in ["selective"] + (["blocks"] if m["text"] else []):
            prog = compile(f"{args.model}-remat-{policy}", [f"--remat={policy}"])
            case(f"dtc --remat={policy}", [], program=prog)
    else:
        case("--overlap on", ["--overlap", "on"])
        case("--overlap off", ["--overlap", "off"])
        case("--metrics", ["--metrics", "@m.csv"])
        case("--checkpoint --checkpoint-every 7", ["--checkpoint", "@ck.st", "--checkpoint-every", "7"])
        case("--comm-timeout 300", ["--comm-timeout", "300"])
        case("--trace (every rank records)", ["--trace", "@t.json", "--trace-steps", str(STEPS)])
        for label, flags in [("dtc --bucket-mb 0 --first-bucket-mb 0 (a bucket per parameter)",
                              ["--bucket-mb", "0", "--first-bucket-mb", "0"]),
                             ("dtc --bucket-mb 100 --first-bucket-mb 100 (one bucket)",
                              ["--bucket-mb", "100", "--first-bucket-mb", "100"]),
                             ("dtc --no-overlap", ["--no-overlap"])]:
            prog = compile(args.model + "-" + str(len(cases)), flags)
            case(label, ["--overlap", "on"], program=prog)
        if m["text"]:
            prog = compile(args.model + "-remat-blocks", ["--remat=blocks"])
            case("dtc --remat=blocks", ["--overlap", "on"], program=prog)

    failures = []
    for i, (what, opts, (key, base_opts), program, threads) in enumerate(cases):
        # (a baseline of another key runs the case's program)
        want = baseline(key, base_opts, threads=threads, program=program if key != "plain" else None)
        got, seconds = train(f"case{i:02d}", opts, program=program, threads=threads)
        diff = difference(got, want)
        status = "bit-identical" if diff is None else f"CHANGES THE PARAMETERS: {diff}"
        print(f"{suite}: {what}: {status} ({seconds:.1f} s)", flush=True)
        if diff is not None:
            failures.append(f"{what}: {diff}")

    # The control: the same comparison must see a learning rate 1e-6 larger.
    lr = m["lr"] * (1 + 1e-6)
    got, _ = train("control", ["--lr", repr(lr)])
    diff = difference(got, plain)
    print(f"{suite}: control (--lr {lr!r}): {'told apart: ' + diff if diff else 'NOT TOLD APART'}")
    if diff is None:
        failures.append("the control (a learning rate 1e-6 larger) was not told apart")

    if failures:
        print(f"FAIL {suite}: " + "; ".join(failures))
        return 1
    print(f"PASS {suite}: {len(cases)} cases bit-identical, the control told apart")
    return 0


if __name__ == "__main__":
    sys.exit(main())
