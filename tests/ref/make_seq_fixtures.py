#!/usr/bin/python3
"""
Reference fixtures of the sequence layers (issue 14) for tests/unit/test_ref.c,
in the format make_fixtures.py describes (x, y, dy, dx, the parameters and
grad/<param>; metadata layer, input_shape, mode, steps, description): conv1d
(valid, same, causal, strides, dilation), max_pooling1d, average_pooling1d,
the global poolings (1-D and 2-D, keepdims) and embedding. Kept apart from
make_fixtures.py so that the layer helpers' cases do not collide.

Run (needs python3-torch and python3-numpy):

    /usr/bin/python3 tests/ref/make_seq_fixtures.py              # all cases into tests/ref/
    /usr/bin/python3 tests/ref/make_seq_fixtures.py -o DIR CASE  # some cases elsewhere
    /usr/bin/python3 tests/ref/make_seq_fixtures.py --list

Semantics are Keras': "same" puts the odd padding after the sequence,
"causal" pads (k - 1) * dilation zeros before it only, max pooling pads
with -inf and average pooling divides by the real elements. Each torch
forward is checked against a plain numpy loop before a file is written.
Embedding's x holds token indices as floats (dtrain's input is float); its
dx is zeros (indices have no gradient; dtrain's embedding writes zeros).
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_fixtures import ACTS, f32, window, write_cases, yaml_layer  # noqa: E402


def one(v):
    return v[0] if isinstance(v, (list, tuple)) else v


def conv_pads(n, a):
    k, s, d = one(a["kernel_size"]), one(a.get("strides", 1)), one(a.get("dilation_rate", 1))
    pad = a.get("padding", "valid")
    if pad == "causal":
        return (k - 1) * d, 0
    _, lo, hi = window(n, k, s, d, pad)
    return lo, hi


def conv1d(x, p, a):
    s, d = one(a.get("strides", 1)), one(a.get("dilation_rate", 1))
    lo, hi = conv_pads(x.shape[1], a)
    xc = F.pad(x.permute(0, 2, 1), (lo, hi))
    y = F.conv1d(xc, p["kernel"].permute(2, 1, 0), p.get("bias"), stride=s, dilation=d)
    return ACTS[a.get("activation", "linear")](y).permute(0, 2, 1)


def pool1d(x, a, kind):
    k = one(a.get("pool_size", 2))
    s = one(a.get("strides", a.get("pool_size", 2)))
    _, lo, hi = window(x.shape[1], k, s, 1, a.get("padding", "valid"))
    xc = x.permute(0, 2, 1)
    if kind == "max":
        y = F.max_pool1d(F.pad(xc, (lo, hi), value=-float("inf")), k, s)
    else:
        total = F.avg_pool1d(F.pad(xc, (lo, hi)), k, s) * k
        count = F.avg_pool1d(F.pad(torch.ones_like(xc[:1, :1]), (lo, hi)), k, s) * k
        y = total / count
    return y.permute(0, 2, 1)


def naive_conv1d(x, p, a):
    k, s, d = one(a["kernel_size"]), one(a.get("strides", 1)), one(a.get("dilation_rate", 1))
    n, steps, _ = x.shape
    lo, hi = conv_pads(steps, a)
    out = (steps + lo + hi - (k - 1) * d - 1) // s + 1
    w = p["kernel"]
    y = np.zeros((n, out, w.shape[2]))
    for i in range(out):
        for u in range(k):
            t = i * s - lo + u * d
            if 0 <= t < steps:
                y[:, i, :] += x[:, t, :] @ w[u]
    if "bias" in p:
        y += p["bias"]
    act = a.get("activation", "linear")
    if act == "relu":
        if np.abs(y).min() < 1e-3:
            sys.exit("conv1d relu: a pre-activation is within 1e-3 of zero; change the case")
        return np.maximum(y, 0)
    return np.tanh(y) if act == "tanh" else y


def naive_pool1d(x, a, kind):
    k = one(a.get("pool_size", 2))
    s = one(a.get("strides", a.get("pool_size", 2)))
    n, steps, c = x.shape
    out, lo, _ = window(steps, k, s, 1, a.get("padding", "valid"))
    y = np.zeros((n, out, c))
    for i in range(out):
        t0 = i * s - lo
        win = x[:, max(t0, 0):min(t0 + k, steps), :]
        y[:, i, :] = win.max(axis=1) if kind == "max" else win.mean(axis=1)
    return y


def global_pool(x, kind, keepdims, numpy=False):
    axes = tuple(range(1, x.ndim - 1)) if numpy else tuple(range(1, x.dim() - 1))
    if numpy:
        return x.max(axis=axes, keepdims=keepdims) if kind == "max" else x.mean(axis=axes, keepdims=keepdims)
    if kind == "max":
        return x.amax(dim=axes, keepdim=keepdims)
    return x.mean(dim=axes, keepdim=keepdims)


def case(name, kind, input_shape, args, n=2, desc=""):
    return dict(name=name, kind=kind, args=args, input_shape=input_shape, n=n, desc=desc)


CASES = [
    case("conv1d_valid", "conv1d", (7, 3), {"filters": 4, "kernel_size": 3}, desc="k 3, stride 1, valid"),
    case("conv1d_same_stride2", "conv1d", (8, 2), {"filters": 3, "kernel_size": 4, "strides": 2, "padding": "same"},
         desc="k 4, stride 2, same on 8 steps: padding 1 before, 1 after (Keras/TF)"),
    case("conv1d_same_odd", "conv1d", (6, 2), {"filters": 2, "kernel_size": 4, "padding": "same"},
         desc="k 4, stride 1, same: padding 1 before, 2 after"),
    case("conv1d_causal_dilation2", "conv1d", (9, 2), {"filters": 3, "kernel_size": 3, "padding": "causal",
                                                       "dilation_rate": 2},
         desc="k 3 dilated by 2, causal: 4 zeros before, none after; y[t] sees x[t-4], x[t-2], x[t]"),
    case("conv1d_causal_stride2", "conv1d", (7, 2), {"filters": 2, "kernel_size": 2, "strides": 2,
                                                     "padding": "causal", "use_bias": False},
         desc="k 2, stride 2, causal, no bias"),
    case("conv1d_tanh", "conv1d", (5, 3), {"filters": 2, "kernel_size": [2], "activation": "tanh"},
         desc="kernel_size as a list of one, tanh"),
    case("max_pooling1d_2", "max_pooling1d", (7, 3), {"pool_size": 2}, desc="2, stride 2, valid: the odd step dropped"),
    case("max_pooling1d_3_s1_same", "max_pooling1d", (6, 2), {"pool_size": 3, "strides": 1, "padding": "same"},
         desc="3, stride 1, same: -inf padding, overlapping windows"),
    case("average_pooling1d_3_s2_same", "average_pooling1d", (8, 3), {"pool_size": 3, "strides": 2,
                                                                      "padding": "same"},
         desc="3, stride 2, same: the mean over the real steps only"),
    case("average_pooling1d_2", "average_pooling1d", (6, 2), {}, desc="Keras' defaults: 2, stride 2, valid"),
    case("global_average_pooling1d", "global_average_pooling1d", (5, 3), {}, desc="mean over the steps"),
    case("global_max_pooling1d", "global_max_pooling1d", (6, 3), {}, desc="max over the steps"),
    case("global_max_pooling1d_keepdims", "global_max_pooling1d", (4, 2), {"keepdims": True},
         desc="max over the steps, (1, C) out"),
    case("global_max_pooling2d", "global_max_pooling2d", (3, 4, 2), {}, desc="max over height and width"),
    case("global_average_pooling2d_keepdims", "global_average_pooling2d", (3, 3, 2), {"keepdims": True},
         desc="mean over height and width, (1, 1, C) out"),
    case("embedding", "embedding", (6,), {"input_dim": 5, "output_dim": 3}, n=3,
         desc="18 indices into 5 rows: repeated tokens, whose gradients add up in their row"),
    case("embedding_2d", "embedding", (2, 3), {"input_dim": 7, "output_dim": 4}, n=2,
         desc="(2, 3) indices per sample to (2, 3, 4)"),
]


def run_case(c, seed):
    rng = np.random.default_rng(seed)
    kind, a, n, shape = c["kind"], c["args"], c["n"], tuple(c["input_shape"])
    params = {}
    if kind == "embedding":
        xs = f32(rng.integers(0, a["input_dim"], (n,) + shape))
        params["embeddings"] = f32(0.5 * rng.standard_normal((a["input_dim"], a["output_dim"])))
    else:
        xs = f32(rng.standard_normal((n,) + shape))
    if kind == "conv1d":
        k = one(a["kernel_size"])
        params["kernel"] = f32(0.5 * rng.standard_normal((k, shape[-1], a["filters"])))
        if a.get("use_bias", True):
            params["bias"] = f32(0.5 * rng.standard_normal(a["filters"]))
    tp = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in params.items()}
    x = torch.tensor(xs, dtype=torch.float64, requires_grad=kind != "embedding")
    if kind == "conv1d":
        y = conv1d(x, tp, a)
        want = naive_conv1d(xs, params, a)
    elif kind in ("max_pooling1d", "average_pooling1d"):
        y = pool1d(x, a, kind[:3])
        want = naive_pool1d(xs, a, kind[:3])
    elif kind.startswith("global_"):
        pk = "max" if "_max_" in kind else "avg"
        y = global_pool(x, pk, a.get("keepdims", False))
        want = global_pool(xs, pk, a.get("keepdims", False), numpy=True)
    else:
        y = F.embedding(x.long(), tp["embeddings"])
        want = params["embeddings"][xs.astype(np.int64)]
    err = np.max(np.abs(want - y.detach().numpy()))
    if want.shape != tuple(y.shape) or err > 1e-10:
        sys.exit(f"{c['name']}: torch and the numpy loop disagree (shapes {tuple(y.shape)} {want.shape}, error {err})")
    dy = f32(rng.standard_normal(y.shape))
    y.backward(torch.tensor(dy))
    dx = np.zeros_like(xs) if kind == "embedding" else x.grad.numpy()
    out = [("x", xs), ("dy", dy), ("y", y.detach().numpy()), ("dx", dx)]
    out += [(k, v) for k, v in params.items()]
    out += [("grad/" + k, tp[k].grad.numpy()) for k in params]
    meta = {
        "layer": yaml_layer(kind, a),
        "input_shape": ",".join(str(d) for d in shape),
        "mode": "training",
        "steps": "1",
        "description": c["desc"],
        "generator": "tests/ref/make_seq_fixtures.py (PyTorch, float64)",
    }
    return out, meta


if __name__ == "__main__":
    write_cases("Writes the sequence layers' reference fixtures of tests/unit/test_ref.c.", CASES, run_case, "layer")
