#!/usr/bin/python3
"""Per-op parity with torch.autograd: for every DSL op, at random shapes with
numpy broadcasting, dtc's forward value and the gradient of every operand
must match PyTorch's.

How dtc's numbers are read, with nothing but its public interface: all
operands are parameters initialized from a safetensors file (--init); the
loss is sum(op(...) * K) with a random weight tensor K (so every output
element matters); one step of plain SGD with lr 1 is run; the step's loss is
in the --metrics file and each gradient is init - saved parameters.

Tolerance: fp32 on both sides with different summation orders; the largest
difference is compared against 1e-4 x (1 + max |value|) per tensor — a
wrong gradient (missing term, wrong broadcast sum, wrong sign or scale) is
off by O(max |value|).
usage: ops.py DTC WORKDIR [ONLY] (ONLY: just the cases whose name contains it)"""
import os, sys
import numpy as np
import torch
from common import save_safetensors, load_safetensors, compile_model, run, read_losses
from dropout_mask import keep_mask, step_seed

rng = np.random.default_rng(7)
AFTER = {}  # case: the buffers torch holds after the step (batch norm)
BUFFER = ("running_mean", "running_var", "num_batches_tracked")
F = torch.nn.functional

def sdpa(q, k, v, is_causal=False, scale=None):
    """F.scaled_dot_product_attention (torch 2), written out for the torch
    of Debian 12 (1.13): softmax(q k^T scale, future keys masked) v."""
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale)
    s = q @ k.transpose(-2, -1) * (scale if scale is not None else q.shape[-1] ** -0.5)
    if is_causal:
        mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, -1) @ v

def pos(shape):   # positive operands (log, sqrt, div)
    return rng.uniform(0.5, 2.0, shape).astype(np.float32)

def rnd(shape):
    return rng.normal(0, 1, shape).astype(np.float32)

