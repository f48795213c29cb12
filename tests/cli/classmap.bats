#!/usr/bin/env bats
# One class map per model (issue 12, item 1): the training data numbers the
# classes, and validation and test data (CSV files, PNG folders), evaluate
# (through the checkpoint) and predict number them the same way; a label
# training never saw is a bad record. Ordered data (item 4): a split that
# validates on one class warns; data.split shuffles and stratifies;
# test_split carves a test part from the training file.

load helpers

# A separable toy set: class ant near (0, 0), bee near (3, -2), cat near (6, -4).
toy() {
	awk -v n="$1" -v seed="$2" 'BEGIN { srand(seed); split("ant bee cat", k, " "); print "x1,x2,kind";
		for (i = 0; i < n; i++) { c = i % 3; printf "%.3f,%.3f,%s\n", c * 3 + rand() * 0.5, -c * 2 + rand() * 0.5, k[c + 1] } }'
}

# csv_model TRAIN TEST [DATA KEY: VALUE...]: m.yaml, a softmax layer on the toy files.
csv_model() {
	local train=$1 test=$2 extra=""
	shift 2
	for kv in "$@"; do extra="$extra
  $kv"; done
	cat >"$TMP/m.yaml" <<-EOF
		model:
		  layers:
		    - dense: {units: 3, activation: softmax}
		compile: {optimizer: {adam: {learning_rate: 0.1}}, loss: sparse_categorical_crossentropy, metrics: [accuracy]}
		data:
		  train: {format: csv, path: $train}
		  test: {format: csv, path: $test}
		  batch_size: 8$extra
		fit: {epochs: 30}
		checkpoint: {dir: $TMP/run}
	EOF
}

setup() {
	common_setup
	export OMP_NUM_THREADS=1
	cd "$TMP"
	toy 60 3 >train.csv
	# The test file lacks class ant: on its own it would number bee 0 and cat 1.
	toy 30 4 | awk -F, 'NR == 1 || $3 != "ant"' >test.csv
}

@test "a test CSV that lacks a class is scored by the training classes: fit, evaluate and predict agree" {
	csv_model train.csv test.csv
	run --separate-stderr "$DTRAIN" fit -q --json "$TMP/m.yaml"
	status_is 0
	fit_acc=$(jq -r 'select(.event == "test") | .accuracy' <<<"$output")
	run --separate-stderr "$DTRAIN" evaluate --json "$TMP/m.yaml"
	status_is 0
	eval_acc=$(jq -r .accuracy <<<"$output")
	# predict's classes against the test file's labels.
	right=$("$DTRAIN" predict -q "$TMP/m.yaml" test.csv 2>/dev/null | paste -d, - <(tail -n +2 test.csv) |
		awk -F, '$2 == $6 { n++ } END { print n + 0 }')
	rows=$(($(wc -l <test.csv) - 1))
	echo "fit $fit_acc, evaluate $eval_acc, predict $right of $rows"
	[ "$right" -eq "$rows" ] # the toy set is separable
	[ "$(printf '%.4f' "$fit_acc")" = 1.0000 ]
	[ "$(printf '%.4f' "$eval_acc")" = 1.0000 ]
}

@test "a test label that is no training class: an error naming the file and row; on_error: skip skips it" {
	cp test.csv dog.csv
	echo "1.0,1.0,dog" >>dog.csv
	row=$(wc -l <dog.csv)
	csv_model train.csv dog.csv
	run --separate-stderr "$DTRAIN" fit -q "$TMP/m.yaml"
	not_crashed
	status_is 1
	stderr_has "'$TMP/dog.csv', row $row: label 'dog' is not a class of the training data ('ant', 'bee', 'cat')"
	csv_model train.csv test.csv
	"$DTRAIN" fit -q "$TMP/m.yaml"
	run --separate-stderr "$DTRAIN" evaluate "$TMP/m.yaml" --set data.test.path="$TMP/dog.csv"
	status_is 1
	stderr_has "'$TMP/dog.csv', row $row: label 'dog'"
	run --separate-stderr "$DTRAIN" evaluate --json "$TMP/m.yaml" --set data.test.path="$TMP/dog.csv" --set data.on_error=skip
	status_is 0
	stderr_has "skipped 1 unreadable record of '$TMP/dog.csv'"
	[ "$(printf '%.4f' "$(jq -r .accuracy <<<"$output")")" = 1.0000 ]
}

