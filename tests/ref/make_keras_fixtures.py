#!/usr/bin/python3
"""
Model fixtures computed by Keras itself, for tests/unit/test_ref.c: where
the semantics are Keras' own and PyTorch has no counterpart, such as the
masks of Embedding(mask_zero=True) (issue 14), which the recurrent layers,
Bidirectional and GlobalAveragePooling1D honour. Each file holds a whole
small model rather than one layer:

    x                   (N, steps) token indices (as floats) with zeros where padded
    y                   the model's output for x (training mode)
    dy                  an upstream gradient
    <layer>/<param>     every parameter, by dtrain's layer name and Keras' name
    grad/<layer>/<param> d(sum(y * dy)) / d<param>

and string metadata: model (the YAML `layers` list, flow style, every layer
named), input_shape, description.

Run with Keras 3 on TensorFlow (make keras-venv makes build/venv):

    build/venv/bin/python tests/ref/make_keras_fixtures.py              # all cases into tests/ref/
    build/venv/bin/python tests/ref/make_keras_fixtures.py -o DIR CASE  # some cases elsewhere
    build/venv/bin/python tests/ref/make_keras_fixtures.py --list

Keras computes in float64 here (keras.config.set_floatx) from float32-rounded
parameters; the output is deterministic.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixture_io import f32, write_cases, yaml_layer  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

keras.config.set_floatx("float64")

VOCAB, DIM, STEPS = 5, 3, 6

# Padding before (Keras' pad_sequences default), after, inside, none, and a
# sample of padding only (left out where a mean over no step would be 0/0).
TOKENS = [
    [0, 0, 3, 1, 4, 2],
    [2, 4, 1, 0, 0, 0],
    [1, 0, 3, 0, 0, 4],
    [3, 1, 2, 4, 1, 2],
    [0, 0, 0, 0, 0, 0],
]


def keras_layer(kind, a):
    """The Keras layer of a dtrain (kind, args), named as dtrain names it."""
    a = dict(a)
    name = a.pop("name")
    if kind == "embedding":
        return keras.layers.Embedding(a["input_dim"], a["output_dim"], mask_zero=a.get("mask_zero", False),
                                      name=name)
    if kind == "bidirectional":
        (inner_kind, inner_args), = a["layer"].items()
        inner = keras_layer(inner_kind, dict(inner_args, name=inner_kind))
        return keras.layers.Bidirectional(inner, merge_mode=a.get("merge_mode", "concat"), name=name)
    cls = {"lstm": keras.layers.LSTM, "gru": keras.layers.GRU, "simple_rnn": keras.layers.SimpleRNN,
           "global_average_pooling1d": keras.layers.GlobalAveragePooling1D, "dense": keras.layers.Dense,
           "activation": keras.layers.Activation, "layer_normalization": keras.layers.LayerNormalization}[kind]
    return cls(name=name, **a)


def param_names(layer):
    """dtrain's names of a Keras layer's weights, in layer.weights order."""
    if isinstance(layer, keras.layers.Bidirectional):
        return [f"{sub.name}/{w.name}" for sub in (layer.forward_layer, layer.backward_layer) for w in sub.weights]
    return [w.name for w in layer.weights]


def run_case(c, seed):
    rng = np.random.default_rng(seed)
    tokens = np.array([t for t in TOKENS if c.get("empty", True) or any(t)], dtype=np.int32)
    layers = [keras_layer(kind, args) for kind, args in c["layers"]]
    model = keras.Sequential([keras.Input(shape=(STEPS,), dtype="int32")] + layers)
    tensors, params = [], []
    for layer in layers:
        values = [f32(rng.uniform(-0.6, 0.6, size=w.shape)) for w in layer.weights]
        layer.set_weights(values)
        for n, w, v in zip(param_names(layer), layer.weights, values):
            tensors.append((f"{layer.name}/{n}", v))
            params.append((f"{layer.name}/{n}", w))
    with tf.GradientTape() as tape:
        y = model(tokens, training=True)
        dy = f32(rng.uniform(-1, 1, size=y.shape))
        objective = tf.reduce_sum(y * dy)
    grads = tape.gradient(objective, [v for _, v in params])
    y = y.numpy()
    if not np.all(np.isfinite(y)):
        sys.exit(f"{c['name']}: Keras' output is not finite")
    tensors = [("x", tokens.astype(np.float64)), ("y", y), ("dy", dy)] + tensors
    for (n, v), g in zip(params, grads):
        if v.trainable:
            tensors.append((f"grad/{n}", np.zeros(v.shape) if g is None else tf.convert_to_tensor(g).numpy()))
    model_yaml = "[" + ", ".join("{" + yaml_layer(kind, args) + "}" for kind, args in c["layers"]) + "]"
    meta = {"model": model_yaml, "input_shape": str(STEPS), "description": c["desc"],
            "reference": f"Keras {keras.__version__} on TensorFlow {tf.__version__}"}
    return tensors, meta


def emb(**extra):
    return ("embedding", dict(name="embedding", input_dim=VOCAB, output_dim=DIM, mask_zero=True, **extra))


CASES = [
    dict(name="mask_lstm", layers=[emb(), ("lstm", dict(name="lstm", units=4))],
         desc="LSTM's last state skips the padding: before, after, inside, none, all"),
    dict(name="mask_lstm_backwards", layers=[emb(), ("lstm", dict(name="lstm", units=4, go_backwards=True))],
         desc="go_backwards reads the unmasked steps from the end"),
    dict(name="mask_lstm_sequences_mean", empty=False,
         layers=[emb(), ("lstm", dict(name="lstm", units=3, return_sequences=True)),
                 ("global_average_pooling1d", dict(name="global_average_pooling1d"))],
         desc="return_sequences repeats the last output at masked steps; the mean skips them"),
    dict(name="mask_gru", layers=[emb(), ("gru", dict(name="gru", units=4))],
         desc="GRU (reset_after) under a mask"),
    dict(name="mask_gru_v1_backwards_sequences", empty=False,
         layers=[emb(), ("gru", dict(name="gru", units=3, reset_after=False, go_backwards=True,
                                     return_sequences=True)),
                 ("global_average_pooling1d", dict(name="global_average_pooling1d"))],
         desc="GRU reset_after false, go_backwards, return_sequences, then the masked mean"),
    dict(name="mask_simple_rnn_stacked",
         layers=[emb(), ("simple_rnn", dict(name="simple_rnn", units=3, return_sequences=True)),
                 ("simple_rnn", dict(name="simple_rnn_1", units=2))],
         desc="the mask passes from one recurrent layer's sequences to the next"),
    dict(name="mask_bidirectional_lstm_sequences", empty=False,
         layers=[emb(), ("bidirectional", dict(name="bidirectional",
                                               layer={"lstm": {"units": 2, "return_sequences": True}})),
                 ("global_average_pooling1d", dict(name="global_average_pooling1d"))],
         desc="Bidirectional with return_sequences: zeros at masked steps (zero_output_for_mask)"),
    dict(name="mask_bidirectional_gru_sum",
         layers=[emb(), ("bidirectional", dict(name="bidirectional", layer={"gru": {"units": 3}},
                                               merge_mode="sum"))],
         desc="Bidirectional GRU's last states under a mask, summed"),
    dict(name="mask_mean", empty=False,
         layers=[emb(), ("global_average_pooling1d", dict(name="global_average_pooling1d"))],
         desc="GlobalAveragePooling1D divides by the unmasked steps"),
    dict(name="mask_through_layer_norm",
         layers=[emb(), ("activation", dict(name="activation", activation="tanh")),
                 ("layer_normalization", dict(name="layer_normalization")),
                 ("lstm", dict(name="lstm", units=3))],
         desc="activation and layer_normalization hand the mask on"),
]

if __name__ == "__main__":
    write_cases("Writes the Keras model fixtures of tests/unit/test_ref.c.", CASES, run_case, "model")
