#!/usr/bin/env bats
# dtrain evaluate: a checkpoint written by fit, scored on data.test; bad
# checkpoints fail with exit 1 and a message, never a crash.

load helpers

# One training run for the whole file: $RUN holds its checkpoints and
# $RUN/fit.json what fit printed with --json.
setup_file() {
	REPO=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	DTRAIN=${DTRAIN:-$REPO/build/dtrain}
	export RUN=$BATS_FILE_TMPDIR/run
	"$DTRAIN" fit "$BATS_TEST_DIRNAME/models/blobs.yaml" -q --json --set checkpoint.dir="$RUN" \
		>"$BATS_FILE_TMPDIR/fit.json"
}

setup() {
	common_setup
	BLOBS=$MODELS/blobs.yaml
	[ -s "$RUN/latest.safetensors" ] || {
		echo "fit in setup_file wrote no checkpoint" >&2
		return 1
	}
	FIT_TEST=$(jq -c 'select(.event == "test")' "$BATS_FILE_TMPDIR/fit.json")
	[ -n "$FIT_TEST" ]
}

# evaluate ARGS...: evaluate blobs.yaml with checkpoint.dir set to the run.
evaluate() {
	"$DTRAIN" evaluate "$BLOBS" --set checkpoint.dir="$RUN" "$@"
}

@test "--json: the evaluate event has the accuracy fit reported (4 decimals)" {
	# fit's test line scores the final weights: latest.safetensors.
	run --separate-stderr evaluate --json --checkpoint "$RUN/latest.safetensors"
	status_is 0
	[ "${#lines[@]}" -eq 1 ]
	jq -e '.event == "evaluate" and (.accuracy | type == "number") and (.loss | type == "number")' \
		<<<"$output" >/dev/null
	local got want
	got=$(jq -r '.accuracy' <<<"$output")
	want=$(jq -r '.accuracy' <<<"$FIT_TEST")
	echo "evaluate: $got, fit: $want"
	[ "$(printf '%.4f' "$got")" = "$(printf '%.4f' "$want")" ]
	# The loss too, and over the same samples.
	[ "$(printf '%.4f' "$(jq -r '.loss' <<<"$output")")" = "$(printf '%.4f' "$(jq -r '.loss' <<<"$FIT_TEST")")" ]
	[ "$(jq -r '.samples' <<<"$output")" = 300 ]
}

@test "--json: without --checkpoint it reads CHECKPOINT_DIR/best.safetensors, and says so" {
	run --separate-stderr evaluate --json
	status_is 0
	[ "$(jq -r '.checkpoint' <<<"$output")" = "$RUN/best.safetensors" ]
	[[ $stderr == *"dtrain: note: using '$RUN/best.safetensors', the run's best checkpoint"* ]]
}

@test "--json: a run that saved no best: CHECKPOINT_DIR/latest.safetensors, and says so" {
	# A run directory without best.safetensors (removed by hand, or from an older dtrain).
	cp -a "$RUN" "$TMP/nobest"
	rm "$TMP/nobest/best.safetensors"
	run --separate-stderr "$DTRAIN" evaluate "$BLOBS" --json --set checkpoint.dir="$TMP/nobest"
	status_is 0
	[ "$(jq -r '.checkpoint' <<<"$output")" = "$TMP/nobest/latest.safetensors" ]
	[[ $stderr == *"dtrain: note: using '$TMP/nobest/latest.safetensors', the run's latest checkpoint (it saved no best)"* ]]
}

@test "-q, as fit and predict take it: no note, the result still prints" {
	for q in -q --quiet; do
		run --separate-stderr evaluate "$q"
		status_is 0
		[ -z "$output" ]
		[[ $stderr == "300 samples - accuracy: "* ]]
		[ "${#stderr_lines[@]}" -eq 1 ]
		run --separate-stderr evaluate "$q" --json
		status_is 0
		[ -z "$stderr" ]
		[ "$(jq -r '.checkpoint' <<<"$output")" = "$RUN/best.safetensors" ]
	done
}

@test "--checkpoint picks the file: best.safetensors" {
	run --separate-stderr evaluate --json --checkpoint "$RUN/best.safetensors"
	status_is 0
	[ "$(jq -r '.checkpoint' <<<"$output")" = "$RUN/best.safetensors" ]
	jq -e '.event == "evaluate" and .accuracy >= 0.95' <<<"$output" >/dev/null
}

