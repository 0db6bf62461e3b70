#!/usr/bin/python3
"""Learning-rate schedules against PyTorch's schedulers, step by step: the lr
column of dtc's --metrics (the rate each optimizer step used) against
optimizer.param_groups[0]["lr"] before each step of torch.optim.SGD driven
by the schedulers a PyTorch user chains for the same schedule:
  --warmup-steps W          LinearLR(start_factor=1/W, total_iters=W-1), then
                            (SequentialLR, milestone W) the schedule below
  --lr-schedule cosine      CosineAnnealingLR(T_max=D-W, eta_min=--min-lr)
  --lr-schedule linear      LinearLR(1, --min-lr/lr, total_iters=D-W)
  --lr-schedule step        StepLR(--lr-step-size, --lr-gamma)
(D = --decay-steps, by default --epochs x steps per epoch). Past D torch's
cosine rises again (it is periodic); dtc's stays at --min-lr, which is
checked on its own. A resumed run (--resume, no schedule options given)
must continue the uninterrupted run's rates exactly, and the recipe's
`schedule = cosine(...)` gives the same rates as the options.
Tolerance: 1e-6 relative (the column is the float32 each step used, in the
fewest digits that read back to it).
usage: schedule.py DTC WORKDIR"""
import csv, os, sys, warnings
import torch
from torch.optim import lr_scheduler as S
from common import compile_model, run

# SequentialLR steps its second scheduler with an epoch (closed form): its warning.
warnings.filterwarnings("ignore", category=UserWarning)

MODEL = """input x: f32[B, 4]
label y: i32[B]
fc = linear(x, 3)
loss = cross_entropy(fc, y)
train {
  data = synthetic(train=320, test=0)
  batch = 16
  optimizer = sgd(lr=0.1)
}
"""
STEPS_PER_EPOCH = 20

def torch_lrs(steps, lr, kind, warmup=0, decay=None, min_lr=0.0, step_size=1, gamma=0.1):
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=lr)
    span = (decay or 0) - warmup
    if kind == "cosine":
        main = S.CosineAnnealingLR(opt, T_max=span, eta_min=min_lr)
    elif kind == "linear":
        main = S.LinearLR(opt, start_factor=1.0, end_factor=min_lr / lr, total_iters=span)
    elif kind == "step":
        main = S.StepLR(opt, step_size=step_size, gamma=gamma)
    else:
        main = S.ConstantLR(opt, factor=1.0, total_iters=0)
    sched = main
    if warmup:
        first = S.LinearLR(opt, start_factor=1.0 / warmup, end_factor=1.0, total_iters=warmup - 1)
        sched = S.SequentialLR(opt, [first, main], milestones=[warmup])
    out = []
    for _ in range(steps):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return out

def dtc_lrs(exe, d, args, name):
    m = os.path.join(d, name + ".csv")
    run([exe, "--eval", "off", "--quiet", "--threads", "1", "--metrics", m] + args)
    with open(m) as f:
        return [float(r["lr"]) for r in csv.DictReader(f)]

def close(a, b):
    return len(a) == len(b) and all(abs(x - y) <= 1e-6 * max(abs(y), 1e-12) for x, y in zip(a, b))

def main():
    dtc, work = sys.argv[1], sys.argv[2]
    exe = compile_model(dtc, MODEL, work, "schedule")
    failures = 0
    def check(name, got, want):
        nonlocal failures
        ok = close(got, want)
        failures += not ok
        worst = max((abs(x - y) / max(abs(y), 1e-12) for x, y in zip(got, want)), default=0)
        print(f"{name:28s} {'ok  ' if ok else 'FAIL'} steps {len(got)} worst {worst:.1e}"
              + ("" if ok else f"\n  dtc   {got[:12]}\n  torch {want[:12]}"))
    cases = [
        ("cosine_warmup", ["--lr-schedule", "cosine", "--warmup-steps", "5", "--decay-steps", "30",
                           "--min-lr", "0.01"], dict(kind="cosine", warmup=5, decay=30, min_lr=0.01), 31),
        ("cosine_default_decay", ["--lr-schedule", "cosine", "--epochs", "2"],
         dict(kind="cosine", decay=2 * STEPS_PER_EPOCH), 2 * STEPS_PER_EPOCH),
        ("linear_warmup", ["--lr-schedule", "linear", "--warmup-steps", "4", "--decay-steps", "24",
                           "--min-lr", "0.001"], dict(kind="linear", warmup=4, decay=24, min_lr=0.001), 40),
        ("step_warmup", ["--lr-schedule", "step", "--warmup-steps", "3", "--lr-step-size", "7",
                         "--lr-gamma", "0.5"], dict(kind="step", warmup=3, step_size=7, gamma=0.5), 40),
        ("constant_warmup", ["--warmup-steps", "6"], dict(kind="constant", warmup=6), 20),
        ("constant", [], dict(kind="constant"), 20),
    ]
    for name, args, kw, steps in cases:
        epochs = ["--epochs", "2"] if "--epochs" not in args else []
        got = dtc_lrs(exe, work, args + epochs + ["--max-steps", str(steps)], name)
        check(name, got, torch_lrs(steps, 0.1, **kw))
    # Past --decay-steps the cosine stays at --min-lr.
    got = dtc_lrs(exe, work, ["--lr-schedule", "cosine", "--decay-steps", "10", "--min-lr", "0.02",
                              "--epochs", "2", "--max-steps", "25"], "cosine_past_decay")
    check("cosine_past_decay", got[11:], [0.02] * (len(got) - 11))
    # The recipe's schedule (train { schedule = ... }), and an option over it.
    recipe = compile_model(dtc, MODEL.replace(
        "  optimizer = sgd(lr=0.1)\n",
        "  optimizer = sgd(lr=0.1)\n  schedule = cosine(warmup=5, decay_steps=30, min_lr=0.01)\n"),
        work, "recipe")
    got = dtc_lrs(recipe, work, ["--epochs", "2", "--max-steps", "31"], "recipe_cosine")
    check("recipe_cosine", got, torch_lrs(31, 0.1, kind="cosine", warmup=5, decay=30, min_lr=0.01))
    got = dtc_lrs(recipe, work, ["--lr-schedule", "constant", "--max-steps", "12"], "recipe_overridden")
    check("recipe_overridden", got, torch_lrs(12, 0.1, kind="constant", warmup=5))
    # A resumed run continues the schedule from the checkpoint's options.
    ck = os.path.join(work, "ck.safetensors")
    sched = ["--lr-schedule", "cosine", "--warmup-steps", "5", "--min-lr", "0.01", "--epochs", "2"]
    whole = dtc_lrs(exe, work, sched, "whole")
    first = dtc_lrs(exe, work, sched + ["--checkpoint", ck, "--checkpoint-every", "13",
                                        "--max-steps", "13"], "first")
    rest = dtc_lrs(exe, work, ["--resume", ck], "rest")
    check("resume_continues", first + rest, whole)
    print(f"{len(cases) + 4 - failures} passed, {failures} failed")
    return 1 if failures else 0

if __name__ == "__main__":
    sys.exit(main())
