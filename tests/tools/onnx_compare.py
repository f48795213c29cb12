#!/usr/bin/env python3
"""The ONNX checks of tests/cli/export.bats.

    onnx_compare.py check MODEL.onnx
        python3-onnx's checker (full_check: shapes inferred too); prints the
        opset and the node types.
    onnx_compare.py input MODEL.onnx N SCALE OUT.npy
        N random samples of the model's input shape, uniform in [0, SCALE),
        float32, seeded: the input for both dtrain predict and onnxruntime;
        SCALE tokens:V gives whole numbers from 0 to V - 1 (an embedding's).
    onnx_compare.py compare MODEL.onnx IN.npy PREDICT.csv [TOL]
        runs the model under onnxruntime on IN.npy and compares its output
        with dtrain predict's lines (--all --header: the p_* columns of a
        classifier, or a regression model's values); prints the largest
        absolute difference and fails above TOL (default 1e-5).
"""
import csv
import sys

import numpy as np


def check(path):
    import onnx
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    ops = sorted({n.op_type for n in model.graph.node})
    print("opset", model.opset_import[0].version, "ops", " ".join(ops))


def input_shape(path):
    import onnx
    dims = onnx.load(path).graph.input[0].type.tensor_type.shape.dim
    return [d.dim_value for d in dims[1:]]


def make_input(path, n, scale, out):
    """Values uniform in [0, scale), or whole numbers below V for scale "tokens:V" (an embedding's input)."""
    rng = np.random.default_rng(17)
    shape = [n] + input_shape(path)
    if scale.startswith("tokens:"):
        x = rng.integers(0, int(scale[len("tokens:"):]), size=shape).astype(np.float32)
    else:
        x = rng.uniform(0, float(scale), size=shape).astype(np.float32)
    np.save(out, x)


def predicted(path):
    """dtrain predict's numbers: the p_* columns, else every column after index."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    head = rows[0]
    cols = [i for i, h in enumerate(head) if h.startswith("p_")]
    if not cols:
        cols = list(range(1, len(head)))
    return np.array([[float(r[i]) for i in cols] for r in rows[1:]], dtype=np.float64)


def compare(path, x_path, pred_path, tol):
    import onnxruntime as ort
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    x = np.load(x_path)
    y = sess.run(None, {"input": x})[0].reshape(len(x), -1).astype(np.float64)
    p = predicted(pred_path)
    if y.shape[1] == 1 and p.shape[1] == 2:  # one sigmoid output: predict prints 1-p, p
        p = p[:, 1:]
    if y.shape != p.shape:
        sys.exit("shapes differ: onnxruntime %s, dtrain predict %s" % (y.shape, p.shape))
    diff = float(np.max(np.abs(y - p)))
    print("max abs difference %.3g over %d samples (onnxruntime %s)" % (diff, len(x), ort.__version__))
    if not diff <= tol:
        sys.exit("difference %.3g above %g" % (diff, tol))


def main(argv):
    if len(argv) >= 2 and argv[0] == "check":
        check(argv[1])
    elif len(argv) == 5 and argv[0] == "input":
        make_input(argv[1], int(argv[2]), argv[3], argv[4])
    elif len(argv) in (4, 5) and argv[0] == "compare":
        compare(argv[1], argv[2], argv[3], float(argv[4]) if len(argv) == 5 else 1e-5)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
