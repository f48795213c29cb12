#!/usr/bin/python3
"""
Reference values of the losses for tests/unit/test_loss_values.c: Keras 3's
formulas (keras/src/losses/losses.py, the numpy backend's crossentropies)
written out in NumPy, float64, on small fixed inputs of 2 rows by 3
columns. Prints the C table the test holds; rerun and paste it there when a
case changes:

    /usr/bin/python3 tests/ref/make_loss_values.py

Each value is the sum over the 2 rows of the per-sample loss (what
dt_op_loss returns): the mean over the columns for the elementwise losses
(mean_absolute_error, huber, log_cosh, poisson, the hinges, the binary
crossentropies), the sum over them for the others.
"""
import numpy as np

EPS = 1e-7

P = np.array([[0.2, 0.7, 0.1], [0.5, 0.3, 0.2]])          # probabilities
Z = np.array([[1.5, -0.3, 0.2], [-2.0, 0.5, 1.0]])        # logits
V = np.array([[0.3, -1.2, 2.5], [1.0, 0.0, -0.4]])        # values
C = np.array([[0.6, 2.1, 0.3], [1.5, 0.9, 0.6]])          # positive rates
T_ONEHOT = np.array([[0, 1, 0], [1, 0, 0]], dtype=float)
T_BIN = np.array([[1, 0, 1], [0, 0, 1]], dtype=float)
T_PM = np.array([[1, -1, 1], [-1, -1, 1]], dtype=float)
T_VAL = np.array([[0.5, -1.0, 0.4], [1.2, 0.3, -0.4]])
T_DIST = np.array([[0.1, 0.6, 0.3], [0.3, 0.3, 0.4]])
T_COUNT = np.array([[1, 2, 0], [0, 1, 3]], dtype=float)

NAMES = {"P": P, "Z": Z, "V": V, "C": C, "T_ONEHOT": T_ONEHOT, "T_BIN": T_BIN, "T_PM": T_PM,
         "T_VAL": T_VAL, "T_DIST": T_DIST, "T_COUNT": T_COUNT}


def softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def sigmoid(z):
    return 1 / (1 + np.exp(-z))


def normalize(x):
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), EPS)


def bce(t, p, logits):
    if logits:
        return np.maximum(p, 0) - p * t + np.log1p(np.exp(-np.abs(p)))
    q = np.clip(p, EPS, 1 - EPS)
    return -(t * np.log(q) + (1 - t) * np.log(1 - q))


def loss(name, t, p, logits=False, delta=1.0, gamma=2.0, alpha=0.25, acb=False, ls=0.0):
    e = p - t
    if name == "mean_absolute_error":
        return np.mean(np.abs(e), -1)
    if name == "huber":
        a = np.abs(e)
        return np.mean(np.where(a <= delta, 0.5 * e * e, delta * a - 0.5 * delta * delta), -1)
    if name == "log_cosh":
        return np.mean(np.log(np.cosh(e)), -1)
    if name == "kl_divergence":
        tc, pc = np.clip(t, EPS, 1), np.clip(p, EPS, 1)
        return np.sum(tc * np.log(tc / pc), -1)
    if name == "poisson":
        return np.mean(p - t * np.log(p + EPS), -1)
    if name == "cosine_similarity":
        return -np.sum(normalize(t) * normalize(p), -1)
    if name in ("hinge", "squared_hinge"):
        if np.all((t == 0) | (t == 1)):
            t = 2 * t - 1
        m = np.maximum(1 - t * p, 0)
        return np.mean(m if name == "hinge" else m * m, -1)
    if name == "categorical_hinge":
        pos = np.sum(t * p, -1)
        neg = np.max((1 - t) * p, -1)
        return np.maximum(neg - pos + 1, 0)
    if name == "binary_crossentropy":
        t = t * (1 - ls) + 0.5 * ls
        return np.mean(bce(t, p, logits), -1)
    if name == "categorical_crossentropy":
        t = t * (1 - ls) + ls / t.shape[-1]
        if logits:
            return -np.sum(t * np.log(softmax(p)), -1)
        o = np.clip(p / p.sum(-1, keepdims=True), EPS, 1 - EPS)
        return -np.sum(t * np.log(o), -1)
    if name == "binary_focal_crossentropy":
        t = t * (1 - ls) + 0.5 * ls
        b = bce(t, p, logits)
        q = sigmoid(p) if logits else p
        p_t = t * q + (1 - t) * (1 - q)
        f = (1 - p_t) ** gamma * b
        if acb:
            f = (t * alpha + (1 - t) * (1 - alpha)) * f
        return np.mean(f, -1)
    if name == "categorical_focal_crossentropy":
        t = t * (1 - ls) + ls / t.shape[-1]
        q = softmax(p) if logits else p
        o = np.clip(q / q.sum(-1, keepdims=True), EPS, 1 - EPS)
        return np.sum(alpha * (1 - o) ** gamma * -t * np.log(o), -1)
    raise ValueError(name)


