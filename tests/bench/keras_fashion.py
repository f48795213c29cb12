"""Keras side of the Fashion-MNIST benchmarks (tests/bench/bench.sh).

Trains models/fashion_mlp.yaml's MLP or Keras' MNIST CNN (models/fashion_cnn.yaml)
with Keras 3 on TensorFlow's CPU build, the way dtrain's files describe them:
glorot-uniform kernels, zero biases, Adam(lr 1e-3, eps 1e-7), batch 128,
shuffled, inputs scaled by 1/255, sparse categorical crossentropy. Reports
the best epoch's training throughput (a callback times each epoch's batches:
no evaluation inside) and the test accuracy, as one JSON line.

    build/venv/bin/python tests/bench/keras_fashion.py --model mlp|cnn --threads N
        [--epochs N] [--steps N] [--precision fp32|bf16]

--threads sets TensorFlow's intra-op threads (inter-op 1); --precision bf16
uses Keras' mixed_bfloat16 policy (bfloat16 compute, float32 variables), the
counterpart of dtrain's compile.precision: bf16. Prints "SKIP: ..." and
exits 0 where Keras or the data is missing. `make keras-venv` makes the
environment (tensorflow-cpu from PyPI, about 1.5 GB); make check never needs it.
"""
import argparse
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


def load(np, split):
    with gzip.open(os.path.join(DATA, f"{split}-images-idx3-ubyte.gz"), "rb") as f:
        x = np.frombuffer(f.read(), dtype=np.uint8, offset=16).reshape(-1, 28, 28, 1)
    with gzip.open(os.path.join(DATA, f"{split}-labels-idx1-ubyte.gz"), "rb") as f:
        y = np.frombuffer(f.read(), dtype=np.uint8, offset=8)
    return x.astype("float32") / 255.0, y.astype("int32")


def model_of(keras, kind):
    L = keras.layers
    if kind == "mlp":
        layers = [L.Flatten(), L.Dense(512, activation="relu"), L.Dropout(0.2),
                  L.Dense(512, activation="relu"), L.Dropout(0.2), L.Dense(10)]
    else:
        layers = [L.Conv2D(32, 3, activation="relu"), L.Conv2D(64, 3, activation="relu"), L.MaxPooling2D(),
                  L.Dropout(0.25), L.Flatten(), L.Dense(128, activation="relu"), L.Dropout(0.5), L.Dense(10)]
    # The logits' softmax in float32, as Keras' mixed-precision guide has it.
    return keras.Sequential([keras.Input((28, 28, 1))] + layers + [L.Activation("softmax", dtype="float32")])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="mlp", choices=["mlp", "cnn"])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--steps", type=int, default=0, help="batches per epoch (default: all)")
    p.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    args = p.parse_args()
    if not os.path.exists(os.path.join(DATA, "train-images-idx3-ubyte.gz")):
        skip(f"no Fashion-MNIST in {DATA} (Debian package dataset-fashion-mnist)")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        import numpy as np
        import tensorflow as tf
        import keras
    except ImportError as e:
        skip(f"{e.name} is not importable by {sys.executable} (make keras-venv)")
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    if args.precision == "bf16":
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    keras.utils.set_random_seed(0)
    (x, y), (xt, yt) = load(np, "train"), load(np, "t10k")
    if args.steps:
        x, y = x[:args.steps * BATCH], y[:args.steps * BATCH]
    model = model_of(keras, args.model)
    model.compile(optimizer=keras.optimizers.Adam(1e-3, epsilon=1e-7), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])

    class Clock(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.rates = []

        def on_epoch_begin(self, epoch, logs=None):
            self.start = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            self.rates.append(x.shape[0] / (time.perf_counter() - self.start))

    clock = Clock()
    model.fit(x, y, batch_size=BATCH, epochs=args.epochs, shuffle=True, verbose=0, callbacks=[clock])
    _, accuracy = model.evaluate(xt, yt, batch_size=1000, verbose=0)
    print(json.dumps({"framework": "keras", "keras": keras.__version__, "tensorflow": tf.__version__,
                      "model": args.model, "threads": args.threads, "precision": args.precision,
                      "samples_per_sec": round(max(clock.rates), 1), "test_accuracy": round(float(accuracy), 4)}))


if __name__ == "__main__":
    main()
