#!/usr/bin/python3
"""
Optimizer fixtures for tests/unit/test_ref.c: one safetensors file per case,
tests/ref/optimizer_<case>.safetensors, with PyTorch's optimizer run for 8
steps on fixed gradients in float64 and stored as float32, so that the C
test compares dtrain's optimizer updates with an independent implementation
without needing PyTorch at run time.

Run (from anywhere; needs python3-torch and python3-numpy, nothing else):

    /usr/bin/python3 tests/ref/make_optimizer_fixtures.py              # all cases into tests/ref/
    /usr/bin/python3 tests/ref/make_optimizer_fixtures.py -o DIR CASE  # some cases elsewhere
    /usr/bin/python3 tests/ref/make_optimizer_fixtures.py --list

The output is deterministic (seeds from the case names, float64 arithmetic).

One file per case, holding float32 tensors of N parameters:

    w              (N) the initial weights
    grad           (steps, N) the gradient of each step
    expect/w       (steps, N) the weights after each step
    expect/<slot>  (steps, N) an optimizer slot after each step, by dtrain's
                   name: m and v (adam, adamw; torch's exp_avg and
                   exp_avg_sq), velocity (rmsprop; torch's square_avg),
                   momentum (sgd and rmsprop with momentum; torch's
                   momentum_buffer times a constant, below)

and string metadata: optimizer (the YAML of compile.optimizer as in a model
file), steps, description.

Where Keras and PyTorch place epsilon differently (Adam: Keras adds it to
sqrt(v) before the bias correction, torch after; RMSprop: Keras takes
sqrt(v + eps), torch sqrt(v) + eps), the cases use an epsilon too small to
matter at these gradients, so that one file holds for both. Everything else
is the same formula: the coefficients 1 - beta_1, 1 - beta_2, 1 - rho and
the bias corrections 1 - beta^t are exact (double) in both.

Momentum is kept in another unit by dtrain (Keras) and torch, the same
update at a constant learning rate: SGD's slot is Keras' m = mu m - lr g,
torch's buffer b = mu b + g, so m = -lr b (Nesterov: w + mu m - lr g in both
once written with m); RMSprop's slot is Keras' m = mu m + lr g / sqrt(v),
torch's b = mu b + g / sqrt(v), so m = lr b. The factor is the slot's third
field below.
"""
import numpy as np
import torch

from make_fixtures import write_cases

N = 48
STEPS = 8

# name, dtrain's compile.optimizer, the torch optimizer on a parameter list,
# slots (dtrain name, torch state key[, factor from torch's value to dtrain's])
CASES = [
    {"name": "optimizer_adam",
     "optimizer": "{adam: {learning_rate: 0.01, beta_1: 0.9, beta_2: 0.999, epsilon: 1e-10}}",
     "torch": lambda p: torch.optim.Adam(p, lr=0.01, betas=(0.9, 0.999), eps=1e-10),
     "slots": [("m", "exp_avg"), ("v", "exp_avg_sq")],
     "desc": "Adam with Keras' and PyTorch's defaults for the betas"},
    {"name": "optimizer_adamw",
     "optimizer": "{adamw: {learning_rate: 0.01, beta_1: 0.8, beta_2: 0.9999, epsilon: 1e-10, weight_decay: 0.5}}",
     "torch": lambda p: torch.optim.AdamW(p, lr=0.01, betas=(0.8, 0.9999), eps=1e-10, weight_decay=0.5),
     "slots": [("m", "exp_avg"), ("v", "exp_avg_sq")],
     "desc": "AdamW: decoupled weight decay w * (1 - lr * wd) before the Adam step"},
    {"name": "optimizer_rmsprop",
     "optimizer": "{rmsprop: {learning_rate: 0.01, rho: 0.999, epsilon: 1e-16}}",
     "torch": lambda p: torch.optim.RMSprop(p, lr=0.01, alpha=0.999, eps=1e-16),
     "slots": [("velocity", "square_avg")],
     "desc": "RMSprop without momentum, rho 0.999 (torch's alpha)"},
    {"name": "optimizer_rmsprop_momentum",
     "optimizer": "{rmsprop: {learning_rate: 0.01, rho: 0.9, momentum: 0.8, epsilon: 1e-16}}",
     "torch": lambda p: torch.optim.RMSprop(p, lr=0.01, alpha=0.9, momentum=0.8, eps=1e-16),
     "slots": [("momentum", "momentum_buffer", 0.01), ("velocity", "square_avg")],
     "desc": "RMSprop with momentum 0.8: the slot is lr times torch's buffer"},
    {"name": "optimizer_sgd",
     "optimizer": "{sgd: {learning_rate: 0.05}}",
     "torch": lambda p: torch.optim.SGD(p, lr=0.05),
     "slots": [],
     "desc": "plain SGD: w - lr g"},
    {"name": "optimizer_sgd_momentum",
     "optimizer": "{sgd: {learning_rate: 0.05, momentum: 0.9}}",
     "torch": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9),
     "slots": [("momentum", "momentum_buffer", -0.05)],
     "desc": "SGD with momentum 0.9: the slot is -lr times torch's buffer"},
    {"name": "optimizer_sgd_nesterov",
     "optimizer": "{sgd: {learning_rate: 0.05, momentum: 0.7, nesterov: true}}",
     "torch": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.7, nesterov=True),
     "slots": [("momentum", "momentum_buffer", -0.05)],
     "desc": "Nesterov SGD, momentum 0.7: w + mu m - lr g, the slot -lr times torch's buffer"},
]


def f32(a):
    """float32 values, as float64: what dtrain reads is exactly what torch starts from."""
    return np.asarray(a, dtype=np.float32).astype(np.float64)


def run_case(c, seed):
    rng = np.random.default_rng(seed)
    w0 = f32(rng.uniform(-0.5, 0.5, N))
    # Gradients of varying size, some of them changing sign from step to step.
    grads = f32(rng.normal(0, 1, (STEPS, N)) * rng.uniform(0.1, 2, N))
    p = torch.nn.Parameter(torch.tensor(w0, dtype=torch.float64))
    opt = c["torch"]([p])
    ws, slots = [], {s[0]: [] for s in c["slots"]}
    for t in range(STEPS):
        p.grad = torch.tensor(grads[t], dtype=torch.float64)
        opt.step()
        ws.append(p.detach().numpy().copy())
        for name, key, *factor in c["slots"]:
            slots[name].append(opt.state[p][key].numpy() * (factor[0] if factor else 1.0))
    tensors = [("w", w0), ("grad", grads), ("expect/w", np.array(ws))]
    tensors += [("expect/" + s[0], np.array(slots[s[0]])) for s in c["slots"]]
    meta = {"optimizer": c["optimizer"], "steps": str(STEPS), "description": c["desc"]}
    return tensors, meta


if __name__ == "__main__":
    write_cases("Writes the optimizer fixtures of tests/unit/test_ref.c.", CASES, run_case, "optimizer")
