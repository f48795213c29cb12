#!/usr/bin/python3
"""
Golden values for tests/cli/golden.bats: small models with fixed weights,
their inputs, and what `dtrain predict` and `dtrain evaluate` must print for
them, computed here in float64 with NumPy from the tensors of the checkpoint
as read back from disk (read_safetensors.load), so that the test compares
dtrain's printed numbers with an independent forward pass and needs no
NumPy at run time.

Run (from anywhere; needs python3-numpy, and python3-torch for the writer it
shares with make_fixtures.py):

    /usr/bin/python3 tests/ref/make_golden.py          # into tests/ref/golden/
    /usr/bin/python3 tests/ref/make_golden.py -o DIR

The output is deterministic (fixed seeds). Files, in tests/ref/golden/:

    x.csv, x.npy         16 samples of 6 features (multiples of 1/32, exact
                         in float32 and in the CSV text)
    M.yaml               the model file of model M (input_shape [6]; data.train
                         and data.test the npy files)
    M.safetensors        its weights (Keras names and layout) and class_names
    M_y.npy              the labels of x for M
    M.predict            what predict --all prints, one line per sample (not
                         for multi, whose outputs are no classes):
                         index,class,probability,p_0,...,p_{C-1} (%.9f)
    M.evaluate           loss accuracy samples, as evaluate --json reports them

The models and what each one pins down:

    softmax  dense relu, dropout 0.5, dense softmax; four named classes.
             predict's probabilities are the softmax output; dropout is off.
    logits   dense tanh, batch_normalization, dropout, dense linear with
             from_logits: true. predict prints softmax(logits); batch
             normalization uses its moving statistics, dropout is off.
    sigmoid  dense relu, dropout, one sigmoid unit, binary_crossentropy;
             classes "no", "yes". p > 0.5 is "yes" with probability p, else
             "no" with 1 - p; --all lists [1 - p, p].
    multi    dense relu, three sigmoid units, binary_crossentropy: accuracy
             is the right outputs over samples x outputs (never above 1).
"""
import argparse
import json
import os
import sys

import numpy as np

from make_fixtures import HERE, save_safetensors
from read_safetensors import load

N, F = 16, 6
CLIP = 1e-7  # Keras' epsilon: probabilities are clipped to [eps, 1 - eps] before the log

MODELS = {
    "softmax": {
        "layers": ["dense: {units: 8, activation: relu}", "dropout: {rate: 0.5}",
                   "dense: {units: 4, activation: softmax}"],
        "loss": "sparse_categorical_crossentropy", "from_logits": False,
        "classes": ["ant", "bee", "cat", "dog"]},
    "logits": {
        "layers": ["dense: {units: 8, activation: tanh}", "batch_normalization: {}",
                   "dropout: {rate: 0.3}", "dense: {units: 3}"],
        "loss": "sparse_categorical_crossentropy", "from_logits": True, "classes": None},
    "sigmoid": {
        "layers": ["dense: {units: 5, activation: relu}", "dropout: {rate: 0.25}",
                   "dense: {units: 1, activation: sigmoid}"],
        "loss": "binary_crossentropy", "from_logits": False, "classes": ["no", "yes"]},
    "multi": {
        "layers": ["dense: {units: 6, activation: relu}", "dense: {units: 3, activation: sigmoid}"],
        "loss": "binary_crossentropy", "from_logits": False, "classes": None},
}


def f32(a):
    return np.asarray(a, dtype=np.float32)


def weights(name, rng):
    """Random weights in Keras' layout, dense kernels (in, out)."""
    t = []
    fan_in, dense = F, 0
    for layer in MODELS[name]["layers"]:
        kind = layer.split(":")[0]
        if kind == "dense":
            units = int(layer.split("units: ")[1].split(",")[0].split("}")[0])
            lname = "dense" if dense == 0 else f"dense_{dense}"
            t += [(lname + "/kernel", f32(rng.normal(0, 1.2 / np.sqrt(fan_in), (fan_in, units)))),
                  (lname + "/bias", f32(rng.normal(0, 0.3, units)))]
            fan_in, dense = units, dense + 1
        elif kind == "batch_normalization":
            t += [("batch_normalization/gamma", f32(rng.uniform(0.5, 1.5, fan_in))),
                  ("batch_normalization/beta", f32(rng.normal(0, 0.3, fan_in))),
                  ("batch_normalization/moving_mean", f32(rng.normal(0, 0.4, fan_in))),
                  ("batch_normalization/moving_variance", f32(rng.uniform(0.2, 2, fan_in)))]
    return t


def forward(name, w, x):
    """The model's output in inference mode, float64: dropout is the identity."""
    h = x.astype(np.float64)
    dense = 0
    for layer in MODELS[name]["layers"]:
        kind = layer.split(":")[0]
        if kind == "dense":
            lname = "dense" if dense == 0 else f"dense_{dense}"
            h = h @ w[lname + "/kernel"].astype(np.float64) + w[lname + "/bias"]
            dense += 1
            act = layer.split("activation: ")[1].split("}")[0] if "activation" in layer else "linear"
            if act == "relu":
                h = np.maximum(h, 0)
            elif act == "tanh":
                h = np.tanh(h)
            elif act == "sigmoid":
                h = 1 / (1 + np.exp(-h))
            elif act == "softmax":
                e = np.exp(h - h.max(axis=1, keepdims=True))
                h = e / e.sum(axis=1, keepdims=True)
        elif kind == "batch_normalization":
            g = {k: w["batch_normalization/" + k].astype(np.float64)
                 for k in ("gamma", "beta", "moving_mean", "moving_variance")}
            h = g["gamma"] * (h - g["moving_mean"]) / np.sqrt(g["moving_variance"] + 1e-3) + g["beta"]
    return h


