#!/usr/bin/env bats
# Messages that say what is wrong and where: long values keep the end of the
# message, a bad number names its key, a wrong run directory says what it is.

load helpers

setup() {
	common_setup
	cd "$TMP"
}

@test "a long value in a message is shortened in its middle, keeping the message's end" {
	local long
	long=$(head -c 3000 /dev/zero | tr '\0' x)
	idx_labels 12 >labels.idx
	run --separate-stderr "$DTRAIN" fit -q "$MODELS/tiny_idx.yaml" --set data.train.images="$TMP/$long" \
		--set data.train.labels=labels.idx
	not_crashed
	status_is 1
	[ "${#lines[@]}" -eq 0 ]
	# The start, an ellipsis, and the end: the closing quote and the reason.
	[[ $stderr == "dtrain: error: cannot open '$TMP/xxx"*"..."*"xxx': File name too long" ]]
	[ "${#stderr}" -lt 1200 ]
}

@test "a nan learning rate names the key" {
	run --separate-stderr "$DTRAIN" fit -q "$MODELS/tiny_idx.yaml" --set compile.optimizer=adam \
		--set "compile.optimizer={adam: {learning_rate: nan}}"
	status_is 2
	stderr_has "'learning_rate' must be a finite number, got 'nan'"
	run --separate-stderr "$DTRAIN" fit -q "$MODELS/tiny_idx.yaml" \
		--set "compile.optimizer={sgd: {learning_rate: {constant: .inf}}}"
	status_is 2
	stderr_has "'constant' must be a finite number"
}

@test "--resume where the run directory is a regular file says so" {
	: >runfile
	idx_images 12 4 4 >images.idx
	idx_labels 12 >labels.idx
	run --separate-stderr "$DTRAIN" fit -q "$MODELS/tiny_idx.yaml" --resume --set checkpoint.enabled=true \
		--set checkpoint.dir="$TMP/runfile" \
		--set data.train.images=images.idx --set data.train.labels=labels.idx
	not_crashed
	status_is 1
	stderr_has "'$TMP/runfile' is not a directory but a regular file"
	[[ $stderr != *"holds no checkpoint"* ]]
}
