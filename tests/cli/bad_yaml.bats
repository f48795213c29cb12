#!/usr/bin/env bats
# Malformed model files (tests/cli/bad_yaml/*.yaml): each must exit 2 with one
# line "FILE:LINE:COL: error: ..." that points at the offending key or value
# and says what is wrong.

load helpers

setup() {
	common_setup
	BAD=$BATS_TEST_DIRNAME/bad_yaml
	ARGS=()
	# A fixture that wrongly passed would train and write runs/NAME here, not in the tree.
	cd "$TMP"
}

# token_at FILE LINE COL TOKEN: the fixture has TOKEN at LINE:COL (1-based,
# in characters). Checks the expected positions against the fixtures.
token_at() {
	local text
	text=$(sed -n "$2p" "$1")
	if [ "${text:$(($3 - 1)):${#4}}" != "$4" ]; then
		echo "fixture $1 has '${text:$(($3 - 1))}' at $2:$3, not '$4'" >&2
		return 1
	fi
}

# expect_error FIXTURE LINE COL TOKEN WORDS...: `dtrain fit FIXTURE ${ARGS[@]}`
# (or the command in CMD, with its options) exits 2, and its stderr is one
# line starting "FIXTURE:LINE:COL: error: " that contains every one of WORDS.
# TOKEN is what the fixture holds at LINE:COL ("" to skip that check).
expect_error() {
	local file=$BAD/$1 line=$2 col=$3 token=$4 w
	local cmd=("${CMD[@]}")
	shift 4
	[ -f "$file" ]
	[ -z "$token" ] || token_at "$file" "$line" "$col" "$token"
	[ "${#cmd[@]}" -gt 0 ] || cmd=(fit -q)
	run --separate-stderr "$DTRAIN" "${cmd[@]}" "$file" "${ARGS[@]}"
	not_crashed
	status_is 2
	[ -z "$output" ]
	if [[ $stderr != "$file:$line:$col: error: "* ]]; then
		echo "expected the position $file:$line:$col, got: $stderr" >&2
		return 1
	fi
	if [ "${#stderr_lines[@]}" -ne 1 ]; then
		echo "expected one line on stderr, got ${#stderr_lines[@]}: $stderr" >&2
		return 1
	fi
	stderr_has "$@"
}

@test "tab indentation: the tab's position and a hint about tabs" {
	expect_error tab_indent.yaml 4 1 $'\t' "tabs cannot indent yaml; use spaces"
}

@test "unclosed flow sequence: a syntax error that names where it started" {
	# libyaml notices at the next key (line 12); the message points back at line 11.
	expect_error syntax_error.yaml 12 4 ":" "did not find expected ',' or ']'" "started at line 11"
	token_at "$BAD/syntax_error.yaml" 11 15 "[10, 20"
}

@test "unknown top-level key 'compil': did you mean 'compile'" {
	expect_error unknown_section.yaml 5 1 compil "unknown key 'compil'" "did you mean 'compile'?"
}

@test "unknown layer type 'dense2': did you mean 'dense'" {
	expect_error unknown_layer.yaml 5 7 dense2 "unknown layer type 'dense2'" "did you mean 'dense'?"
}

@test "unknown layer argument 'untis': did you mean 'units'" {
	expect_error unknown_layer_arg.yaml 4 15 untis "unknown key 'untis' in 'dense'" "did you mean 'units'?"
}

@test "Keras' fit(validation_split=...) as fit.validation_split: did you mean data.validation_split" {
	expect_error keras_fit_keys.yaml 12 3 validation_split "unknown key 'validation_split' in 'fit'" \
		"did you mean 'data.validation_split'?"
	run --separate-stderr "$DTRAIN" fit -q "$MODELS/blobs.yaml" --set fit.batch_size=8
	status_is 2
	stderr_has "--set:1:5: error: unknown key 'batch_size' in 'fit'; did you mean 'data.batch_size'?"
}

@test "Keras' input_shape on the first layer: the error says model.input_shape" {
	expect_error keras_input_shape.yaml 4 44 input_shape "unknown key 'input_shape' in 'dense'" \
		"the samples' shape is model.input_shape"
}

@test "wrong type: units: abc" {
	expect_error wrong_type.yaml 5 16 abc "'units' must be an integer, got 'abc'"
}

@test "out of range: dropout rate: 1.5" {
	expect_error rate_range.yaml 5 23 1.5 "'rate' must be in" "got 1.5"
}

@test "out of range: dropout rate's range is written [0, 1)" {
	# The documented range is [0, 1); '[0, 0.999999]' would be a made-up bound.
	expect_error rate_range.yaml 5 23 1.5 "'rate' must be in [0, 1), got 1.5"
}