# png DIR CLASS:VALUE...: 6 gray 4x4 PNGs per class folder, pixel values VALUE..VALUE+5.
png() {
	python3 - "$@" <<-'EOF'
		import os, struct, sys, zlib
		def chunk(t, d):
		    return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d) & 0xffffffff)
		for spec in sys.argv[2:]:
		    name, v = spec.split(':')
		    os.makedirs(os.path.join(sys.argv[1], name), exist_ok=True)
		    for i in range(6):
		        raw = b''.join(b'\0' + bytes([min(255, int(v) + i)]) * 4 for _ in range(4))
		        with open(os.path.join(sys.argv[1], name, '%d.png' % i), 'wb') as f:
		            f.write(b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', 4, 4, 8, 0, 0, 0, 0)) +
		                    chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b''))
	EOF
}

# fit_png VALIDATION_DIR [ARGS...]: a softmax on PNG folders train/ and VALIDATION_DIR (also the test set).
fit_png() {
	local val=$1
	shift
	cat >p.yaml <<-EOF
		model:
		  layers:
		    - flatten
		    - dense: {units: 3, activation: softmax}
		compile: {optimizer: {adam: {learning_rate: 0.1}}, loss: sparse_categorical_crossentropy, metrics: [accuracy]}
		data:
		  train: {format: png_folder, directory: train, color_mode: grayscale}
		  validation: {format: png_folder, directory: $val, color_mode: grayscale}
		  test: {format: png_folder, directory: $val, color_mode: grayscale}
		  rescale: 1/255
		  batch_size: 6
		fit: {epochs: 40}
		checkpoint: {dir: $TMP/prun}
	EOF
	run --separate-stderr "$DTRAIN" fit -q --json "$TMP/p.yaml" "$@"
}

@test "png_folder: a validation folder that lacks a class validates by the training classes" {
	command -v python3 >/dev/null || skip "python3 is not installed"
	png train A:0 B:120 C:240
	png val A:0 C:240
	fit_png val
	status_is 0
	[ "$(jq -r 'select(.event == "epoch" and .epoch == 40) | .val_accuracy' <<<"$output")" = 1 ]
	[ "$(jq -r 'select(.event == "test") | .accuracy' <<<"$output")" = 1 ]
	run --separate-stderr "$DTRAIN" evaluate --json "$TMP/p.yaml"
	status_is 0
	[ "$(jq -r .accuracy <<<"$output")" = 1 ]
}

@test "png_folder: a validation folder with an extra class: an error naming the image and folder; on_error: skip" {
	command -v python3 >/dev/null || skip "python3 is not installed"
	png train A:0 B:120 C:240
	png extra A:0 B:120 C:240 D:60
	fit_png extra --set checkpoint.every=1
	not_crashed
	status_is 1
	stderr_has "'$TMP/extra/D/" "of '$TMP/extra'): its folder 'D' is not a class of the training data ('A', 'B', 'C')"
	# before any training: not one step's checkpoint
	[ -z "$(ls -A "$TMP/prun" 2>/dev/null)" ]
	fit_png extra --set data.on_error=skip
	status_is 0
	stderr_has "skipped 6 unreadable records of '$TMP/extra'"
	[ "$(jq -r 'select(.event == "test") | .accuracy' <<<"$output")" = 1 ]
	# No training class at all: an error when the folder is opened.
	png other X:0 Y:100
	fit_png other --set fit.epochs=1
	status_is 1
	stderr_has "none of the class folders of '$TMP/other' is a class of the training data"
}

# sorted_model [DATA KEY: VALUE...]: m.yaml on sorted.csv (the toy set sorted by class), validation_split 0.2.
sorted_model() {
	(head -1 train.csv && tail -n +2 train.csv | sort -t, -k3,3) >sorted.csv
	csv_model sorted.csv test.csv "validation_split: 0.2" "$@"
	sed -i '/^  test:/d; s/epochs: 30/epochs: 2/' "$TMP/m.yaml"
}

