#!/usr/bin/env bats
# Multi-label classification: sigmoid outputs and binary_crossentropy on
# multi-hot labels, from several CSV label columns (label: [a, b, c]) or a
# 2-D NPY label array. A rule-made set reaches high per-label accuracy; on
# scikit-learn's make_multilabel_classification the metrics (micro, macro,
# per-label, multi_label AUC) match scikit-learn on the predictions predict
# prints; predict prints every label's probability and the labels above
# --threshold; the metrics that read one class per sample are refused.
# Needs /usr/bin/python3 with numpy and sklearn (python3-sklearn); skips without.

load helpers

PY=/usr/bin/python3

setup() {
	common_setup
	export OMP_NUM_THREADS=1
	cd "$TMP"
	$PY -c 'import numpy, sklearn' 2>/dev/null || skip "no numpy and scikit-learn for /usr/bin/python3 (python3-sklearn)"
}

# model LABELS TRAIN TEST METRICS: m.yaml, 4 sigmoid outputs on TRAIN and TEST sources.
model() {
	cat >m.yaml <<-EOF
		model:
		  layers:
		    - dense: {units: 32, activation: relu}
		    - dense: {units: 4, activation: sigmoid}
		compile:
		  optimizer: {adam: {learning_rate: 0.01}}
		  loss: binary_crossentropy
		  metrics: $3
		data:
		  train: $1
		  test: $2
		  batch_size: 32
		fit: {epochs: 15, seed: 1}
		checkpoint: {dir: run}
	EOF
}

@test "NPY (N, 4) labels from a known rule: every label's accuracy above 0.95" {
	$PY - <<-'EOF'
		import numpy as np
		rng = np.random.default_rng(5)
		for name, n in (("train", 1500), ("test", 500)):
		    x = rng.normal(size=(n, 6)).astype(np.float32)
		    y = np.stack([x[:, 0] > 0, x[:, 1] + x[:, 2] > 0, x[:, 3] > 0.5, x[:, 4] - x[:, 5] > -0.3], 1)
		    np.save(name + "_x.npy", x)
		    np.save(name + "_y.npy", y.astype(np.float32))
	EOF
	model "{format: npy, x: train_x.npy, y: train_y.npy}" "{format: npy, x: test_x.npy, y: test_y.npy}" \
		"[binary_accuracy]"
	"$DTRAIN" fit m.yaml -q
	"$DTRAIN" predict m.yaml test_x.npy --json -q >pred.json
	$PY - <<-'EOF'
		import json
		import numpy as np
		y = np.load("test_y.npy")
		p = np.array([json.loads(l)["probabilities"] for l in open("pred.json")])
		acc = ((p > 0.5) == (y > 0.5)).mean(0)
		print("per-label accuracy", acc)
		assert p.shape == (500, 4) and (acc > 0.95).all()
	EOF
}

# ml_data: train.csv and test.csv from make_multilabel_classification, 8 features,
# label columns a, b, c, d and a weight column w of ones (which predict skips).
ml_data() {
	$PY - <<-'EOF'
		import numpy as np
		from sklearn.datasets import make_multilabel_classification
		X, Y = make_multilabel_classification(n_samples=1600, n_features=8, n_classes=4, n_labels=2,
		                                      random_state=0)
		X = X / X.max()
		for name, rows in (("train", slice(0, 1200)), ("test", slice(1200, 1600))):
		    with open(name + ".csv", "w") as f:
		        f.write("x0,x1,x2,x3,a,b,x4,x5,x6,x7,c,d,w\n")
		        for x, y in zip(X[rows], Y[rows]):
		            v = [f"{t:.5f}" for t in x]
		            f.write(",".join(v[:4] + [str(y[0]), str(y[1])] + v[4:] + [str(y[2]), str(y[3]), "1"]) + "\n")
	EOF
	model "{format: csv, path: train.csv, label: [a, b, c, d], sample_weight: w}" \
		"{format: csv, path: test.csv, label: [a, b, c, d], sample_weight: w}" \
		"[binary_accuracy, precision, recall, {f1_score: {average: macro}}, {f1_score: {average: micro}},
		  {f1_score: {average: weighted}}, {precision: {class_id: 2}}, {recall: {class_id: 3}},
		  {auc: {num_thresholds: 4000}}, {auc: {multi_label: true, num_thresholds: 4000}}]"
}

