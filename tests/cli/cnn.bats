#!/usr/bin/env bats
# Convolutional layers end to end: a tiny CNN (reshape, conv2d,
# batch_normalization, max_pooling2d) trained on synthetic data, its
# checkpoint, evaluate in inference mode, summary's parameter counts, and the
# layers' configuration errors.

load helpers

# One training run for the whole file: $RUN holds its checkpoints and
# $RUN/fit.json what fit printed with --json.
setup_file() {
	REPO=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	DTRAIN=${DTRAIN:-$REPO/build/dtrain}
	export RUN=$BATS_FILE_TMPDIR/run
	"$DTRAIN" fit "$BATS_TEST_DIRNAME/models/tiny_cnn.yaml" -q --json --set checkpoint.dir="$RUN" \
		>"$BATS_FILE_TMPDIR/fit.json"
}

setup() {
	common_setup
	CNN=$MODELS/tiny_cnn.yaml
	FIT=$(cat "$BATS_FILE_TMPDIR/fit.json")
	[ -s "$RUN/latest.safetensors" ] || {
		echo "fit in setup_file wrote no checkpoint" >&2
		return 1
	}
}

# tensor FILE NAME: the float32 values of one tensor of a safetensors file, one per line.
tensor() {
	local header len begin end
	header=$(safetensors_header "$1") || return 1
	len=$(od -An -t u8 -N 8 "$1" | tr -d ' ')
	begin=$(jq -r --arg n "$2" '.[$n].data_offsets[0]' <<<"$header")
	end=$(jq -r --arg n "$2" '.[$n].data_offsets[1]' <<<"$header")
	[ "$begin" != null ] || return 1
	od -An -v -t f4 -w4 -j $((8 + len + begin)) -N $((end - begin)) "$1" | tr -d ' '
}

# rows: summary's table rows as "| name (Type) | shape | count |".
rows() {
	grep '^│' <<<"$output" | sed 's/│/|/g; s/  */ /g'
}

@test "the tiny CNN learns: validation accuracy far above chance (1/3)" {
	local acc
	acc=$(jq -r 'select(.event == "epoch" and .epoch == 5) | .val_accuracy' <<<"$FIT")
	echo "val_accuracy after 5 epochs: $acc"
	jq -e -n --argjson a "$acc" '$a >= 0.9' >/dev/null
}

@test "the loss falls from epoch to epoch" {
	local losses
	losses=$(jq -r 'select(.event == "epoch") | .loss' <<<"$FIT" | tr '\n' ' ')
	echo "losses: $losses"
	jq -e -n --argjson l "[${losses// /,}0]" '$l[0] > $l[4] and $l[4] < 0.5' >/dev/null
}

@test "evaluate scores the checkpoint as fit's test did (batch norm uses its moving statistics)" {
	run --separate-stderr "$DTRAIN" evaluate "$CNN" --json --set checkpoint.dir="$RUN"
	status_is 0
	local got want
	got=$(jq -r '.accuracy' <<<"$output")
	want=$(jq -r 'select(.event == "test") | .accuracy' <<<"$FIT")
	echo "evaluate: $got, fit: $want"
	[ "$(printf '%.4f' "$got")" = "$(printf '%.4f' "$want")" ]
	[ "$(printf '%.4f' "$(jq -r '.loss' <<<"$output")")" = \
		"$(printf '%.4f' "$(jq -r 'select(.event == "test") | .loss' <<<"$FIT")")" ]
}

@test "the checkpoint holds Keras' names and layouts, conv kernel (kh, kw, in, out)" {
	local header
	header=$(safetensors_header "$RUN/latest.safetensors")
	[ "$(jq -c '."conv2d/kernel".shape' <<<"$header")" = "[3,3,1,4]" ]
	[ "$(jq -r 'has("conv2d/bias")' <<<"$header")" = false ]
	for p in gamma beta moving_mean moving_variance; do
		[ "$(jq -c --arg n "batch_normalization/$p" '.[$n].shape' <<<"$header")" = "[4]" ]
	done
	[ "$(jq -c '."dense/kernel".shape' <<<"$header")" = "[16,3]" ]
	# The optimizer has slots for the trainable parameters only.
	[ "$(jq -r 'has("optimizer/batch_normalization/gamma/m")' <<<"$header")" = true ]
	[ "$(jq -r 'has("optimizer/batch_normalization/moving_mean/m")' <<<"$header")" = false ]
}

