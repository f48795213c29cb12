#!/usr/bin/env bats
# data.sample_weight (Keras' sample_weight): a CSV column or an NPY file of
# one weight per record, multiplied into each record's loss and gradient;
# the loss is sum(w * l) / batch size (Keras' sum_over_batch_size). Checked
# against closed forms: weights of 1 change nothing, weights of 2 are a
# doubled learning rate for plain SGD, a weight of 0 is a skipped step with
# batches of one.

load helpers

# model FILE.yaml TRAIN-SOURCE [LR [BATCH]]: a softmax regression on TRAIN-SOURCE, plain SGD, no shuffle.
model() {
	cat >"$TMP/$1" <<-EOF
		model:
		  layers:
		    - dense: {units: 2, activation: softmax}
		compile: {optimizer: {sgd: {learning_rate: ${3:-0.1}}}, loss: sparse_categorical_crossentropy}
		data:
		  train: $2
		  batch_size: ${4:-4}
		  shuffle: false
		fit: {epochs: 2, seed: 7}
	EOF
}

# fit NAME FILE.yaml: trains into $TMP/NAME, the epoch events in $TMP/NAME.json.
fit() {
	"$DTRAIN" fit -q --json "$TMP/$2" --set checkpoint.dir="$TMP/$1" >"$TMP/$1.json"
}

ckpt_diff() {
	local diff
	diff=$(dirname "$DTRAIN")/tests/tools/ckpt_diff
	[ -x "$diff" ] || diff=$REPO/build/tests/tools/ckpt_diff
	"$diff" "$@"
}

# The weights of the two runs' last checkpoints are the same, bit for bit.
same_weights() {
	run ckpt_diff "$TMP/$1/latest.safetensors" "$TMP/$2/latest.safetensors" 0
	status_is 0
	[[ $output == *"worst 0 "* ]]
}

# fails_with TRAIN-SOURCE TEXT...: fit on it exits non-zero, its stderr holding every TEXT.
fails_with() {
	local source=$1
	shift
	model m.yaml "$source"
	run --separate-stderr "$DTRAIN" fit -q "$TMP/m.yaml" --set checkpoint.dir="$TMP/run"
	[ "$status" -ne 0 ]
	stderr_has "$@"
}

first_loss() {
	jq -s -r '[.[] | select(.event == "epoch")][0].loss' "$TMP/$1.json"
}

setup() {
	common_setup
	export OMP_NUM_THREADS=1
	cd "$TMP"
	# 12 records of two features and a class, with a weight column between them.
	awk 'BEGIN { srand(3); print "f1,f2,kind"; for (i = 0; i < 12; i++) { c = i % 2;
		printf "%.3f,%.3f,%d\n", c + rand() * 0.5, c + rand() * 0.5, c } }' >plain.csv
	awk -F, 'NR == 1 { print "f1,w,f2,kind"; next } { print $1 ",1," $2 "," $3 }' plain.csv >ones.csv
	awk -F, 'NR == 1 { print "f1,w,f2,kind"; next } { print $1 ",2," $2 "," $3 }' plain.csv >twos.csv
}

@test "CSV: a weight column of ones is no feature and changes nothing" {
	model plain.yaml "{format: csv, path: plain.csv, label: kind}"
	model ones.yaml "{format: csv, path: ones.csv, label: kind, sample_weight: w}"
	fit plain plain.yaml
	fit ones ones.yaml
	same_weights plain ones
	[ "$(first_loss plain)" != null ]
	[ "$(first_loss plain)" = "$(first_loss ones)" ]
}

@test "CSV: weights of 2 by index are plain SGD at twice the rate, and the loss is sum(w*l)/batch" {
	model fast.yaml "{format: csv, path: plain.csv, label: kind}" 0.2
	model twos.yaml "{format: csv, path: twos.csv, label: -1, sample_weight: 1}" 0.1
	fit fast fast.yaml
	fit twos twos.yaml
	same_weights fast twos
	jq -en --argjson a "$(first_loss fast)" --argjson b "$(first_loss twos)" '($b - 2 * $a) | fabs < 1e-6' >/dev/null
}

