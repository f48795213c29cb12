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
