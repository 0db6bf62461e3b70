#!/usr/bin/python3
"""Per-model parity with PyTorch over 120 training steps: the same initial
parameters (written here, read by dtc with --init), the same batches (file
order: --shuffle off), the same optimizer; the loss of every step and the
final parameters must match.
  mlp       examples/mlp.dsl on Fashion-MNIST, SGD lr 0.01 momentum 0.9
  deep      examples/deep_mlp.dsl on Fashion-MNIST, AdamW lr 1e-3 wd 0.01
  mse       examples/regression.dsl on a CSV regression data set, SGD
            nesterov + weight decay
  cnn       two convolutions (padded, strided, grouped), max and average
            pooling, dropout with dtc's masks applied on PyTorch's side,
            on Fashion-MNIST as [B, 1, 28, 28], SGD momentum
  cnn_bn    convolutions and a linear layer each followed by batch_norm
            (BatchNorm2d / 1d in training mode), dropout; the running
            statistics and num_batches_tracked are compared at the end
Tolerances (fp32, different summation orders, errors compounding over the
steps): every step's loss within 2e-5 x (1 + |loss|), final parameters
within 2e-4 x (1 + max |w|) per tensor (measured: at most 2.3e-6 and 2.0e-5,
AdamW amplifying). --control runs dtc with a 1% larger learning rate: every
case must then fail (measured: loss errors 3e-3, parameter errors 2e-3 to
1e-2) — a wrong gradient scale, a missed bias gradient or an optimizer off by
one step does at least as much.
usage: models.py DTC EXAMPLES_DIR WORKDIR [--control]"""
import gzip, os, sys
import numpy as np
import torch
from common import save_safetensors, load_safetensors, run, read_losses, dtc_flags
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "benchmarks"))
from idx import idx  # noqa: E402

STEPS, BATCH = 120, 64
F = torch.nn.functional
torch.set_num_threads(1)


def fashion(n):
    root = "/usr/share/datasets/fashion-mnist"
    x = idx(f"{root}/train-images-idx3-ubyte.gz")[:n].reshape(n, 784).astype(np.float32) / 255
    y = idx(f"{root}/train-labels-idx1-ubyte.gz")[:n].astype(np.int64)
    return torch.tensor(x), torch.tensor(y)

def linear_init(rng, out, inp, prefix):
    b = 1 / np.sqrt(inp)
    return {f"{prefix}.weight": rng.uniform(-b, b, (out, inp)).astype(np.float32),
            f"{prefix}.bias": rng.uniform(-b, b, (out,)).astype(np.float32)}

BUFFER = ("running_mean", "running_var", "num_batches_tracked")

def torch_train(params, forward, make_opt, x, y, loss_fn):
    # Buffers (batch norm's) take no gradient; the forward updates them.
    p = {k: torch.tensor(v, requires_grad=not k.endswith(BUFFER)) for k, v in params.items()}
    opt = make_opt([v for k, v in p.items() if not k.endswith(BUFFER)])
    losses = []
    for s in range(STEPS):
        xb, yb = x[s * BATCH:(s + 1) * BATCH], y[s * BATCH:(s + 1) * BATCH]
        opt.zero_grad()
        loss = loss_fn(forward(p, xb), yb)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, {k: v.detach().numpy() for k, v in p.items()}

def mlp_case(rng, lr):
    params = {**linear_init(rng, 500, 784, "fc1"), **linear_init(rng, 10, 500, "fc2")}
    fwd = lambda p, x: F.linear(F.relu(F.linear(x, p["fc1.weight"], p["fc1.bias"])), p["fc2.weight"], p["fc2.bias"])
    opt = lambda ps: torch.optim.SGD(ps, lr=lr, momentum=0.9)
    x, y = fashion(STEPS * BATCH)
    return "mlp.dsl", params, fwd, opt, x, y, F.cross_entropy, ["--lr", str(lr)]

