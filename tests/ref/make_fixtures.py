#!/usr/bin/python3
"""
Reference fixtures for tests/unit/test_ref.c: one small safetensors file per
case, computed with PyTorch in float64 and stored as float32, so the C tests
compare dtrain's layers against an independent implementation without
needing PyTorch at run time.

Run (from anywhere; needs python3-torch and python3-numpy, nothing else):

    /usr/bin/python3 tests/ref/make_fixtures.py              # all cases into tests/ref/
    /usr/bin/python3 tests/ref/make_fixtures.py -o DIR CASE  # some cases elsewhere
    /usr/bin/python3 tests/ref/make_fixtures.py --list

The output is deterministic (fixed seeds, float64 arithmetic), so rerunning
it leaves the checked-in files unchanged unless a case was edited.

One file per case, tests/ref/<case>.safetensors, holding float32 tensors:

    x              (N, *input_shape), channels last (NHWC) as dtrain and Keras;
                   (steps * N, ...) when the case runs several steps
    y              the layer's output for x (steps * N rows for several steps)
    dy             the upstream gradient (absent for forward-only cases)
    dx             d(sum(y * dy)) / dx
    <param>        the layer's parameters by Keras name, in Keras layout:
                   kernel (kh, kw, in, out) or (in, out), bias, gamma, beta,
                   moving_mean, moving_variance
    grad/<param>   d(sum(y * dy)) / d<param> for the trainable ones
    expect/<param> a parameter's value after the run (batch norm's moving
                   statistics)

and string metadata: layer (the YAML of the layer as in a model file),
input_shape ("7,7,3", per sample), mode ("training" or "inference"), steps
(forward passes over consecutive batches of x), description.

Semantics are Keras', computed here by hand where PyTorch differs: "same"
padding puts the odd pixel at the bottom/right (so x is padded explicitly
before a valid torch op), max pooling pads with -inf, average pooling
divides by the number of real (unpadded) elements, batch normalization
updates moving = momentum * moving + (1 - momentum) * batch with the biased
batch variance (torch's momentum is 1 - Keras' and its running_var is
unbiased, so neither is used). Every forward is also checked against a plain
numpy loop before a file is written.
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_io  # noqa: E402
from fixture_io import HERE, f32, save_safetensors, yaml_layer, yaml_value  # noqa: E402,F401


# ---- Keras' geometry --------------------------------------------------------

def pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def window(n, k, stride, dil, padding):
    """Output size and (before, after) padding of one spatial dimension, as Keras/TF."""
    eff = (k - 1) * dil + 1
    if padding == "valid":
        return (n - eff) // stride + 1, 0, 0
    out = -(-n // stride)
    total = max((out - 1) * stride + eff - n, 0)
    return out, total // 2, total - total // 2


# ---- the layers in torch (float64, NHWC in and out) -------------------------

ACTS = {"linear": lambda t: t, "relu": torch.relu, "tanh": torch.tanh, "sigmoid": torch.sigmoid}


def conv2d(x, p, a):
    kh, kw = pair(a["kernel_size"])
    sh, sw = pair(a.get("strides", 1))
    dh, dw = pair(a.get("dilation_rate", 1))
    pad = a.get("padding", "valid")
    _, top, bottom = window(x.shape[1], kh, sh, dh, pad)
    _, left, right = window(x.shape[2], kw, sw, dw, pad)
    xc = F.pad(x.permute(0, 3, 1, 2), (left, right, top, bottom))
    w = p["kernel"].permute(3, 2, 0, 1)  # (kh, kw, in, out) -> (out, in, kh, kw)
    y = F.conv2d(xc, w, p.get("bias"), stride=(sh, sw), dilation=(dh, dw))
    return ACTS[a.get("activation", "linear")](y).permute(0, 2, 3, 1)


def pool2d(x, a, kind):
    kh, kw = pair(a.get("pool_size", 2))
    sh, sw = pair(a.get("strides", a.get("pool_size", 2)))
    pad = a.get("padding", "valid")
    _, top, bottom = window(x.shape[1], kh, sh, 1, pad)
    _, left, right = window(x.shape[2], kw, sw, 1, pad)
    xc = x.permute(0, 3, 1, 2)
    if kind == "max":
        xc = F.pad(xc, (left, right, top, bottom), value=-float("inf"))
        y = F.max_pool2d(xc, (kh, kw), (sh, sw))
    else:
        xc = F.pad(xc, (left, right, top, bottom))
        ones = F.pad(torch.ones_like(x[:1, :, :, :1]).permute(0, 3, 1, 2), (left, right, top, bottom))
        total = F.avg_pool2d(xc, (kh, kw), (sh, sw), divisor_override=1)
        count = F.avg_pool2d(ones, (kh, kw), (sh, sw), divisor_override=1)
        y = total / count
    return y.permute(0, 2, 3, 1)


def batchnorm(x, p, a, training, state):
    """Keras' BatchNormalization over the last axis; state gets the new moving statistics."""
    eps = a.get("epsilon", 1e-3)
    m = a.get("momentum", 0.99)
    axes = tuple(range(x.dim() - 1))
    if training:
        mean = x.mean(dim=axes)
        var = ((x - mean) ** 2).mean(dim=axes)  # biased, as Keras
        with torch.no_grad():
            state["moving_mean"] = m * state["moving_mean"] + (1 - m) * mean
            state["moving_variance"] = m * state["moving_variance"] + (1 - m) * var
    else:
        mean, var = state["moving_mean"], state["moving_variance"]
    y = (x - mean) / torch.sqrt(var + eps)
    if a.get("scale", True):
        y = y * p["gamma"]
    if a.get("center", True):
        y = y + p["beta"]
    return y


# ---- the same forwards as plain loops, to check the torch versions ----------

def naive_conv2d(x, p, a):
    kh, kw = pair(a["kernel_size"])
    sh, sw = pair(a.get("strides", 1))
    dh, dw = pair(a.get("dilation_rate", 1))
    pad = a.get("padding", "valid")
    n, h, w, _ = x.shape
    oh, top, _ = window(h, kh, sh, dh, pad)
    ow, left, _ = window(w, kw, sw, dw, pad)
    k = p["kernel"]
    y = np.zeros((n, oh, ow, k.shape[3]))
    for i in range(oh):
        for j in range(ow):
            for u in range(kh):
                for v in range(kw):
                    r, c = i * sh - top + u * dh, j * sw - left + v * dw
                    if 0 <= r < h and 0 <= c < w:
                        y[:, i, j, :] += x[:, r, c, :] @ k[u, v]
    if "bias" in p:
        y += p["bias"]
    if a.get("activation", "linear") != "relu":
        return y
    # A pre-activation within float32 noise of 0 could take relu's other branch in dtrain.
    if np.abs(y).min() < 1e-3:
        sys.exit("conv2d relu: a pre-activation is within 1e-3 of zero; change the case")
    return np.maximum(y, 0)


