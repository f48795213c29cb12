#!/usr/bin/env bats
# compile.metrics beyond accuracy: precision, recall, f1_score and auc,
# computed over the whole epoch from confusion counts and threshold
# histograms. Checked against scikit-learn (and a NumPy copy of Keras' AUC
# formulas) on the predictions dtrain predict prints, across replicas and MPI
# ranks, through a resume, as monitors, and their config errors.
# Needs /usr/bin/python3 with numpy and sklearn (python3-sklearn); the
# comparisons skip without them.

load helpers

setup() {
	common_setup
	export OMP_NUM_THREADS=1
	cd "$TMP"
}

PY=/usr/bin/python3

need_sklearn() {
	$PY -c 'import numpy, sklearn' 2>/dev/null || skip "no numpy and scikit-learn for /usr/bin/python3 (python3-sklearn)"
}

# gen_csv CLASSES: train.csv and test.csv, two features and a label column.
gen_csv() {
	$PY - "$1" <<-'EOF'
		import sys
		import numpy as np
		k = int(sys.argv[1])
		rng = np.random.default_rng(3)
		for name, n in (("train", 800), ("test", 400)):
		    y = rng.integers(0, k, n)
		    x = rng.normal(size=(n, 2)) + np.stack([np.cos(y * 2.1), np.sin(y * 2.1)], 1) * 1.2
		    with open(name + ".csv", "w") as f:
		        f.write("x1,x2,label\n")
		        for a, b, c in zip(x[:, 0], x[:, 1], y):
		            f.write(f"{a:.6f},{b:.6f},{c}\n")
	EOF
}

# fit_eval_predict INPUT ARGS...: fits m.yaml, then eval.json (evaluate --json) and
# pred.json (predict --all --json of INPUT; ALL= for no --all), with ARGS for all three; and ref.py, which
# loads them for the comparisons (e, rows) and compares (check).
fit_eval_predict() {
	local input=$1
	shift
	"$DTRAIN" fit m.yaml -q "$@"
	"$DTRAIN" evaluate m.yaml --json "$@" 2>/dev/null >eval.json
	"$DTRAIN" predict m.yaml "$input" ${ALL---all} --json -q "$@" >pred.json
	cat >ref.py <<-'EOF'
		import json
		import numpy as np
		from sklearn import metrics as M
		e = json.load(open("eval.json"))
		rows = [json.loads(l) for l in open("pred.json")]

		def check(want, tol=1e-3):
		    bad = 0
		    for k, v in want.items():
		        print(f"{k}: dtrain {e[k]:.6f} reference {v:.6f}")
		        bad |= abs(e[k] - v) > tol * max(1, abs(v))
		    return int(bad)
	EOF
}

# model UNITS ACTIVATION LOSS METRICS: m.yaml on train.csv and test.csv.
model() {
	cat >m.yaml <<-EOF
		model:
		  layers:
		    - dense: {units: 8, activation: relu}
		    - dense: {units: $1, activation: $2}
		compile:
		  optimizer: {adam: {learning_rate: 0.02}}
		  loss: $3
		  metrics: $4
		data:
		  train: {format: csv, path: train.csv, label: label}
		  test: {format: csv, path: test.csv, label: label}
		  batch_size: 32
		fit: {epochs: 3, seed: 1}
		checkpoint: {dir: run}
	EOF
}