# name: (params {name: array}, DSL expression, torch function of the params, out shape)
def cases():
    c = {}
    for op, tf in [("relu", F.relu), ("tanh", torch.tanh), ("sigmoid", torch.sigmoid),
                   ("gelu", F.gelu), ("exp", torch.exp), ("neg", torch.neg)]:
        c[op] = ({"a": rnd((3, 5))}, f"{op}(a)", lambda p, tf=tf: tf(p["a"]))
    c["gelu_tanh"] = ({"a": rnd((8, 25)) * 2}, 'gelu(a, approximate="tanh")',
                      lambda p: F.gelu(p["a"], approximate="tanh"))
    c["silu"] = ({"a": rnd((8, 25)) * 2}, "silu(a)", lambda p: F.silu(p["a"]))
    # LLaMA's SwiGLU feed-forward: silu(gate) * up.
    c["swiglu"] = ({"a": rnd((6, 9)), "b": rnd((6, 9))}, "silu(a) * b",
                   lambda p: F.silu(p["a"]) * p["b"])
    c["log"] = ({"a": pos((4, 3))}, "log(a)", lambda p: torch.log(p["a"]))
    c["sqrt"] = ({"a": pos((4, 3))}, "sqrt(a)", lambda p: torch.sqrt(p["a"]))
    for op, sym, tf in [("add", "+", torch.add), ("sub", "-", torch.sub),
                        ("mul", "*", torch.mul), ("div", "/", torch.div)]:
        b = pos if op == "div" else rnd
        c[op + "_same"] = ({"a": rnd((3, 4)), "b": b((3, 4))}, f"a {sym} b", lambda p, tf=tf: tf(p["a"], p["b"]))
        c[op + "_bcast_row"] = ({"a": rnd((3, 4)), "b": b((4,))}, f"{op}(a, b)", lambda p, tf=tf: tf(p["a"], p["b"]))
        c[op + "_bcast_both"] = ({"a": rnd((3, 1)), "b": b((1, 4))}, f"a {sym} b", lambda p, tf=tf: tf(p["a"], p["b"]))
        c[op + "_scalar"] = ({"a": rnd((2, 3, 4))}, f"a {sym} 1.5", lambda p, tf=tf: tf(p["a"], torch.tensor(1.5)))
    c["matmul"] = ({"a": rnd((5, 3)), "b": rnd((3, 4))}, "a @ b", lambda p: p["a"] @ p["b"])
    c["matmul_transposed"] = ({"a": rnd((3, 5)), "b": rnd((4, 3))}, "transpose(a) @ transpose(b)",
                              lambda p: p["a"].T @ p["b"].T)
    c["transpose_perm"] = ({"a": rnd((2, 3, 4))}, "transpose(a, [2, 0, 1])", lambda p: p["a"].permute(2, 0, 1))
    # torch.matmul over leading dimensions: batched, broadcast, a 2-D rhs on
    # every row, transposed in place, and 1-D operands.
    c["matmul_batched"] = ({"a": rnd((2, 3, 4, 5)), "b": rnd((2, 3, 5, 2))}, "a @ b",
                           lambda p: p["a"] @ p["b"])
    c["matmul_batched_bcast"] = ({"a": rnd((3, 4, 5)), "b": rnd((2, 1, 5, 6))}, "matmul(a, b)",
                                 lambda p: torch.matmul(p["a"], p["b"]))
    c["matmul_lhs_2d"] = ({"a": rnd((4, 5)), "b": rnd((3, 5, 2))}, "a @ b", lambda p: p["a"] @ p["b"])
    c["matmul_rhs_2d"] = ({"a": rnd((2, 3, 4)), "b": rnd((4, 5))}, "a @ b", lambda p: p["a"] @ p["b"])
    c["matmul_batched_transposed"] = ({"a": rnd((2, 5, 3)), "b": rnd((2, 4, 5))},
                                      "transpose(a, 1, 2) @ transpose(b, -1, -2)",
                                      lambda p: p["a"].transpose(1, 2) @ p["b"].transpose(-1, -2))
    c["matmul_vector_rhs"] = ({"a": rnd((2, 3, 4)), "b": rnd((4,))}, "a @ b", lambda p: p["a"] @ p["b"])
    c["matmul_vector_lhs"] = ({"a": rnd((4,)), "b": rnd((2, 4, 3))}, "a @ b", lambda p: p["a"] @ p["b"])
    c["transpose_dims"] = ({"a": rnd((2, 3, 4))}, "transpose(a, 0, -1)", lambda p: p["a"].transpose(0, -1))
    c["permute"] = ({"a": rnd((2, 3, 4, 5))}, "permute(a, [0, 2, 3, 1])",
                    lambda p: p["a"].permute(0, 2, 3, 1))
    # nn.LayerNorm over the last dimension: `o = layer_norm(...)` declares
    # o.weight and o.bias [D] (random here); rows over several of the
    # kernel's blocks of 32, and a row length with a tail after its 32 lanes.
    c["layer_norm"] = ({"a": rnd((2, 3, 8)), "o.weight": rnd((8,)), "o.bias": rnd((8,))},
                       "layer_norm(a)", lambda p: F.layer_norm(p["a"], (8,), p["o.weight"], p["o.bias"]))
    c["layer_norm_rows_eps"] = ({"a": rnd((70, 67)) * 3 + 1, "o.weight": rnd((67,)), "o.bias": rnd((67,))},
                                "layer_norm(a, eps=1e-3)",
                                lambda p: F.layer_norm(p["a"], (67,), p["o.weight"], p["o.bias"], 1e-3))
    # torch.nn.RMSNorm's formula (torch 1.13 has no module):
    # x * rsqrt(mean(x^2) + eps) * weight, `o = rms_norm(...)` declaring
    # o.weight [D] (random here).
    rms = lambda x, w, eps: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w
    c["rms_norm"] = ({"a": rnd((2, 3, 8)), "o.weight": rnd((8,))},
                     "rms_norm(a)", lambda p: rms(p["a"], p["o.weight"], 1e-6))
    c["rms_norm_rows_eps"] = ({"a": rnd((70, 67)) * 3 + 1, "o.weight": rnd((67,))},
                              "rms_norm(a, eps=1e-3)",
                              lambda p: rms(p["a"], p["o.weight"], 1e-3))
    # split (torch.chunk) and concat (torch.cat); statements before o's
    # value go on lines of their own. One piece unused: its gradient is 0.
    c["split_concat"] = ({"a": rnd((2, 6, 4))},
                         "q, k, v = split(a, 3, axis=1)\nconcat([v * 2, q, tanh(k)], axis=-1)",
                         lambda p: torch.cat([p["a"].chunk(3, 1)[2] * 2, p["a"].chunk(3, 1)[0],
                                              torch.tanh(p["a"].chunk(3, 1)[1])], -1))
    c["split_unused_concat_axis1"] = ({"a": rnd((4, 6)), "b": rnd((4, 2))},
                                      "h, t = split(a, 2)\nconcat([b, h * 3, b], axis=1)",
                                      lambda p: torch.cat([p["b"], p["a"].chunk(2, -1)[0] * 3, p["b"]], 1))
    # A layer's parameter read again by its name (weight tying, as GPT-2's
    # head reuses the token embedding): the gradients of both uses add up.
    c["tied_weight"] = ({"a": rnd((3, 5)), "h.weight": rnd((4, 5)), "h.bias": rnd((4,))},
                        "h = linear(a, 4)\nh @ h.weight",
                        lambda p: F.linear(p["a"], p["h.weight"], p["h.bias"]) @ p["h.weight"])
    # F.scaled_dot_product_attention: causal over [H, T, D] heads, and
    # full with another scale over fewer queries than keys and Dv != D.
    c["sdpa_causal"] = ({"q": rnd((2, 3, 7, 4)), "k": rnd((2, 3, 7, 4)), "v": rnd((2, 3, 7, 4))},
                        "scaled_dot_product_attention(q, k, v, is_causal=true)",
                        lambda p: sdpa(p["q"], p["k"], p["v"], is_causal=True))
    c["sdpa_scale_rect"] = ({"q": rnd((2, 4, 3)) * 2, "k": rnd((2, 6, 3)), "v": rnd((2, 6, 5))},
                            "scaled_dot_product_attention(q, k, v, scale=0.3)",
                            lambda p: sdpa(p["q"], p["k"], p["v"], scale=0.3))
    c["sdpa_default_scale"] = ({"q": rnd((5, 16)) * 3, "k": rnd((9, 16)), "v": rnd((9, 2))},
                               "scaled_dot_product_attention(q, k, v)",
                               lambda p: sdpa(p["q"], p["k"], p["v"]))
    # A position embedding: the first rows of its table (torch.arange ids).
    c["position_embedding"] = ({"a": rnd((2, 5, 3)), "e.weight": rnd((7, 3))},
                               "e = embedding(arange(5), 7, 3)\na * e",
                               lambda p: p["a"] * F.embedding(torch.arange(5), p["e.weight"]))
    # nn.Linear on the last dimension of a 3-D input: `o = linear(...)`
    # declares o.weight [out, in] and o.bias [out].
    c["linear_3d"] = ({"a": rnd((2, 3, 5)), "o.weight": rnd((4, 5)), "o.bias": rnd((4,))},
                      "linear(a, 4)", lambda p: F.linear(p["a"], p["o.weight"], p["o.bias"]))
    c["reshape"] = ({"a": rnd((2, 6))}, "reshape(a, [3, 4])", lambda p: p["a"].reshape(3, 4))
    for op, tf in [("sum", torch.sum), ("mean", torch.mean)]:
        c[op + "_axis0"] = ({"a": rnd((3, 4))}, f"{op}(a, axis=0)", lambda p, tf=tf: tf(p["a"], 0))
        c[op + "_axis1_keep"] = ({"a": rnd((3, 4, 2))}, f"{op}(a, axis=1, keepdims=true)",
                                 lambda p, tf=tf: tf(p["a"], 1, keepdim=True))
        c[op + "_all"] = ({"a": rnd((3, 4))}, f"{op}(a)", lambda p, tf=tf: tf(p["a"]))
    c["max_axis"] = ({"a": rnd((3, 5))}, "max(a, axis=1)", lambda p: torch.max(p["a"], 1).values)
    c["softmax"] = ({"a": rnd((4, 6))}, "softmax(a)", lambda p: torch.softmax(p["a"], -1))
    c["softmax_axis0"] = ({"a": rnd((4, 6))}, "softmax(a, axis=0)", lambda p: torch.softmax(p["a"], 0))
    c["log_softmax"] = ({"a": rnd((4, 6))}, "log_softmax(a, axis=-1)", lambda p: torch.log_softmax(p["a"], -1))
    c["mse"] = ({"a": rnd((4, 3)), "b": rnd((4, 3))}, "mse(a, b)", lambda p: F.mse_loss(p["a"], p["b"]))
    # Convolutions: `o = conv2d(...)` declares o.weight [O, C/g, kH, kW] and
    # o.bias [O] itself (torch.nn.Conv2d's names and layout).
    def conv(name, shape, out, k, dsl, **kw):
        g = kw.get("groups", 1)
        kh, kw_ = (k, k) if isinstance(k, int) else k
        ps = {"a": rnd(shape), "o.weight": rnd((out, shape[1] // g, kh, kw_)) * 0.5}
        bias = kw.pop("bias", True)
        if bias:
            ps["o.bias"] = rnd((out,))
        tf = lambda p, kw=kw, bias=bias: F.conv2d(p["a"], p["o.weight"], p["o.bias"] if bias else None, **kw)
        c[name] = (ps, f"conv2d(a, {out}, {dsl})", tf)
        # The path without oneDNN's convolutions: im2col + GEMM (OpenBLAS).
        c[name + "_openblas"] = (ps, f"conv2d(a, {out}, {dsl})", tf, ["--gemm=openblas"])
    conv("conv2d", (2, 3, 6, 5), 4, 3, "3")
    conv("conv2d_pad_stride", (2, 2, 7, 6), 3, (3, 2), "[3, 2], stride=[2, 1], padding=[1, 2]",
         stride=(2, 1), padding=(1, 2))
    conv("conv2d_dilation", (1, 2, 9, 8), 2, 3, "3, dilation=[2, 3], padding=1", dilation=(2, 3), padding=1)
    conv("conv2d_groups", (2, 4, 5, 5), 6, 3, "3, groups=2, padding=1, bias=false", groups=2, padding=1,
         bias=False)
    conv("conv2d_1x1", (2, 3, 4, 4), 5, 1, "1")
    conv("conv2d_depthwise_strided", (1, 3, 8, 7), 3, 3, "3, stride=3, groups=3", stride=3, groups=3)
    # Channels in whole blocks of 16: the ones dtc --layout=blocked holds
    # blocked (input and result, the result only, the input only).
    conv("conv2d_16ch", (2, 16, 6, 5), 16, 3, "3, padding=1", padding=1)
    conv("conv2d_into_16ch", (2, 3, 6, 5), 16, 3, "3")
    conv("conv2d_from_16ch_strided", (2, 16, 7, 6), 5, 3, "3, stride=2", stride=2)
    for name, dsl, tf in [
        ("max_pool2d", "max_pool2d(a, 2)", lambda p: F.max_pool2d(p["a"], 2)),
        ("max_pool2d_overlap_pad", "max_pool2d(a, 3, stride=[1, 2], padding=1)",
         lambda p: F.max_pool2d(p["a"], 3, stride=(1, 2), padding=1)),
        ("avg_pool2d", "avg_pool2d(a, [2, 3])", lambda p: F.avg_pool2d(p["a"], (2, 3))),
        ("avg_pool2d_pad", "avg_pool2d(a, 3, stride=2, padding=1)",
         lambda p: F.avg_pool2d(p["a"], 3, stride=2, padding=1)),
        ("avg_pool2d_pad_exclude", "avg_pool2d(a, 3, stride=2, padding=1, count_include_pad=false)",
         lambda p: F.avg_pool2d(p["a"], 3, stride=2, padding=1, count_include_pad=False)),
        ("adaptive_avg_pool2d", "adaptive_avg_pool2d(a, 1)", lambda p: F.adaptive_avg_pool2d(p["a"], 1)),
        ("flatten", "flatten(a)", lambda p: torch.flatten(p["a"], 1)),
    ]:
        c[name] = ({"a": rnd((2, 3, 7, 6))}, dsl, tf)
        if name != "flatten":  # and on 16 channels (blocked with --layout=blocked)
            c[name + "_16ch"] = ({"a": rnd((2, 16, 7, 6))}, dsl, tf)
    # Batch normalization in training: `o = batch_norm(a)` declares
    # o.weight, o.bias and the buffers o.running_mean, o.running_var,
    # o.num_batches_tracked (torch.nn.BatchNorm's); the buffers after the
    # step must be torch's too (AFTER).
    def bn(name, shape, dsl, **kw):
        C = shape[1]
        ps = {"a": rnd(shape), "o.weight": pos((C,)), "o.bias": rnd((C,)),
              "o.running_mean": rnd((C,)), "o.running_var": pos((C,)),
              "o.num_batches_tracked": np.array(3, dtype=np.int64)}
        def tf(p, kw=kw):
            rm, rv = p["o.running_mean"].detach().clone(), p["o.running_var"].detach().clone()
            y = F.batch_norm(p["a"], rm, rv, p["o.weight"], p["o.bias"], training=True, **kw)
            AFTER[name] = {"o.running_mean": rm.numpy(), "o.running_var": rv.numpy(),
                           "o.num_batches_tracked": np.array(4, dtype=np.int64)}
            return y
        c[name] = (ps, dsl, tf)
    bn("batch_norm2d", (4, 3, 5, 6), "batch_norm(a)")
    bn("batch_norm1d", (7, 5), "batch_norm(a, momentum=0.3)", momentum=0.3)
    bn("batch_norm1d_3d", (3, 4, 5), "batch_norm(a, eps=0.01)", eps=0.01)
    bn("batch_norm2d_relu", (2, 2, 3, 3), "batch_norm(a, 0.5, 1e-3, act=relu)", momentum=0.5, eps=1e-3)
    bn("batch_norm2d_32ch", (3, 32, 3, 5), "batch_norm(a)")
    bn("batch_norm2d_16ch_relu", (2, 16, 3, 3), "batch_norm(a, act=relu)")
    # Dropout: the masks of step 1 at seed 0 on rank 0 (the run below),
    # rebuilt from dtc's hash (dropout_mask.py); the second dropout has salt 1.
    seed1 = step_seed(0, 1, 0)
    def dropped(t, salt, p):
        m = torch.tensor(keep_mask(seed1, salt, t.numel(), p).reshape(tuple(t.shape)))
        return t * m / (1 - p) if p < 1 else t * 0
    c["dropout"] = ({"a": rnd((4, 6))}, "dropout(a, 0.3)", lambda p: dropped(p["a"], 0, 0.3))
    c["dropout_twice"] = ({"a": rnd((5, 7))}, "dropout(dropout(a), p=0.25)",
                          lambda p: dropped(dropped(p["a"], 0, 0.5), 1, 0.25))
    c["dropout_all"] = ({"a": rnd((3, 3))}, "dropout(a, 1)", lambda p: dropped(p["a"], 0, 1.0))
    return c

def main():
    dtc, work = sys.argv[1], sys.argv[2]
    only = sys.argv[3] if len(sys.argv) > 3 else ""  # the cases whose name contains it
    failures = 0
    for name, (params, expr, tf, *extra) in cases().items():
        if only not in name:
            continue
        tp = {k: torch.tensor(v, requires_grad=not k.endswith(BUFFER)) for k, v in params.items()}
        out = tf(tp)
        if name.endswith("_relu"):
            out = F.relu(out)
        K = rnd(tuple(out.shape))
        params = dict(params, K=K)
        tp["K"] = torch.tensor(K, requires_grad=True)
        loss = (out * tp["K"]).sum()
        loss.backward()
        decls = "\n".join(f"param {k}: f32[{', '.join(map(str, v.shape)) or ''}]"
                          for k, v in params.items() if "." not in k)  # a layer's
        pre, _, last = expr.rpartition("\n")  # statements before o's value
        src = f"""input x: f32[B, 2]
label y: f32[B, 1]
{decls}
{pre}
o = {last}
loss = sum(o * K)
train {{
  optimizer = sgd(lr=1.0)
}}
"""
        d = os.path.join(work, name)
        exe = compile_model(dtc, src, d, name, *extra)
        save_safetensors(os.path.join(d, "init.safetensors"), params)
        run([exe, "--init", os.path.join(d, "init.safetensors"), "--data", "synthetic:4,0",
             "--batch", "4", "--max-steps", "1", "--eval", "off", "--quiet", "--threads", "1",
             "--metrics", os.path.join(d, "m.csv"), "--save", os.path.join(d, "out.safetensors")])
        dtc_loss = read_losses(os.path.join(d, "m.csv"))[0]
        saved = load_safetensors(os.path.join(d, "out.safetensors"))
        errs = {"loss": abs(dtc_loss - loss.item()) / (1 + abs(loss.item()))}
        for k, v in params.items():
            if k.endswith(BUFFER):               # updated by the step, as torch does
                want = AFTER[name][k]
                errs[k] = float(np.abs(saved[k] - want).max()) / (1 + float(np.abs(want).max()))
                continue
            g_dtc = v - saved[k]                 # one SGD step with lr 1
            g_ref = tp[k].grad.numpy()
            errs["d" + k] = float(np.abs(g_dtc - g_ref).max()) / (1 + float(np.abs(g_ref).max()))
        worst = max(errs.values())
        ok = worst <= 1e-4
        failures += not ok
        print(f"{name:22s} {'ok  ' if ok else 'FAIL'} " + " ".join(f"{k} {v:.1e}" for k, v in errs.items()))
    ran = sum(only in n for n in cases())
    print(f"{ran - failures} passed, {failures} failed")
    return 1 if failures else 0

if __name__ == "__main__":
    sys.exit(main())