@test "training moved the moving statistics away from their start (0 and 1)" {
	local mean var
	mean=$(tensor "$RUN/latest.safetensors" batch_normalization/moving_mean)
	var=$(tensor "$RUN/latest.safetensors" batch_normalization/moving_variance)
	echo "moving_mean: $mean; moving_variance: $var"
	[ "$(wc -l <<<"$mean")" -eq 4 ]
	[ "$(wc -l <<<"$var")" -eq 4 ]
	# Every variance positive; the statistics are no longer the initial values.
	awk '$1 <= 0 { exit 1 }' <<<"$var"
	awk '$1 != 0 { moved = 1 } END { exit !moved }' <<<"$mean"
	awk '$1 != 1 { moved = 1 } END { exit !moved }' <<<"$var"
}

@test "summary: conv2d and batch_normalization counts, trainable and non-trainable" {
	run --separate-stderr "$DTRAIN" summary "$CNN"
	status_is 0
	[ "$(rows)" = "$(
		cat <<-'EOF'
			| reshape (Reshape) | (None, 4, 4, 1) | 0 |
			| conv2d (Conv2D) | (None, 4, 4, 4) | 36 |
			| batch_normalization | (None, 4, 4, 4) | 16 |
			| (BatchNormalization) | | |
			| activation (Activation) | (None, 4, 4, 4) | 0 |
			| max_pooling2d (MaxPooling2D) | (None, 2, 2, 4) | 0 |
			| flatten (Flatten) | (None, 16) | 0 |
			| dense (Dense) | (None, 3) | 51 |
		EOF
	)" ]
	[[ $output == *$'\n'" Total params: 103 (412.00 B)"$'\n'* ]]
	[[ $output == *$'\n'" Trainable params: 95 (380.00 B)"$'\n'* ]]
	[[ $output == *$'\n'" Non-trainable params: 8 (32.00 B)" ]]
}

@test "models/fashion_cnn.yaml: Keras' counts for its MNIST CNN" {
	run --separate-stderr "$DTRAIN" summary "$REPO/models/fashion_cnn.yaml"
	status_is 0
	[ "$(rows)" = "$(
		cat <<-'EOF'
			| conv2d (Conv2D) | (None, 26, 26, 32) | 320 |
			| conv2d_1 (Conv2D) | (None, 24, 24, 64) | 18,496 |
			| max_pooling2d (MaxPooling2D) | (None, 12, 12, 64) | 0 |
			| dropout (Dropout) | (None, 12, 12, 64) | 0 |
			| flatten (Flatten) | (None, 9216) | 0 |
			| dense (Dense) | (None, 128) | 1,179,776 |
			| dropout_1 (Dropout) | (None, 128) | 0 |
			| dense_1 (Dense) | (None, 10) | 1,290 |
		EOF
	)" ]
	[[ $output == *" Total params: 1,199,882 (4.58 MB)"* ]]
	[[ $output == *" Non-trainable params: 0 (0.00 B)"* ]]
}

@test "models/fashion_cnn_bn.yaml: Keras' counts, 896 of them non-trainable" {
	run --separate-stderr "$DTRAIN" summary "$REPO/models/fashion_cnn_bn.yaml"
	status_is 0
	[[ $output == *"conv2d_3 (Conv2D)"*"(None, 14, 14, 64)"*"36,864"* ]]
	[[ $output == *"batch_normalization_3 "*"256"*"(BatchNormalization)"* ]]
	[[ $output == *"dense (Dense)"*"(None, 256)"*"802,816"* ]]
	[[ $output == *"batch_normalization_4 "*"(None, 256)"*"1,024"*"(BatchNormalization)"* ]]
	[[ $output == *" Total params: 871,978 (3.33 MB)"* ]]
	[[ $output == *" Trainable params: 871,082 (3.32 MB)"* ]]
	[[ $output == *" Non-trainable params: 896 (3.50 KB)"* ]]
}