def naive_pool2d(x, a, kind):
    kh, kw = pair(a.get("pool_size", 2))
    sh, sw = pair(a.get("strides", a.get("pool_size", 2)))
    pad = a.get("padding", "valid")
    n, h, w, c = x.shape
    oh, top, _ = window(h, kh, sh, 1, pad)
    ow, left, _ = window(w, kw, sw, 1, pad)
    y = np.zeros((n, oh, ow, c))
    for i in range(oh):
        for j in range(ow):
            r0, c0 = i * sh - top, j * sw - left
            win = x[:, max(r0, 0):min(r0 + kh, h), max(c0, 0):min(c0 + kw, w), :]
            y[:, i, j, :] = win.max(axis=(1, 2)) if kind == "max" else win.mean(axis=(1, 2))
    return y



# ---- recurrent layers (rnn): Keras' layout and gate order, torch's modules -

def rnn_gates(kind):
    return {"simple_rnn": 1, "lstm": 4, "gru": 3}[kind]


def rnn_torch(x, p, a, kind):
    """Keras' SimpleRNN/LSTM/GRU on torch: nn.RNN, nn.LSTM (gates i, f, g, o =
    Keras' i, f, c, o) and nn.GRU (reset_after; gates r, z, n against Keras'
    z, r, h) from Keras' kernels, so autograd reaches Keras' parameters;
    GRU reset_after: false by hand. go_backwards reads x reversed in time,
    and returns the steps in that order, as Keras."""
    units = a["units"]
    if a.get("go_backwards", False):
        x = torch.flip(x, dims=[1])
    n, steps, cin = x.shape
    k, r = p["kernel"], p["recurrent_kernel"]
    b = p.get("bias")
    reset_after = a.get("reset_after", True)
    if kind == "gru" and not reset_after:
        h = torch.zeros(n, units, dtype=torch.float64)
        bz = b if b is not None else torch.zeros(3 * units, dtype=torch.float64)
        outs = []
        for t in range(steps):
            xw = x[:, t] @ k + bz
            hu = h @ r[:, :2 * units]
            z = torch.sigmoid(xw[:, :units] + hu[:, :units])
            rr = torch.sigmoid(xw[:, units:2 * units] + hu[:, units:])
            hh = torch.tanh(xw[:, 2 * units:] + (rr * h) @ r[:, 2 * units:])
            h = z * h + (1 - z) * hh
            outs.append(h)
        seq = torch.stack(outs, dim=1)
    else:
        if kind == "lstm":
            mod = torch.nn.LSTM(cin, units, batch_first=True, bias=b is not None).double()
            wi, wh = k.t(), r.t()
            bi, bh = b, None
        elif kind == "simple_rnn":
            mod = torch.nn.RNN(cin, units, batch_first=True, bias=b is not None,
                               nonlinearity=a.get("activation", "tanh")).double()
            wi, wh = k.t(), r.t()
            bi, bh = b, None
        else:  # torch's gates r, z, n from Keras' z, r, h
            mod = torch.nn.GRU(cin, units, batch_first=True, bias=b is not None).double()
            def rz(m):
                return torch.cat([m[..., units:2 * units], m[..., :units], m[..., 2 * units:]], dim=-1)
            wi, wh = rz(k).t(), rz(r).t()
            bi, bh = (rz(b[0]), rz(b[1])) if b is not None else (None, None)
        # the module's parameters replaced by functions of Keras' ones
        del mod.weight_ih_l0, mod.weight_hh_l0
        mod.weight_ih_l0, mod.weight_hh_l0 = wi, wh
        if b is not None:
            del mod.bias_ih_l0, mod.bias_hh_l0
            mod.bias_ih_l0 = bi
            mod.bias_hh_l0 = bh if bh is not None else torch.zeros_like(bi)
        mod._flat_weights = [getattr(mod, w) for w in mod._flat_weights_names]
        seq, _ = mod(x)
    if a.get("return_sequences", False):
        return seq
    return seq[:, -1]


def bidir_parts(a):
    """The wrapped layer of a bidirectional case: its kind, arguments, and the backward copy's."""
    (kind, inner), = a["layer"].items()
    back = dict(inner, go_backwards=not inner.get("go_backwards", False))
    return kind, inner, back


def bidir_merge(f, b, a, inner, flip, cat):
    """Keras' Bidirectional: the backward copy's steps back in input order, then the merge."""
    if inner.get("return_sequences", False):
        b = flip(b)
    mode = a.get("merge_mode", "concat")
    if mode == "concat":
        return cat([f, b])
    return {"sum": f + b, "mul": f * b, "ave": (f + b) / 2}[mode]


def bidir_torch(x, p, a):
    kind, inner, back = bidir_parts(a)
    name = inner.get("name", kind)
    pf = {k.split("/", 1)[1]: v for k, v in p.items() if k.startswith("forward_")}
    pb = {k.split("/", 1)[1]: v for k, v in p.items() if k.startswith("backward_")}
    return bidir_merge(rnn_torch(x, pf, inner, kind), rnn_torch(x, pb, back, kind), a, inner,
                       lambda t: torch.flip(t, dims=[1]), lambda ts: torch.cat(ts, dim=-1))


def bidir_naive(x, p, a):
    kind, inner, back = bidir_parts(a)
    pf = {k.split("/", 1)[1]: v for k, v in p.items() if k.startswith("forward_")}
    pb = {k.split("/", 1)[1]: v for k, v in p.items() if k.startswith("backward_")}
    return bidir_merge(naive_rnn(x, pf, inner, kind), naive_rnn(x, pb, back, kind), a, inner,
                       lambda t: t[:, ::-1], lambda ts: np.concatenate(ts, axis=-1))