@test "human output goes to stderr, nothing to stdout" {
	run --separate-stderr evaluate
	status_is 0
	[ -z "$output" ]
	local want
	want=$(printf '%.4f' "$(jq -r '.accuracy' <<<"$FIT_TEST")")
	# After the note naming the checkpoint (a best epoch can differ from the last: compare with it).
	run --separate-stderr evaluate --checkpoint "$RUN/latest.safetensors"
	[[ $stderr == "300 samples - accuracy: $want - loss: "* ]]
}

@test "an untrained checkpoint scores worse (the comparison can fail)" {
	"$DTRAIN" fit "$BLOBS" -q --set fit.epochs=1 --set checkpoint.dir="$TMP/short"
	run --separate-stderr evaluate --json --checkpoint "$TMP/short/latest.safetensors"
	status_is 0
	jq -e '.accuracy < 0.95' <<<"$output" >/dev/null
}

@test "missing checkpoint file: exit 1 naming it" {
	run --separate-stderr evaluate --checkpoint "$TMP/none.safetensors"
	status_is 1
	[ -z "$output" ]
	[[ $stderr == *"cannot open '$TMP/none.safetensors'"* ]]
}

@test "no checkpoint in checkpoint.dir: exit 1 naming DIR/latest.safetensors" {
	run --separate-stderr "$DTRAIN" evaluate "$BLOBS" --set checkpoint.dir="$TMP/empty"
	status_is 1
	[[ $stderr == *"'$TMP/empty/latest.safetensors'"* ]]
}

@test "truncated checkpoints: exit 1 naming the file, no crash" {
	local size
	size=$(stat -L -c %s "$RUN/latest.safetensors")
	for n in 0 4 8 9 100 $((size / 2)) $((size - 4)) $((size - 1)); do
		head -c "$n" "$RUN/latest.safetensors" >"$TMP/cut.safetensors"
		run --separate-stderr evaluate --checkpoint "$TMP/cut.safetensors"
		not_crashed
		status_is 1
		[[ $stderr == *"'$TMP/cut.safetensors'"* ]] || {
			echo "cut at $n bytes: the message does not name the file: $stderr" >&2
			return 1
		}
	done
}

@test "garbage checkpoint: exit 1, no crash" {
	head -c 4096 /dev/urandom >"$TMP/garbage.safetensors"
	run --separate-stderr evaluate --checkpoint "$TMP/garbage.safetensors"
	not_crashed
	status_is 1
	[[ $stderr == *"'$TMP/garbage.safetensors'"* ]]
}

@test "a text file as checkpoint: exit 1, no crash" {
	cp "$BLOBS" "$TMP/model.safetensors"
	run --separate-stderr evaluate --checkpoint "$TMP/model.safetensors"
	not_crashed
	status_is 1
	[[ $stderr == *"'$TMP/model.safetensors'"* ]]
}

