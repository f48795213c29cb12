#!/usr/bin/env bats
# Sequence layers end to end (issue 14): conv1d and the 1-D and global
# poolings trained on synthetic data, summary's parameter counts (Keras'),
# and the layers' configuration errors with their place in the file.

load helpers

setup() {
	common_setup
	SEQ=$MODELS/tiny_seq.yaml
}

@test "conv1d, pooling1d and the global poolings train to the blobs' accuracy" {
	run --separate-stderr "$DTRAIN" fit "$SEQ" -q --json --set checkpoint.enabled=false
	status_is 0
	events epoch | jq -e 'select(.epoch == 5) | .val_accuracy >= 0.9' >/dev/null
	run --separate-stderr "$DTRAIN" fit "$SEQ" -q --json --set checkpoint.enabled=false \
		--set 'model.layers.2={average_pooling1d: {pool_size: 3, strides: 1, padding: same}}' \
		--set 'model.layers.4=global_average_pooling1d'
	status_is 0
	events epoch | jq -e 'select(.epoch == 5) | .val_accuracy >= 0.8' >/dev/null
}

@test "summary: conv1d's parameters are Keras' k*C*filters + filters; keepdims keeps ones" {
	run "$DTRAIN" summary "$SEQ" --set 'model.layers.4={global_max_pooling1d: {keepdims: true}}' \
		--set 'model.layers.5=flatten'
	status_is 0
	[[ $output == *"│ conv1d (Conv1D)                 │ (None, 16, 8)          │            56 │"* ]]
	[[ $output == *"│ max_pooling1d (MaxPooling1D)    │ (None, 8, 8)           │             0 │"* ]]
	[[ $output == *"│ conv1d_1 (Conv1D)               │ (None, 4, 8)           │           200 │"* ]]
	[[ $output == *"│ (GlobalMaxPooling1D)            │"* ]]
	[[ $output == *"│ (None, 1, 8)           │             0 │"* ]]
	run "$DTRAIN" summary "$SEQ" --set 'model.layers.1.conv1d={filters: 4, kernel_size: 5, use_bias: false, dilation_rate: 2}' \
		--set 'model.layers.2={max_pooling1d: {pool_size: 3, strides: 1}}'
	status_is 0
	# valid: 16 - (5 - 1) * 2 = 8 steps; no bias: 5 * 2 * 4.
	[[ $output == *"│ conv1d (Conv1D)                 │ (None, 8, 4)           │            40 │"* ]]
	[[ $output == *"│ max_pooling1d (MaxPooling1D)    │ (None, 6, 4)           │             0 │"* ]]
	run "$DTRAIN" summary "$MODELS/tiny_cnn.yaml" --set 'model.layers.4={global_max_pooling2d: {keepdims: true}}'
	status_is 0
	[[ $output == *"│ (GlobalMaxPooling2D)            │"* ]]
	[[ $output == *"│ (None, 1, 1, 4)        │             0 │"* ]]
}

@test "conv1d and pooling1d on an image or flat input: exit 2, the layer, the shape and a hint" {
	run --separate-stderr "$DTRAIN" summary "$SEQ" --set 'model.layers.0={reshape: {target_shape: [4, 4, 2]}}'
	status_is 2
	stderr_has "tiny_seq.yaml:7:" "layer 'conv1d' needs a sequence input (steps, channels)" "(None, 4, 4, 2)" "reshape"
	run --separate-stderr "$DTRAIN" summary "$SEQ" --set 'model.layers.1={dense: {units: 4}}' \
		--set 'model.layers.0={dense: {units: 4}}'
	status_is 2
	stderr_has "tiny_seq.yaml:8:" "layer 'max_pooling1d' needs a sequence input" "(None, 4)"
	run --separate-stderr "$DTRAIN" summary "$SEQ" --set 'model.layers.4=global_max_pooling2d'
	status_is 2
	stderr_has "--set:1:" "layer 'global_max_pooling2d' needs an image input" "(None, 4, 8)"
}