@test "CSV: a weight of 0 with batches of one skips the record's step" {
	awk -F, 'NR == 1 { print "f1,f2,kind,w"; next } { print $0 "," (NR % 2 ? 0 : 1) }' plain.csv >half.csv
	awk -F, 'NR == 1 || NR % 2 == 0' plain.csv >kept.csv
	model half.yaml "{format: csv, path: half.csv, label: kind, sample_weight: w}" 0.1 1
	model kept.yaml "{format: csv, path: kept.csv, label: kind}" 0.1 1
	fit half half.yaml
	fit kept kept.yaml
	same_weights half kept
}

@test "predict skips the training file's sample_weight column, by name or index, with or without a header" {
	model ones.yaml "{format: csv, path: ones.csv, label: kind, sample_weight: w}"
	fit ones ones.yaml
	# the features alone (f1, f2), and the training file itself (f1, w, f2, kind): the same predictions
	awk -F, '{ print $1 "," $3 }' ones.csv >features.csv
	"$DTRAIN" predict -q "$TMP/ones.yaml" features.csv --set checkpoint.dir="$TMP/ones" >want.txt
	"$DTRAIN" predict -q "$TMP/ones.yaml" ones.csv --set checkpoint.dir="$TMP/ones" >got.txt
	[ "$(wc -l <want.txt)" -eq 12 ]
	diff want.txt got.txt
	# the features and the weight, without the label; by index without a header
	awk -F, '{ print $1 "," $2 "," $3 }' ones.csv >nolabel.csv
	"$DTRAIN" predict -q "$TMP/ones.yaml" nolabel.csv --set checkpoint.dir="$TMP/ones" >got.txt
	diff want.txt got.txt
	tail -n +2 ones.csv >bare.csv
	"$DTRAIN" predict -q "$TMP/ones.yaml" bare.csv --set checkpoint.dir="$TMP/ones" \
		--set 'data.train={format: csv, path: ones.csv, label: 3, sample_weight: 1}' >got.txt
	diff want.txt got.txt
	# a width that fits no layout says which widths would (with a header it names the column instead)
	awk -F, '{ print $0 ",9" }' bare.csv >wide.csv
	run --separate-stderr "$DTRAIN" predict -q "$TMP/ones.yaml" wide.csv --set checkpoint.dir="$TMP/ones"
	status_is 1
	stderr_has "expected 2 fields" "or 3 with a label column" "or 4 with the sample_weight too, found 5"
}

@test "NPY: sample_weight is a (N,) file; weights of 2 are twice the rate" {
	npy_python '
import csv
rows = list(csv.reader(open("plain.csv")))[1:]
npy("x.npy", "<f4", "(12, 2)", b"".join(struct.pack("<2f", float(r[0]), float(r[1])) for r in rows))
npy("y.npy", "<i8", "(12,)", struct.pack("<12q", *[int(r[2]) for r in rows]))
npy("w.npy", "<f8", "(12,)", struct.pack("<12d", *[2.0] * 12))
npy("w11.npy", "<f4", "(11,)", struct.pack("<11f", *[1.0] * 11))
npy("wneg.npy", "<f4", "(12,)", struct.pack("<12f", *[1.0] * 5 + [-1.0] + [1.0] * 6))
'
	model fast.yaml "{format: npy, x: x.npy, y: y.npy}" 0.2
	model twos.yaml "{format: npy, x: x.npy, y: y.npy, sample_weight: w.npy}" 0.1
	fit fast fast.yaml
	fit twos twos.yaml
	same_weights fast twos
	fails_with "{format: npy, x: x.npy, y: y.npy, sample_weight: w11.npy}" \
		"'$TMP/w11.npy' has 11 weights but '$TMP/x.npy' has 12 records"
	fails_with "{format: npy, x: x.npy, y: y.npy, sample_weight: wneg.npy}" \
		"'$TMP/wneg.npy', record 5: the sample_weight -1 is not a finite number >= 0"
}

@test "CSV: a missing weight column, a negative weight and the label's column are errors naming the file" {
	fails_with "{format: csv, path: ones.csv, label: kind, sample_weight: weight}" \
		"m.yaml:6:" "'$TMP/ones.csv' has no column 'weight' in its header (the sample_weight)"
	sed '4s/,1,/,-0.5,/' ones.csv >neg.csv
	fails_with "{format: csv, path: neg.csv, label: kind, sample_weight: w}" \
		"'$TMP/neg.csv', row 4: the sample_weight '-0.5' is not a finite number >= 0"
	fails_with "{format: csv, path: ones.csv, label: kind, sample_weight: 3}" \
		"sample_weight names the label column of '$TMP/ones.csv'"
}
