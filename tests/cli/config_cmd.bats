#!/usr/bin/env bats
# dtrain config: the configuration as fit uses it (defaults filled in, the
# data file inlined, --set applied, paths absolute), YAML that fit trains the
# same model from, or JSON; and the configuration a checkpoint was trained with.

load helpers

setup() {
	common_setup
	DIFF=$(dirname "$DTRAIN")/tests/tools/ckpt_diff
	[ -x "$DIFF" ] || DIFF=$REPO/build/tests/tools/ckpt_diff
}

@test "defaults filled in: every reader's value, in the key's own mapping" {
	run --separate-stderr "$DTRAIN" config "$MODELS/blobs.yaml"
	status_is 0
	[ -z "$stderr" ]
	# What the file says stays; what it leaves out comes with fit's value.
	[[ $output == *$'\n'"  batch_size: 32"$'\n'* ]]
	[[ $output == *$'\n'"  epochs: 5"$'\n'* ]]
	[[ $output == *$'\n'"        use_bias: true"$'\n'* ]]
	[[ $output == *$'\n'"  prefetch: 2"$'\n'* ]]
	# 'optimizer: adam' with its arguments, and only adam's.
	[[ $output == *$'\n'"    adam:"$'\n'* ]]
	[[ $output == *$'\n'"      learning_rate: 0.001"$'\n'* ]]
	[[ $output == *$'\n'"      beta_2: 0.999"$'\n'* ]]
	[[ $output != *momentum* && $output != *clipnorm* ]]
	[[ $output == *$'\n'"  strategy: auto"$'\n'* ]]
	# No value for a key whose absence means something (early_stopping's baseline: none).
	run --separate-stderr "$DTRAIN" config "$MODELS/blobs.yaml" --set 'fit.callbacks=[early_stopping]'
	status_is 0
	[[ $output == *$'\n'"        patience: 0"$'\n'* ]]
	[[ $output != *baseline* ]]
}

@test "the output is YAML that fit trains the same model from: bit-identical weights after 1 epoch" {
	for m in blobs tiny_cnn; do
		"$DTRAIN" config "$MODELS/$m.yaml" --set fit.epochs=1 >"$TMP/$m.yaml"
		"$DTRAIN" fit -q "$MODELS/$m.yaml" --set fit.epochs=1 --set checkpoint.dir="$TMP/$m-a" >/dev/null
		"$DTRAIN" fit -q "$TMP/$m.yaml" --set checkpoint.dir="$TMP/$m-b" >/dev/null
		run "$DIFF" "$TMP/$m-a/latest.safetensors" "$TMP/$m-b/latest.safetensors" 0
		status_is 0
		# And it is a fixed point: its own config is itself.
		run "$DTRAIN" config "$TMP/$m.yaml"
		status_is 0
		[ "$output" = "$(cat "$TMP/$m.yaml")" ]
	done
}

@test "the data file inlined, --set applied, relative paths made absolute" {
	mkdir -p "$TMP/sub"
	printf 'a,b,kind\n1,2,x\n2,1,y\n' >"$TMP/sub/train.csv"
	cat >"$TMP/sub/data.yaml" <<-EOF
		train: {format: csv, path: train.csv, label: kind}
	EOF
	cat >"$TMP/m.yaml" <<-EOF
		model: {layers: [dense: {units: 2, activation: softmax}]}
		compile: {loss: sparse_categorical_crossentropy}
		data: sub/data.yaml
	EOF
	run --separate-stderr "$DTRAIN" config "$TMP/m.yaml" --set data.batch_size=4
	status_is 0
	[[ $output == *$'\n'"    path: $TMP/sub/train.csv"$'\n'* ]]
	[[ $output == *$'\n'"  batch_size: 4"$'\n'* ]]
	# No optimizer in the file: fit's rmsprop.
	[[ $output == *$'\n'"    rmsprop:"$'\n'* ]]
	[[ $output == *$'\n'"  name: m"$'\n'* ]]
}

@test "--json: the same configuration, typed" {
	run --separate-stderr "$DTRAIN" config "$MODELS/blobs.yaml" --json
	status_is 0
	[ "$(jq -c '.data.batch_size, .data.shuffle, .compile.optimizer.adam.learning_rate, .compile.metrics' <<<"$output")" = \
		"$(printf '32\ntrue\n0.001\n["accuracy"]')" ]
	[ "$(jq -r '.model.layers[0].dense.activation' <<<"$output")" = relu ]
}

@test "CHECKPOINT: the configuration it was trained with, --set flags included" {
	"$DTRAIN" fit -q "$MODELS/blobs.yaml" --set fit.epochs=1 --set data.batch_size=16 \
		--set checkpoint.dir="$TMP/run" >/dev/null
	cp "$TMP/run/latest.safetensors" "$TMP/c.safetensors"
	run --separate-stderr "$DTRAIN" config "$TMP/c.safetensors"
	status_is 0
	[[ $output == *$'\n'"  batch_size: 16"$'\n'* ]]
	[[ $output == *$'\n'"  epochs: 1"$'\n'* ]]
	[[ $output == *$'\n'"  name: blobs"$'\n'* ]]
	# The run directory: its latest, as it saved no best... or its best.
	run --separate-stderr "$DTRAIN" config "$TMP/run" --json
	status_is 0
	[ "$(jq -r .data.batch_size <<<"$output")" = 16 ]
}

@test "errors: a bad model file names its position; no model file is a usage error" {
	printf 'model:\n  input_shape: [2]\n  layers: [dense: {units: 0}]\ncompile: {loss: mean_squared_error}\n' >"$TMP/bad.yaml"
	run --separate-stderr "$DTRAIN" config "$TMP/bad.yaml"
	status_is 2
	stderr_has "$TMP/bad.yaml:3:"
	run --separate-stderr "$DTRAIN" config
	status_is 2
	stderr_has "missing the model file"
}