@test "conv1d's and pooling1d's bad arguments: exit 2 at the value" {
	run --separate-stderr "$DTRAIN" summary "$SEQ" --set 'model.layers.1.conv1d.kernel_size=[3, 3]'
	status_is 2
	stderr_has "--set:1:" "'kernel_size' must be an integer or a list of one integer"
	run --separate-stderr "$DTRAIN" summary "$SEQ" --set 'model.layers.1.conv1d.padding=full'
	status_is 2
	stderr_has "--set:1:" "padding" "causal"
	run --separate-stderr "$DTRAIN" summary "$SEQ" --set 'model.layers.1.conv1d.strides=2' \
		--set 'model.layers.1.conv1d.dilation_rate=2'
	status_is 2
	stderr_has "--set:1:" "strides > 1 cannot be combined with dilation_rate > 1"
	run --separate-stderr "$DTRAIN" summary "$SEQ" --set 'model.layers.1.conv1d.padding=valid' \
		--set 'model.layers.1.conv1d.kernel_size=17'
	status_is 2
	stderr_has "--set:1:" "the kernel of 17 does not fit the input (16, 2)"
	run --separate-stderr "$DTRAIN" summary "$SEQ" --set 'model.layers.2={max_pooling1d: {padding: causal}}'
	status_is 2
	stderr_has "--set:1:" "padding"
	run --separate-stderr "$DTRAIN" summary "$SEQ" --set 'model.layers.2={max_pooling1d: {pool_size: 0}}'
	status_is 2
	stderr_has "--set:1:"
	run --separate-stderr "$DTRAIN" summary "$SEQ" --set 'model.layers.4={global_max_pooling1d: {keepdims: 3}}'
	status_is 2
	stderr_has "--set:1:" "keepdims"
	run --separate-stderr "$DTRAIN" summary "$SEQ" --set 'model.layers.4={global_max_pooling1d: {pool_size: 3}}'
	status_is 2
	stderr_has "--set:1:" "pool_size"
}

# tokens_csv FILE ROWS...: a CSV with columns t0..t5 and label; each ROW is "t0,t1,t2,t3,t4,t5,label".
tokens_csv() {
	local f=$1
	shift
	echo "t0,t1,t2,t3,t4,t5,label" >"$f"
	printf '%s\n' "$@" >>"$f"
}

# The embedding model of seq_pattern.yaml on a CSV of 6 tokens (vocabulary 20).
fit_csv() {
	"$DTRAIN" fit -q "$REPO/models/seq_pattern.yaml" --set checkpoint.enabled=false --set fit.epochs=1 \
		--set "data.train={format: csv, path: '$1', label: label}" --set data.validation=null \
		--set data.test=null --set data.batch_size=2 "${@:2}"
}

@test "embedding: seq_pattern.yaml learns the bigram; a bag of tokens stays near chance" {
	run --separate-stderr "$DTRAIN" fit "$REPO/models/seq_pattern.yaml" -q --json --set checkpoint.enabled=false \
		--set data.train.samples=8000 --set data.validation.samples=1000 --set data.test.samples=2000 \
		--set fit.epochs=3 --set 'compile.optimizer={adam: {learning_rate: 0.01}}'
	status_is 0
	events epoch | jq -e 'select(.epoch == 3) | .val_accuracy >= 0.98' >/dev/null
	run --separate-stderr "$DTRAIN" fit "$REPO/models/seq_pattern.yaml" -q --json --set checkpoint.enabled=false \
		--set data.train.samples=8000 --set data.validation.samples=1000 --set data.test.samples=2000 \
		--set fit.epochs=3 --set 'compile.optimizer={adam: {learning_rate: 0.01}}' \
		--set 'model.layers.1=global_average_pooling1d' --set 'model.layers.2={dense: {units: 16, activation: relu}}'
	status_is 0
	events epoch | jq -e 'select(.epoch == 3) | .val_accuracy < 0.6' >/dev/null
}

@test "summary: embedding's parameters are input_dim * output_dim, its output (steps, output_dim)" {
	run "$DTRAIN" summary "$REPO/models/seq_pattern.yaml"
	status_is 0
	[[ $output == *"│ embedding (Embedding)           │ (None, 20, 16)         │           320 │"* ]]
	[[ $output == *"│ conv1d (Conv1D)                 │ (None, 19, 32)         │         1,056 │"* ]]
	[[ $output == *"Total params: 1,442"* ]]
}