def probabilities(name, out):
    """What predict prints: class probabilities (N, classes)."""
    m = MODELS[name]
    if out.shape[1] == 1:
        p = out[:, 0] if not m["from_logits"] else 1 / (1 + np.exp(-out[:, 0]))
        return np.stack([1 - p, p], axis=1)
    if m["from_logits"]:
        e = np.exp(out - out.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    return out


def labels(name, out, rng):
    """Labels that agree with the model about 70% of the time, so accuracy is neither 0 nor 1."""
    if MODELS[name]["loss"] == "binary_crossentropy":
        right = (out > 0.5).astype(np.float64)
        flip = rng.uniform(size=out.shape) < 0.3
        y = np.where(flip, 1 - right, right)
        return y[:, 0] if out.shape[1] == 1 else y
    c = out.shape[1]
    y = out.argmax(axis=1)
    flip = rng.uniform(size=N) < 0.3
    y = np.where(flip, rng.integers(0, c, N), y)
    y[:c] = np.arange(c)  # every class appears among the labels
    return y.astype(np.float64)


def loss_accuracy(name, out, y):
    m = MODELS[name]
    if m["loss"] == "binary_crossentropy":
        t = y.reshape(out.shape)
        q = np.clip(out, CLIP, 1 - CLIP)
        loss = -(t * np.log(q) + (1 - t) * np.log(1 - q)).mean(axis=1)
        return loss.mean(), ((out > 0.5) == (t > 0.5)).mean()
    cls = y.astype(int)
    if m["from_logits"]:
        lse = out.max(axis=1) + np.log(np.exp(out - out.max(axis=1, keepdims=True)).sum(axis=1))
        loss = lse - out[np.arange(N), cls]
    else:
        loss = -np.log(np.clip(out[np.arange(N), cls], CLIP, 1 - CLIP))
    return loss.mean(), (out.argmax(axis=1) == cls).mean()


def model_yaml(name):
    m = MODELS[name]
    layers = "".join(f"    - {layer}\n" for layer in m["layers"])
    logits = ", from_logits: true" if m["from_logits"] else ""
    return (f"# Written by tests/ref/make_golden.py: the golden model '{name}' of tests/cli/golden.bats.\n"
            f"model:\n  name: golden_{name}\n  input_shape: [{F}]\n  layers:\n{layers}"
            f"compile: {{optimizer: {{sgd: {{learning_rate: 0.1}}}}, loss: {m['loss']}{logits}, metrics: [accuracy]}}\n"
            f"data:\n  train: {{format: npy, x: x.npy, y: {name}_y.npy}}\n"
            f"  test: {{format: npy, x: x.npy, y: {name}_y.npy}}\n  batch_size: 5\n"
            f"fit: {{epochs: 1, seed: 3}}\n")


def main():
    ap = argparse.ArgumentParser(description="Writes the golden models and values of tests/cli/golden.bats.")
    ap.add_argument("-o", "--out", default=os.path.join(HERE, "golden"), help="output directory")
    out_dir = ap.parse_args().out
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(19)
    x = f32(rng.integers(-64, 65, (N, F)) / 32)
    np.save(os.path.join(out_dir, "x.npy"), x)
    with open(os.path.join(out_dir, "x.csv"), "w") as f:
        for row in x:
            f.write(",".join(repr(float(v)) for v in row) + "\n")
    for name, m in MODELS.items():
        path = os.path.join(out_dir, name + ".safetensors")
        meta = {"class_names": json.dumps(m["classes"])} if m["classes"] else {}
        save_safetensors(path, weights(name, rng), meta)
        w, _ = load(path)  # the expected values come from the file as written
        out = forward(name, w, x)
        p = probabilities(name, out)
        y = labels(name, out, rng)
        np.save(os.path.join(out_dir, name + "_y.npy"), f32(y))
        loss, acc = loss_accuracy(name, out, y)
        with open(os.path.join(out_dir, name + ".yaml"), "w") as f:
            f.write(model_yaml(name))
        with open(os.path.join(out_dir, name + ".evaluate"), "w") as f:
            f.write(f"{loss:.9f} {acc:.9f} {N}\n")
        if out.shape[1] == 1 or abs(p.sum(axis=1) - 1).max() < 1e-9:  # not multi: its outputs are no classes
            names = m["classes"] or [str(i) for i in range(p.shape[1])]
            with open(os.path.join(out_dir, name + ".predict"), "w") as f:
                for i, row in enumerate(p):
                    best = int(row.argmax())
                    f.write(f"{i},{names[best]},{row[best]:.9f}," + ",".join(f"{v:.9f}" for v in row) + "\n")
        print(f"{path}: loss {loss:.6f}, accuracy {acc:.4f}, predicted classes {sorted(set(p.argmax(axis=1)))}")
        if len(set(p.argmax(axis=1))) < 2:
            sys.exit(f"{name}: every sample has the same class; change the seed")


if __name__ == "__main__":
    main()