def naive_rnn(x, p, a, kind):
    """The same cells as plain numpy loops."""
    units = a["units"]
    if a.get("go_backwards", False):
        x = x[:, ::-1]
    n, steps, _ = x.shape
    k, r = p["kernel"], p["recurrent_kernel"]
    g = rnn_gates(kind)
    b = p.get("bias", np.zeros((2, g * units) if kind == "gru" and a.get("reset_after", True) else g * units))
    sig = lambda v: 1 / (1 + np.exp(-v))
    h = np.zeros((n, units))
    c = np.zeros((n, units))
    outs = []
    for t in range(steps):
        if kind == "simple_rnn":
            z = x[:, t] @ k + h @ r + b
            h = np.tanh(z) if a.get("activation", "tanh") == "tanh" else np.maximum(z, 0)
        elif kind == "lstm":
            z = x[:, t] @ k + h @ r + b
            i, f, cc, o = (z[:, j * units:(j + 1) * units] for j in range(4))
            c = sig(f) * c + sig(i) * np.tanh(cc)
            h = sig(o) * np.tanh(c)
        elif a.get("reset_after", True):
            xw = x[:, t] @ k + b[0]
            hu = h @ r + b[1]
            z = sig(xw[:, :units] + hu[:, :units])
            rr = sig(xw[:, units:2 * units] + hu[:, units:2 * units])
            hh = np.tanh(xw[:, 2 * units:] + rr * hu[:, 2 * units:])
            h = z * h + (1 - z) * hh
        else:
            xw = x[:, t] @ k + b
            z = sig(xw[:, :units] + h @ r[:, :units])
            rr = sig(xw[:, units:2 * units] + h @ r[:, units:2 * units])
            hh = np.tanh(xw[:, 2 * units:] + (rr * h) @ r[:, 2 * units:])
            h = z * h + (1 - z) * hh
        outs.append(h)
    seq = np.stack(outs, axis=1)
    return seq if a.get("return_sequences", False) else seq[:, -1]


# ---- cases --------------------------------------------------------------------

def conv_case(name, input_shape, args, n=2, desc=""):
    return dict(name=name, kind="conv2d", args=args, input_shape=input_shape, n=n, desc=desc)


def pool_case(name, kind, input_shape, args, n=2, desc=""):
    return dict(name=name, kind=kind, args=args, input_shape=input_shape, n=n, desc=desc)


def rnn_case(name, kind, input_shape, args, n=3, desc=""):
    return dict(name=name, kind=kind, args=args, input_shape=input_shape, n=n, desc=desc)


def bn_case(name, input_shape, args, n, mode="training", steps=1, desc=""):
    return dict(name=name, kind="batch_normalization", args=args, input_shape=input_shape, n=n,
                mode=mode, steps=steps, desc=desc)


