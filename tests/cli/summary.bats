#!/usr/bin/env bats
# dtrain summary: the Keras 3 table of layers, shapes and parameter counts, on stdout.

load helpers

setup() {
	common_setup
	FASHION=$REPO/models/fashion_mlp.yaml
}

@test "fashion_mlp: the Keras table on stdout, nothing on stderr" {
	run --separate-stderr "$DTRAIN" summary "$FASHION"
	status_is 0
	[ -z "$stderr" ]
	[ "${lines[0]}" = 'Model: "fashion_mlp"' ]
	[[ $output == *"Layer (type)"*"Output Shape"*"Param #"* ]]
	[[ $output == *"dense (Dense)"* ]]
	[[ $output == *"(None, 512)"* ]]
	[[ $output == *"401,920"* ]]
	[[ $output == *$'\n'" Total params: 669,706 (2.55 MB)"$'\n'* ]]
	[[ $output == *$'\n'" Trainable params: 669,706 (2.55 MB)"$'\n'* ]]
	[[ $output == *$'\n'" Non-trainable params: 0 (0.00 B)" ]]
}

@test "fashion_mlp: one row per layer, with Keras' names, shapes and counts" {
	run --separate-stderr "$DTRAIN" summary "$FASHION"
	status_is 0
	# Rows are "│ name (Type)   │ shape   │   count │"; squeeze the padding.
	local rows
	rows=$(grep '^│' <<<"$output" | sed 's/│/|/g; s/  */ /g')
	[ "$rows" = "$(
		cat <<-'EOF'
			| flatten (Flatten) | (None, 784) | 0 |
			| dense (Dense) | (None, 512) | 401,920 |
			| dropout (Dropout) | (None, 512) | 0 |
			| dense_1 (Dense) | (None, 512) | 262,656 |
			| dropout_1 (Dropout) | (None, 512) | 0 |
			| dense_2 (Dense) | (None, 10) | 5,130 |
		EOF
	)" ]
}

@test "the table's lines all have the same width" {
	run "$DTRAIN" summary "$FASHION"
	status_is 0
	local widths
	# Count characters, not bytes: the box-drawing characters are 3 bytes in UTF-8.
	export LC_ALL=C.UTF-8
	widths=$(grep -E '^[┏┃┡│├└]' <<<"$output" | while IFS= read -r l; do echo "${#l}"; done | sort -u)
	[ "$(wc -l <<<"$widths")" -eq 1 ]
}

@test "works without the data files when input_shape is given" {
	sed 's#/usr/share/datasets/fashion-mnist/#/nonexistent/fashion-mnist/#' "$FASHION" >"$TMP/fashion.yaml"
	grep -q /nonexistent/ "$TMP/fashion.yaml"
	run --separate-stderr "$DTRAIN" summary "$TMP/fashion.yaml"
	status_is 0
	[ -z "$stderr" ]
	[[ $output == *"dense (Dense)"*"401,920"* ]]
	[[ $output == *" Total params: 669,706 (2.55 MB)"* ]]
}

@test "without input_shape it reads the shape from the data, and says which file is missing" {
	sed 's#/usr/share/datasets/fashion-mnist/#/nonexistent/fashion-mnist/#; /input_shape/d' "$FASHION" \
		>"$TMP/fashion.yaml"
	run --separate-stderr "$DTRAIN" summary "$TMP/fashion.yaml"
	not_crashed
	status_is 1
	[ -z "$output" ]
	[[ $stderr == *"cannot open '/nonexistent/fashion-mnist/train-images-idx3-ubyte.gz'"* ]]
}

@test "--set changes the counts: 256 units in the first dense layer" {
	run --separate-stderr "$DTRAIN" summary "$FASHION" --set model.layers.1.dense.units=256
	status_is 0
	[[ $output == *"(None, 256)"*"200,960"* ]]
	[[ $output == *" Total params: 337,674 (1.29 MB)"* ]]
}

@test "the synthetic blobs model: input shape from the data, bytes under 1 KB" {
	run --separate-stderr "$DTRAIN" summary "$MODELS/blobs.yaml"
	status_is 0
	[ "${lines[0]}" = 'Model: "blobs"' ]
	[[ $output == *"(None, 16)"*" 48 "*"(None, 3)"*" 51 "* ]]
	[[ $output == *" Total params: 99 (396.00 B)"* ]]
}

@test "the name defaults to the file name without its extension" {
	sed '/^  name:/d' "$MODELS/blobs.yaml" >"$TMP/my_model.yaml"
	run "$DTRAIN" summary "$TMP/my_model.yaml"
	status_is 0
	[ "${lines[0]}" = 'Model: "my_model"' ]
}

@test "a config error: exit 2 and nothing on stdout" {
	run --separate-stderr "$DTRAIN" summary "$FASHION" --set model.layers.1.dense.units=abc
	status_is 2
	[ -z "$output" ]
	[[ $stderr == *"--set:1:28: error: 'units' must be an integer, got 'abc'"* ]]
}

@test "summary checks the whole file: a bad strategy or data source argument is exit 2, before any data" {
	run --separate-stderr "$DTRAIN" summary "$FASHION" --set distribute.strategy=foo
	status_is 2
	[[ $stderr == "--set:1:21: error: unknown strategy 'foo'"* ]]
	# The test source's typo, although summary reads no test data (and the input shape is given).
	run --separate-stderr "$DTRAIN" summary "$FASHION" --set data.test.imagez=x
	status_is 2
	[[ $stderr == "--set:1:11: error: unknown key 'imagez' in 'idx'; did you mean 'images'?" ]]
}

@test "summary does not ask for the processes a strategy runs in: parameter_server without mpirun" {
	run --separate-stderr "$DTRAIN" summary "$FASHION" --set distribute.strategy=parameter_server
	status_is 0
	[ -z "$stderr" ]
	[ "${lines[0]}" = 'Model: "fashion_mlp"' ]
}
