#!/usr/bin/env bats
# Keras 3's losses and optimizers end to end: a small model trains with each
# loss (with its arguments) and each optimizer (with amsgrad, clipvalue and
# global_clipnorm) and ends with finite numbers; wrong arguments are config
# errors at their place (FILE:LINE:COL).

load helpers

setup() {
	common_setup
	export OMP_NUM_THREADS=1
	cd "$TMP"
}

# model LOSS OPTIMIZER [FROM_LOGITS]: m.yaml, the blobs model with one-hot
# labels (3 classes), so every loss gets labels shaped like the output.
model() {
	cat >m.yaml <<-EOF
		model:
		  layers:
		    - dense: {units: 8, activation: relu}
		    - dense: {units: 3, activation: softmax}
		compile:
		  optimizer: $2
		  loss: $1
		  from_logits: ${3:-false}
		data:
		  train: {format: synthetic, kind: blobs, samples: 120, classes: 3, features: 2, noise: 0.3, seed: 1}
		  one_hot: true
		  batch_size: 16
		fit: {epochs: 2, seed: 3}
		checkpoint: {dir: run}
	EOF
}

# trains: `dtrain fit m.yaml --json` succeeds and every epoch's loss is a finite number.
trains() {
	run --separate-stderr "$DTRAIN" fit m.yaml -q --json
	status_is 0
	local finite='[.[] | select(.event == "epoch") | .loss | select(type == "number" and isinfinite | not)] | length'
	[ "$(jq -s "$finite" <<<"$output")" = 2 ] || {
		echo "not two finite epoch losses: $output" >&2
		return 1
	}
}