CASES = [
    dict(name="dense", kind="dense", args={"units": 3}, input_shape=(5,), n=4,
         desc="dense, linear: proves the harness on a layer that predates the fixtures"),
    dict(name="dense_tanh", kind="dense", args={"units": 4, "activation": "tanh"}, input_shape=(6,), n=3,
         desc="dense with tanh"),
    conv_case("conv2d_valid", (6, 6, 3), {"filters": 4, "kernel_size": 3},
              desc="3x3, stride 1, valid"),
    conv_case("conv2d_same_stride2", (8, 6, 3), {"filters": 4, "kernel_size": 3, "strides": 2, "padding": "same"},
              desc="3x3, stride 2, same on 8x6: padding 0 top/left, 1 bottom/right (Keras/TF)"),
    conv_case("conv2d_same_stride2_odd", (7, 7, 2), {"filters": 3, "kernel_size": 2, "strides": 2, "padding": "same"},
              desc="2x2, stride 2, same on 7x7: padding 0 top/left, 1 bottom/right"),
    conv_case("conv2d_same_k4", (5, 6, 2), {"filters": 3, "kernel_size": 4, "padding": "same"},
              desc="4x4, stride 1, same: padding 1 top/left, 2 bottom/right"),
    conv_case("conv2d_dilation2", (7, 7, 2), {"filters": 3, "kernel_size": 3, "dilation_rate": 2},
              desc="3x3 dilated by 2 (5x5 reach), valid"),
    conv_case("conv2d_dilation2_same", (6, 5, 2), {"filters": 3, "kernel_size": 3, "padding": "same",
                                                   "dilation_rate": 2},
              desc="3x3 dilated by 2, same"),
    conv_case("conv2d_1x5", (4, 7, 3), {"filters": 4, "kernel_size": [1, 5]},
              desc="1x5 kernel, valid"),
    conv_case("conv2d_1x5_same_strides", (4, 8, 3), {"filters": 2, "kernel_size": [1, 5], "strides": [1, 2],
                                                     "padding": "same"},
              desc="1x5 kernel, strides [1, 2], same: padding 1 left, 2 right"),
    conv_case("conv2d_no_bias", (5, 5, 3), {"filters": 4, "kernel_size": 3, "use_bias": False},
              desc="3x3, valid, use_bias: false"),
    conv_case("conv2d_relu", (6, 6, 3), {"filters": 4, "kernel_size": 3, "padding": "same", "activation": "relu"},
              desc="3x3, same, relu"),
    pool_case("max_pooling2d_2x2", "max_pooling2d", (6, 6, 3), {"pool_size": 2},
              desc="2x2, stride 2, valid"),
    pool_case("max_pooling2d_3x3_s2_same", "max_pooling2d", (8, 7, 3),
              {"pool_size": 3, "strides": 2, "padding": "same"},
              desc="3x3, stride 2, same on 8x7: padding 0 top, 1 bottom, 1 left, 1 right; -inf padding"),
    pool_case("max_pooling2d_3x3_s1_same", "max_pooling2d", (5, 5, 2),
              {"pool_size": 3, "strides": 1, "padding": "same"},
              desc="3x3, stride 1, same: overlapping windows, one element the max of several"),
    pool_case("average_pooling2d_valid", "average_pooling2d", (7, 7, 3), {"pool_size": 3, "strides": 2},
              desc="3x3, stride 2, valid: overlapping windows"),
    pool_case("average_pooling2d_same", "average_pooling2d", (8, 7, 3),
              {"pool_size": 3, "strides": 2, "padding": "same"},
              desc="3x3, stride 2, same: the mean over the real elements only"),
    pool_case("average_pooling2d_2x2", "average_pooling2d", (6, 6, 2), {"pool_size": 2},
              desc="2x2, stride 2, valid"),
    pool_case("global_average_pooling2d", "global_average_pooling2d", (4, 5, 3), {},
              desc="mean over height and width"),
    dict(name="reshape", kind="reshape", args={"target_shape": [3, -1, 2]}, input_shape=(4, 6), n=2,
         desc="(4, 6) to (3, 4, 2), the -1 inferred: row-major order as Keras"),
    bn_case("batch_normalization_nhwc", (3, 3, 5), {}, n=4,
            desc="training on (N, H, W, C), Keras defaults; expect/ holds the moving statistics after it"),
    bn_case("batch_normalization_nc", (5,), {}, n=6,
            desc="training on (N, C), Keras defaults"),
    bn_case("batch_normalization_no_center_scale", (2, 2, 3), {"center": False, "scale": False}, n=4,
            desc="training without gamma and beta"),
    bn_case("batch_normalization_inference", (2, 3, 4), {}, n=3, mode="inference",
            desc="inference: normalizes with the given moving statistics and leaves them as they are"),
    bn_case("batch_normalization_moving", (2, 2, 3), {"momentum": 0.9, "epsilon": 0.01}, n=4, steps=3,
            desc="three training steps on different batches: y of each and the moving statistics after them"),
    rnn_case("lstm", "lstm", (5, 3), {"units": 4},
             desc="LSTM, Keras defaults: the last state; torch's nn.LSTM (gates i, f, g, o)"),
    rnn_case("lstm_sequences", "lstm", (4, 3), {"units": 3, "return_sequences": True},
             desc="LSTM returning every step"),
    rnn_case("lstm_backwards", "lstm", (5, 2), {"units": 3, "go_backwards": True, "return_sequences": True},
             desc="LSTM go_backwards: x reversed in time, the steps returned in that order (Keras)"),
    rnn_case("lstm_no_bias", "lstm", (4, 3), {"units": 3, "use_bias": False},
             desc="LSTM without bias"),
    rnn_case("gru", "gru", (5, 3), {"units": 4},
             desc="GRU, reset_after (Keras 3's default): torch's nn.GRU, bias (2, 3*units)"),
    rnn_case("gru_sequences_backwards", "gru", (4, 3), {"units": 3, "return_sequences": True,
                                                         "go_backwards": True},
             desc="GRU reset_after, every step, go_backwards"),
    rnn_case("gru_reset_before", "gru", (5, 3), {"units": 4, "reset_after": False},
             desc="GRU reset_after: false, by hand (the reset gate before the recurrent product)"),
    rnn_case("gru_reset_before_sequences", "gru", (4, 2), {"units": 3, "reset_after": False,
                                                            "return_sequences": True, "go_backwards": True},
             desc="GRU reset_after: false, every step, go_backwards"),
    rnn_case("bidirectional_lstm", "bidirectional", (5, 3), {"layer": {"lstm": {"units": 3}}},
             desc="Bidirectional(LSTM), concat of the last states"),
    rnn_case("bidirectional_lstm_sequences", "bidirectional", (4, 3),
             {"layer": {"lstm": {"units": 3, "return_sequences": True}}},
             desc="Bidirectional(LSTM) over every step: the backward copy's steps back in input order"),
    rnn_case("bidirectional_gru_sum", "bidirectional", (4, 2),
             {"layer": {"gru": {"units": 3, "return_sequences": True}}, "merge_mode": "sum"},
             desc="Bidirectional(GRU), every step, merge_mode sum"),
    rnn_case("bidirectional_gru_backwards_mul", "bidirectional", (4, 3),
             {"layer": {"gru": {"units": 2, "reset_after": False, "go_backwards": True,
                                "return_sequences": True}}, "merge_mode": "mul"},
             desc="Bidirectional(GRU reset_after false, go_backwards): the copies swap directions; mul"),
    rnn_case("bidirectional_simple_rnn_ave", "bidirectional", (4, 3),
             {"layer": {"simple_rnn": {"units": 3, "name": "rnn"}}, "merge_mode": "ave"},
             desc="Bidirectional(SimpleRNN named rnn: forward_rnn/..., backward_rnn/...), ave"),
    rnn_case("simple_rnn", "simple_rnn", (5, 3), {"units": 4},
             desc="SimpleRNN, tanh: torch's nn.RNN"),
    rnn_case("simple_rnn_relu_sequences", "simple_rnn", (4, 3), {"units": 3, "activation": "relu",
                                                                  "return_sequences": True},
             desc="SimpleRNN, relu, every step"),
]


# ---- modern CNN pieces (issue 14): padding, cropping, upsampling, depthwise,
# separable and transposed convolutions. Each has its torch forward and a plain
# numpy loop; cnn_params makes the parameters in Keras' layout. ----

def sides(v):
    """Keras' ZeroPadding2D/Cropping2D argument: ((top, bottom), (left, right))."""
    if isinstance(v, int):
        return (v, v), (v, v)
    return tuple(pair(e) for e in v)


def upsample_src(o, s, n, mode):
    """Source (lo, hi, t) of output o along an axis upsampled by s: tf.image.resize's half-pixel rule."""
    if mode == "nearest":
        return o // s, o // s, 0.0
    src = (o + 0.5) / s - 0.5
    f = int(np.floor(src))
    return min(max(f, 0), n - 1), min(max(f + 1, 0), n - 1), src - f


M64 = (1 << 64) - 1
M32 = (1 << 32) - 1
TEST_REF_KEY = 0x5eed  # the step key test_ref.c runs a fixture's one-layer model with


def splitmix64(x):
    x = (x + 0x9e3779b97f4a7c15) & M64
    z = x
    z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & M64
    z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & M64
    return x, z ^ (z >> 31)


def hash64(a, b):
    """core/rng.c's dt_hash64."""
    x = a ^ ((b * 0xd1342543de82ef95) & M64)
    x, _ = splitmix64(x)
    _, z = splitmix64(x)
    return z


def hash_uniform(key, counter):
    """core/rng.h's dt_hash_uniform: a float32 in [0, 1)."""
    x = (counter ^ key) & M32
    x ^= x >> 16
    x = (x * 0x7feb352d) & M32
    x ^= x >> 15
    x = (x * 0x846ca68b) & M32
    x ^= x >> 16
    x ^= key >> 32
    x = (x * 0x9e3779b1) & M32
    x ^= x >> 16
    x = (x * 0x7feb352d) & M32
    x ^= x >> 15
    return np.float32(x >> 8) * np.float32(1.0 / 16777216.0)


