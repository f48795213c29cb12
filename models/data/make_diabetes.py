#!/usr/bin/python3
"""Writes diabetes_train.csv and diabetes_test.csv for models/diabetes_mlp.yaml
from scikit-learn's bundled copy of the diabetes data (Efron, Hastie,
Johnstone and Tibshirani, "Least Angle Regression", Annals of Statistics,
2004; Debian package python3-sklearn, sklearn.datasets.load_diabetes).

442 patients: ten baseline measurements (age, sex, body mass index, average
blood pressure and six blood serum values s1..s6, raw, not scaled) and the
target, a quantitative measure of disease progression one year later
(25 to 346). The rows are shuffled with a fixed seed and split 80/20: the
first 353 for training, the other 89 for testing. tests/bench/diabetes.py
scores scikit-learn's regressors on the same split.

    /usr/bin/python3 models/data/make_diabetes.py [DIR]   (default: this file's folder)
"""
import os
import random
import sys

from sklearn.datasets import load_diabetes

out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
d = load_diabetes(scaled=False)
header = ",".join(list(d.feature_names) + ["progression"])
rows = [",".join("%.10g" % v for v in list(x) + [y]) for x, y in zip(d.data, d.target)]
order = list(range(len(rows)))
random.Random(442).shuffle(order)
n_train = len(rows) * 4 // 5
for name, part in (("diabetes_train.csv", order[:n_train]), ("diabetes_test.csv", order[n_train:])):
    with open(os.path.join(out, name), "w") as f:
        f.write(header + "\n")
        f.writelines(rows[i] + "\n" for i in part)