# token_col LINE TOKEN: the column where TOKEN first starts on line LINE of m.yaml.
token_col() {
	local text
	text=$(sed -n "${1}p" m.yaml)
	[[ $text == *"$2"* ]] || {
		echo "line $1 of m.yaml has no '$2': $text" >&2
		return 1
	}
	text=${text%%"$2"*}
	echo $((${#text} + 1))
}

# bad LINE TOKEN WORDS...: `dtrain fit m.yaml` exits 2 with one line
# "m.yaml:LINE:COL: error: " holding WORDS, COL where TOKEN first starts on
# that line of m.yaml.
bad() {
	local line=$1 col
	col=$(token_col "$1" "$2") || return 1
	shift 2
	run --separate-stderr "$DTRAIN" fit -q m.yaml
	not_crashed
	status_is 2
	if [[ $stderr != "m.yaml:$line:$col: error: "* ]] || [ "${#stderr_lines[@]}" -ne 1 ]; then
		echo "expected one line at m.yaml:$line:$col, got: $stderr" >&2
		return 1
	fi
	stderr_has "$@"
}

# warns LINE TOKEN WORDS...: `dtrain fit m.yaml` trains (exit 0) and warns once,
# "m.yaml:LINE:COL: warning: " holding WORDS, COL where TOKEN first starts on
# that line of m.yaml.
warns() {
	local line=$1 col
	col=$(token_col "$1" "$2") || return 1
	shift 2
	run --separate-stderr "$DTRAIN" fit -q m.yaml
	status_is 0
	if [[ $stderr != "m.yaml:$line:$col: warning: "* ]] || [ "${#stderr_lines[@]}" -ne 1 ]; then
		echo "expected one warning at m.yaml:$line:$col, got: $stderr" >&2
		return 1
	fi
	stderr_has "$@"
}

@test "every new loss trains, with its arguments" {
	for loss in mean_absolute_error huber "{huber: {delta: 0.5}}" log_cosh kl_divergence poisson \
		cosine_similarity hinge squared_hinge categorical_hinge binary_focal_crossentropy \
		"{binary_focal_crossentropy: {apply_class_balancing: true, alpha: 0.4, gamma: 1.5, label_smoothing: 0.1}}" \
		categorical_focal_crossentropy "{categorical_focal_crossentropy: {alpha: 0.5, gamma: 3, label_smoothing: 0.2}}" \
		"{categorical_crossentropy: {label_smoothing: 0.1}}" "{binary_crossentropy: {label_smoothing: 0.2}}"; do
		model "$loss" adam
		trains
	done
	# the focal losses and label smoothing from logits
	for loss in "{categorical_focal_crossentropy: {label_smoothing: 0.1}}" binary_focal_crossentropy \
		"{categorical_crossentropy: {label_smoothing: 0.1}}"; do
		model "$loss" adam true
		sed -i 's/activation: softmax/activation: linear/' m.yaml
		trains
	done
}

@test "every new optimizer trains, and amsgrad, clipvalue and global_clipnorm" {
	for opt in adagrad adadelta adamax nadam lion "{adagrad: {initial_accumulator_value: 0.5, epsilon: 1e-6}}" \
		"{adadelta: {learning_rate: 1.0, rho: 0.9}}" "{adamax: {beta_1: 0.8, weight_decay: 0.01}}" \
		"{nadam: {learning_rate: 0.01, clipnorm: 1.0}}" "{lion: {learning_rate: 0.0003, beta_2: 0.98}}" \
		"{adam: {amsgrad: true}}" "{adamw: {amsgrad: true, clipvalue: 0.5}}" "{sgd: {momentum: 0.9, global_clipnorm: 1.0}}" \
		"{rmsprop: {clipvalue: 0.1}}"; do
		model categorical_crossentropy "$opt"
		trains
	done
	# amsgrad keeps a third slot, and the checkpoint holds it
	model categorical_crossentropy "{adam: {amsgrad: true}}"
	trains
	[ "$(safetensors_header run/latest.safetensors | jq -c '[keys[] | select(startswith("optimizer/dense/kernel/"))]')" = \
		'["optimizer/dense/kernel/m","optimizer/dense/kernel/v","optimizer/dense/kernel/vhat"]' ]
}

@test "a regression loss (huber) reports mae like mean_squared_error" {
	model huber adam
	sed -i 's/activation: softmax/activation: linear/; s/^  loss: huber/  loss: huber\n  metrics: [mae]/' m.yaml
	trains
	[ "$(jq -s '[.[] | select(.event == "epoch") | .mae] | length' <<<"$output")" = 2 ]
}

@test "use_ema: the checkpoint holds the average beside the weights; fit's test, evaluate and predict use it" {
	model categorical_crossentropy "{adam: {use_ema: true, ema_momentum: 0.9}}"
	sed -i 's/^  one_hot: true/  one_hot: true\n  test: {format: synthetic, kind: blobs, samples: 60, classes: 3, features: 2, seed: 2}/' \
		m.yaml
	run --separate-stderr "$DTRAIN" fit m.yaml --json
	status_is 0
	stderr_has "the test set is evaluated with the moving average of the weights (use_ema)"
	fit_test=$(jq -c 'select(.event == "test") | .loss' <<<"$output")
	safetensors_header run/latest.safetensors | jq -e '."optimizer/dense/kernel/ema" and ."dense/kernel"'
	run --separate-stderr "$DTRAIN" evaluate m.yaml --json --checkpoint run/latest.safetensors
	status_is 0
	stderr_has "holds the moving average of the weights (use_ema): evaluating the average"
	[ "$(jq -r .weights <<<"$output")" = ema ]
	[ "$(jq -c .loss <<<"$output")" = "$fit_test" ]
	printf '0.1,0.2\n-1,0.5\n' >x.csv
	run --separate-stderr "$DTRAIN" predict m.yaml x.csv --checkpoint run/latest.safetensors
	status_is 0
	stderr_has "predicting with the average"
	# without use_ema: no note, no ema tensors
	model categorical_crossentropy adam
	trains
	[ "$(safetensors_header run/latest.safetensors | jq '[keys[] | select(endswith("/ema"))] | length')" = 0 ]
}

@test "loss arguments: wrong key, out of range, none taken, did you mean" {
	model "{huber: {delta: 0}}" adam
	bad 7 "0}}" "'delta' must be in (0, " "got 0"
	model "{huber: {gamma: 2}}" adam
	bad 7 gamma "unknown key 'gamma' in 'huber' (expected one of: delta)"
	model "{mean_absolute_error: {delta: 1}}" adam
	bad 7 "delta" "'mean_absolute_error' takes no arguments, got 'delta'"
	model "{sparse_categorical_crossentropy: {label_smoothing: 0.1}}" adam
	bad 7 label_smoothing "'sparse_categorical_crossentropy' takes no arguments, got 'label_smoothing'"
	model "{binary_focal_crossentropy: {alpha: 1.5}}" adam
	bad 7 1.5 "'alpha' must be in [0, 1], got 1.5"
	model "{categorical_focal_crossentropy: {label_smoothing: 2}}" adam
	bad 7 "2}}" "'label_smoothing' must be in [0, 1], got 2"
	model "{hubr: {delta: 1}}" adam
	bad 7 hubr "unknown loss 'hubr'" "did you mean 'huber'?"
	model "{huber: {delta: 1}, mae: {}}" adam
	bad 7 "{huber" "'loss' is a name ('huber') or one key with arguments"
}

@test "Keras' short loss names: mse, mae, bce and kld train as the full names; mape and msle say why not" {
	local alias full losses
	for pair in mse:mean_squared_error mae:mean_absolute_error bce:binary_crossentropy kld:kl_divergence; do
		alias=${pair%%:*} full=${pair#*:}
		model "$full" adam
		trains
		losses=$(jq -sc '[.[] | select(.event == "epoch") | .loss]' <<<"$output")
		model "$alias" adam
		trains
		[ "$(jq -sc '[.[] | select(.event == "epoch") | .loss]' <<<"$output")" = "$losses" ]
		model "{$alias: {}}" adam
		trains
	done
	model mape adam
	bad 7 mape "unknown loss 'mape': Keras' mean_absolute_percentage_error, which dtrain has as a metric, not as a loss"
	model msle adam
	bad 7 msle "unknown loss 'msle': Keras' mean_squared_logarithmic_error, which dtrain does not have"
}

@test "from_logits among a loss's arguments, as Keras' loss classes take it, points to compile.from_logits" {
	model "{sparse_categorical_crossentropy: {from_logits: true}}" adam
	bad 7 from_logits "'sparse_categorical_crossentropy' takes no argument 'from_logits': it is compile.from_logits"
	model "{categorical_crossentropy: {label_smoothing: 0.1, from_logits: true}}" adam
	bad 7 from_logits "'categorical_crossentropy' takes no argument 'from_logits': it is compile.from_logits"
}

@test "class-index labels with a loss that needs one-hot rows: the error says data.one_hot" {
	model categorical_focal_crossentropy adam
	sed -i '/^  one_hot: true/d' m.yaml
	bad 7 categorical_focal_crossentropy "'categorical_focal_crossentropy' needs labels shaped like the output (None, 3)" \
		"(class indices: 'data.one_hot: true' makes them one-hot rows)"
}

@test "from_logits belongs to the crossentropies: huber with from_logits is an error at the loss" {
	model huber adam true
	bad 7 huber "'huber' does not take from_logits"
}

@test "optimizer arguments: one clip only, keys each optimizer takes, ranges" {
	model categorical_crossentropy "{adam: {clipnorm: 1, clipvalue: 0.5}}"
	bad 6 "0.5" "'clipnorm' and 'clipvalue' are both set" "one of clipnorm, global_clipnorm and clipvalue"
	model categorical_crossentropy "{lion: {epsilon: 1e-7}}"
	bad 6 epsilon "unknown key 'epsilon' in 'lion'"
	model categorical_crossentropy "{sgd: {amsgrad: true}}"
	bad 6 amsgrad "unknown key 'amsgrad' in 'sgd'"
	model categorical_crossentropy "{adagrad: {initial_accumulator_value: -1}}"
	bad 6 "-1" "'initial_accumulator_value' must be in [0, " "got -1"
	model categorical_crossentropy "{nadam: {global_clipnorm: -2}}"
	bad 6 "-2" "'global_clipnorm' must be in [0, " "got -2"
	model categorical_crossentropy "{adam: {ema_overwrite_frequency: 10}}"
	bad 6 "10}}" "'ema_overwrite_frequency' needs 'use_ema: true'"
	model categorical_crossentropy "{adam: {use_ema: true, ema_momentum: 1.5}}"
	bad 6 1.5 "'ema_momentum' must be in [0, 1], got 1.5"
	model categorical_crossentropy "{lino: {}}"
	bad 6 lino "unknown optimizer 'lino'" "did you mean 'lion'?"
}

@test "an output activation the loss does not read as meant: a warning at the activation, and fit trains" {
	model sparse_categorical_crossentropy adam
	sed -i '/^  one_hot: true/d' m.yaml
	run --separate-stderr "$DTRAIN" fit -q m.yaml
	status_is 0
	[ -z "$stderr" ]
	# PyTorch's habit: logits into a loss that expects probabilities.
	sed -i 's/{units: 3, activation: softmax}/{units: 3}/' m.yaml
	warns 4 dense "'sparse_categorical_crossentropy' reads the outputs of layer 'dense_1' as probabilities" \
		"it has no activation" "add 'activation: softmax', or set 'compile.from_logits: true'"
	sed -i 's/{units: 3}/{units: 3, activation: sigmoid}/' m.yaml
	warns 4 sigmoid "probabilities that sum to 1, but its activation is sigmoid: use 'activation: softmax'"
	# An activation after the dense layer, and a dropout after that, are still the output's.
	sed -i 's/{units: 3, activation: sigmoid}/{units: 3}\n    - activation: {activation: relu}\n    - dropout: {rate: 0.1}/' m.yaml
	warns 5 relu "outputs of layer 'activation' as probabilities that sum to 1, but its activation is relu"
	# Keras warns of this one: softmax, then the loss's own softmax of from_logits.
	model sparse_categorical_crossentropy adam true
	sed -i '/^  one_hot: true/d' m.yaml
	warns 4 softmax "takes logits (compile.from_logits: true), but layer 'dense_1' applies softmax" \
		"drop the activation, or from_logits"
	# softmax over one output is 1 whatever the weights.
	model binary_crossentropy adam
	sed -i -e '/^  one_hot: true/d' -e 's/{units: 3, activation: softmax}/{units: 1, activation: softmax}/' \
		-e 's/classes: 3/classes: 2/' m.yaml
	warns 4 softmax "softmax over the 1 output of layer 'dense_1' is always 1" "use 'activation: sigmoid'"
	sed -i 's/activation: softmax}/activation: tanh}/' m.yaml
	warns 4 tanh "'binary_crossentropy' reads the outputs of layer 'dense_1' as probabilities in [0, 1]" \
		"use 'activation: sigmoid'"
	sed -i 's/activation: tanh}/activation: sigmoid}/' m.yaml
	run --separate-stderr "$DTRAIN" fit -q m.yaml
	status_is 0
	[ -z "$stderr" ]
}