# header_file JSON PAD: a safetensors file with header JSON and PAD zero bytes of data.
header_file() {
	local json=$1 pad=$2 n=${#1}
	printf "$(printf '\\%03o' $((n & 255)) $(((n >> 8) & 255)) 0 0 0 0 0 0)"
	printf '%s' "$json"
	head -c "$pad" /dev/zero
}

@test "corrupt headers: exit 1 with a message, no crash" {
	local -a headers=(
		'not json at all'
		'[1, 2]'
		'{"dense/kernel": {"dtype": "F32", "shape": [2, 16], "data_offsets": [0, 100]}}'
		'{"dense/kernel": {"dtype": "F32", "shape": [-2, 16], "data_offsets": [0, 128]}}'
		'{"dense/kernel": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 128]}}'
		'{"dense/kernel": {"dtype": "F32", "shape": "x", "data_offsets": [0, 128]}}'
		'{"dense/kernel": {"dtype": "F32", "shape": [2, 16], "data_offsets": [128, 0]}}'
		'{"dense/kernel": {"dtype": "F32", "shape": [2, 16], "data_offsets": [0, 99999999]}}'
	)
	for h in "${headers[@]}"; do
		header_file "$h" 128 >"$TMP/bad.safetensors"
		run --separate-stderr evaluate --checkpoint "$TMP/bad.safetensors"
		not_crashed
		status_is 1
		[[ $stderr == *"'$TMP/bad.safetensors'"* ]] || {
			echo "header $h: the message does not name the file: $stderr" >&2
			return 1
		}
	done
}

@test "a header length past the end of the file: exit 1 saying so" {
	printf '\377\377\377\377\377\377\377\177{}' >"$TMP/long.safetensors"
	run --separate-stderr evaluate --checkpoint "$TMP/long.safetensors"
	not_crashed
	status_is 1
	[[ $stderr == *"'$TMP/long.safetensors'"*"header length"* ]]
}

@test "an F64 tensor: exit 1 naming the dtype" {
	header_file '{"dense/kernel": {"dtype": "F64", "shape": [2, 16], "data_offsets": [0, 256]}}' 256 \
		>"$TMP/f64.safetensors"
	run --separate-stderr evaluate --checkpoint "$TMP/f64.safetensors"
	status_is 1
	[[ $stderr == *"'dense/kernel'"*"F64"* ]]
}

@test "a checkpoint without the model's tensors: exit 1 naming the missing tensor" {
	header_file '{"__metadata__": {"format": "dtrain"}}' 0 >"$TMP/nothing.safetensors"
	run --separate-stderr evaluate --checkpoint "$TMP/nothing.safetensors"
	status_is 1
	[[ $stderr == *"no tensor 'dense/kernel'"* ]]
}

@test "data after the tensors: exit 1" {
	cp "$RUN/latest.safetensors" "$TMP/extra.safetensors"
	echo trailing >>"$TMP/extra.safetensors"
	run --separate-stderr evaluate --checkpoint "$TMP/extra.safetensors"
	not_crashed
	status_is 1
	[[ $stderr == *"'$TMP/extra.safetensors'"* ]]
}

@test "a checkpoint of another shape of model: exit 1 naming the tensor and both shapes" {
	run --separate-stderr evaluate --checkpoint "$RUN/latest.safetensors" --set model.layers.0.dense.units=8
	status_is 1
	[[ $stderr == *"'dense/kernel'"* && $stderr == *"(2, 16)"* && $stderr == *"(2, 8)"* ]]
}

@test "a directory as checkpoint: exit 1, no crash" {
	run --separate-stderr evaluate --checkpoint "$TMP"
	not_crashed
	status_is 1
	[[ $stderr == *"'$TMP'"* ]]
}

@test "a model without data.test: exit 2 saying there is no test set" {
	grep -v '^  test:' "$BLOBS" >"$TMP/notest.yaml"
	run ! grep -q 'test:' "$TMP/notest.yaml"
	run --separate-stderr "$DTRAIN" evaluate "$TMP/notest.yaml" --checkpoint "$RUN/latest.safetensors"
	status_is 2
	[[ $stderr == *"'$TMP/notest.yaml' has no data.test section"* ]]
}

@test "CHECKPOINT first: a copy of the checkpoint alone evaluates as MODEL.yaml --checkpoint does" {
	mkdir -p "$TMP/alone"
	cp "$RUN/latest.safetensors" "$TMP/alone/blobs.safetensors"
	run --separate-stderr evaluate --json --checkpoint "$RUN/latest.safetensors"
	status_is 0
	local want
	want=$(jq -c 'del(.checkpoint)' <<<"$output")
	cd "$TMP/alone"
	run --separate-stderr "$DTRAIN" evaluate blobs.safetensors --json
	status_is 0
	[ "$(jq -c 'del(.checkpoint)' <<<"$output")" = "$want" ]
	[ "$(jq -r .checkpoint <<<"$output")" = blobs.safetensors ]
	# fit wants the model file.
	run --separate-stderr "$DTRAIN" fit blobs.safetensors
	status_is 2
	stderr_has "'blobs.safetensors' is a checkpoint, but this command reads a model file (YAML)"
}

@test "--data FILE: a YAML file with the test source, for the checkpoint alone or with the model file" {
	mkdir -p "$TMP/alone"
	cp "$RUN/latest.safetensors" "$TMP/alone/blobs.safetensors"
	printf 'format: synthetic\nkind: blobs\nsamples: 50\nclasses: 3\nfeatures: 2\nnoise: 0.3\nseed: 5\n' >"$TMP/alone/test.yaml"
	cd "$TMP/alone"
	run --separate-stderr "$DTRAIN" evaluate blobs.safetensors --data test.yaml --json
	status_is 0
	[ "$(jq -r .samples <<<"$output")" = 50 ]
	local got=$output
	run --separate-stderr evaluate --json --checkpoint blobs.safetensors --data test.yaml
	status_is 0
	[ "$output" = "$got" ]
	# A data file in place of data.train's needs a format with one file.
	run --separate-stderr "$DTRAIN" evaluate blobs.safetensors --data x.csv
	status_is 1
	stderr_has "--data 'x.csv': data.train names no single file (path or directory) to replace"
}

@test "--data FILE: a CSV in place of data.train's, with its other keys (label column)" {
	local d=$TMP/csv
	mkdir -p "$d"
	awk 'BEGIN { srand(3); print "a,b,kind"; for (i = 0; i < 90; i++) { c = i % 3;
		printf "%.3f,%.3f,%s\n", c + rand() * 0.3, c - rand() * 0.3, (c == 0 ? "x" : c == 1 ? "y" : "z") } }' >"$d/train.csv"
	head -31 "$d/train.csv" >"$d/test.csv"
	cat >"$d/m.yaml" <<-EOF
		model: {layers: [dense: {units: 3, activation: softmax}]}
		compile: {optimizer: adam, loss: sparse_categorical_crossentropy, metrics: [accuracy]}
		data: {train: {format: csv, path: train.csv, label: kind}}
		fit: {epochs: 1}
		checkpoint: {dir: $d/run}
	EOF
	"$DTRAIN" fit -q "$d/m.yaml" >/dev/null 2>&1
	cp "$d/run/latest.safetensors" "$TMP/m.safetensors"
	rm -r "$d/run" "$d/m.yaml" "$d/train.csv"
	run --separate-stderr "$DTRAIN" evaluate "$TMP/m.safetensors" --data "$d/test.csv" --json
	status_is 0
	[ "$(jq -r .samples <<<"$output")" = 30 ]
}

