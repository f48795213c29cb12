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
                   name: m and v (adam, adamw, nadam; torch's exp_avg and
                   exp_avg_sq), vhat (amsgrad; max_exp_avg_sq), velocity
                   (rmsprop; torch's square_avg), momentum (sgd and rmsprop
                   with momentum; torch's momentum_buffer times a constant,
                   below), accumulator (adagrad; sum), accumulated_grad and
                   accumulated_delta_var (adadelta; square_avg, acc_delta),
                   m and u (adamax; exp_avg, exp_inf), m (lion)

and string metadata: optimizer (the YAML of compile.optimizer as in a model
file), steps, description.

Where Keras and PyTorch place epsilon differently (Adam: Keras adds it to
sqrt(v) before the bias correction, torch after; RMSprop: Keras takes
sqrt(v + eps), torch sqrt(v) + eps), the cases use an epsilon too small to
matter at these gradients, so that one file holds for both. Everything else
is the same formula: the coefficients 1 - beta_1, 1 - beta_2, 1 - rho and
the bias corrections 1 - beta^t are exact (double) in both.

Adagrad (Keras: sqrt(acc + eps), torch sqrt(acc) + eps) and Adamax (Keras:
u + eps, torch max(beta_2 u, |g| + eps)) also use an epsilon too small to
matter. PyTorch 1.13 has no Lion: KerasLion below is Keras 3's update rule
(w -= lr sign(beta_1 m + (1 - beta_1) g); m = beta_2 m + (1 - beta_2) g)
written as a torch optimizer, in float64. Its NAdam multiplies mu_t into
the product twice for mu_product_next (fixed in later releases) and keeps
the product in float32, so KerasNadam below is Keras 3's (and the Nadam
paper's) rule: m_hat = u_{t+1} m / (1 - u_1..u_{t+1}) + (1 - u_t) g / (1 -
u_1..u_t), v_hat = v / (1 - beta_2^t), w -= lr m_hat / (sqrt(v_hat) + eps),
u_t = beta_1 (1 - 0.5 * 0.96^(0.004 t)), the product in float64. A case's "clip" clips the
gradients before torch sees them, as Keras' clipvalue does ("value", c) or
its global_clipnorm ("global_norm", c) over the one parameter.

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


class KerasLion(torch.optim.Optimizer):
    """Keras 3's Lion (keras/src/optimizers/lion.py), its slot m in the state."""

    def __init__(self, params, lr, beta_1, beta_2):
        super().__init__(params, dict(lr=lr, beta_1=beta_1, beta_2=beta_2))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            b1, b2 = group["beta_1"], group["beta_2"]
            for p in group["params"]:
                m = self.state[p].setdefault("m", torch.zeros_like(p))
                p.sub_(group["lr"] * torch.sign(m * b1 + p.grad * (1 - b1)))
                m.mul_(b2).add_(p.grad * (1 - b2))