def deep_case(rng, lr):
    params = {**linear_init(rng, 1024, 784, "fc1"), **linear_init(rng, 1024, 1024, "fc2"),
              **linear_init(rng, 10, 1024, "fc3")}
    def fwd(p, x):
        h = F.gelu(F.linear(x, p["fc1.weight"], p["fc1.bias"]))
        h = F.gelu(F.linear(h, p["fc2.weight"], p["fc2.bias"]))
        return F.linear(h, p["fc3.weight"], p["fc3.bias"])
    opt = lambda ps: torch.optim.AdamW(ps, lr=lr, weight_decay=0.01)
    x, y = fashion(STEPS * BATCH)
    return "deep_mlp.dsl", params, fwd, opt, x, y, F.cross_entropy, ["--lr", str(lr)]

def mse_case(rng, lr, work):
    params = {"w1": rng.normal(0, 0.3, (16, 32)).astype(np.float32), "b1": np.zeros(32, np.float32),
              "w2": rng.normal(0, 0.3, (32, 2)).astype(np.float32), "b2": np.zeros(2, np.float32)}
    fwd = lambda p, x: torch.tanh(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]
    opt = lambda ps: torch.optim.SGD(ps, lr=lr, momentum=0.9, nesterov=True, weight_decay=0.0001)
    n = STEPS * BATCH
    x = rng.normal(0, 1, (n, 16)).astype(np.float32)
    t = (np.sin(x[:, :2]) + 0.1 * x[:, 2:4]).astype(np.float32)
    csv = os.path.join(work, "regression.csv")
    np.savetxt(csv, np.concatenate([t, x], 1), delimiter=",", fmt="%.9g")
    return ("regression.dsl", params, fwd, opt, torch.tensor(x), torch.tensor(t), F.mse_loss,
            ["--lr", str(lr), "--data", csv])

CNN_DSL = """model parity_cnn
input x: f32[B, 1, 28, 28]
label y: i32[B]
c1 = conv2d(x, 8, 3, padding=1, act=relu)
p1 = max_pool2d(c1, 2)
c2 = conv2d(p1, 16, [3, 2], stride=[1, 2], padding=[1, 0], groups=2, act=relu)
p2 = avg_pool2d(c2, 2)
fc1 = linear(flatten(p2), 32, act=relu)
d = dropout(fc1, 0.3)
fc2 = linear(d, 10)
loss = cross_entropy(fc2, y)
train {
  data = fashion_mnist("/usr/share/datasets/fashion-mnist")
  optimizer = sgd(lr=0.02, momentum=0.9)
  seed = 5
}
"""

def conv_init(rng, out, inp, kh, kw, prefix):
    b = 1 / np.sqrt(inp * kh * kw)
    return {f"{prefix}.weight": rng.uniform(-b, b, (out, inp, kh, kw)).astype(np.float32),
            f"{prefix}.bias": rng.uniform(-b, b, (out,)).astype(np.float32)}

def cnn_case(rng, lr, work):
    """Convolutions (padded, strided, grouped), max and average pooling and
    dropout, whose masks PyTorch applies as dtc draws them (dropout_mask.py:
    the seed of each step, rank 0, salt 0)."""
    from dropout_mask import keep_mask, step_seed
    params = {**conv_init(rng, 8, 1, 3, 3, "c1"), **conv_init(rng, 16, 4, 3, 2, "c2"),
              **linear_init(rng, 32, 16 * 7 * 3, "fc1"), **linear_init(rng, 10, 32, "fc2")}
    step = [0]
    def fwd(p, x):
        h = F.max_pool2d(F.relu(F.conv2d(x, p["c1.weight"], p["c1.bias"], padding=1)), 2)
        h = F.relu(F.conv2d(h, p["c2.weight"], p["c2.bias"], stride=(1, 2), padding=(1, 0), groups=2))
        h = F.avg_pool2d(h, 2)
        h = F.relu(F.linear(torch.flatten(h, 1), p["fc1.weight"], p["fc1.bias"]))
        step[0] += 1
        m = torch.tensor(keep_mask(step_seed(5, step[0], 0), 0, h.numel(), 0.3).reshape(tuple(h.shape)))
        return F.linear(h * m / 0.7, p["fc2.weight"], p["fc2.bias"])
    return image_case(work, "parity_cnn", CNN_DSL, params, fwd, lr)