@test "binary: auc (ROC, PR), precision, recall and f1_score match scikit-learn and Keras' formulas on the predictions" {
	need_sklearn
	gen_csv 2
	model 1 sigmoid binary_crossentropy \
		'[accuracy, {auc: {num_thresholds: 10000}}, {auc: {curve: PR}}, auc, precision, recall, f1_score,
		{binary_accuracy: {threshold: 0.3}}]'
	fit_eval_predict test.csv
	run $PY - <<-'EOF'
		from ref import *
		p = np.array([r["probabilities"][1] for r in rows])
		y = np.loadtxt("test.csv", delimiter=",", skiprows=1)[:, 2].astype(int)

		def keras_auc(y, p, n, curve):
		    t = np.array([-1e-7] + [i / (n - 1) for i in range(1, n - 1)] + [1 + 1e-7], dtype=np.float32)
		    pp = p.astype(np.float32)[None, :] > t[:, None]
		    tp = (pp & (y == 1)).sum(1).astype(float); fp = (pp & (y == 0)).sum(1).astype(float)
		    fn = (y == 1).sum() - tp; tn = (y == 0).sum() - fp
		    if curve == "ROC":
		        tpr = tp / (tp + fn); fpr = fp / (fp + tn)
		        return np.sum((fpr[:-1] - fpr[1:]) * (tpr[:-1] + tpr[1:]) / 2)
		    dtp = tp[:-1] - tp[1:]; q = tp + fp; dq = q[:-1] - q[1:]
		    slope = np.divide(dtp, dq, out=np.zeros_like(dtp), where=dq > 0)
		    icpt = tp[1:] - slope * q[1:]
		    ratio = np.where((q[:-1] > 0) & (q[1:] > 0), np.divide(q[:-1], q[1:], out=np.ones_like(dtp), where=q[1:] > 0), 1)
		    den = tp[1:] + fn[1:]
		    return np.sum(np.divide(slope * (dtp + icpt * np.log(ratio)), den, out=np.zeros_like(dtp), where=den > 0))

		yhat = (p > 0.5).astype(int)
		want = {
		    "auc": M.roc_auc_score(y, p),
		    "auc_1": keras_auc(y, p, 200, "PR"),
		    "auc_2": keras_auc(y, p, 200, "ROC"),
		    "precision": M.precision_score(y, yhat),
		    "recall": M.recall_score(y, yhat),
		    "f1_score": M.f1_score(y, yhat),
		    "accuracy": M.accuracy_score(y, yhat),
		    "binary_accuracy": M.accuracy_score(y, p > 0.3),
		}
		# A model better than chance, so that the comparison means something.
		raise SystemExit(check(want) | (not 0.7 < e["auc"] < 1))
	EOF
	echo "$output"
	status_is 0
}

@test "multi-class: macro, micro and weighted averages and class_id match scikit-learn" {
	need_sklearn
	gen_csv 3
	model 3 softmax sparse_categorical_crossentropy '[accuracy, f1_score, {f1_score: {average: weighted}},
		{precision: {average: micro}}, {precision: {class_id: 2}}, {recall: {average: macro}},
		{auc: {class_id: 1, num_thresholds: 10000}}, sparse_categorical_accuracy,
		{sparse_top_k_categorical_accuracy: {k: 2}}]'
	fit_eval_predict test.csv
	run $PY - <<-'EOF'
		from ref import *
		p = np.array([r["probabilities"] for r in rows])
		y = np.loadtxt("test.csv", delimiter=",", skiprows=1)[:, 2].astype(int)
		yhat = p.argmax(1)
		want = {
		    "f1_score": M.f1_score(y, yhat, average="macro"),
		    "f1_score_1": M.f1_score(y, yhat, average="weighted"),
		    "precision": M.precision_score(y, yhat, average="micro"),
		    "precision_1": M.precision_score(y, yhat, labels=[2], average=None)[0],
		    "recall": M.recall_score(y, yhat, average="macro"),
		    "auc": M.roc_auc_score(y == 1, p[:, 1]),
		    "sparse_categorical_accuracy": M.accuracy_score(y, yhat),
		    "sparse_top_k_categorical_accuracy": M.top_k_accuracy_score(y, p, k=2),
		}
		raise SystemExit(check(want))
	EOF
	echo "$output"
	status_is 0
}

@test "regression: mean_squared_error, mean_absolute_percentage_error and r2_score match scikit-learn" {
	need_sklearn
	cp "$REPO/models/diabetes_mlp.yaml" m.yaml
	mkdir data
	cp "$REPO"/models/data/diabetes_*.csv data/
	local set='compile.metrics=[mse, mape, r2_score, {mean_squared_error: {}}]'
	ALL= fit_eval_predict data/diabetes_test.csv --set fit.epochs=20 --set checkpoint.dir=run --set "$set"
	run $PY - <<-'EOF'
		from ref import *
		p = np.array([r["values"][0] for r in rows])
		y = np.loadtxt("data/diabetes_test.csv", delimiter=",", skiprows=1)[:, -1]
		want = {
		    "mse": M.mean_squared_error(y, p),
		    "mean_squared_error": M.mean_squared_error(y, p),
		    "mape": 100 * M.mean_absolute_percentage_error(y, p),
		    "r2_score": M.r2_score(y, p),
		}
		raise SystemExit(check(want) | (abs(e["mse"] - e["loss"]) > 1e-3 * e["loss"]))
	EOF
	echo "$output"
	status_is 0
}

