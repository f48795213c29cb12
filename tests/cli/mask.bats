#!/usr/bin/env bats
# Embedding's mask_zero (issue 14) end to end: padding is invisible to a
# masked model wherever it sits, a masked model learns a task on padded
# sequences, and the layers that cannot honour a mask are refused at their
# place in the file. Keras' own numbers are in tests/ref/mask_*.safetensors
# (test_ref), the gradients in test_gradcheck's test_masks.

load helpers

setup() {
	common_setup
}

# A model on 8 tokens (vocabulary 10, 0 the padding): LAYERS is its layers after the embedding.
mask_model() {
	cat >"$1" <<YAML
model:
  name: masked
  input_shape: [8]
  layers:
    - embedding: {input_dim: 10, output_dim: 6, mask_zero: $2}
$3
    - dense: {units: 3, activation: softmax}
compile:
  optimizer: {adam: {learning_rate: 0.01}}
  loss: sparse_categorical_crossentropy
  metrics: [accuracy]
data:
  train: {format: csv, path: '$TMP/train.csv', label: label}
  batch_size: 16
fit: {epochs: 1, seed: 3}
checkpoint: {dir: '$TMP/run'}
YAML
}

# Three rows of the same tokens, padded before, after and inside, and one other sequence.
padded_rows() {
	printf '0,0,0,4,7,2,9,1\n4,7,2,9,1,0,0,0\n4,0,7,2,0,9,0,1\n3,3,8,0,0,0,0,0\n' >"$1"
}

# The largest difference between the probabilities predict --all gives row 0 and rows 1 and 2
# (the same tokens padded elsewhere); predict prints 6 digits.
paddings_differ() {
	"$DTRAIN" predict "$TMP/run" "$TMP/in.csv" --all --json | head -3 |
		jq -s '[.[0].probabilities as $a | .[1:][] | [.probabilities, $a] | transpose[] |
			(.[0] - .[1]) | fabs] | max'
}

@test "mask_zero: where the padding sits changes nothing (lstm, gru, bidirectional and the masked mean, through layer_normalization); without it, it does" {
	printf 't0,t1,t2,t3,t4,t5,t6,t7,label\n' >"$TMP/train.csv"
	for i in $(seq 0 31); do
		echo "$((i % 9 + 1)),$((i % 7)),0,$((i % 5 + 1)),0,0,2,1,$((i % 3))" >>"$TMP/train.csv"
	done
	padded_rows "$TMP/in.csv"
	for layers in "    - lstm: {units: 5}" \
		"    - gru: {units: 4, go_backwards: true}" \
		"    - bidirectional: {layer: {simple_rnn: {units: 3, return_sequences: true}}}
    - global_average_pooling1d" \
		"    - layer_normalization
    - spatial_dropout1d: {rate: 0.2}
    - lstm: {units: 3}"; do
		mask_model "$TMP/m.yaml" true "$layers"
		run --separate-stderr "$DTRAIN" fit -q "$TMP/m.yaml"
		status_is 0
		run --separate-stderr paddings_differ
		status_is 0
		jq -e '. <= 2e-6' <<<"$output" >/dev/null || {
			echo "$layers: the paddings' probabilities differ by $output"
			return 1
		}
		mask_model "$TMP/m.yaml" false "$layers"
		run --separate-stderr "$DTRAIN" fit -q "$TMP/m.yaml"
		status_is 0
		run --separate-stderr paddings_differ
		status_is 0
		jq -e '. > 1e-4' <<<"$output" >/dev/null
	done
}

@test "mask_zero: an lstm learns the first real token of left-padded sequences of any length" {
	# Class = the first token after the padding (1, 2 or 3), then noise tokens 4-9; 1 to 8 real tokens.
	awk 'BEGIN { srand(11); print "t0,t1,t2,t3,t4,t5,t6,t7,label";
		for (i = 0; i < 1200; i++) { n = 1 + int(rand() * 8); c = 1 + int(rand() * 3); row = "";
			for (t = 0; t < 8; t++) { v = t < 8 - n ? 0 : t == 8 - n ? c : 4 + int(rand() * 6);
				row = row v ","; }
			print row (c - 1); } }' >"$TMP/train.csv"
	mask_model "$TMP/m.yaml" true "    - lstm: {units: 8}"
	run --separate-stderr "$DTRAIN" fit -q --json "$TMP/m.yaml" --set fit.epochs=15 \
		--set "data.validation={format: csv, path: '$TMP/train.csv', label: label}" --set data.validation_split=null
	status_is 0
	events epoch | jq -e 'select(.epoch == 15) | .val_accuracy >= 0.95' >/dev/null
}

@test "mask_zero: a layer that ignores the mask, a mask at the output, batch norm, export: exit 2 naming why" {
	printf 't0,t1,t2,t3,t4,t5,t6,t7,label\n1,2,3,4,5,6,7,8,0\n' >"$TMP/train.csv"
	mask_model "$TMP/m.yaml" true "    - conv1d: {filters: 2, kernel_size: 3}
    - global_max_pooling1d"
	run --separate-stderr "$DTRAIN" summary "$TMP/m.yaml"
	status_is 2
	stderr_has "m.yaml:6:7: error: layer 'conv1d' (Conv1D) does not honour the mask of mask_zero: true" \
		"lstm, gru, simple_rnn, bidirectional, global_average_pooling1d"
	mask_model "$TMP/m.yaml" true "    - batch_normalization
    - lstm: {units: 2}"
	run --separate-stderr "$DTRAIN" summary "$TMP/m.yaml"
	status_is 2
	stderr_has "m.yaml:6:7: error: layer 'batch_normalization' (BatchNormalization) does not honour the mask"
	mask_model "$TMP/m.yaml" true "    - lstm: {units: 2, return_sequences: true}
    - activation: {activation: tanh}"
	head -n 7 "$TMP/m.yaml" >"$TMP/out.yaml"
	run --separate-stderr "$DTRAIN" summary "$TMP/out.yaml" --set 'compile={loss: mean_squared_error}'
	status_is 2
	stderr_has "out.yaml:7:7: error: the mask of mask_zero: true reaches the model's output at layer 'activation'"
	mask_model "$TMP/m.yaml" true "    - flatten"
	run --separate-stderr "$DTRAIN" summary "$TMP/m.yaml" --set 'model.input_shape=[4, 2]'
	status_is 2
	stderr_has "m.yaml:5:60: error: layer 'embedding': mask_zero masks the steps of a sequence of indices, (steps,)"
	mask_model "$TMP/m.yaml" true "    - lstm: {units: 2}"
	run --separate-stderr "$DTRAIN" fit -q "$TMP/m.yaml"
	status_is 0
	run --separate-stderr "$DTRAIN" export "$TMP/m.yaml" -o "$TMP/m.onnx"
	[ "$status" -ne 0 ]
	not_crashed
	stderr_has "layer 'embedding' has mask_zero: true, and the exported graph would not skip the padded steps"
	[ ! -e "$TMP/m.onnx" ]
}