def image_case(work, name, dsl_text, params, fwd, lr):
    """A case on Fashion-MNIST images [B, 1, 28, 28], SGD with momentum 0.9;
    writes the model's DSL to work."""
    opt = lambda ps: torch.optim.SGD(ps, lr=lr, momentum=0.9)
    x, y = fashion(STEPS * BATCH)
    dsl = os.path.join(work, name + ".dsl")
    with open(dsl, "w") as f:
        f.write(dsl_text)
    return dsl, params, fwd, opt, x.reshape(-1, 1, 28, 28), y, F.cross_entropy, ["--lr", str(lr)]

CNN_BN_DSL = """model parity_cnn_bn
input x: f32[B, 1, 28, 28]
label y: i32[B]
c1 = conv2d(x, 8, 3, padding=1, bias=false)
n1 = batch_norm(c1, act=tanh)
p1 = avg_pool2d(n1, 2)
c2 = conv2d(p1, 16, 3)
n2 = batch_norm(c2, momentum=0.2, act=tanh)
p2 = avg_pool2d(n2, 2)
fc1 = linear(flatten(p2), 32)
n3 = batch_norm(fc1, eps=0.001, act=tanh)
d = dropout(n3, 0.2)
fc2 = linear(d, 10)
loss = cross_entropy(fc2, y)
train {
  data = fashion_mnist("/usr/share/datasets/fashion-mnist")
  optimizer = sgd(lr=0.02, momentum=0.9)
  seed = 9
}
"""

def bn_init(rng, c, prefix):
    """Affine parameters and buffers away from their defaults, so that a
    buffer or parameter read in the wrong place shows."""
    return {f"{prefix}.weight": rng.uniform(0.5, 1.5, c).astype(np.float32),
            f"{prefix}.bias": rng.normal(0, 0.1, c).astype(np.float32),
            f"{prefix}.running_mean": rng.normal(0, 0.1, c).astype(np.float32),
            f"{prefix}.running_var": rng.uniform(0.5, 1.5, c).astype(np.float32),
            f"{prefix}.num_batches_tracked": np.array(7, dtype=np.int64)}

def cnn_bn_case(rng, lr, work):
    """Batch normalization after convolutions (BatchNorm2d, one without a
    convolution bias) and after a linear layer (BatchNorm1d), in training
    mode, with their running statistics compared at the end; dropout with
    dtc's masks. tanh after each and average pooling: batch norm centres
    its outputs at 0, where a ReLU's kink turns a last-bit difference of the
    convolutions (oneDNN's summation order against PyTorch's) into another
    mask element (measured: one element at step 0 moved parameters by 1%),
    and a max pooling after a saturating tanh picks another of two nearly
    equal maxima (measured: the losses part by 1e-4 in 100 steps); with
    both, the runs stay within 2e-6. The example itself uses ReLU and max
    pooling; cnn_dropout covers max pooling.
    the example itself uses ReLU."""
    from dropout_mask import keep_mask, step_seed
    params = {**{"c1.weight": conv_init(rng, 8, 1, 3, 3, "c1")["c1.weight"]}, **bn_init(rng, 8, "n1"),
              **conv_init(rng, 16, 8, 3, 3, "c2"), **bn_init(rng, 16, "n2"),
              **linear_init(rng, 32, 16 * 6 * 6, "fc1"), **bn_init(rng, 32, "n3"),
              **linear_init(rng, 10, 32, "fc2")}
    step = [0]
    def bn(p, h, n, **kw):
        return F.batch_norm(h, p[n + ".running_mean"], p[n + ".running_var"], p[n + ".weight"],
                            p[n + ".bias"], training=True, **kw)
    def fwd(p, x):
        h = F.avg_pool2d(torch.tanh(bn(p, F.conv2d(x, p["c1.weight"], padding=1), "n1")), 2)
        h = torch.tanh(bn(p, F.conv2d(h, p["c2.weight"], p["c2.bias"]), "n2", momentum=0.2))
        h = F.avg_pool2d(h, 2)
        h = F.linear(torch.flatten(h, 1), p["fc1.weight"], p["fc1.bias"])
        h = torch.tanh(bn(p, h, "n3", eps=0.001))
        for n in ("n1", "n2", "n3"):
            p[n + ".num_batches_tracked"] += 1
        step[0] += 1
        m = torch.tensor(keep_mask(step_seed(9, step[0], 0), 0, h.numel(), 0.2).reshape(tuple(h.shape)))
        return F.linear(h * m / 0.8, p["fc2.weight"], p["fc2.bias"])
    return image_case(work, "parity_cnn_bn", CNN_BN_DSL, params, fwd, lr)