@test "categorical accuracies on one-hot labels: categorical_accuracy is accuracy, top-k of every class is 1" {
	"$DTRAIN" fit "$MODELS/blobs.yaml" -q --set data.one_hot=true --set fit.epochs=2 \
		--set compile.loss=categorical_crossentropy --set checkpoint.dir="$TMP/oh" --json \
		--set 'compile.metrics=[accuracy, categorical_accuracy, top_k_categorical_accuracy,
			{top_k_categorical_accuracy: {k: 1}}, {binary_accuracy: {threshold: 0.4}}]' >oh.json
	jq -e 'select(.event == "epoch" or .event == "test") | .categorical_accuracy == .accuracy and
		.top_k_categorical_accuracy == 1 and .top_k_categorical_accuracy_1 == .accuracy and
		.binary_accuracy > 0 and .binary_accuracy < 1' oh.json >/dev/null
	[ "$(jq -s '[.[] | select(.event == "epoch" or .event == "test")] | length' oh.json)" -eq 3 ]
}

# blobs_metrics DIR ARGS...: blobs with auc and f1_score, --json epoch lines in DIR.json.
blobs_metrics() {
	local dir=$1
	shift
	"$DTRAIN" fit "$MODELS/blobs.yaml" -q --json --set fit.epochs=2 --set checkpoint.dir="$TMP/$dir" \
		--set 'compile.metrics=[accuracy, auc, f1_score, {recall: {class_id: 1}}]' "$@" >"$TMP/$dir.json"
}

# same_metrics A B: the epochs' auc, f1_score and recall (and val_) are the same numbers.
same_metrics() {
	local f='select(.event == "epoch") | [.auc, .f1_score, .recall, .val_auc, .val_f1_score, .val_recall]'
	jq -c "$f" "$TMP/$1.json" >"$TMP/$1.m"
	jq -c "$f" "$TMP/$2.json" >"$TMP/$2.m"
	[ "$(wc -l <"$TMP/$1.m")" -eq 2 ] && ! grep -q null "$TMP/$1.m"
	diff "$TMP/$1.m" "$TMP/$2.m"
}

@test "mirrored replicas and 2 MPI ranks report the metrics of one device" {
	blobs_metrics one
	blobs_metrics mir2 --set distribute.strategy=mirrored --set 'distribute.devices=[cpu:0, cpu:1]'
	same_metrics one mir2
	need_mpi
	mpi 2 "$DTRAIN" fit "$MODELS/blobs.yaml" -q --json --set fit.epochs=2 --set checkpoint.dir="$TMP/mpi2" \
		--set 'compile.metrics=[accuracy, auc, f1_score, {recall: {class_id: 1}}]' >"$TMP/mpi2.json"
	same_metrics one mpi2
}

@test "a run killed mid-epoch and resumed reports the metrics of an uninterrupted one" {
	cp "$MODELS/resume.yaml" m.yaml
	local set='compile.metrics=[accuracy, auc, f1_score, {recall: {class_id: 1}}]'
	mkdir ref cut
	(cd ref && "$DTRAIN" fit ../m.yaml -q --json --set "$set" --set checkpoint.dir=run >../ref.json)
	(cd cut && DTRAIN_TEST_CRASH_AT=step:10 "$DTRAIN" fit ../m.yaml -q --set "$set" --set checkpoint.dir=run) || true
	# The step-7 checkpoint holds the counts of its 7 steps.
	safetensors_header cut/run/latest.safetensors | jq -e '.__metadata__.metric_stats | fromjson | length > 9' >/dev/null
	(cd cut && "$DTRAIN" fit ../m.yaml -q --json --set "$set" --set checkpoint.dir=run --resume >../cut.json)
	jq -c 'select(.event == "epoch") | [.epoch, .auc, .f1_score, .recall, .val_auc]' ref.json >a
	jq -c 'select(.event == "epoch") | [.epoch, .auc, .f1_score, .recall, .val_auc]' cut.json >b
	diff a b
}

@test "val_auc as the monitor of early_stopping and model_checkpoint: mode auto is max" {
	blobs_metrics mon --set 'fit.callbacks=[{early_stopping: {monitor: val_auc, patience: 1}},
		{model_checkpoint: {filepath: "best-{epoch}", monitor: val_f1_score, save_best_only: true}},
		{csv_logger: {filename: log.csv}}]' \
		--set 'checkpoint.save_best={monitor: val_auc}'
	# csv_logger has their columns, sorted as Keras sorts the logs.
	[ "$(head -1 "$TMP/mon/log.csv")" = "epoch,accuracy,auc,f1_score,loss,recall,val_accuracy,val_auc,val_f1_score,val_loss,val_recall" ]
	[ -f "$TMP/mon/best-1.safetensors" ]
	safetensors_header "$TMP/mon/best.safetensors" | jq -e '.__metadata__.monitor == "val_auc"' >/dev/null
	# The best value is the highest val_auc of the epochs.
	local best
	best=$(jq -s '[.[] | select(.event == "epoch") | .val_auc] | max' "$TMP/mon.json")
	safetensors_header "$TMP/mon/best.safetensors" |
		jq -e --argjson b "$best" '(.__metadata__.monitor_value | tonumber) - $b | fabs < 1e-9' >/dev/null
}