@test "out of range: batch_size: 0" {
	expect_error batch_zero.yaml 11 15 0 "'batch_size' must be in [1, 1048576], got 0"
}

@test "out of range: a zero in input_shape" {
	expect_error bad_input_shape.yaml 3 21 0 "'input_shape[1]' must be in [1, 2147483647], got 0"
}

@test "out of range: an integer past 64 bits is too large, and the message names the largest allowed" {
	for over in 99999999999999999999 1e30; do
		run --separate-stderr "$DTRAIN" fit -q "$MODELS/blobs.yaml" --set checkpoint.dir="$TMP/run" --set fit.seed=$over
		not_crashed
		status_is 2
		[ "$stderr" = "--set:1:10: error: 'seed' must be in [0, 9223372036854775807], got $over (too large)" ]
	done
	run --separate-stderr "$DTRAIN" fit -q "$MODELS/blobs.yaml" --set fit.seed=-99999999999999999999
	status_is 2
	[ "$stderr" = "--set:1:10: error: 'seed' must be >= 0, got -99999999999999999999 (too small)" ]
	# A key with a bound of its own names it.
	run --separate-stderr "$DTRAIN" fit -q "$MODELS/blobs.yaml" --set data.batch_size=99999999999999999999
	status_is 2
	[ "$stderr" = "--set:1:17: error: 'batch_size' must be in [1, 1048576], got 99999999999999999999 (too large)" ]
	[ ! -e "$TMP/run" ]
}

@test "missing required key: units in dense (at the layer's arguments)" {
	expect_error missing_units.yaml 4 14 "{activation" "missing required key 'units' in 'dense'"
}

@test "missing required key: a bare '- dense' has no units either" {
	expect_error dense_without_args.yaml 4 7 dense "missing required key 'units' in 'dense'"
}

@test "missing required key: loss in compile (at the compile mapping)" {
	expect_error missing_loss.yaml 6 3 optimizer "missing required key 'loss' in 'compile'"
}

@test "missing required key: layers in model (at the model mapping)" {
	expect_error missing_layers.yaml 3 3 name "missing required key 'layers' in 'model'"
}

@test "unknown loss: did you mean, and the list of losses" {
	expect_error unknown_loss.yaml 7 9 sparse_categorical_crossentropi \
		"unknown loss 'sparse_categorical_crossentropi'" "did you mean 'sparse_categorical_crossentropy'?" \
		"expected one of: sparse_categorical_crossentropy, categorical_crossentropy"
}

@test "unknown optimizer 'adm': did you mean 'adam'" {
	expect_error unknown_optimizer.yaml 6 15 adm "unknown optimizer 'adm'" "did you mean 'adam'?"
}

@test "unknown activation 'rleu': did you mean 'relu'" {
	expect_error unknown_activation.yaml 4 38 rleu "unknown activation 'rleu'" "did you mean 'relu'?"
}

@test "unknown metric 'acuracy': did you mean 'accuracy'" {
	expect_error unknown_metric.yaml 8 13 acuracy "unknown metric 'acuracy'" "did you mean 'accuracy'?"
}

@test "unknown strategy 'mirored': did you mean 'mirrored'" {
	expect_error unknown_strategy.yaml 13 13 mirored "unknown strategy 'mirored'" "did you mean 'mirrored'?"
}

@test "shape mismatch: dense on (28, 28, 1) images says to add flatten" {
	idx_images 4 28 28 >"$TMP/images.idx"
	idx_labels 4 >"$TMP/labels.idx"
	ARGS=(--set data.train.images="$TMP/images.idx" --set data.train.labels="$TMP/labels.idx")
	expect_error needs_flatten.yaml 5 14 "{units" "layer 'dense' needs a flat input" "(None, 28, 28, 1)" \
		"add '- flatten' before it"
}

@test "shape mismatch: summary says the same without the data" {
	run --separate-stderr "$DTRAIN" summary "$BAD/needs_flatten.yaml"
	status_is 2
	[ -z "$output" ]
	[[ $stderr == "$BAD/needs_flatten.yaml:5:14: error: "*"add '- flatten' before it" ]]
}

@test "shape mismatch: input_shape disagrees with the data, at input_shape" {
	expect_error input_shape_mismatch.yaml 3 16 "[3]" "input_shape" "(3,)" "(2,)"
}

@test "labels/loss mismatch: categorical_crossentropy with 3 classes and 4 outputs" {
	expect_error labels_mismatch.yaml 7 9 categorical_crossentropy \
		"'categorical_crossentropy' needs one-hot labels (None, 4)" "(None, 3)" "data's classes" "'sparse_categorical_crossentropy'"
}

