#!/usr/bin/python3
"""PyTorch side of the Fashion-MNIST MLP benchmark.

Trains the model of models/fashion_mlp.yaml the way Keras does -- Flatten,
Dense 512 relu, Dropout 0.2, Dense 512 relu, Dropout 0.2, Dense 10 (softmax
inside the loss), glorot-uniform kernels and zero biases, Adam(lr 1e-3,
eps 1e-7), batch 128, shuffled every epoch -- on CPU, and reports training
throughput (the training loop only: no data loading, no evaluation; the best
epoch) and the test accuracy.

    /usr/bin/python3 tests/bench/torch_mlp.py [--epochs N] [--threads N] [--json]

Without --threads it runs once with 1 thread and once with 2 and reports the
faster. Prints "SKIP: ..." and exits 0 where torch, numpy or the data is missing.
"""
import argparse
import ctypes
import gzip
import json
import os
import sys
import time

DATA = "/usr/share/datasets/fashion-mnist"
BATCH = 128


def skip(why):
    print("SKIP: " + why)
    sys.exit(0)


def blas_library():
    """Path of the BLAS that torch's matrix products run on (Debian's torch uses
    whatever libblas.so.3 the alternatives system selects)."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1]
                if os.path.basename(path).startswith(("libblas.", "libopenblas", "libmkl_rt", "libblis")):
                    return path
    except OSError:
        pass
    return "unknown"


def set_threads(n):
    torch.set_num_threads(n)
    try:  # OpenBLAS keeps its own thread count, which torch does not set here
        ctypes.CDLL(blas_library()).openblas_set_num_threads(n)
    except (OSError, AttributeError):
        pass


def read_idx(path, offset):
    with gzip.open(path, "rb") as f:
        return np.frombuffer(f.read(), dtype=np.uint8, offset=offset)


def load(data_dir, split):
    images = read_idx(os.path.join(data_dir, split + "-images-idx3-ubyte.gz"), 16)
    labels = read_idx(os.path.join(data_dir, split + "-labels-idx1-ubyte.gz"), 8)
    x = torch.from_numpy(images.reshape(-1, 28, 28, 1).astype(np.float32) / 255.0)
    y = torch.from_numpy(labels.astype(np.int64))
    return x, y


def make_model():
    model = torch.nn.Sequential(
        torch.nn.Flatten(),
        torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Dropout(0.2),
        torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Dropout(0.2),
        torch.nn.Linear(512, 10),
    )
    for m in model:
        if isinstance(m, torch.nn.Linear):
            torch.nn.init.xavier_uniform_(m.weight)  # Keras glorot_uniform
            torch.nn.init.zeros_(m.bias)
    return model


def train(threads, epochs, seed, train_set, test_set, verbose):
    """Returns (best samples/s over epochs, test accuracy)."""
    set_threads(threads)
    torch.manual_seed(seed)
    x, y = train_set
    n = x.shape[0]
    model = make_model()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-7)
    loss_fn = torch.nn.CrossEntropyLoss()
    best = 0.0
    for epoch in range(1, epochs + 1):
        model.train()
        total = torch.zeros(())
        start = time.perf_counter()
        perm = torch.randperm(n)
        for i in range(0, n, BATCH):
            idx = perm[i:i + BATCH]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x[idx]), y[idx])
            loss.backward()
            opt.step()
            total += loss.detach() * idx.shape[0]
        seconds = time.perf_counter() - start
        rate = n / seconds
        best = max(best, rate)
        if verbose:
            print(f"threads {threads}: epoch {epoch}/{epochs}: {rate:,.0f} samples/s "
                  f"({seconds:.2f} s), loss {total.item() / n:.4f}", flush=True)
    model.eval()
    with torch.no_grad():
        xt, yt = test_set
        accuracy = (model(xt).argmax(1) == yt).double().mean().item()
    return best, accuracy


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--threads", type=int, default=0, help="torch threads (default: try 1 and 2)")
    p.add_argument("--json", action="store_true", help="print one JSON line")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data", default=DATA, help="folder of the Fashion-MNIST .gz files")
    p.add_argument("--model", default="mlp", choices=["mlp"])
    args = p.parse_args()
    if args.epochs < 1 or args.threads < 0:
        p.error("--epochs must be at least 1 and --threads not negative")

    global np, torch
    try:
        import numpy as np
        import torch
    except ImportError as e:
        skip(f"{e.name} is not importable by {sys.executable}")
    if not os.path.exists(os.path.join(args.data, "train-images-idx3-ubyte.gz")):
        skip(f"no Fashion-MNIST in '{args.data}' (Debian package dataset-fashion-mnist)")

    train_set, test_set = load(args.data, "train"), load(args.data, "t10k")
    blas = blas_library()
    if not args.json:
        print(f"pytorch {torch.__version__}, BLAS {blas}", flush=True)
        if "/blas/libblas.so" in blas:
            print("note: that is the netlib reference BLAS, several times slower than OpenBLAS "
                  "(Debian libopenblas0-pthread)", flush=True)
    results = []
    for threads in ([args.threads] if args.threads else [1, 2]):
        rate, accuracy = train(threads, args.epochs, args.seed, train_set, test_set, not args.json)
        results.append((rate, threads, accuracy))
        if not args.json:
            print(f"threads {threads}: best {rate:,.0f} samples/s, test accuracy {accuracy:.4f}", flush=True)
    rate, threads, accuracy = max(results)
    if args.json:
        print(json.dumps({"framework": "pytorch", "threads": threads, "batch": BATCH,
                          "samples_per_sec": round(rate, 1), "test_accuracy": round(accuracy, 4),
                          "epochs": args.epochs, "blas": blas}))
    else:
        print(f"pytorch {torch.__version__}: best with {threads} thread(s): "
              f"{rate:,.0f} samples/s, test accuracy {accuracy:.4f}")


if __name__ == "__main__":
    main()