@test "embedding: a token index that is negative, fractional, too large or not a number names the file and record" {
	tokens_csv "$TMP/ok.csv" "1,2,3,4,5,6,0" "1,2,3,4,5,19,1" "0,0,0,0,0,0,0" "7,8,9,1,2,3,1"
	run --separate-stderr fit_csv "$TMP/ok.csv"
	status_is 0
	tokens_csv "$TMP/frac.csv" "1,2,3,4,5,6,0" "1,2,3,4,5,6,1" "1,2,3.5,4,5,6,0" "1,2,3,4,5,6,1"
	run --separate-stderr fit_csv "$TMP/frac.csv"
	[ "$status" -eq 1 ]
	not_crashed
	stderr_has "'$TMP/frac.csv' record 2: value 3.5 at position 2 is not a token index of embedding 'embedding'" \
		"a whole number from 0 to 19"
	tokens_csv "$TMP/big.csv" "1,2,3,4,5,6,0" "1,2,3,4,5,20,1"
	run --separate-stderr fit_csv "$TMP/big.csv"
	[ "$status" -eq 1 ]
	stderr_has "'$TMP/big.csv' record 1: value 20 at position 5"
	tokens_csv "$TMP/neg.csv" "1,2,3,-1,5,6,0" "1,2,3,4,5,6,1"
	run --separate-stderr fit_csv "$TMP/neg.csv"
	[ "$status" -eq 1 ]
	stderr_has "'$TMP/neg.csv' record 0: value -1 at position 3"
	# NPY: int64 tokens, one beyond the vocabulary at record 5; and a NaN in float32.
	cd "$TMP"
	npy_python '
npy("x.npy", "<i8", "(8, 6)", struct.pack("<48q", *[40 if i == 33 else i % 20 for i in range(48)]))
npy("y.npy", "<i8", "(8,)", struct.pack("<8q", *[i % 2 for i in range(8)]))
npy("xf.npy", "<f4", "(8, 6)", struct.pack("<48f", *[float("nan") if i == 13 else i % 20 for i in range(48)]))
'
	run --separate-stderr "$DTRAIN" fit -q "$REPO/models/seq_pattern.yaml" --set checkpoint.enabled=false \
		--set fit.epochs=1 --set "data.train={format: npy, x: '$TMP/x.npy', y: '$TMP/y.npy'}" \
		--set data.validation=null --set data.test=null
	[ "$status" -eq 1 ]
	stderr_has "'$TMP/x.npy' record 5: value 40 at position 3 is not a token index"
	run --separate-stderr "$DTRAIN" fit -q "$REPO/models/seq_pattern.yaml" --set checkpoint.enabled=false \
		--set fit.epochs=1 --set "data.train={format: npy, x: '$TMP/xf.npy', y: '$TMP/y.npy'}" \
		--set data.validation=null --set data.test=null
	[ "$status" -eq 1 ]
	# (a NaN in a float .npy is an unreadable record before it is a token)
	stderr_has "'$TMP/xf.npy', record 2: value 1 of the sample is nan, not a finite number"
}

@test "embedding: predict checks its input's tokens too, naming the input and the record" {
	tokens_csv "$TMP/ok.csv" "1,2,3,4,5,6,0" "1,2,3,4,5,19,1" "0,0,0,0,0,0,0" "7,8,9,1,2,3,1"
	run --separate-stderr fit_csv "$TMP/ok.csv" --set checkpoint.enabled=true --set checkpoint.dir="$TMP/run"
	status_is 0
	printf '1,2,3,4,5,6\n1,2,3,4,5,60\n' >"$TMP/in.csv"
	run --separate-stderr "$DTRAIN" predict "$TMP/run" "$TMP/in.csv"
	[ "$status" -eq 1 ]
	not_crashed
	stderr_has "'$TMP/in.csv' record 1: value 60 at position 5 is not a token index"
}

@test "embedding: rescale and normalize are refused, at their place, saying why" {
	run --separate-stderr "$DTRAIN" fit -q "$REPO/models/seq_pattern.yaml" --set checkpoint.enabled=false \
		--set data.rescale=0.5
	status_is 2
	stderr_has "--set:1:" "data.rescale would scale the token indices that layer 'embedding' (embedding) reads"
	run --separate-stderr "$DTRAIN" fit -q "$REPO/models/seq_pattern.yaml" --set checkpoint.enabled=false \
		--set data.normalize=auto
	status_is 2
	stderr_has "--set:1:" "data.normalize would shift the token indices"
}

@test "embedding's bad arguments: exit 2 at the value" {
	local M=$REPO/models/seq_pattern.yaml
	run --separate-stderr "$DTRAIN" summary "$M" --set 'model.layers.0.embedding.mask_zero=true'
	status_is 2
	stderr_has "seq_pattern.yaml:" "layer 'conv1d' (Conv1D) does not honour the mask of mask_zero: true"
	run --separate-stderr "$DTRAIN" summary "$M" --set 'model.layers.0.embedding={output_dim: 4}'
	status_is 2
	stderr_has "--set:1:" "input_dim"
	run --separate-stderr "$DTRAIN" summary "$M" --set 'model.layers.0.embedding.input_dim=0'
	status_is 2
	stderr_has "--set:1:" "input_dim"
	run --separate-stderr "$DTRAIN" summary "$M" --set 'model.layers.0.embedding.embeddings_initializer=orthogonal_x'
	status_is 2
	stderr_has "--set:1:" "orthogonal_x"
	run --separate-stderr "$DTRAIN" summary "$M" --set 'model.layers.1={embedding: {input_dim: 4, output_dim: 2}}'
	status_is 2
	stderr_has "--set:1:" "embedding must be the model's first layer"
}

