#!/usr/bin/python3
"""Writes fruit.csv: a small generated tabular set (no third-party data) for
models/fruit_csv.yaml. Four measured features and a named class per row, in a
shuffled order; the classes overlap a little, so accuracy stays below 100%.

    python3 models/data/make_fruit.py > models/data/fruit.csv
"""
import random

# class: (mass kg, width cm, height cm, colour score 0..1), mean and spread
FRUIT = {
    "apple": ((0.165, 7.4, 7.3, 0.80), (0.025, 0.5, 0.6, 0.08)),
    "lemon": ((0.140, 6.2, 8.4, 0.72), (0.022, 0.4, 0.7, 0.06)),
    "mandarin": ((0.085, 6.0, 4.6, 0.76), (0.012, 0.4, 0.4, 0.05)),
    "orange": ((0.190, 7.6, 7.9, 0.78), (0.030, 0.5, 0.6, 0.06)),
}

rng = random.Random(2026)
rows = []
for name, (mean, sd) in FRUIT.items():
    for _ in range(60):
        v = [rng.gauss(m, s) for m, s in zip(mean, sd)]
        rows.append("%.3f,%.1f,%.1f,%.2f,%s" % (v[0], v[1], v[2], min(max(v[3], 0), 1), name))
rng.shuffle(rows)
print("mass_kg,width_cm,height_cm,color_score,fruit")
print("\n".join(rows))