def spatial_mask(n, c, rate, layer=0, first_row=0):
    """The (n, c) mask of spatial dropout: dt_op_dropout's draw for element row * c + ch of
    the (global batch, c) tensor, keyed by dt_hash64(step key, layer index)."""
    key = hash64(TEST_REF_KEY, layer)
    keep = np.float32(1) / (np.float32(1) - np.float32(rate))
    m = np.zeros((n, c))
    for r in range(n):
        for ch in range(c):
            m[r, ch] = keep if hash_uniform(key, (first_row + r) * c + ch) >= np.float32(rate) else 0
    return m


def cnn_params(kind, a, shape, rng):
    cin = shape[-1]
    p = {}
    if kind in ("depthwise_conv2d", "separable_conv2d"):
        m = a.get("depth_multiplier", 1)
        name = "kernel" if kind == "depthwise_conv2d" else "depthwise_kernel"
        p[name] = (f32(0.5 * rng.standard_normal(pair(a["kernel_size"]) + (cin, m))), True)
        units = cin * m
        if kind == "separable_conv2d":
            units = a["filters"]
            p["pointwise_kernel"] = (f32(0.5 * rng.standard_normal((1, 1, cin * m, units))), True)
        if a.get("use_bias", True):
            p["bias"] = (f32(0.5 * rng.standard_normal(units)), True)
    if kind == "conv2d_transpose":
        f = a["filters"]
        p["kernel"] = (f32(0.5 * rng.standard_normal(pair(a["kernel_size"]) + (f, cin))), True)
        if a.get("use_bias", True):
            p["bias"] = (f32(0.5 * rng.standard_normal(f)), True)
    return p