class KerasNadam(torch.optim.Optimizer):
    """Keras 3's Nadam (keras/src/optimizers/nadam.py), slots m and v in the state."""

    def __init__(self, params, lr, beta_1, beta_2, eps):
        super().__init__(params, dict(lr=lr, beta_1=beta_1, beta_2=beta_2, eps=eps))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            b1, b2, lr, eps = group["beta_1"], group["beta_2"], group["lr"], group["eps"]
            for p in group["params"]:
                st = self.state[p]
                if not st:
                    st.update(m=torch.zeros_like(p), v=torch.zeros_like(p), t=0, product=1.0)
                st["t"] += 1
                t, g, m, v = st["t"], p.grad, st["m"], st["v"]
                u_t = b1 * (1 - 0.5 * 0.96 ** (0.004 * t))
                u_next = b1 * (1 - 0.5 * 0.96 ** (0.004 * (t + 1)))
                st["product"] *= u_t
                m.add_((g - m) * (1 - b1))
                v.add_((g * g - v) * (1 - b2))
                m_hat = u_next * m / (1 - st["product"] * u_next) + (1 - u_t) * g / (1 - st["product"])
                v_hat = v / (1 - b2 ** t)
                p.sub_(lr * m_hat / (torch.sqrt(v_hat) + eps))

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
    {"name": "optimizer_adam_amsgrad",
     "optimizer": "{adam: {learning_rate: 0.01, beta_1: 0.9, beta_2: 0.99, epsilon: 1e-10, amsgrad: true}}",
     "torch": lambda p: torch.optim.Adam(p, lr=0.01, betas=(0.9, 0.99), eps=1e-10, amsgrad=True),
     "slots": [("m", "exp_avg"), ("v", "exp_avg_sq"), ("vhat", "max_exp_avg_sq")],
     "desc": "Adam with amsgrad: the largest v so far divides"},
    {"name": "optimizer_adagrad",
     "optimizer": "{adagrad: {learning_rate: 0.1, initial_accumulator_value: 0.1, epsilon: 1e-10}}",
     "torch": lambda p: torch.optim.Adagrad(p, lr=0.1, initial_accumulator_value=0.1, eps=1e-10),
     "slots": [("accumulator", "sum")],
     "desc": "Adagrad with Keras' initial_accumulator_value 0.1"},
    {"name": "optimizer_adadelta",
     "optimizer": "{adadelta: {learning_rate: 1.0, rho: 0.95, epsilon: 1e-6}}",
     "torch": lambda p: torch.optim.Adadelta(p, lr=1.0, rho=0.95, eps=1e-6),
     "slots": [("accumulated_grad", "square_avg"), ("accumulated_delta_var", "acc_delta")],
     "desc": "Adadelta, rho 0.95 (Keras' default), epsilon inside both square roots as in Keras and torch"},
    {"name": "optimizer_adamax",
     "optimizer": "{adamax: {learning_rate: 0.01, beta_1: 0.9, beta_2: 0.999, epsilon: 1e-10}}",
     "torch": lambda p: torch.optim.Adamax(p, lr=0.01, betas=(0.9, 0.999), eps=1e-10),
     "slots": [("m", "exp_avg"), ("u", "exp_inf")],
     "desc": "Adamax: the infinity norm u, lr / (1 - beta_1^t)"},
    {"name": "optimizer_nadam",
     "optimizer": "{nadam: {learning_rate: 0.01, beta_1: 0.9, beta_2: 0.999, epsilon: 1e-10}}",
     "torch": lambda p: KerasNadam(p, lr=0.01, beta_1=0.9, beta_2=0.999, eps=1e-10),
     "slots": [("m", "m"), ("v", "v")],
     "desc": "Nadam, Keras 3's rule with the momentum cache u_t = beta_1 (1 - 0.5 * 0.96^(0.004 t))"},
    {"name": "optimizer_lion",
     "optimizer": "{lion: {learning_rate: 0.01, beta_1: 0.9, beta_2: 0.99}}",
     "torch": lambda p: KerasLion(p, lr=0.01, beta_1=0.9, beta_2=0.99),
     "slots": [("m", "m")],
     "desc": "Lion, Keras 3's update rule (torch 1.13 has none)"},
    {"name": "optimizer_rmsprop_clipvalue",
     "optimizer": "{rmsprop: {learning_rate: 0.01, rho: 0.9, epsilon: 1e-16, clipvalue: 0.5}}",
     "torch": lambda p: torch.optim.RMSprop(p, lr=0.01, alpha=0.9, eps=1e-16),
     "clip": ("value", 0.5),
     "slots": [("velocity", "square_avg")],
     "desc": "RMSprop with clipvalue 0.5: each gradient element clipped to [-0.5, 0.5] first"},
    {"name": "optimizer_sgd_global_clipnorm",
     "optimizer": "{sgd: {learning_rate: 0.05, momentum: 0.9, global_clipnorm: 2.0}}",
     "torch": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9),
     "clip": ("global_norm", 2.0),
     "slots": [("momentum", "momentum_buffer", -0.05)],
     "desc": "SGD with global_clipnorm 2: the gradients scaled to norm 2 when longer"},
]


def clipped(c, g):
    """The gradient torch gets: Keras' clipvalue or global_clipnorm applied first."""
    kind, v = c.get("clip", (None, 0))
    if kind == "value":
        return np.clip(g, -v, v)
    if kind == "global_norm":
        norm = np.sqrt(np.sum(g * g))
        return g * (v / norm) if norm > v else g
    return g


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
        p.grad = torch.tensor(clipped(c, grads[t]), dtype=torch.float64)
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
