#!/usr/bin/python3
"""PyTorch side of the GPU benchmark (tests/bench/gpu_bench.sh).

Trains on CUDA, the way dtrain does, one of:

  fashion_mlp  models/fashion_mlp.yaml: flatten, dense 512 relu, dropout 0.2,
               dense 512 relu, dropout 0.2, dense 10 (Adam 1e-3, batch 128);
  fashion_cnn  Keras' MNIST CNN of models/fashion_cnn.yaml on Fashion-MNIST
               (Adam 1e-3, batch 128);
  cnn32        tests/bench/cnn32.yaml: nine 3x3 conv + batch norm + relu
               blocks (16, 32, 64 channels; stride 2 into 32 and 64), global
               average pooling, dense 10, on synthetic 32x32x3 inputs (SGD 0.05
               momentum 0.9, batch 512);
  resnet32     tests/bench/resnet32.yaml: ResNet-20 on the same inputs (a 3x3
               stem, three stages of three basic blocks of 16, 32, 64
               channels, a strided 1x1 convolution with a bias on the
               shortcut of a block that changes the shape; same optimizer);

with the batches in page-locked host memory copied to the GPU each step
(non_blocking, as dtrain does), the loss read back every step (dtrain's
per-step metrics), cudnn.benchmark on, and TF32 off for --precision fp32
(on for tf32). --precision bf16 is dtrain's bf16: float32 weights and
optimizer, the model's forward under torch.autocast to bfloat16 (matrix
products and convolutions in bfloat16, float32 accumulation).
Reports samples/s of the best epoch (the training loop only) and the peak
memory PyTorch's allocator held (torch.cuda.max_memory_reserved).

    /usr/bin/python3 tests/bench/torch_gpu.py --model fashion_mlp|fashion_cnn|cnn32|resnet32
        [--epochs N] [--steps N] [--batch N] [--precision fp32|tf32|bf16] [--json]

Prints "SKIP: ..." and exits 0 where torch, CUDA or the data is missing.
"""
import argparse
import gzip
import json
import os
import sys
import time

DATA = "/usr/share/datasets/fashion-mnist"


def skip(why):
    print("SKIP: " + why)
    sys.exit(0)


try:
    import numpy as np
    import torch
except ImportError as e:
    skip(f"python3-torch or python3-numpy is not installed ({e})")


def fashion(data_dir):
    def read(name, offset):
        with gzip.open(os.path.join(data_dir, name), "rb") as f:
            return np.frombuffer(f.read(), dtype=np.uint8, offset=offset)
    try:
        x = read("train-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28).astype(np.float32) / 255.0
        y = read("train-labels-idx1-ubyte.gz", 8).astype(np.int64)
    except OSError as e:
        skip(f"Fashion-MNIST is not installed ({e})")
    return torch.from_numpy(x), torch.from_numpy(y)


def synthetic(n, seed):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 10, (n,), generator=g)
    centres = torch.randn(10, 3 * 32 * 32, generator=g)
    x = centres[y] + torch.randn(n, 3 * 32 * 32, generator=g)
    return x.reshape(n, 32, 32, 3).permute(0, 3, 1, 2).contiguous(), y


def conv_bn(nn, cin, cout, stride):
    """A 3x3 convolution without a bias and its batch normalization (Keras' eps and momentum)."""
    return [nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False),
            nn.BatchNorm2d(cout, eps=1e-3, momentum=0.01)]


