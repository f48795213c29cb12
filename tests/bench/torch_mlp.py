#!/usr/bin/python3
"""PyTorch side of the Fashion-MNIST benchmarks (the MLP, the CNNs, the LSTM).

Trains, the way Keras does, on CPU, one of:

  mlp  the model of models/fashion_mlp.yaml: Flatten, Dense 512 relu,
       Dropout 0.2, Dense 512 relu, Dropout 0.2, Dense 10;
  cnn  Keras' MNIST CNN (models/fashion_cnn.yaml): Conv 32 3x3 relu, Conv 64
       3x3 relu, MaxPool 2, Dropout 0.25, Flatten, Dense 128 relu, Dropout 0.5,
       Dense 10; the NHWC input (28, 28, 1) is permuted to NCHW for torch;
  resnet  the residual CNN of models/fashion_resnet.yaml (make_resnet below),
       with its AdamW (lr 2e-3, weight decay 1e-4) and label smoothing 0.1;
  lstm the model of models/fashion_lstm.yaml: each (28, 28, 1) image as 28
       steps of 28 rows, torch.nn.LSTM(28, 128) (its last state), Dense 10;
       Keras' initial weights (orthogonal recurrent kernel, forget bias 1);

with softmax inside the loss, glorot-uniform kernels (xavier_uniform_ on
conv and linear weights) and zero biases, Adam(lr 1e-3, eps 1e-7), batch
128, shuffled every epoch, and reports the training throughput (the training
loop only: no data loading, no evaluation; the best epoch) and the test
accuracy.

    /usr/bin/python3 tests/bench/torch_mlp.py [--model mlp|cnn|resnet|lstm] [--epochs N]
        [--steps N] [--threads N] [--precision fp32|bf16] [--json]

--steps N ends each epoch after N batches (a CNN epoch takes minutes on a
CPU); the throughput counts the samples of those batches. --precision bf16
runs the forward pass and the loss under torch.autocast("cpu", bfloat16),
PyTorch's CPU mixed precision (convolutions and linear layers in bfloat16,
float32 weights and optimizer), the counterpart of dtrain's
compile.precision: bf16. Without --threads
it runs once with 1 thread and once with 2 and reports the faster. Prints
"SKIP: ..." and exits 0 where torch, numpy or the data is missing.
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


def blas_description():
    """The BLAS path and, for OpenBLAS, the kernel it chose: on a CPU it does
    not recognize (a hypervisor's "Intel Xeon Processor", say) it falls back
    to Prescott, the generic SSE3 kernel, which makes a reference several
    times slower than it should be; OPENBLAS_CORETYPE picks another."""
    path = blas_library()
    try:
        lib = ctypes.CDLL(path)
        lib.openblas_get_corename.restype = ctypes.c_char_p
        core = lib.openblas_get_corename().decode()
    except (OSError, AttributeError):
        return path
    if core.lower() == "prescott":
        return f"{path} (OpenBLAS kernel {core}: the generic fallback; set OPENBLAS_CORETYPE, e.g. SkylakeX or Haswell, for a fair reference)"
    return f"{path} (OpenBLAS kernel {core})"


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


# ---- the residual CNN (issue 14, resnet) ----

def make_resnet():
    """models/fashion_resnet.yaml: a 3x3 stem (32, no bias) + BN + relu, then two
    basic blocks that halve the size (64, then 128 channels): [conv 3x3 stride
    2, BN, relu, conv 3x3, BN] + a strided 1x1 projection (with bias), relu;
    global average pooling, dropout 0.2, dense 10. BN epsilon 1e-3 as Keras.
    Torch pads the strided 3x3 by 1 on every side where Keras' 'same' pads
    0/1: the same shapes and work."""
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self, cin, cout):
            super().__init__()
            self.body = nn.Sequential(
                nn.Conv2d(cin, cout, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(cout, eps=1e-3),
                nn.ReLU(), nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout, eps=1e-3))
            self.projection = nn.Conv2d(cin, cout, 1, stride=2)

        def forward(self, x):
            return torch.relu(self.body(x) + self.projection(x))

    class Permute(nn.Module):
        def forward(self, x):
            return x.permute(0, 3, 1, 2)

    return nn.Sequential(
        Permute(), nn.Conv2d(1, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32, eps=1e-3), nn.ReLU(),
        Block(32, 64), Block(64, 128), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.2), nn.Linear(128, 10))


# ---- the LSTM (issue 14, rnn) ----

def make_lstm_model():
    """models/fashion_lstm.yaml in torch: LSTM 128 over the 28 rows, its last state into Dense 10."""
    class LSTMClassifier(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = torch.nn.LSTM(28, 128, batch_first=True)
            self.dense = torch.nn.Linear(128, 10)

        def forward(self, x):
            seq, _ = self.lstm(x.reshape(-1, 28, 28))
            return self.dense(seq[:, -1])

    model = LSTMClassifier()
    with torch.no_grad():  # Keras' LSTM: glorot kernel, orthogonal recurrent kernel, zero bias but forget 1
        torch.nn.init.xavier_uniform_(model.lstm.weight_ih_l0)
        torch.nn.init.orthogonal_(model.lstm.weight_hh_l0)
        model.lstm.bias_ih_l0.zero_()
        model.lstm.bias_ih_l0[128:256] = 1
        model.lstm.bias_hh_l0.zero_()
    torch.nn.init.xavier_uniform_(model.dense.weight)
    torch.nn.init.zeros_(model.dense.bias)
    return model


def make_model(kind):
    if kind == "lstm":
        return make_lstm_model()
    if kind == "resnet":
        model = make_resnet()
        for m in model.modules():
            if isinstance(m, (torch.nn.Linear, torch.nn.Conv2d)):
                torch.nn.init.xavier_uniform_(m.weight)  # Keras glorot_uniform
                if m.bias is not None:
                    torch.nn.init.zeros_(m.bias)
        return model
    if kind == "cnn":
        class Permute(torch.nn.Module):
            def forward(self, x):
                return x.permute(0, 3, 1, 2)

        model = torch.nn.Sequential(
            Permute(),  # (N, 28, 28, 1) as Keras feeds it -> (N, 1, 28, 28)
            torch.nn.Conv2d(1, 32, 3), torch.nn.ReLU(),
            torch.nn.Conv2d(32, 64, 3), torch.nn.ReLU(),
            torch.nn.MaxPool2d(2), torch.nn.Dropout(0.25),
            torch.nn.Flatten(),
            torch.nn.Linear(64 * 12 * 12, 128), torch.nn.ReLU(), torch.nn.Dropout(0.5),
            torch.nn.Linear(128, 10),
        )
    else:
        model = torch.nn.Sequential(
            torch.nn.Flatten(),
            torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Dropout(0.2),
            torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Dropout(0.2),
            torch.nn.Linear(512, 10),
        )
    for m in model:
        if isinstance(m, (torch.nn.Linear, torch.nn.Conv2d)):
            torch.nn.init.xavier_uniform_(m.weight)  # Keras glorot_uniform
            torch.nn.init.zeros_(m.bias)
    return model


def train(kind, threads, epochs, steps, seed, train_set, test_set, verbose, bf16):
    """Returns (best samples/s over epochs, test accuracy). steps > 0 ends each
    epoch after that many batches; bf16: forward and loss under CPU autocast."""
    set_threads(threads)
    torch.manual_seed(seed)
    x, y = train_set
    n = x.shape[0]
    batches = (n + BATCH - 1) // BATCH
    if steps:
        batches = min(batches, steps)
    model = make_model(kind)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-7)
    loss_fn = torch.nn.CrossEntropyLoss()
    if kind == "resnet":  # fashion_resnet.yaml's optimizer and loss
        opt = torch.optim.AdamW(model.parameters(), lr=2e-3, betas=(0.9, 0.999), eps=1e-7, weight_decay=1e-4)
        loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
    best = 0.0
    for epoch in range(1, epochs + 1):
        model.train()
        total = torch.zeros(())
        seen = 0
        start = time.perf_counter()
        perm = torch.randperm(n)
        for i in range(0, batches * BATCH, BATCH):
            idx = perm[i:i + BATCH]
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                loss = loss_fn(model(x[idx]), y[idx])
            loss.backward()
            opt.step()
            total += loss.detach() * idx.shape[0]
            seen += idx.shape[0]
        seconds = time.perf_counter() - start
        rate = seen / seconds
        best = max(best, rate)
        if verbose:
            print(f"{kind}, threads {threads}: epoch {epoch}/{epochs} ({batches} steps): {rate:,.0f} samples/s "
                  f"({seconds:.2f} s), loss {total.item() / seen:.4f}", flush=True)
    model.eval()
    correct = 0
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        xt, yt = test_set
        for i in range(0, xt.shape[0], 1000):  # chunks: the CNN's activations of 10,000 images take GBs
            correct += (model(xt[i:i + 1000]).argmax(1) == yt[i:i + 1000]).sum().item()
    return best, correct / xt.shape[0]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--threads", type=int, default=0, help="torch threads (default: try 1 and 2)")
    p.add_argument("--json", action="store_true", help="print one JSON line")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data", default=DATA, help="folder of the Fashion-MNIST .gz files")
    p.add_argument("--model", default="mlp", choices=["mlp", "cnn", "resnet", "lstm"])
    p.add_argument("--steps", type=int, default=0, help="batches per epoch (default: all)")
    p.add_argument("--precision", default="fp32", choices=["fp32", "bf16"],
                   help="bf16: torch.autocast on the CPU in bfloat16")
    args = p.parse_args()
    if args.epochs < 1 or args.threads < 0 or args.steps < 0:
        p.error("--epochs must be at least 1, --threads and --steps not negative")

    global np, torch
    try:
        import numpy as np
        import torch
    except ImportError as e:
        skip(f"{e.name} is not importable by {sys.executable}")
    if not os.path.exists(os.path.join(args.data, "train-images-idx3-ubyte.gz")):
        skip(f"no Fashion-MNIST in '{args.data}' (Debian package dataset-fashion-mnist)")

    train_set, test_set = load(args.data, "train"), load(args.data, "t10k")
    blas = blas_description()
    if not args.json:
        print(f"pytorch {torch.__version__}, BLAS {blas}", flush=True)
        if "/blas/libblas.so" in blas:
            print("note: that is the netlib reference BLAS, several times slower than OpenBLAS "
                  "(Debian libopenblas0-pthread)", flush=True)
    results = []
    for threads in ([args.threads] if args.threads else [1, 2]):
        rate, accuracy = train(args.model, threads, args.epochs, args.steps, args.seed, train_set, test_set,
                               not args.json, args.precision == "bf16")
        results.append((rate, threads, accuracy))
        if not args.json:
            print(f"threads {threads}: best {rate:,.0f} samples/s, test accuracy {accuracy:.4f}", flush=True)
    rate, threads, accuracy = max(results)
    if args.json:
        print(json.dumps({"framework": "pytorch", "model": args.model, "threads": threads, "batch": BATCH,
                          "samples_per_sec": round(rate, 1), "test_accuracy": round(accuracy, 4),
                          "epochs": args.epochs, "steps": args.steps, "precision": args.precision,
                          "blas": blas}))
    else:
        print(f"pytorch {torch.__version__}, {args.model}: best with {threads} thread(s): "
              f"{rate:,.0f} samples/s, test accuracy {accuracy:.4f}")


if __name__ == "__main__":
    main()