# loss, prediction, target, keyword arguments (C field names in the comment)
CASES = [
    ("mean_absolute_error", "V", "T_VAL", {}),
    ("huber", "V", "T_VAL", {}),
    ("huber", "V", "T_VAL", {"delta": 0.5}),
    ("log_cosh", "V", "T_VAL", {}),
    ("kl_divergence", "P", "T_DIST", {}),
    ("poisson", "C", "T_COUNT", {}),
    ("cosine_similarity", "V", "T_VAL", {}),
    ("hinge", "V", "T_BIN", {}),
    ("hinge", "V", "T_PM", {}),
    ("squared_hinge", "V", "T_BIN", {}),
    ("categorical_hinge", "V", "T_ONEHOT", {}),
    ("binary_focal_crossentropy", "P", "T_BIN", {}),
    ("binary_focal_crossentropy", "P", "T_BIN", {"gamma": 1.5, "alpha": 0.4, "acb": True, "ls": 0.1}),
    ("binary_focal_crossentropy", "Z", "T_BIN", {"logits": True}),
    ("binary_focal_crossentropy", "Z", "T_BIN", {"logits": True, "acb": True, "gamma": 0.5}),
    ("categorical_focal_crossentropy", "P", "T_ONEHOT", {}),
    ("categorical_focal_crossentropy", "P", "T_ONEHOT", {"gamma": 1.5, "alpha": 0.5, "ls": 0.1}),
    ("categorical_focal_crossentropy", "Z", "T_ONEHOT", {"logits": True}),
    ("categorical_crossentropy", "P", "T_ONEHOT", {"ls": 0.1}),
    ("categorical_crossentropy", "Z", "T_ONEHOT", {"logits": True, "ls": 0.1}),
    ("binary_crossentropy", "P", "T_BIN", {"ls": 0.2}),
    ("binary_crossentropy", "Z", "T_BIN", {"logits": True, "ls": 0.2}),
]

if __name__ == "__main__":
    for name, p, t, kw in CASES:
        v = float(np.sum(loss(name, NAMES[t], NAMES[p], **kw)))
        args = kw.copy()
        fields = [f".delta = {args['delta']}f" if "delta" in args else "",
                  f".gamma = {args['gamma']}f" if "gamma" in args else "",
                  f".alpha = {args['alpha']}f" if "alpha" in args else "",
                  ".acb = 1" if args.get("acb") else "",
                  f".ls = {args['ls']}f" if "ls" in args else "",
                  ".logits = 1" if args.get("logits") else ""]
        fields = ", ".join(f for f in fields if f)
        print(f"\t{{ .loss = DT_LOSS_{name.upper()}, .pred = {p}, .target = {t},\n"
              f"\t  .expect = {v!r}{', ' + fields if fields else ''} }},")
