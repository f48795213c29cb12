#!/usr/bin/python3
"""Regression side by side: dtrain's models/diabetes_mlp.yaml against
scikit-learn's LinearRegression and MLPRegressor on the same split of the
diabetes data (models/data/diabetes_{train,test}.csv), scored on the test rows
with MAE and RMSE.

Every model trains on all 353 training rows (dtrain with
data.validation_split=0) with the features standardized by the training
rows' mean and standard deviation (dtrain: data.normalize: auto;
scikit-learn: StandardScaler) and the raw targets. MLPRegressor is set up as
the YAML's model: one hidden layer of 32 relu units, Adam with learning rate
0.01, batch 32, the same number of epochs, no L2 penalty (alpha 0). The
seeds differ (the networks start from other weights), so compare within a
few points, not digit for digit.

    /usr/bin/python3 tests/bench/diabetes.py [--epochs N]
        (DTRAIN: the binary, default build/dtrain; needs python3-sklearn)
"""
import argparse
import json
import os
import subprocess
import warnings

import numpy as np
from sklearn.linear_model import LinearRegression
from sklearn.neural_network import MLPRegressor
from sklearn.preprocessing import StandardScaler

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
ap = argparse.ArgumentParser()
ap.add_argument("--epochs", type=int, default=100)
args = ap.parse_args()


def load(name):
    a = np.loadtxt(os.path.join(root, "models", "data", name), delimiter=",", skiprows=1)
    return a[:, :-1], a[:, -1]


def scores(pred, y):
    return np.abs(pred - y).mean(), np.sqrt(((pred - y) ** 2).mean())


x_train, y_train = load("diabetes_train.csv")
x_test, y_test = load("diabetes_test.csv")
scale = StandardScaler().fit(x_train)
x_train, x_test = scale.transform(x_train), scale.transform(x_test)

dtrain = os.environ.get("DTRAIN", os.path.join(root, "build", "dtrain"))
out = subprocess.run([dtrain, "fit", os.path.join(root, "models", "diabetes_mlp.yaml"), "--json", "-q",
                      "--set", "data.validation_split=0", "--set", "fit.epochs=%d" % args.epochs,
                      "--set", "checkpoint.enabled=false"],
                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=True, text=True).stdout
test = [e for e in map(json.loads, out.splitlines()) if e.get("event") == "test"][0]

rows = [("dtrain diabetes_mlp.yaml", test["mae"], test["rmse"]),
        ("sklearn LinearRegression",) + scores(LinearRegression().fit(x_train, y_train).predict(x_test), y_test)]
mlp = MLPRegressor(hidden_layer_sizes=(32,), learning_rate_init=0.01, batch_size=32, max_iter=args.epochs,
                   alpha=0, random_state=1)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # it stops at max_iter without converging, as dtrain stops at its epochs
    mlp.fit(x_train, y_train)
rows.append(("sklearn MLPRegressor (32,)",) + scores(mlp.predict(x_test), y_test))

print("diabetes: %d training rows, %d test rows, %d epochs" % (len(y_train), len(y_test), args.epochs))
print("%-28s %8s %8s" % ("model", "MAE", "RMSE"))
for name, mae, rmse in rows:
    print("%-28s %8.2f %8.2f" % (name, mae, rmse))
