#!/usr/bin/python3
"""
Builds a dtrain model file's layer list as a Keras 3 Sequential model and
prints one line per layer, "name|shape|params", shape as Keras prints it
((None, 6, 10)), then "total|N". keras.bats compares these lines with
dtrain summary's rows, so the shapes and parameter counts a user reads are
Keras' own.

    build/venv/bin/python tests/tools/keras_summary.py MODEL.yaml

Needs keras (tensorflow-cpu, `make keras-venv`) and PyYAML. The model file
must give model.input_shape; residual blocks have no Sequential form and are
refused. A layer's YAML name maps to its Keras class (conv2d -> Conv2D,
global_max_pooling1d -> GlobalMaxPooling1D) and its arguments pass through
as Keras keyword arguments; bidirectional's `layer` is built the same way.
"""
import os
import re
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import keras  # noqa: E402
import yaml  # noqa: E402


def keras_class(name):
    # conv2d -> Conv2D, global_max_pooling1d -> GlobalMaxPooling1D, lstm -> LSTM
    words = name.split("_")
    upper = {"lstm": "LSTM", "gru": "GRU", "rnn": "RNN"}
    camel = "".join(upper.get(w, re.sub(r"(\d)d$", r"\1D", w.capitalize())) for w in words)
    if not hasattr(keras.layers, camel):
        sys.exit("keras_summary: no Keras layer %s for '%s'" % (camel, name))
    return getattr(keras.layers, camel)


def build(item):
    if isinstance(item, str):
        name, args = item, {}
    else:
        (name, args), = item.items()
        args = dict(args or {})
    if name == "residual":
        sys.exit("keras_summary: residual blocks have no Sequential form")
    if name == "bidirectional":
        return keras.layers.Bidirectional(build(args.pop("layer")), **args)
    return keras_class(name)(**args)


def main():
    spec = yaml.safe_load(open(sys.argv[1]))["model"]
    model = keras.Sequential([keras.Input(tuple(spec["input_shape"]))] + [build(i) for i in spec["layers"]])
    for layer in model.layers:
        print("%s|%s|%d" % (layer.name, tuple(layer.output.shape), layer.count_params()))
    print("total|%d" % model.count_params())


if __name__ == "__main__":
    main()