@test "duplicate key: batch_size twice, naming the first line" {
	expect_error duplicate_key.yaml 12 3 batch_size "duplicate key 'batch_size' (first at line 11)"
	token_at "$BAD/duplicate_key.yaml" 11 3 batch_size
}

@test "empty file" {
	[ ! -s "$BAD/empty.yaml" ]
	expect_error empty.yaml 1 1 "" "is empty (expected a mapping of keys)"
}

@test "a file of comments only is empty too" {
	printf '# nothing here\n\n# at all\n' >"$TMP/comments.yaml"
	run --separate-stderr "$DTRAIN" fit -q "$TMP/comments.yaml"
	status_is 2
	[[ $stderr == "$TMP/comments.yaml:1:1: error: "*"is empty"* ]]
}

@test "a data file referenced by data: that does not exist" {
	expect_error missing_data_file.yaml 9 7 no_such_data.yaml \
		"cannot open '$BAD/no_such_data.yaml'" "No such file or directory"
}

@test "a section that is not a mapping: model: [dense]" {
	expect_error section_not_mapping.yaml 2 8 "[dense]" "expected a mapping for 'model', got a sequence"
}

@test "both validation and validation_split" {
	expect_error validation_both.yaml 12 21 0.2 "give either 'validation' or 'validation_split', not both"
}

@test "YAML aliases are refused" {
	expect_error alias.yaml 11 9 "*blobs" "aliases are not supported ('*blobs')"
}

@test "a second YAML document is refused" {
	expect_error two_documents.yaml 12 1 "---" "a second document is not supported"
}

# The whole file is checked before any data is read (issue 12, item 7): the
# late_*.yaml fixtures name data files that do not exist, and the error
# reported is the one in the file, whichever section holds it.

@test "summary checks distribute: an unknown strategy is exit 2 at its line:col" {
	CMD=(summary)
	expect_error unknown_strategy.yaml 13 13 mirored "unknown strategy 'mirored'" "did you mean 'mirrored'?"
}

@test "a bad distribute key is reported before a missing training file" {
	expect_error late_distribute_key.yaml 14 3 devcies "unknown key 'devcies' in 'distribute'" \
		"did you mean 'devices'?"
	CMD=(evaluate)
	expect_error late_distribute_key.yaml 14 3 devcies "unknown key 'devcies' in 'distribute'"
	CMD=(summary)
	expect_error late_distribute_key.yaml 14 3 devcies "unknown key 'devcies' in 'distribute'"
}

@test "a bad key in the test source is reported before the training file is opened" {
	expect_error late_source_key.yaml 12 47 lable "unknown key 'lable' in 'csv'" "did you mean 'label'?"
	CMD=(predict -q)
	ARGS=(/dev/null)
	expect_error late_source_key.yaml 12 47 lable "unknown key 'lable' in 'csv'"
}

@test "a bad value in the validation source is reported before the training file is opened" {
	expect_error late_source_value.yaml 10 60 maybe "header must be auto, true or false, not 'maybe'"
}

@test "with model.input_shape, the layers are checked before the data is opened" {
	expect_error late_layer_value.yaml 7 22 "0," "'units' must be in [1, 16777216], got 0"
	CMD=(time)
	expect_error late_layer_value.yaml 7 22 "0," "'units' must be in [1, 16777216], got 0"
}

@test "a callback's monitor that fit will not report is a config error before any data" {
	expect_error late_callback_monitor.yaml 13 7 early_stopping \
		"'early_stopping' monitors 'val_loss' but fit has no validation data"
	CMD=(summary)
	expect_error late_callback_monitor.yaml 13 7 early_stopping "'early_stopping' monitors 'val_loss'"
}

@test "an argument indented as deep as its layer's type: the key, and where it belongs" {
	expect_error layer_second_key.yaml 5 7 activation \
		"'activation' is a second key in the item of layer 'dense' (a layer is one key naming its type)" \
		"indent it under 'dense' or put it inside its {...}"
}

@test "a layer without its '- ' under the one before: start each layer with '- '" {
	expect_error layer_missing_dash.yaml 5 7 dropout "a second layer 'dropout' in the item of 'dense'" \
		"start each layer with '- '"
}