def check(name, dtc, examples, work, case, control):
    dsl, params, fwd, opt, x, y, loss_fn, extra = case
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    exe = os.path.join(d, "train")
    run([dtc, *dtc_flags(), os.path.join(examples, dsl), "-o", exe])
    init = os.path.join(d, "init.safetensors")
    save_safetensors(init, params)
    run([exe, "--init", init, "--shuffle", "off", "--batch", str(BATCH), "--max-steps", str(STEPS),
         "--eval", "off", "--quiet", "--threads", "1", "--metrics", os.path.join(d, "m.csv"),
         "--save", os.path.join(d, "out.safetensors"), *extra])
    dtc_losses = read_losses(os.path.join(d, "m.csv"))
    dtc_params = load_safetensors(os.path.join(d, "out.safetensors"))
    ref_losses, ref_params = torch_train(params, fwd, opt, x, y, loss_fn)
    loss_err = max(abs(a - b) / (1 + abs(b)) for a, b in zip(dtc_losses, ref_losses))
    par_err = max(float(np.abs(dtc_params[k] - v).max()) / (1 + float(np.abs(v).max()))
                  for k, v in ref_params.items())
    ok = len(dtc_losses) == STEPS and loss_err <= 2e-5 and par_err <= 2e-4
    print(f"{name:14s} {'ok  ' if ok else 'FAIL'} steps {len(dtc_losses)} loss[0] {dtc_losses[0]:.5f}/{ref_losses[0]:.5f} "
          f"loss[-1] {dtc_losses[-1]:.5f}/{ref_losses[-1]:.5f} max loss err {loss_err:.1e} max param err {par_err:.1e}")
    return ok

def main():
    dtc, examples, work = sys.argv[1:4]
    control = "--control" in sys.argv
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(3)
    cases = {"mlp": lambda lr: mlp_case(rng, lr), "deep_adamw": lambda lr: deep_case(rng, lr),
             "mse_nesterov": lambda lr: mse_case(rng, lr, work),
             "cnn_dropout": lambda lr: cnn_case(rng, lr, work),
             "cnn_batchnorm": lambda lr: cnn_bn_case(rng, lr, work)}
    lrs = {"mlp": 0.01, "deep_adamw": 0.001, "mse_nesterov": 0.05, "cnn_dropout": 0.02,
           "cnn_batchnorm": 0.02}
    failed = 0
    for name, make in cases.items():
        case = make(lrs[name])
        if control:  # dtc with a 1% larger learning rate must be told apart
            case = case[:7] + (case[7][:1] + [str(lrs[name] * 1.01)] + case[7][2:],)
        ok = check(name, dtc, examples, work, case, control)
        failed += (not ok) if not control else ok
    n = len(cases)
    print(f"{n - failed} passed, {failed} failed" + (" (control: every case must fail)" if control else ""))
    return 1 if failed else 0

if __name__ == "__main__":
    sys.exit(main())