class Block(torch.nn.Module):
    """relu(conv-bn-relu-conv-bn(x) + shortcut(x)), dtrain's residual block."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        nn = torch.nn
        self.body = nn.Sequential(*conv_bn(nn, cin, cout, stride), nn.ReLU(), *conv_bn(nn, cout, cout, 1))
        self.shortcut = (nn.Conv2d(cin, cout, 1, stride=stride) if stride != 1 or cin != cout
                         else nn.Identity())

    def forward(self, x):
        return torch.relu(self.body(x) + self.shortcut(x))


def make_model(kind):
    nn = torch.nn
    if kind == "fashion_mlp":
        model = nn.Sequential(
            nn.Flatten(), nn.Linear(28 * 28, 512), nn.ReLU(), nn.Dropout(0.2),
            nn.Linear(512, 512), nn.ReLU(), nn.Dropout(0.2), nn.Linear(512, 10))
    elif kind == "fashion_cnn":
        model = nn.Sequential(
            nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(),
            nn.MaxPool2d(2), nn.Dropout(0.25), nn.Flatten(),
            nn.Linear(64 * 12 * 12, 128), nn.ReLU(), nn.Dropout(0.5), nn.Linear(128, 10))
    elif kind == "cnn32":
        layers, cin = [], 3
        for cout, stride in [(16, 1)] * 3 + [(32, 2), (32, 1), (32, 1), (64, 2), (64, 1), (64, 1)]:
            layers += [*conv_bn(nn, cin, cout, stride), nn.ReLU()]
            cin = cout
        model = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))
    else:
        layers, cin = [*conv_bn(nn, 3, 16, 1), nn.ReLU()], 16
        for cout, stride in [(16, 1)] * 3 + [(32, 2), (32, 1), (32, 1), (64, 2), (64, 1), (64, 1)]:
            layers.append(Block(cin, cout, stride))
            cin = cout
        model = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))
    for m in model.modules():
        if isinstance(m, (nn.Linear, nn.Conv2d)):
            nn.init.xavier_uniform_(m.weight)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
    return model


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="fashion_cnn", choices=["fashion_mlp", "fashion_cnn", "cnn32", "resnet32"])
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--steps", type=int, default=0, help="batches per epoch (default: all)")
    p.add_argument("--batch", type=int, default=0, help="batch size (default: the model's)")
    p.add_argument("--precision", default="fp32", choices=["fp32", "tf32", "bf16"])
    p.add_argument("--data", default=DATA)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    if not torch.cuda.is_available():
        skip("torch sees no CUDA GPU")
    tf32 = a.precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(1)
    dev = torch.device("cuda:0")
    if a.model in ("fashion_mlp", "fashion_cnn"):
        x, y = fashion(a.data)
        batch = 128
    else:
        x, y = synthetic(20480, 1)
        batch = 512
    batch = a.batch or batch
    x, y = x.pin_memory(), y.pin_memory()
    model = make_model(a.model).to(dev)
    if a.model in ("fashion_mlp", "fashion_cnn"):
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-7)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    n = x.shape[0]
    batches = (n + batch - 1) // batch
    if a.steps:
        batches = min(batches, a.steps)
    best = 0.0
    for epoch in range(a.epochs):
        model.train()
        perm = torch.randperm(n)
        xs, ys = x[perm].pin_memory(), y[perm].pin_memory()  # the epoch's order, before the clock starts
        torch.cuda.synchronize()
        start = time.perf_counter()
        seen, total = 0, 0.0
        for i in range(0, batches * batch, batch):
            xb = xs[i:i + batch].to(dev, non_blocking=True)
            yb = ys[i:i + batch].to(dev, non_blocking=True)
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.precision == "bf16"):
                logits = model(xb)
            loss = loss_fn(logits.float(), yb)
            loss.backward()
            opt.step()
            total += loss.item() * xb.shape[0]  # one read-back per step, as dtrain
            seen += xb.shape[0]
        torch.cuda.synchronize()
        rate = seen / (time.perf_counter() - start)
        best = max(best, rate)
        if not a.json:
            print(f"{a.model} ({a.precision}): epoch {epoch + 1}: {rate:,.0f} samples/s, loss {total / seen:.4f}")
    out = {"model": a.model, "precision": a.precision, "samples_per_sec": best, "batch": batch,
           "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "cudnn": torch.backends.cudnn.version(),
           "peak_reserved_mib": torch.cuda.max_memory_reserved(0) / 2**20}
    print(json.dumps(out) if a.json else out)


if __name__ == "__main__":
    main()
