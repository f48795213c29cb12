#!/usr/bin/python3
"""Windows of Seattle's daily weather for models/seattle_weather_conv1d.yaml.

    /usr/bin/python3 models/seattle_weather.py [--out DIR] [--source CSV] [--window W]

reads seattle-weather.csv of the Debian package python3-vega-datasets
(1,461 days, 2012-01-01 to 2015-12-31: precipitation, temp_max, temp_min,
wind, weather) and writes, in DIR (default seattle-weather/ at the top of
the repository, where the model looks):

    train_x.npy  (N, W, 6) float32   the W days before each target day, days
    train_y.npy  (N, 1) float32      oldest first; y is the target day's
    test_x.npy, test_y.npy           temp_max in degrees Celsius

Each day of a window has 6 channels: precipitation, temp_max, temp_min,
wind, and sin and cos of the day of the year (2 pi doy / 365.25), the first
four standardized by the training days' mean and standard deviation (the
script does it: dtrain's data.normalize takes one mean for a sequence
sample, not one per channel). Training windows are those whose target day
is in 2012-2014, test windows those of 2015: a forecast is tested on a year
it has not seen. W defaults to 14.

It then prints the baselines a forecaster asks for, on the same test
windows: persistence (tomorrow's temp_max = today's), the training years'
mean temp_max of the target's calendar month (climatology), and scikit-learn's LinearRegression and Ridge on the
flattened windows (when python3-sklearn is installed), as MAE and RMSE in
degrees. Needs NumPy (python3-numpy): run it with Debian's /usr/bin/python3.
"""
import argparse
import csv
import datetime
import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = "/usr/lib/python3/dist-packages/vega_datasets/_data/seattle-weather.csv"


def read_days(path):
    days = []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            d = datetime.datetime.strptime(row["date"], "%Y/%m/%d").date()
            days.append((d, [float(row[k]) for k in ("precipitation", "temp_max", "temp_min", "wind")]))
    days.sort()
    for (a, _), (b, _) in zip(days, days[1:]):
        if (b - a).days != 1:
            sys.exit(f"{path}: the days jump from {a} to {b}; the windows need consecutive days")
    return days


def errors(pred, y):
    e = np.asarray(pred, dtype=np.float64).ravel() - np.asarray(y, dtype=np.float64).ravel()
    return float(np.mean(np.abs(e))), float(np.sqrt(np.mean(e * e)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(HERE, "..", "seattle-weather"))
    ap.add_argument("--source", default=SOURCE)
    ap.add_argument("--window", type=int, default=14)
    opt = ap.parse_args()
    if not os.path.exists(opt.source):
        sys.exit(f"{opt.source}: not found; install the Debian package python3-vega-datasets")
    days = read_days(opt.source)
    w = opt.window
    raw = np.array([v for _, v in days], dtype=np.float64)           # (days, 4)
    year = np.array([d.year for d, _ in days])
    month = np.array([d.month for d, _ in days])
    doy = np.array([d.timetuple().tm_yday for d, _ in days], dtype=np.float64)
    train_days = year <= 2014
    mean, std = raw[train_days].mean(axis=0), raw[train_days].std(axis=0)
    feat = np.concatenate([(raw - mean) / std, np.sin(2 * math.pi * doy / 365.25)[:, None],
                           np.cos(2 * math.pi * doy / 365.25)[:, None]], axis=1)
    targets = np.arange(w, len(days))                                  # the target day of each window
    x = np.stack([feat[t - w:t] for t in targets]).astype(np.float32)  # (N, w, 6)
    y = raw[targets, 1:2].astype(np.float32)                           # temp_max
    test = year[targets] == 2015
    os.makedirs(opt.out, exist_ok=True)
    for name, part in (("train", ~test), ("test", test)):
        np.save(os.path.join(opt.out, f"{name}_x.npy"), x[part])
        np.save(os.path.join(opt.out, f"{name}_y.npy"), y[part])
    print(f"{opt.out}: {int((~test).sum())} training windows (targets in 2012-2014), {int(test.sum())} test "
          f"windows (2015), {w} days x 6 channels each")

    yt = y[test]
    rows = [("persistence (tomorrow = today)", raw[targets[test] - 1, 1])]
    clim = {m: raw[train_days & (month == m), 1].mean() for m in range(1, 13)}
    rows.append(("climatology (the month's mean)", [clim[m] for m in month[targets[test]]]))
    try:
        from sklearn.linear_model import LinearRegression, Ridge
        xf = x.reshape(len(x), -1)
        for name, model in (("LinearRegression on the windows", LinearRegression()),
                            ("Ridge(alpha=1) on the windows", Ridge(alpha=1.0))):
            model.fit(xf[~test], y[~test].ravel())
            rows.append((name, model.predict(xf[test])))
    except ImportError:
        print("(no python3-sklearn: the linear baselines are not computed)")
    print("baselines on the 2015 test windows (temp_max, degrees C):")
    for name, pred in rows:
        mae, rmse = errors(pred, yt)
        print(f"  {name:34s} MAE {mae:.3f}  RMSE {rmse:.3f}")


if __name__ == "__main__":
    main()