@test "synthetic kind sequence: its keys, and the others' keys refused with it" {
	local M=$REPO/models/seq_pattern.yaml
	run --separate-stderr "$DTRAIN" fit -q "$M" --set data.train.features=4
	status_is 2
	stderr_has "--set:1:" "'features' does not apply to kind 'sequence'" "vocab and length"
	run --separate-stderr "$DTRAIN" fit -q "$M" --set data.train.classes=3
	status_is 2
	stderr_has "--set:1:" "kind 'sequence' has 2 classes"
	run --separate-stderr "$DTRAIN" fit -q "$M" --set data.train.vocab=2
	status_is 2
	stderr_has "--set:1:" "vocab"
	run --separate-stderr "$DTRAIN" fit -q "$MODELS/tiny_seq.yaml" --set data.train.length=5
	status_is 2
	stderr_has "--set:1:" "'length' does not apply to kind 'blobs'"
	# The data's length must match; the embedding reads (length,) samples.
	run "$DTRAIN" summary "$M" --set data.train.length=7
	status_is 0
	[[ $output == *"│ embedding (Embedding)           │ (None, 7, 16)          │           320 │"* ]]
}

@test "seattle weather: the script windows the real CSV, prints the baselines, and the conv1d model fits on it" {
	local csv=/usr/lib/python3/dist-packages/vega_datasets/_data/seattle-weather.csv
	[ -e "$csv" ] || skip "no $csv (Debian: python3-vega-datasets): the time-series example is not tested"
	/usr/bin/python3 -c 'import numpy' 2>/dev/null || skip "no NumPy for /usr/bin/python3 (Debian: python3-numpy)"
	run /usr/bin/python3 "$REPO/models/seattle_weather.py" --out "$TMP/sw"
	status_is 0
	[[ ${lines[0]} == *"1082 training windows (targets in 2012-2014), 365 test windows (2015), 14 days x 6 channels"* ]]
	[[ $output == *"persistence (tomorrow = today)     MAE 2.240  RMSE 2.907"* ]]
	[[ $output == *"climatology (the month's mean)     MAE 3.262"* ]]
	# The model as shipped (at most 300 epochs of 9 steps, early stopping): a second or two.
	run --separate-stderr "$DTRAIN" fit -q --json "$REPO/models/seattle_weather_conv1d.yaml" --set checkpoint.enabled=false \
		--set data.train.x="$TMP/sw/train_x.npy" --set data.train.y="$TMP/sw/train_y.npy" \
		--set data.test.x="$TMP/sw/test_x.npy" --set data.test.y="$TMP/sw/test_y.npy"
	status_is 0
	# On the held-out year it is far better than the month's mean (MAE 3.26) and near persistence
	# (2.24); seed 1 measured 2.32.
	events test | jq -e '.mae < 2.5 and .samples == 365' >/dev/null || {
		events test
		false
	}
	# Without the script's files the error names the path.
	run --separate-stderr "$DTRAIN" fit -q "$REPO/models/seattle_weather_conv1d.yaml" \
		--set data.train.x="$TMP/none_x.npy" --set data.train.y="$TMP/sw/train_y.npy"
	[ "$status" -ne 0 ]
	not_crashed
	stderr_has "$TMP/none_x.npy"
}

@test "synthetic kind sequence: long records are made (no rejection loop), and train" {
	run --separate-stderr timeout 120 "$DTRAIN" fit -q "$REPO/models/seq_pattern.yaml" --set checkpoint.enabled=false \
		--set data.train.length=65536 --set data.train.samples=40 --set fit.epochs=1 --set data.validation=null \
		--set data.test=null --set data.batch_size=8
	status_is 0
}

@test "synthetic kind sequence: dtrain config shows its keys only, and its output loads again" {
	run --separate-stderr "$DTRAIN" config "$REPO/models/seq_pattern.yaml"
	status_is 0
	printf '%s\n' "$output" >"$TMP/resolved.yaml"
	[[ $output == *"vocab: 20"* ]]
	[[ $output == *"length: 20"* ]]
	[[ $output != *"noise:"* && $output != *"features:"* ]]
	run --separate-stderr "$DTRAIN" summary "$TMP/resolved.yaml"
	status_is 0
}