def transpose_window(n, k, s, d, padding, op):
    """Keras' Conv2DTranspose on one axis: (output size, cut before, cut after) of the full
    (n - 1) * s + span result; the cut after is negative where outputs lie past it."""
    span = (k - 1) * d + 1
    full = (n - 1) * s + span
    if padding == "valid":
        out = full + op if op is not None else (n - 1) * s + max(span, s)
        lo = 0
    else:
        if op is not None:
            out = (n - 1) * s + span - 2 * (span // 2) + op
            pad_len = span + span % 2 - 2 + op
        else:
            out = n * s
            pad_len = s + span - 2
        lo = span - 1 - min(pad_len // 2 + pad_len % 2, span - 1)  # Keras' JAX backend's rule
    return out, lo, full - lo - out


def transpose_geometry(x_shape, a):
    kh, kw = pair(a["kernel_size"])
    sh, sw = pair(a.get("strides", 1))
    dh, dw = pair(a.get("dilation_rate", 1))
    op = a.get("output_padding")
    oph, opw = pair(op) if op is not None else (None, None)
    pad = a.get("padding", "valid")
    return (transpose_window(x_shape[1], kh, sh, dh, pad, oph), transpose_window(x_shape[2], kw, sw, dw, pad, opw),
            (kh, kw, sh, sw, dh, dw))


def naive_transpose(xs, k, b, a):
    (oh, top, _), (ow, left, _), (kh, kw, sh, sw, dh, dw) = transpose_geometry(xs.shape, a)
    n, h, w, _ = xs.shape
    y = np.zeros((n, oh, ow, k.shape[2]))
    for i in range(h):
        for j in range(w):
            for u in range(kh):
                for v in range(kw):
                    r, q = i * sh + u * dh - top, j * sw + v * dw - left
                    if 0 <= r < oh and 0 <= q < ow:
                        y[:, r, q, :] += xs[:, i, j, :] @ k[u, v].T
    return y + (b if b is not None else 0)


def depthwise_torch(x, k, a):
    """Keras' depthwise convolution of x (N, C, H, W) padded as Keras; k (kh, kw, C, m)."""
    kh, kw, c, m = k.shape
    sh, sw = pair(a.get("strides", 1))
    dh, dw = pair(a.get("dilation_rate", 1))
    pad = a.get("padding", "valid")
    _, top, bottom = window(x.shape[2], kh, sh, dh, pad)
    _, left, right = window(x.shape[3], kw, sw, dw, pad)
    w = k.permute(2, 3, 0, 1).reshape(c * m, 1, kh, kw)  # output channel c * m + j
    return F.conv2d(F.pad(x, (left, right, top, bottom)), w, stride=(sh, sw), dilation=(dh, dw), groups=c)


def naive_depthwise(xs, k, a):
    kh, kw, c, m = k.shape
    sh, sw = pair(a.get("strides", 1))
    dh, dw = pair(a.get("dilation_rate", 1))
    pad = a.get("padding", "valid")
    n, h, w, _ = xs.shape
    oh, top, _ = window(h, kh, sh, dh, pad)
    ow, left, _ = window(w, kw, sw, dw, pad)
    y = np.zeros((n, oh, ow, c, m))
    for i in range(oh):
        for j in range(ow):
            for u in range(kh):
                for v in range(kw):
                    r, q = i * sh - top + u * dh, j * sw - left + v * dw
                    if 0 <= r < h and 0 <= q < w:
                        y[:, i, j] += xs[:, r, q, :, None] * k[u, v]
    return y.reshape(n, oh, ow, c * m)


def cnn_forward(kind, x, p, a):
    xc = x.permute(0, 3, 1, 2) if x.dim() == 4 else None
    if kind == "zero_padding2d":
        (t, b), (l, r) = sides(a.get("padding", 1))
        return F.pad(xc, (l, r, t, b)).permute(0, 2, 3, 1)
    if kind == "cropping2d":
        (t, b), (l, r) = sides(a.get("cropping", 0))
        return x[:, t:x.shape[1] - b, l:x.shape[2] - r, :]
    if kind == "up_sampling2d":
        sh, sw = pair(a.get("size", 2))
        mode = a.get("interpolation", "nearest")
        if mode == "nearest":
            y = F.interpolate(xc, scale_factor=(sh, sw), mode="nearest")
        else:
            y = F.interpolate(xc, scale_factor=(sh, sw), mode="bilinear", align_corners=False)
        return y.permute(0, 2, 3, 1)
    if kind in ("spatial_dropout1d", "spatial_dropout2d"):
        m = torch.tensor(spatial_mask(x.shape[0], x.shape[-1], a["rate"]), dtype=torch.float64)
        return x * m.reshape((x.shape[0],) + (1,) * (x.dim() - 2) + (x.shape[-1],))
    if kind == "conv2d_transpose":
        (_, top, bottom), (_, left, right), (kh, kw, sh, sw, dh, dw) = transpose_geometry(x.shape, a)
        w = p["kernel"].permute(3, 2, 0, 1)  # (kh, kw, filters, in) -> torch's (in, filters, kh, kw)
        y = F.conv_transpose2d(xc, w, stride=(sh, sw), dilation=(dh, dw))
        y = F.pad(y, (-left, -right, -top, -bottom))  # negative pads crop; a negative cut pads with zeros
        if "bias" in p:
            y = y + p["bias"][None, :, None, None]
        return ACTS[a.get("activation", "linear")](y).permute(0, 2, 3, 1)
    if kind == "depthwise_conv2d":
        y = depthwise_torch(xc, p["kernel"], a)
        if "bias" in p:
            y = y + p["bias"][None, :, None, None]
        return ACTS[a.get("activation", "linear")](y).permute(0, 2, 3, 1)
    if kind == "separable_conv2d":
        y = depthwise_torch(xc, p["depthwise_kernel"], a)
        y = F.conv2d(y, p["pointwise_kernel"][0, 0].T[:, :, None, None], p.get("bias"))
        return ACTS[a.get("activation", "linear")](y).permute(0, 2, 3, 1)
    raise ValueError(kind)


def cnn_naive(kind, xs, p, a):
    n, h, w, c = (xs.shape + (1, 1))[:4]
    if kind == "zero_padding2d":
        (t, b), (l, r) = sides(a.get("padding", 1))
        y = np.zeros((n, h + t + b, w + l + r, c))
        y[:, t:t + h, l:l + w, :] = xs
        return y
    if kind == "cropping2d":
        (t, b), (l, r) = sides(a.get("cropping", 0))
        y = np.zeros((n, h - t - b, w - l - r, c))
        for i in range(y.shape[1]):
            for j in range(y.shape[2]):
                y[:, i, j, :] = xs[:, i + t, j + l, :]
        return y
    if kind == "up_sampling2d":
        sh, sw = pair(a.get("size", 2))
        mode = a.get("interpolation", "nearest")
        y = np.zeros((n, h * sh, w * sw, c))
        for i in range(h * sh):
            r0, r1, u = upsample_src(i, sh, h, mode)
            for j in range(w * sw):
                c0, c1, v = upsample_src(j, sw, w, mode)
                y[:, i, j, :] = ((1 - u) * ((1 - v) * xs[:, r0, c0] + v * xs[:, r0, c1]) +
                                 u * ((1 - v) * xs[:, r1, c0] + v * xs[:, r1, c1]))
        return y
    if kind == "conv2d_transpose":
        y = naive_transpose(xs, p["kernel"], p.get("bias"), a)
        return np.tanh(y) if a.get("activation") == "tanh" else y
    if kind in ("spatial_dropout1d", "spatial_dropout2d"):
        m = spatial_mask(n, xs.shape[-1], a["rate"])
        y = xs.copy()
        for r in range(len(xs)):
            for ch in range(xs.shape[-1]):
                y[r, ..., ch] *= m[r, ch]
        return y
    if kind in ("depthwise_conv2d", "separable_conv2d"):
        y = naive_depthwise(xs, p["kernel" if kind == "depthwise_conv2d" else "depthwise_kernel"], a)
        if kind == "separable_conv2d":
            y = y @ p["pointwise_kernel"][0, 0]
        if "bias" in p:
            y = y + p["bias"]
        act = a.get("activation", "linear")
        if act == "relu" and np.abs(y).min() < 1e-3:
            sys.exit(f"{kind} relu: a pre-activation is within 1e-3 of zero; change the case")
        return {"linear": y, "relu": np.maximum(y, 0), "tanh": np.tanh(y)}[act]
    raise ValueError(kind)


def cnn_case(name, kind, input_shape, args, n=2, desc=""):
    return dict(name=name, kind=kind, args=args, input_shape=input_shape, n=n, desc=desc)


CNN_CASES = [
    cnn_case("zero_padding2d", "zero_padding2d", (3, 4, 2), {},
             desc="Keras' default padding 1 on every side"),
    cnn_case("zero_padding2d_sides", "zero_padding2d", (3, 2, 3), {"padding": [[1, 2], [0, 3]]},
             desc="padding [[top, bottom], [left, right]] = [[1, 2], [0, 3]]"),
    cnn_case("cropping2d_sides", "cropping2d", (6, 5, 2), {"cropping": [[2, 1], [0, 2]]},
             desc="cropping [[2, 1], [0, 2]]: 2 rows off the top, 1 off the bottom, 2 columns off the right"),
    cnn_case("cropping2d_hw", "cropping2d", (5, 6, 3), {"cropping": [1, 2]},
             desc="cropping [1, 2]: 1 row at the top and bottom, 2 columns at each side"),
    cnn_case("up_sampling2d_nearest", "up_sampling2d", (3, 2, 2), {"size": [2, 3]},
             desc="nearest, size [2, 3]: each value repeated"),
    cnn_case("up_sampling2d_bilinear", "up_sampling2d", (3, 4, 2), {"size": 2, "interpolation": "bilinear"},
             desc="bilinear x2: half-pixel centres (tf.image.resize, torch align_corners=False)"),
    cnn_case("up_sampling2d_bilinear_3x2", "up_sampling2d", (4, 3, 2),
             {"size": [3, 2], "interpolation": "bilinear"},
             desc="bilinear [3, 2]: an odd factor, the edge rows clamped"),
    cnn_case("depthwise_conv2d", "depthwise_conv2d", (6, 6, 3), {"kernel_size": 3},
             desc="3x3 depthwise, valid, depth_multiplier 1"),
    cnn_case("depthwise_conv2d_m2_same_stride2", "depthwise_conv2d", (7, 6, 2),
             {"kernel_size": 3, "strides": 2, "padding": "same", "depth_multiplier": 2},
             desc="3x3, stride 2, same (odd padding at the bottom/right), depth_multiplier 2: channel c*2+j"),
    cnn_case("depthwise_conv2d_dilation_tanh", "depthwise_conv2d", (7, 7, 2),
             {"kernel_size": [2, 3], "dilation_rate": 2, "depth_multiplier": 3, "use_bias": False,
              "activation": "tanh"},
             desc="2x3 dilated by 2, depth_multiplier 3, no bias, tanh"),
    cnn_case("separable_conv2d", "separable_conv2d", (6, 5, 3), {"filters": 4, "kernel_size": 3},
             desc="3x3 depthwise then 1x1 to 4 filters, valid"),
    cnn_case("separable_conv2d_m2_same_relu", "separable_conv2d", (6, 6, 2),
             {"filters": 3, "kernel_size": 3, "strides": 2, "padding": "same", "depth_multiplier": 2,
              "activation": "relu"},
             desc="stride 2, same, depth_multiplier 2, relu"),
    cnn_case("spatial_dropout1d", "spatial_dropout1d", (5, 8), {"rate": 0.5}, n=4,
             desc="training, rate 0.5: whole channels of each sample zeroed, the others times 2"),
    cnn_case("spatial_dropout2d", "spatial_dropout2d", (3, 4, 6), {"rate": 0.3}, n=4,
             desc="training, rate 0.3 on (H, W, C): one mask per (sample, channel), kept ones times 1/0.7"),
    cnn_case("conv2d_transpose_valid", "conv2d_transpose", (3, 4, 2), {"filters": 3, "kernel_size": 3},
             desc="3x3, stride 1, valid: (in - 1) + 3 = in + 2 each way"),
    cnn_case("conv2d_transpose_same_stride2", "conv2d_transpose", (3, 4, 2),
             {"filters": 3, "kernel_size": 3, "strides": 2, "padding": "same"},
             desc="3x3, stride 2, same: in * 2, the full 2 * in + 1 cut 0 before and 1 after"),
    cnn_case("conv2d_transpose_k4_same", "conv2d_transpose", (3, 3, 2),
             {"filters": 2, "kernel_size": 4, "strides": 2, "padding": "same", "activation": "tanh"},
             desc="4x4, stride 2, same: cut 1 before and 1 after; tanh"),
    cnn_case("conv2d_transpose_output_padding", "conv2d_transpose", (3, 3, 2),
             {"filters": 2, "kernel_size": 3, "strides": 2, "output_padding": 1},
             desc="3x3, stride 2, valid, output_padding 1: one more row and column that only the bias reaches"),
    cnn_case("conv2d_transpose_same_output_padding", "conv2d_transpose", (3, 4, 2),
             {"filters": 2, "kernel_size": [3, 2], "strides": [2, 3], "padding": "same", "output_padding": [1, 2],
              "use_bias": False},
             desc="3x2 kernel, strides [2, 3], same, output_padding [1, 2], no bias"),
    cnn_case("conv2d_transpose_k1_stride2", "conv2d_transpose", (3, 3, 3),
             {"filters": 2, "kernel_size": 1, "strides": 2},
             desc="1x1, stride 2, valid: output in * 2, past the full 2 * in - 1: a bias-only last row"),
    cnn_case("conv2d_transpose_dilation", "conv2d_transpose", (4, 3, 2),
             {"filters": 2, "kernel_size": 3, "dilation_rate": [2, 1], "padding": "same"},
             desc="3x3 dilated by [2, 1], same: the output the input's size"),
]
CNN_KINDS = {c["kind"] for c in CNN_CASES}


# ---- layer normalization (issue 14, resnet) ---------------------------------

def layer_norm(x, p, a):
    """Keras' LayerNormalization over the last axis, as torch.nn.functional.layer_norm."""
    c = x.shape[-1]
    return F.layer_norm(x, (c,), p.get("gamma"), p.get("beta"), a.get("epsilon", 1e-3))


def ln_case(name, input_shape, args, n, desc=""):
    return dict(name=name, kind="layer_normalization", args=args, input_shape=input_shape, n=n, desc=desc)


CASES += [
    ln_case("layer_normalization_nc", (6,), {}, n=4,
            desc="(N, C), Keras defaults: each sample's own mean and biased variance, epsilon 1e-3"),
    ln_case("layer_normalization_ntc", (3, 5), {"epsilon": 0.01}, n=3,
            desc="(N, T, C): each position normalized over C, epsilon 0.01"),
    ln_case("layer_normalization_nhwc", (2, 3, 4), {}, n=2,
            desc="(N, H, W, C) over the channels"),
    ln_case("layer_normalization_no_center_scale", (2, 7), {"center": False, "scale": False}, n=3,
            desc="without gamma and beta"),
]


def run_case(c, seed):
    rng = np.random.default_rng(seed)
    kind, a = c["kind"], c["args"]
    n, shape, steps = c["n"], tuple(c["input_shape"]), c.get("steps", 1)
    training = c.get("mode", "training") == "training"
    # Batch norm gets inputs off zero and off unit scale, as real activations are.
    xs = rng.standard_normal((steps * n,) + shape)
    if kind in ("batch_normalization", "layer_normalization"):
        xs = 1.5 + 2 * xs
    xs = f32(xs)

    params = {}  # name -> (array, trainable), in the layer's declaration order
    if kind in ("dense", "conv2d"):
        cin = shape[-1]
        units = a["units"] if kind == "dense" else a["filters"]
        kshape = (cin, units) if kind == "dense" else pair(a["kernel_size"]) + (cin, units)
        params["kernel"] = (f32(0.5 * rng.standard_normal(kshape)), True)
        if a.get("use_bias", True):
            params["bias"] = (f32(0.5 * rng.standard_normal(units)), True)
    elif kind in ("lstm", "gru", "simple_rnn", "bidirectional"):
        if kind == "bidirectional":
            rk, ra, _ = bidir_parts(a)
            prefixes = ["forward_" + ra.get("name", rk) + "/", "backward_" + ra.get("name", rk) + "/"]
        else:
            rk, ra, prefixes = kind, a, [""]
        gu = rnn_gates(rk) * ra["units"]
        for pre in prefixes:
            params[pre + "kernel"] = (f32(0.5 * rng.standard_normal((shape[-1], gu))), True)
            params[pre + "recurrent_kernel"] = (f32(0.5 * rng.standard_normal((ra["units"], gu))), True)
            if ra.get("use_bias", True):
                two = rk == "gru" and ra.get("reset_after", True)
                params[pre + "bias"] = (f32(0.5 * rng.standard_normal((2, gu) if two else gu)), True)
    elif kind == "batch_normalization":
        ch = shape[-1]
        if a.get("scale", True):
            params["gamma"] = (f32(rng.uniform(0.5, 1.5, ch)), True)
        if a.get("center", True):
            params["beta"] = (f32(0.5 * rng.standard_normal(ch)), True)
        params["moving_mean"] = (f32(0.5 * rng.standard_normal(ch)), False)
        params["moving_variance"] = (f32(rng.uniform(0.5, 1.5, ch)), False)
    elif kind in CNN_KINDS:
        params.update(cnn_params(kind, a, shape, rng))
    elif kind == "layer_normalization":
        ch = shape[-1]
        if a.get("scale", True):
            params["gamma"] = (f32(rng.uniform(0.5, 1.5, ch)), True)
        if a.get("center", True):
            params["beta"] = (f32(0.5 * rng.standard_normal(ch)), True)

    tp = {k: torch.tensor(v, dtype=torch.float64, requires_grad=tr) for k, (v, tr) in params.items()}
    state = {k: tp[k].detach().clone() for k in ("moving_mean", "moving_variance") if k in tp}

    def forward(x):
        if kind == "dense":
            z = x @ tp["kernel"] + (tp["bias"] if "bias" in tp else 0)
            return ACTS[a.get("activation", "linear")](z)
        if kind == "conv2d":
            return conv2d(x, tp, a)
        if kind in ("max_pooling2d", "average_pooling2d"):
            return pool2d(x, a, kind[:3])
        if kind == "global_average_pooling2d":
            return x.mean(dim=(1, 2))
        if kind == "reshape":
            return x.reshape((x.shape[0],) + tuple(a["target_shape"]))
        if kind in CNN_KINDS:
            return cnn_forward(kind, x, tp, a)
        if kind == "layer_normalization":
            return layer_norm(x, tp, a)
        if kind in ("lstm", "gru", "simple_rnn"):
            return rnn_torch(x, tp, a, kind)
        if kind == "bidirectional":
            return bidir_torch(x, tp, a)
        return batchnorm(x, tp, a, training, state)

    ys, last = [], None
    for s in range(steps):
        x = torch.tensor(xs[s * n:(s + 1) * n], dtype=torch.float64, requires_grad=True)
        y = forward(x)
        ys.append(y)
        last = x
    y = torch.cat(ys)
    check_forward(c, xs, params, y.detach().numpy())

    out = [("x", xs)]
    # Forward-only cases: several steps (only the statistics matter) and inference.
    with_grad = steps == 1 and training
    if with_grad:
        dy = f32(rng.standard_normal(y.shape))
        y.backward(torch.tensor(dy))
        out += [("dy", dy), ("y", y.detach().numpy()), ("dx", last.grad.numpy())]
    else:
        out += [("y", y.detach().numpy())]
    for k, (v, tr) in params.items():
        out.append((k, v))
    if with_grad:
        for k, (v, tr) in params.items():
            if tr:
                out.append(("grad/" + k, tp[k].grad.numpy()))
    for k in ("moving_mean", "moving_variance"):
        if k in state:
            out.append(("expect/" + k, state[k].numpy()))

    meta = {
        "layer": yaml_layer(kind, a),
        "input_shape": ",".join(str(d) for d in shape),
        "mode": c.get("mode", "training"),
        "steps": str(steps),
        "description": c["desc"],
        "generator": "tests/ref/make_fixtures.py (PyTorch, float64)",
    }
    return out, meta


def check_forward(c, xs, params, y):
    """The torch forward against plain numpy loops: catches layout and padding slips here."""
    kind, a = c["kind"], c["args"]
    p = {k: v for k, (v, _) in params.items()}
    n, steps = c["n"], c.get("steps", 1)
    if kind == "conv2d":
        want = naive_conv2d(xs, p, a)
    elif kind in ("max_pooling2d", "average_pooling2d"):
        want = naive_pool2d(xs, a, kind[:3])
    elif kind == "global_average_pooling2d":
        want = xs.mean(axis=(1, 2))
    elif kind == "reshape":
        want = xs.reshape((len(xs),) + tuple(a["target_shape"]))
    elif kind in CNN_KINDS:
        want = cnn_naive(kind, xs, p, a)
    elif kind in ("lstm", "gru", "simple_rnn"):
        want = naive_rnn(xs, p, a, kind)
    elif kind == "bidirectional":
        want = bidir_naive(xs, p, a)
    elif kind == "dense":
        want = xs @ p["kernel"] + p.get("bias", 0)
        if a.get("activation") == "tanh":
            want = np.tanh(want)
    elif kind == "layer_normalization":
        mean = xs.mean(axis=-1, keepdims=True)
        var = ((xs - mean) ** 2).mean(axis=-1, keepdims=True)
        want = (xs - mean) / np.sqrt(var + a.get("epsilon", 1e-3)) * p.get("gamma", 1) + p.get("beta", 0)
    else:
        eps, m = a.get("epsilon", 1e-3), a.get("momentum", 0.99)
        mm, mv = p["moving_mean"].copy(), p["moving_variance"].copy()
        want = []
        for s in range(steps):
            x = xs[s * n:(s + 1) * n].reshape(-1, xs.shape[-1])
            if c.get("mode", "training") == "training":
                mean, var = x.mean(axis=0), x.var(axis=0)
                mm, mv = m * mm + (1 - m) * mean, m * mv + (1 - m) * var
            else:
                mean, var = mm, mv
            z = (x - mean) / np.sqrt(var + eps) * p.get("gamma", 1) + p.get("beta", 0)
            want.append(z.reshape(xs[s * n:(s + 1) * n].shape))
        want = np.concatenate(want)
    err = np.max(np.abs(want - y))
    if want.shape != y.shape or err > 1e-10:
        sys.exit(f"{c['name']}: torch and the numpy loop disagree (shapes {y.shape} {want.shape}, error {err})")


def write_cases(description, cases, run_case, summary):
    """fixture_io.write_cases with torch's deterministic algorithms."""
    torch.use_deterministic_algorithms(True)
    fixture_io.write_cases(description, cases, run_case, summary)


if __name__ == "__main__":
    write_cases("Writes the reference fixtures of tests/unit/test_ref.c.", CASES + CNN_CASES, run_case, "layer")
