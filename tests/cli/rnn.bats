#!/usr/bin/env bats
# Recurrent layers (lstm, gru, simple_rnn): Keras' parameter counts in
# dtrain summary, training, and the errors of bad arguments at their place.

load helpers

setup() {
	common_setup
	RNN=$MODELS/tiny_rnn.yaml
	cd "$TMP"
}

# summary_of LAYER_YAML: dtrain summary of the model with layer 1 set to LAYER_YAML.
summary_of() {
	run --separate-stderr "$DTRAIN" summary "$RNN" --set "model.layers.1=$1"
	status_is 0
}

@test "parameter counts are Keras': LSTM, GRU (reset_after true and false), SimpleRNN" {
	# (6, 4) in: LSTM 4*(4*8 + 8*8 + 8) = 416; GRU 3*(4*8 + 8*8) + 6*8 = 336,
	# reset_after false 3*(4*8 + 8*8 + 8) = 312; SimpleRNN 4*8 + 8*8 + 8 = 104.
	summary_of '{lstm: {units: 8}}'
	[[ $output == *"│ lstm (LSTM)                     │ (None, 8)              │           416 │"* ]]
	summary_of '{gru: {units: 8}}'
	[[ $output == *"│ gru (GRU)                       │ (None, 8)              │           336 │"* ]]
	summary_of '{gru: {units: 8, reset_after: false}}'
	[[ $output == *"│ gru (GRU)                       │ (None, 8)              │           312 │"* ]]
	summary_of '{simple_rnn: {units: 8}}'
	[[ $output == *"│ simple_rnn (SimpleRNN)          │ (None, 8)              │           104 │"* ]]
	run --separate-stderr "$DTRAIN" summary "$RNN" --set 'model.layers.1={lstm: {units: 8, return_sequences: true}}' \
		--set 'model.layers.2=flatten'
	status_is 0
	[[ $output == *"│ lstm (LSTM)                     │ (None, 6, 8)           │           416 │"* ]]
	summary_of '{lstm: {units: 8, use_bias: false}}'
	[[ $output == *"│ lstm (LSTM)                     │ (None, 8)              │           384 │"* ]]
}

@test "LSTM, GRU and SimpleRNN train: validation accuracy rises on blobs" {
	local layer
	for layer in '{lstm: {units: 8}}' '{gru: {units: 8, go_backwards: true}}' \
		'{gru: {units: 8, reset_after: false}}' '{simple_rnn: {units: 8}}'; do
		run --separate-stderr "$DTRAIN" fit "$RNN" -q --json --set checkpoint.enabled=false \
			--set "model.layers.1=$layer"
		status_is 0
		events epoch | jq -e 'select(.epoch == 5) | .val_accuracy >= 0.9' >/dev/null || {
			echo "$layer: $output" >&2
			return 1
		}
	done
}

@test "the checkpoint names the parameters as Keras: kernel, recurrent_kernel, bias" {
	run --separate-stderr "$DTRAIN" fit "$RNN" -q --set fit.epochs=1 --set checkpoint.dir=ck \
		--set 'model.layers.1={gru: {units: 8}}'
	status_is 0
	run safetensors_header ck/latest.safetensors
	[[ $output == *'"gru/kernel":{"dtype":"F32","shape":[4,24]'* ]]
	[[ $output == *'"gru/recurrent_kernel":{"dtype":"F32","shape":[8,24]'* ]]
	[[ $output == *'"gru/bias":{"dtype":"F32","shape":[2,24]'* ]]
}

@test "an activation oneDNN and cuDNN lack: exit 2 at the value, the supported ones named" {
	run --separate-stderr "$DTRAIN" summary "$RNN" --set 'model.layers.1={lstm: {units: 8, activation: relu}}'
	status_is 2
	stderr_has "--set:1:" "layer 'lstm': activation 'relu' is not one LSTM" "use tanh"
	run --separate-stderr "$DTRAIN" summary "$RNN" --set 'model.layers.1={simple_rnn: {units: 8, activation: sigmoid}}'
	status_is 2
	stderr_has "--set:1:" "activation 'sigmoid'" "use tanh or relu"
	run --separate-stderr "$DTRAIN" summary "$RNN" \
		--set 'model.layers.1={gru: {units: 8, recurrent_activation: hard_sigmoid}}'
	status_is 2
	stderr_has "--set:1:" "recurrent_activation"
}