@test "validation_split of a file sorted by class warns that the validation part holds one class" {
	sorted_model
	run --separate-stderr "$DTRAIN" fit -q "$TMP/m.yaml"
	status_is 0
	stderr_has "warning: the validation part of '$TMP/sorted.csv' (12 records) holds one class only, 'cat'" \
		"is the file sorted by class?"
	run --separate-stderr "$DTRAIN" fit -q "$TMP/m.yaml" --set data.validation_split=0.5
	status_is 0
	stderr_has "the validation part of '$TMP/sorted.csv' (30 records) lacks 1 of the 2 classes of the training part: 'ant'"
	# A shuffled, stratified split holds every class: no warning.
	run --separate-stderr "$DTRAIN" fit -q "$TMP/m.yaml" --set 'data.split={shuffle: true, stratify: true}'
	status_is 0
	[[ $stderr != *warning* ]]
}

@test "test_split carves a test part; fit and evaluate score the same records" {
	sorted_model "test_split: 0.25" "split: {shuffle: true, stratify: true, seed: 5}"
	sed -i 's/epochs: 2/epochs: 30/' "$TMP/m.yaml"
	run --separate-stderr "$DTRAIN" fit -q --json "$TMP/m.yaml"
	status_is 0
	[[ $stderr != *warning* ]]
	fit_test=$(jq -c 'select(.event == "test")' <<<"$output")
	[ "$(jq -r .samples <<<"$fit_test")" -eq 15 ]
	[ "$(jq -r '.accuracy' <<<"$fit_test")" = 1 ]
	run --separate-stderr "$DTRAIN" evaluate --json "$TMP/m.yaml"
	status_is 0
	[ "$(jq -r .samples <<<"$output")" -eq 15 ]
	[ "$(printf '%.6f' "$(jq -r .loss <<<"$output")")" = "$(printf '%.6f' "$(jq -r .loss <<<"$fit_test")")" ]
	# Not with data.test too.
	csv_model sorted.csv test.csv "test_split: 0.25"
	run --separate-stderr "$DTRAIN" fit -q "$TMP/m.yaml"
	status_is 2
	stderr_has "m.yaml:" "give either 'test' or 'test_split', not both"
}

@test "stratify with nothing to split trains on every record: fit, config, summary, inspect" {
	# No validation_split and no test_split (or test_split 0): stratify is moot, and crashed once.
	csv_model train.csv test.csv "split: {stratify: true}"
	sed -i 's/epochs: 30/epochs: 1/' "$TMP/m.yaml"
	run --separate-stderr "$DTRAIN" fit -q --json "$TMP/m.yaml"
	not_crashed
	status_is 0
	# All 60 records train, in batches of 8; data.test (20 records) is scored whole.
	[ "$(jq -r 'select(.event == "epoch") | .steps' <<<"$output")" -eq 8 ]
	[ "$(jq -r 'select(.event == "test") | .samples' <<<"$output")" -eq 20 ]
	sed -i '/^  test:/d' "$TMP/m.yaml"
	run --separate-stderr "$DTRAIN" fit -q --json "$TMP/m.yaml" --set data.test_split=0
	not_crashed
	status_is 0
	[ "$(jq -r 'select(.event == "epoch") | .steps' <<<"$output")" -eq 8 ]
	for cmd in config summary inspect; do
		run --separate-stderr "$DTRAIN" "$cmd" "$TMP/m.yaml"
		not_crashed
		status_is 0
	done
}

@test "stratify needs class labels: an error at data.split" {
	printf 'a,y\n1,0.5\n2,1.5\n3,2.5\n4,3.5\n' >reg.csv
	cat >r.yaml <<-EOF
		model:
		  layers:
		    - dense: {units: 1}
		compile: {optimizer: sgd, loss: mean_squared_error}
		data:
		  train: {format: csv, path: reg.csv}
		  validation_split: 0.5
		  split: {stratify: true}
		checkpoint: {dir: $TMP/rrun}
	EOF
	run --separate-stderr "$DTRAIN" fit -q "$TMP/r.yaml"
	status_is 2
	stderr_has "r.yaml:8:" "data.split.stratify needs class labels"
}