@test "Keras' Activation('softmax') as '- activation: softmax': the arguments are a mapping, with an example" {
	expect_error layer_args_scalar.yaml 5 19 softmax "the arguments of 'activation' are a mapping, got 'softmax'" \
		"e.g. '- activation: {activation: relu}'"
	run --separate-stderr "$DTRAIN" fit -q "$BAD/layer_args_scalar.yaml" --set 'model.layers.0.dense=3'
	status_is 2
	[ "$stderr" = "--set:1:22: error: the arguments of 'dense' are a mapping, got '3'; e.g. '- dense: {units: 3}'" ]
	run --separate-stderr "$DTRAIN" fit -q "$BAD/layer_args_scalar.yaml" --set 'model.layers.1=flatten: yes'
	status_is 2
	[ "$stderr" = "--set:1:25: error: 'flatten' takes no arguments here, got 'yes'; write '- flatten'" ]
}

@test "a key indented deeper than the one above continues its value: the error says so" {
	expect_error indent_continues.yaml 7 14 ": adam" "mapping values are not allowed in this context" \
		"this line is indented deeper than line 6, so it continues that line's value"
	# A second ': ' on one line is not indentation but a value to quote.
	run --separate-stderr "$DTRAIN" fit -q "$MODELS/blobs.yaml" --set 'model.name=a: b: c'
	status_is 2
	[ "$stderr" = "--set:1:16: error: mapping values are not allowed in this context; a value that holds ': ' needs quotes" ]
}

@test "a line indented less than its siblings: libyaml's error, and a word on indentation" {
	expect_error indent_shallow.yaml 6 5 activation "did not find expected '-' indicator" \
		"is this line indented as deep as the keys or items it belongs with?"
}

@test "a Python tuple (3, 3): the key, and the list to write instead" {
	# In {...} YAML splits it into the value '(3' and the key '3)'.
	expect_error python_tuple.yaml 5 41 "(3, 3)" "'kernel_size' is a Python tuple, (3, 3), which YAML does not have" \
		"write a list: [3, 3]"
	# In block style it is one string.
	run --separate-stderr "$DTRAIN" summary "$MODELS/blobs.yaml" --set 'model.input_shape=(2,)'
	status_is 2
	[ "$stderr" = "--set:1:19: error: 'input_shape' must be a sequence of 1 to 4 positive integers such as [28, 28, 1], got '(2,)' (a Python tuple; YAML writes a list: [2,])" ]
}

@test "metrics: accuracy, a name where a list is expected: the list of one to write" {
	run --separate-stderr "$DTRAIN" fit -q "$MODELS/blobs.yaml" --set compile.metrics=accuracy
	status_is 2
	[ "$stderr" = "--set:1:17: error: expected a sequence for 'metrics', got 'accuracy'; a list of one is [accuracy]" ]
}

@test "Keras' and PyTorch's spellings: did you mean dtrain's name, and an optimizer's call as its mapping" {
	local set want
	while IFS='|' read -r set want; do
		run --separate-stderr "$DTRAIN" fit -q "$MODELS/blobs.yaml" --set "$set"
		not_crashed
		status_is 2
		stderr_has "$want"
	done <<-'EOF'
		model.layers.0={keras.layers.Dense: {units: 8}}|unknown layer type 'keras.layers.Dense'; did you mean 'dense'?
		model.layers.0={nn.Linear: {units: 8}}|unknown layer type 'nn.Linear'; did you mean 'dense'?
		model.layers.0={dense: {out_features: 8}}|unknown key 'out_features' in 'dense'; did you mean 'units'?
		model.layers.0={dense: {in_features: 2, units: 8}}|unknown key 'in_features' in 'dense': the samples' shape is model.input_shape
		model.layers.0={dropout: {p: 0.5}}|unknown key 'p' in 'dropout'; did you mean 'rate'?
		compile.loss=nn.CrossEntropyLoss()|did you mean 'sparse_categorical_crossentropy'?
		compile.optimizer=keras.optimizers.Adam(learning_rate=1e-3)|did you mean '{adam: {learning_rate: 1e-3}}'?
		compile.optimizer=torch.optim.SGD(lr=0.1, momentum=0.9)|did you mean '{sgd: {learning_rate: 0.1, momentum: 0.9}}'?
		compile.optimizer=Adam()|unknown optimizer 'Adam()'; did you mean 'adam'?
		compile.optimizer={adam: {lr: 0.01}}|unknown key 'lr' in 'adam'; did you mean 'learning_rate'?
	EOF
}

@test "every fixture in bad_yaml/ has a test" {
	local f name
	for f in "$BAD"/*.yaml; do
		name=$(basename "$f")
		grep -q "$name" "$BATS_TEST_FILENAME" || {
			echo "no test uses $name" >&2
			return 1
		}
	done
	[ "$(ls "$BAD"/*.yaml | wc -l)" -ge 12 ]
}