@test "a recurrent layer on a flat input, or an unknown key: exit 2, file:line:col and a hint" {
	run --separate-stderr "$DTRAIN" summary "$RNN" --set 'model.layers.0=flatten'
	status_is 2
	stderr_has "tiny_rnn.yaml:6:" "layer 'lstm' needs a sequence input (steps, features)" "(None, 24)" "reshape"
	run --separate-stderr "$DTRAIN" summary "$RNN" --set 'model.layers.1={gru: {units: 8, unit_forget_bias: true}}'
	status_is 2
	stderr_has "--set:1:" "unit_forget_bias"
	run --separate-stderr "$DTRAIN" summary "$RNN" --set 'model.layers.1={lstm: {units: 0}}'
	status_is 2
	stderr_has "--set:1:" "units"
}

@test "orthogonal on a one-dimensional parameter: exit 2 naming it" {
	run --separate-stderr "$DTRAIN" summary "$RNN" --set 'model.layers.1={lstm: {units: 8, bias_initializer: orthogonal}}'
	status_is 2
	stderr_has "--set:1:" "orthogonal initializer needs a parameter of two or more dimensions" "'bias'"
}

@test "bidirectional: twice the parameters, Keras' names, merge modes' shapes, and it trains" {
	summary_of '{bidirectional: {layer: {lstm: {units: 8}}}}'
	[[ $output == *"│ bidirectional (Bidirectional)   │ (None, 16)             │           832 │"* ]]
	summary_of '{bidirectional: {layer: {gru: {units: 8}}, merge_mode: ave}}'
	[[ $output == *"│ bidirectional (Bidirectional)   │ (None, 8)              │           672 │"* ]]
	run --separate-stderr "$DTRAIN" fit "$RNN" -q --json --set checkpoint.dir=ck \
		--set 'model.layers.1={bidirectional: {layer: {lstm: {units: 8, name: rec}}, merge_mode: sum}}'
	status_is 0
	events epoch | jq -e 'select(.epoch == 5) | .val_accuracy >= 0.9' >/dev/null
	run safetensors_header ck/latest.safetensors
	[[ $output == *'"bidirectional/forward_rec/kernel":{"dtype":"F32","shape":[4,32]'* ]]
	[[ $output == *'"bidirectional/backward_rec/recurrent_kernel":{"dtype":"F32","shape":[8,32]'* ]]
	[[ $output == *'"bidirectional/backward_rec/bias":{"dtype":"F32","shape":[32]'* ]]
	# the checkpoint loads back by those names: evaluate on the training blobs
	run --separate-stderr "$DTRAIN" evaluate "$RNN" --checkpoint ck/latest.safetensors --json \
		--set 'model.layers.1={bidirectional: {layer: {lstm: {units: 8, name: rec}}, merge_mode: sum}}' \
		--set 'data.test={format: synthetic, kind: blobs, samples: 400, classes: 3, features: 24, noise: 0.5, seed: 1}'
	status_is 0
	jq -e 'select(.event == "evaluate") | .accuracy >= 0.9' <<<"$output" >/dev/null
}

@test "bidirectional around a non-recurrent layer, or a bad merge_mode: exit 2 at the place" {
	run --separate-stderr "$DTRAIN" summary "$RNN" --set 'model.layers.1={bidirectional: {layer: {dense: {units: 8}}}}'
	status_is 2
	stderr_has "--set:1:" "bidirectional wraps lstm, gru or simple_rnn, not 'dense'"
	run --separate-stderr "$DTRAIN" summary "$RNN" \
		--set 'model.layers.1={bidirectional: {layer: {lstm: {units: 8}}, merge_mode: max}}'
	status_is 2
	stderr_has "--set:1:" "merge_mode"
	run --separate-stderr "$DTRAIN" summary "$RNN" --set 'model.layers.1={bidirectional: {layer: lstm}}'
	status_is 2
	stderr_has "--set:1:" "'layer' is one recurrent layer"
	run --separate-stderr "$DTRAIN" summary "$RNN" --set 'model.layers.1=bidirectional'
	status_is 2
	stderr_has "--set:1:" "missing required key 'layer' in 'bidirectional'"
}

@test "reproducible: two runs of a recurrent model give bit-identical checkpoints" {
	local diff=$(dirname "$DTRAIN")/tests/tools/ckpt_diff d
	[ -x "$diff" ] || diff=$REPO/build/tests/tools/ckpt_diff
	for d in a b; do
		run --separate-stderr "$DTRAIN" fit "$RNN" -q --set checkpoint.dir=$d \
			--set 'model.layers.1={bidirectional: {layer: {gru: {units: 8, go_backwards: true}}, merge_mode: mul}}'
		status_is 0
	done
	run "$diff" a/latest.safetensors b/latest.safetensors 0
	status_is 0
}