@test "--data FILE: an error in the test source it makes is placed at --data, not at a --set the user never gave" {
	local d=$TMP/place
	mkdir -p "$d"
	awk 'BEGIN { srand(3); print "a,b,kind"; for (i = 0; i < 30; i++) { c = i % 3;
		printf "%.3f,%.3f,%s\n", c + rand() * 0.3, c - rand() * 0.3, (c == 0 ? "x" : c == 1 ? "y" : "z") } }' >"$d/train.csv"
	sed '1s/kind/label/' "$d/train.csv" >"$d/test.csv"
	cat >"$d/m.yaml" <<-EOF
		model: {layers: [dense: {units: 3, activation: softmax}]}
		compile: {optimizer: adam, loss: sparse_categorical_crossentropy}
		data: {train: {format: csv, path: train.csv, label: kind}}
		fit: {epochs: 1}
		checkpoint: {dir: $d/run}
	EOF
	"$DTRAIN" fit -q "$d/m.yaml" >/dev/null 2>&1
	for model in "$d/m.yaml" "$d/run/latest.safetensors"; do
		# was '--set:1:48: error: ...' and exit 2: test data that cannot be read is 1 (dtrain-evaluate(1))
		run --separate-stderr "$DTRAIN" evaluate "$model" --data "$d/test.csv"
		status_is 1
		[[ $stderr == *"--data: error: '$d/test.csv' has no column 'kind' in its header (row 1)"* ]]
		run --separate-stderr "$DTRAIN" evaluate "$model" --data "$d/missing.yaml"
		status_is 1
		[[ $stderr == *"--data: error: cannot open '$d/missing.yaml'"* ]]
		[[ $stderr != *"--set:"* ]]
	done
}

@test "--data FILE with a feature the model was not trained on: the data is named, not the checkpoint's weights" {
	local d=$TMP/wide
	mkdir -p "$d"
	awk 'BEGIN { srand(5); print "a,b,y"; for (i = 0; i < 30; i++) { c = i % 3;
		printf "%.3f,%.3f,%d\n", c + rand() * 0.3, c - rand() * 0.3, c } }' >"$d/train.csv"
	# No header, so its columns are taken by position (with one, the extra column is named: csv.bats).
	awk -F, 'BEGIN { OFS = "," } NR > 1 { print $1, $2, 0.5, $3 }' "$d/train.csv" >"$d/test.csv"
	cat >"$d/m.yaml" <<-EOF
		model: {layers: [dense: {units: 3, activation: softmax}]}
		compile: {optimizer: adam, loss: sparse_categorical_crossentropy}
		data: {train: {format: csv, path: train.csv, label: -1}}
		fit: {epochs: 1}
		checkpoint: {dir: $d/run}
	EOF
	"$DTRAIN" fit -q "$d/m.yaml" >/dev/null 2>&1
	# the model file (its run's checkpoint), then the checkpoint alone
	for model in "$d/m.yaml" "$d/run/latest.safetensors"; do
		run --separate-stderr "$DTRAIN" evaluate "$model" --data "$d/test.csv"
		not_crashed
		status_is 2
		stderr_has "was trained on samples of (2,), but those of '$d/test.csv' are (3,)"
		[[ $stderr != *"tensor 'dense/kernel'"* && $stderr != *"--set:"* ]]
	done
}