@test "checkpoint file names hold the metrics of compile.metrics: {val_auc}, {f1_score}, {recall}" {
	blobs_metrics names --set 'checkpoint.filename=ckpt-{epoch:02d}-{val_auc:.4f}-{f1_score:.3f}' \
		--set 'fit.callbacks=[{model_checkpoint: {filepath: "m-{epoch}-{val_recall:.2f}"}}]'
	local auc f1 rec
	auc=$(jq -r 'select(.event == "epoch" and .epoch == 2) | .val_auc * 10000 | round / 10000' "$TMP/names.json")
	f1=$(jq -r 'select(.event == "epoch" and .epoch == 2) | .f1_score' "$TMP/names.json")
	rec=$(jq -r 'select(.event == "epoch" and .epoch == 1) | .val_recall' "$TMP/names.json")
	ls "$TMP/names"
	[ -f "$TMP/names/$(printf 'ckpt-02-%.4f-%.3f.safetensors' "$auc" "$f1")" ]
	[ -f "$TMP/names/$(printf 'm-1-%.2f.safetensors' "$rec")" ]
	# a metric that compile.metrics lacks, and one at steps within an epoch, are config errors
	run --separate-stderr "$DTRAIN" fit "$MODELS/blobs.yaml" --set 'checkpoint.filename="{val_precision:.3f}"'
	status_is 2
	stderr_has "checkpoint.filename" "needs a metric named 'precision' in compile.metrics"
	run --separate-stderr "$DTRAIN" fit "$MODELS/blobs.yaml" --set 'compile.metrics=[auc]' \
		--set 'checkpoint.filename="{auc:.3f}-{step}"' --set checkpoint.every=5
	status_is 2
	stderr_has "only at the end of an epoch"
}

# config_error METRICS WORD...: fit with compile.metrics METRICS is a config error whose message has each WORD.
config_error() {
	local metrics=$1
	shift
	run --separate-stderr "$DTRAIN" fit m.yaml --set "compile.metrics=$metrics"
	status_is 2
	stderr_has "$@"
}

@test "metric config errors name file:line:col" {
	cp "$MODELS/blobs.yaml" m.yaml
	config_error '[{auc: {num_thresholds: 1}}]' "--set:1:" "num_thresholds"
	config_error '[{auc: {curv: PR}}]' "'curv'" "curve"
	config_error '[{f1_score: {average: mean}}]' "'mean'" "macro" "micro" "weighted"
	config_error '[{precision: {class_id: 3}}]' "--set:1:" "class_id 3" "0 to 2"
	config_error '[{sparse_top_k_categorical_accuracy: {k: 0}}]' "--set:1:" "'k'"
	config_error '[{r2_score: {k: 1}}]' "--set:1:" "unknown key 'k'"
	config_error '[categorical_accuracy]' "--set:1:" "class indices" "use 'sparse_categorical_accuracy'"
	config_error '[precison]' "did you mean 'precision'"
	run --separate-stderr "$DTRAIN" fit m.yaml --set 'fit.callbacks=[{early_stopping: {monitor: val_auc}}]'
	status_is 2
	stderr_has "--set:1:" "'val_auc'" "compile.metrics has no metric named 'auc'"
	run --separate-stderr "$DTRAIN" fit m.yaml --set 'compile.metrics=[auc]' \
		--set 'fit.callbacks=[{early_stopping: {monitor: val_auc_1}}]'
	status_is 2
	stderr_has "no metric named 'auc_1'"
}