@test "CSV label columns: the metrics match scikit-learn on the predictions (micro, macro, weighted, per label, AUC)" {
	ml_data
	"$DTRAIN" fit m.yaml -q
	"$DTRAIN" evaluate m.yaml --json 2>/dev/null >eval.json
	"$DTRAIN" predict m.yaml test.csv --json -q >pred.json
	$PY - <<-'EOF'
		import json
		import numpy as np
		from sklearn import metrics as M
		e = json.load(open("eval.json"))
		rows = [l.strip().split(",") for l in open("test.csv")][1:]
		y = np.array([[int(r[4]), int(r[5]), int(r[10]), int(r[11])] for r in rows])
		p = np.array([json.loads(l)["probabilities"] for l in open("pred.json")])
		yp = (p > 0.5).astype(int)
		want = {
		    "binary_accuracy": (yp == y).mean(),
		    "precision": M.precision_score(y, yp, average="micro"),
		    "recall": M.recall_score(y, yp, average="micro"),
		    "f1_score": M.f1_score(y, yp, average="macro"),
		    "f1_score_1": M.f1_score(y, yp, average="micro"),
		    "f1_score_2": M.f1_score(y, yp, average="weighted"),
		    "precision_1": M.precision_score(y[:, 2], yp[:, 2]),
		    "recall_1": M.recall_score(y[:, 3], yp[:, 3]),
		    "auc": M.roc_auc_score(y.ravel(), p.ravel()),
		    "auc_1": M.roc_auc_score(y, p, average="macro"),
		}
		bad = 0
		for k, v in want.items():
		    print(f"{k}: dtrain {e[k]:.6f} scikit-learn {v:.6f}")
		    bad |= abs(e[k] - v) > (1e-3 if k.startswith("auc") else 1e-5)
		# the macro, micro and weighted scores differ here, so the test tells them apart
		assert len({round(want[k], 5) for k in ("f1_score", "f1_score_1", "f1_score_2")}) == 3
		assert e["binary_accuracy"] > 0.75
		raise SystemExit(int(bad))
	EOF
}

@test "predict: each label's probability and the labels above --threshold, in CSV and --json" {
	ml_data
	"$DTRAIN" fit m.yaml -q --set fit.epochs=3
	head -6 test.csv >five.csv
	"$DTRAIN" predict m.yaml five.csv -q --header >p.csv
	[ "$(head -1 p.csv)" = "index,labels,p_a,p_b,p_c,p_d" ]
	[ "$(wc -l <p.csv)" -eq 6 ]
	"$DTRAIN" predict m.yaml five.csv -q --json --threshold 0.3 >p.json
	"$DTRAIN" predict m.yaml five.csv -q --threshold 0.3 >p3.csv
	$PY - <<-'EOF'
		import csv, json
		names = ["a", "b", "c", "d"]
		rows = list(csv.DictReader(open("p.csv")))
		for r in rows:
		    p = [float(r["p_" + n]) for n in names]
		    assert r["labels"] == ";".join(n for n, q in zip(names, p) if q > 0.5), r
		    assert all(0 <= q <= 1 for q in p)
		for l, c in zip(open("p.json"), open("p3.csv")):
		    j = json.loads(l)
		    want = [n for n, q in zip(names, j["probabilities"]) if q > 0.3]
		    assert j["labels"] == want, j
		    assert c.split(",")[1] == ";".join(want), c
		    assert len(j["probabilities"]) == 4
		print("ok")
	EOF
	run --separate-stderr "$DTRAIN" predict m.yaml five.csv -q --threshold 1.5
	status_is 2
	stderr_has "--threshold must be a probability from 0 to 1"
}

@test "multi-label: metrics that read one class per sample, --report and bad label columns are errors" {
	ml_data
	run --separate-stderr "$DTRAIN" fit m.yaml -q --set 'compile.metrics=[categorical_accuracy]'
	status_is 2
	stderr_has "--set:1:" "'categorical_accuracy' reads one class per sample" "multi-label model" "binary_accuracy"
	run --separate-stderr "$DTRAIN" fit m.yaml -q --set 'compile.metrics=[{top_k_categorical_accuracy: {k: 2}}]'
	status_is 2
	stderr_has "multi-label model"
	run --separate-stderr "$DTRAIN" fit m.yaml -q --set 'compile.metrics=[{precision: {class_id: 4}}]'
	status_is 2
	stderr_has "class_id 4" "4 labels (0 to 3)"
	run --separate-stderr "$DTRAIN" fit m.yaml -q --set 'compile.metrics=[{auc: {multi_label: true, class_id: 1}}]'
	status_is 2
	stderr_has "give one of the two"
	"$DTRAIN" fit m.yaml -q --set fit.epochs=1
	run --separate-stderr "$DTRAIN" evaluate m.yaml --report
	status_is 2
	stderr_has "m.yaml:" "--report counts one class per sample" "multi-label"
	run --separate-stderr "$DTRAIN" fit m.yaml -q --set 'data.train.label=[a, bb]'
	status_is 2
	stderr_has "--set:1:" "has no column 'bb'"
	awk -F, -v OFS=, 'NR == 3 { $5 = "yes" } 1' train.csv >bad.csv && mv bad.csv train.csv
	run --separate-stderr "$DTRAIN" fit m.yaml -q
	[ "$status" -ne 0 ]
	stderr_has "train.csv', row 3, column 'a': the label 'yes' is not a number"
}

@test "a one-column label list is a label too: predict skips that column, not the last" {
	ml_data
	cat >one.yaml <<-EOF
		model:
		  layers:
		    - dense: {units: 1, activation: sigmoid}
		compile: {optimizer: adam, loss: binary_crossentropy}
		data:
		  train: {format: csv, path: train.csv, label: [b], sample_weight: w}
		  batch_size: 32
		fit: {epochs: 1, seed: 1}
		checkpoint: {dir: one}
	EOF
	"$DTRAIN" fit one.yaml -q
	# 11 features: every column but b and w; the file itself and its features alone predict the same
	cut -d, -f1-5,7-12 test.csv >features.csv
	"$DTRAIN" predict one.yaml features.csv -q >want.txt
	"$DTRAIN" predict one.yaml test.csv -q >got.txt
	[ "$(wc -l <want.txt)" -eq 400 ]
	diff want.txt got.txt
}