@test "--data FILE: a numbered label the training data lacks is an error naming the row, as in fit; on_error: skip skips it" {
	local d=$TMP/num
	mkdir -p "$d"
	# Classes 0 to 2 in training; the test file's row 5 (line 6) has class 3.
	awk 'BEGIN { srand(4); print "a,b,y"; for (i = 0; i < 60; i++) { c = i % 3;
		printf "%.3f,%.3f,%d\n", c + rand() * 0.3, c - rand() * 0.3, c } }' >"$d/train.csv"
	head -11 "$d/train.csv" | awk -F, 'NR == 6 { $3 = 3 } 1' OFS=, >"$d/test.csv"
	for units in 5 3; do
		cat >"$d/m$units.yaml" <<-EOF
			model: {layers: [dense: {units: $units, activation: softmax}]}
			compile: {optimizer: adam, loss: sparse_categorical_crossentropy, metrics: [accuracy]}
			data: {train: {format: csv, path: train.csv, label: y}}
			fit: {epochs: 1}
			checkpoint: {dir: $d/run$units}
		EOF
		"$DTRAIN" fit -q "$d/m$units.yaml" >/dev/null 2>&1
		# More outputs than training classes (5) or as many (3): the same error either way.
		run --separate-stderr "$DTRAIN" evaluate "$d/run$units/latest.safetensors" --data "$d/test.csv" --report
		not_crashed
		status_is 1
		stderr_has "'$d/test.csv', row 6: label '3' is not a class of the training data (0 to 2)"
		[ -z "$output" ]
		run --separate-stderr "$DTRAIN" evaluate "$d/run$units/latest.safetensors" --data "$d/test.csv" --json \
			--set data.on_error=skip
		status_is 0
		stderr_has "skipped 1 unreadable record of '$d/test.csv'"
		[ "$(jq -r .event <<<"$output")" = evaluate ]
		# the samples scored: 10 records, 1 skipped
		[ "$(jq -r .samples <<<"$output")" = 9 ]
	done
	# fit scores the same file as data.test with the same error.
	run --separate-stderr "$DTRAIN" fit -q "$d/m5.yaml" --set "data.test={format: csv, path: $d/test.csv, label: y}"
	status_is 1
	stderr_has "'$d/test.csv', row 6: label '3' is not a class of the training data (0 to 2)"
	run --separate-stderr "$DTRAIN" fit "$d/m5.yaml" --set "data.test={format: csv, path: $d/test.csv, label: y}" \
		--set data.on_error=skip --json
	status_is 0
	[ "$(jq -r 'select(.event == "test") | .samples' <<<"$output")" = 9 ]
	stderr_has "test: 9 samples"
}

@test "CHECKPOINT first: an older checkpoint without input_shape still works; one without a config is refused by name" {
	cp "$RUN/latest.safetensors" "$TMP/old.safetensors"
	python3 "$REPO/tests/tools/ckpt_meta.py" "$TMP/old.safetensors" -input_shape -config_name
	run --separate-stderr "$DTRAIN" evaluate "$TMP/old.safetensors" --json
	status_is 0
	[ "$(jq -r .samples <<<"$output")" = 300 ]
	python3 "$REPO/tests/tools/ckpt_meta.py" "$TMP/old.safetensors" -config
	run --separate-stderr "$DTRAIN" evaluate "$TMP/old.safetensors"
	status_is 1
	stderr_has "'$TMP/old.safetensors' holds no config (it was not written by dtrain fit): give the model file"
	# The model file form still reads it.
	run --separate-stderr evaluate --json --checkpoint "$TMP/old.safetensors"
	status_is 0
}