@test "evaluate --report: per-class scores, averages and the confusion matrix of scikit-learn, with class names" {
	need_sklearn
	gen_csv 3
	# Named classes (sorted as the indices were): the report shows the names.
	sed -i -e '2,$s/,0$/,ant/' -e '2,$s/,1$/,bee/' -e '2,$s/,2$/,cat/' train.csv test.csv
	model 3 softmax sparse_categorical_crossentropy '[accuracy]'
	fit_eval_predict test.csv
	"$DTRAIN" evaluate m.yaml --report --json 2>/dev/null >eval.json
	run --separate-stderr "$DTRAIN" evaluate m.yaml --report
	status_is 0
	[[ $output == *precision*recall*f1-score*support* ]]
	[[ $output == *"macro avg"* && $output == *"weighted avg"* ]]
	[[ $output == *"confusion matrix (rows: true class, columns: predicted class)"* ]]
	[[ $(grep -c '^ *cat ' <<<"$output") -eq 2 ]]
	jq -e '.report.classes | map(.class) == ["ant", "bee", "cat"]' eval.json >/dev/null
	run $PY - <<-'EOF'
		from ref import *
		r = e["report"]
		p = np.array([x["probabilities"] for x in rows])
		names = ["ant", "bee", "cat"]
		y = np.array([names.index(l.strip().split(",")[2]) for l in open("test.csv").readlines()[1:]])
		yhat = p.argmax(1)
		bad = r["confusion_matrix"] != M.confusion_matrix(y, yhat).tolist()
		want = M.classification_report(y, yhat, output_dict=True)
		for k in range(3):
		    for key, ref in (("precision", "precision"), ("recall", "recall"), ("f1_score", "f1-score"), ("support", "support")):
		        bad |= abs(r["classes"][k][key] - want[str(k)][ref]) > 1e-6
		for ours, theirs in (("macro_avg", "macro avg"), ("weighted_avg", "weighted avg")):
		    for key, ref in (("precision", "precision"), ("recall", "recall"), ("f1_score", "f1-score")):
		        bad |= abs(r[ours][key] - want[theirs][ref]) > 1e-6
		bad |= abs(r["accuracy"] - want["accuracy"]) > 1e-6
		print(json.dumps(r), want)
		raise SystemExit(int(bad))
	EOF
	status_is 0
}

@test "evaluate --report of a test file without one training class: scikit-learn's default report, the class left out and named" {
	need_sklearn
	# three clusters far apart: no cat in the test file, and a model that never predicts cat on it
	$PY - <<-'EOF'
		import numpy as np
		rng = np.random.default_rng(5)
		for name, n, k in (("train", 600, 3), ("test", 200, 2)):
		    y = rng.integers(0, k, n)
		    x = rng.normal(size=(n, 2)) * 0.2 + np.stack([np.cos(y * 2.1), np.sin(y * 2.1)], 1) * 3
		    with open(name + ".csv", "w") as f:
		        f.write("x1,x2,label\n")
		        for a, b, c in zip(x[:, 0], x[:, 1], y):
		            f.write(f"{a:.6f},{b:.6f},{['ant', 'bee', 'cat'][c]}\n")
	EOF
	model 3 softmax sparse_categorical_crossentropy '[accuracy]'
	"$DTRAIN" fit m.yaml -q
	run --separate-stderr "$DTRAIN" evaluate m.yaml --report --json
	status_is 0
	stderr_has "the report leaves out the training class 'cat': no test record and no prediction"
	echo "$output" >eval.json
	"$DTRAIN" predict m.yaml test.csv --all --json -q >pred.json
	run $PY - <<-'EOF'
		import json
		import numpy as np
		from sklearn import metrics as M
		r = json.load(open("eval.json"))["report"]
		p = np.array([json.loads(l)["probabilities"] for l in open("pred.json")])
		names = ["ant", "bee", "cat"]
		y = np.array([names.index(l.strip().split(",")[2]) for l in open("test.csv").readlines()[1:]])
		yhat = p.argmax(1)
		if 2 in yhat:
		    print("the model predicted cat: this test needs a case without")
		    raise SystemExit(2)
		want = M.classification_report(y, yhat, output_dict=True)
		bad = [c["class"] for c in r["classes"]] != ["ant", "bee"] or r["left_out"] != ["cat"]
		bad |= r["confusion_matrix"] != M.confusion_matrix(y, yhat).tolist()
		for ours, theirs in (("macro_avg", "macro avg"), ("weighted_avg", "weighted avg")):
		    for key, ref in (("precision", "precision"), ("recall", "recall"), ("f1_score", "f1-score")):
		        bad |= abs(r[ours][key] - want[theirs][ref]) > 1e-6
		print(json.dumps(r), want)
		raise SystemExit(int(bad))
	EOF
	status_is 0
	run --separate-stderr "$DTRAIN" evaluate m.yaml --report
	[[ $output != *cat* ]]
}

@test "evaluate --report refuses a regression model" {
	cp "$MODELS/blobs.yaml" m.yaml
	run --separate-stderr "$DTRAIN" evaluate m.yaml --report --set compile.loss=mean_squared_error \
		--set 'model.layers=[{dense: {units: 1}}]' --set 'data.test={format: csv, path: x.csv}'
	status_is 2
	stderr_has "--set:1:" "--report counts classes" "regression loss"
}