@test "summary: names wider than the first column wrap as in Keras; every line has one width" {
	run "$DTRAIN" summary "$REPO/models/fashion_cnn_bn.yaml" \
		--set 'model.layers.1={batch_normalization: {name: a_batch_normalization_layer_with_a_long_name}}'
	status_is 0
	[[ $output == *"│ batch_normalization_1           │ (None, 28, 28, 32)     │           128 │"$'\n'"│ (BatchNormalization)            │                        │               │"* ]]
	[[ $output == *"│ a_batch_normalization_layer_wit │"*$'\n'"│ h_a_long_name                   │"*$'\n'"│ (BatchNormalization)            │"* ]]
	local widths
	export LC_ALL=C.UTF-8
	widths=$(grep -E '^[┏┃┡│├└]' <<<"$output" | while IFS= read -r l; do echo "${#l}"; done | sort -u)
	[ "$(wc -l <<<"$widths")" -eq 1 ]
}

@test "strides, dilation, average and global average pooling train too" {
	run --separate-stderr "$DTRAIN" fit "$CNN" -q --json --set checkpoint.enabled=false \
		--set 'model.layers.1.conv2d={filters: 6, kernel_size: [2, 3], strides: 1, dilation_rate: [1, 2], padding: same}' \
		--set 'model.layers.4={average_pooling2d: {pool_size: 3, strides: 1, padding: same}}' \
		--set 'model.layers.5=global_average_pooling2d'
	status_is 0
	events epoch | jq -e 'select(.epoch == 5) | .val_accuracy >= 0.6' >/dev/null
}

@test "conv2d on a flat input: exit 2, the layer and the shape named, a hint" {
	run --separate-stderr "$DTRAIN" summary "$CNN" --set 'model.layers.0={dense: {units: 16}}'
	status_is 2
	stderr_has "tiny_cnn.yaml:8:" "layer 'conv2d' needs an image input" "(None, 16)" "reshape"
}

@test "reshape to another count: exit 2, both shapes named" {
	run --separate-stderr "$DTRAIN" summary "$CNN" --set 'model.layers.0.reshape.target_shape=[-1, 5, 1]'
	status_is 2
	stderr_has "--set:1:" "cannot reshape (16,) (16 values) to (-1, 5, 1)"
}

@test "strides with dilation, a kernel that does not fit, a bad axis: exit 2 with the place" {
	run --separate-stderr "$DTRAIN" summary "$CNN" --set 'model.layers.1.conv2d.strides=2' \
		--set 'model.layers.1.conv2d.dilation_rate=2'
	status_is 2
	stderr_has "--set:1:" "strides > 1 cannot be combined with dilation_rate > 1"
	run --separate-stderr "$DTRAIN" summary "$CNN" --set 'model.layers.1.conv2d.padding=valid' \
		--set 'model.layers.1.conv2d.kernel_size=[5, 3]'
	status_is 2
	stderr_has "--set:1:" "the 5x3 kernel does not fit the input (4, 4, 1)"
	run --separate-stderr "$DTRAIN" summary "$CNN" --set 'model.layers.2={batch_normalization: {axis: 1}}'
	status_is 2
	stderr_has "--set:1:" "only the last axis"
	run --separate-stderr "$DTRAIN" summary "$CNN" --set 'model.layers.4={max_pooling2d: {pool_size: [2, 2, 2]}}'
	status_is 2
	stderr_has "--set:1:" "'pool_size' must be an integer or a list of two integers"
}

@test "batch_normalization as the first layer with parameters (no input gradient) trains" {
	run --separate-stderr "$DTRAIN" fit "$CNN" -q --json --set checkpoint.enabled=false \
		--set 'model.layers.0={batch_normalization: {momentum: 0.9}}' \
		--set 'model.layers.1={reshape: {target_shape: [4, 4, 1]}}' \
		--set 'model.layers.2={conv2d: {filters: 4, kernel_size: 3, padding: same, activation: relu}}' \
		--set 'model.layers.3={activation: {activation: linear}}'
	status_is 0
	events epoch | jq -e 'select(.epoch == 5) | .val_accuracy >= 0.9' >/dev/null
}
