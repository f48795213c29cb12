#!/usr/bin/env bats
# dtrain fit: training, progress output, --json, --set, checkpoints,
# --init-weights and a data section in its own file.

load helpers

setup() {
	common_setup
	BLOBS=$MODELS/blobs.yaml
}

# fit_blobs ARGS...: fit blobs.yaml with checkpoints under $TMP/run.
fit_blobs() {
	"$DTRAIN" fit "$BLOBS" --set checkpoint.dir="$TMP/run" "$@"
}

@test "blobs trains to at least 95% test accuracy" {
	run --separate-stderr fit_blobs --json
	status_is 0
	local acc
	acc=$(events test | jq -r '.accuracy')
	[ -n "$acc" ]
	echo "test accuracy: $acc"
	jq -e --argjson a "$acc" -n '$a >= 0.95' >/dev/null
	[ "$(events test | jq -r '.samples')" = 300 ]
}

@test "one epoch is not enough for blobs (the accuracy test can fail)" {
	run --separate-stderr fit_blobs --json --set fit.epochs=1
	status_is 0
	events test | jq -e '.accuracy < 0.95' >/dev/null
}

@test "--json: one epoch object per epoch with the documented keys" {
	run --separate-stderr fit_blobs --json
	status_is 0
	local epochs
	epochs=$(events epoch)
	[ "$(wc -l <<<"$epochs")" -eq 5 ]
	# Numbered 1..5, each saying there are 5.
	[ "$(jq -r '.epoch' <<<"$epochs" | tr '\n' ' ')" = "1 2 3 4 5 " ]
	jq -se 'all(.[]; .epochs == 5)' <<<"$epochs" >/dev/null
	for k in epoch epochs loss accuracy val_loss val_accuracy seconds samples_per_sec; do
		jq -se --arg k "$k" 'all(.[]; has($k) and (.[$k] | type == "number"))' <<<"$epochs" >/dev/null || {
			echo "epoch objects lack the number '$k'" >&2
			return 1
		}
	done
}

@test "--json: epoch objects hold no keys beyond the documented ones" {
	# epoch, epochs, loss, accuracy, val_loss, val_accuracy, seconds,
	# samples_per_sec; dtrain also writes event, steps and learning_rate.
	run --separate-stderr fit_blobs --json --set fit.epochs=1
	status_is 0
	local keys
	keys=$(events epoch | jq -c 'keys')
	[ "$keys" = '["accuracy","epoch","epochs","event","learning_rate","loss","samples_per_sec","seconds","steps","val_accuracy","val_loss"]' ]
}

@test "--json: stdout holds only JSON objects, the strategy, epochs then the test result" {
	run --separate-stderr fit_blobs --json --set fit.epochs=3
	status_is 0
	[ "${#lines[@]}" -eq 5 ]
	for l in "${lines[@]}"; do
		jq -e 'type == "object"' <<<"$l" >/dev/null || {
			echo "not a JSON object on stdout: $l" >&2
			return 1
		}
	done
	[ "$(jq -r '.event' <<<"$output" | tr '\n' ' ')" = "strategy epoch epoch epoch test " ]
	# The progress went to stderr.
	[[ $stderr == *"Epoch 3/3:"* ]]
	[[ $output != *"Epoch "* ]]
}

@test "without --json nothing goes to stdout" {
	run --separate-stderr fit_blobs --set fit.epochs=1
	status_is 0
	[ -z "$output" ]
	[[ $stderr == *"Epoch 1/1:"* ]]
}

@test "progress in a pipe: one plain 'Epoch N/M:' line per epoch, no control characters" {
	fit_blobs --set fit.epochs=3 2>"$TMP/err" >/dev/null
	cat "$TMP/err"
	[ "$(grep -c '^Epoch [0-9]*/3: ' "$TMP/err")" -eq 3 ]
	grep -q '^Epoch 1/3: ' "$TMP/err"
	grep -q '^Epoch 2/3: ' "$TMP/err"
	grep -q '^Epoch 3/3: ' "$TMP/err"
	# Each epoch line carries the metrics.
	[ "$(grep '^Epoch ' "$TMP/err" | grep -c 'loss: .*val_accuracy: .*val_loss: ')" -eq 3 ]
	# No carriage return, no escape sequence, no other control byte.
	run ! grep -q $'\r' "$TMP/err"
	run ! grep -q $'\e' "$TMP/err"
	run ! env LC_ALL=C grep -q '[[:cntrl:]]' "$TMP/err"
	# The strategy line, epoch lines and the test line, nothing else.
	[ "$(wc -l <"$TMP/err")" -eq 5 ]
	grep -q '^dtrain: strategy: ' "$TMP/err"
	grep -q '^test: 300 samples - accuracy: ' "$TMP/err"
}

@test "progress on a terminal: a bar redrawn with carriage returns" {
	command -v script >/dev/null || skip "no 'script' to give dtrain a terminal"
	script -qec "'$DTRAIN' fit '$BLOBS' --set checkpoint.enabled=false --set fit.epochs=2" /dev/null >"$TMP/tty"
	grep -q 'Epoch 2/2' "$TMP/tty"
	grep -q $'\r' "$TMP/tty"
}

@test "-q prints no progress" {
	run --separate-stderr fit_blobs -q --set fit.epochs=2
	status_is 0
	[ -z "$stderr" ]
	[ -z "$output" ]
	[ -f "$TMP/run/latest.safetensors" ]
}

@test "--quiet is -q" {
	run --separate-stderr fit_blobs --quiet --set fit.epochs=1
	status_is 0
	[ -z "$stderr" ]
}

@test "-q --json: JSON on stdout and nothing on stderr" {
	run --separate-stderr fit_blobs -q --json --set fit.epochs=2
	status_is 0
	[ "$(events epoch | wc -l)" -eq 2 ]
	[ "$(events test | wc -l)" -eq 1 ]
	# -q means no progress and no human result lines on stderr.
	[ -z "$stderr" ]
}

@test "--set fit.epochs=2 gives 2 epochs" {
	run --separate-stderr fit_blobs --json --set fit.epochs=2
	status_is 0
	[ "$(events epoch | wc -l)" -eq 2 ]
	[ "$(grep -c '^Epoch ' <<<"$stderr")" -eq 2 ]
	[[ $stderr == *"Epoch 2/2:"* ]]
	[[ $stderr != *"Epoch 3/"* ]]
}

@test "--set may come before the model file, and the last --set wins" {
	run --separate-stderr "$DTRAIN" fit --set fit.epochs=4 --set fit.epochs=1 --json "$BLOBS" \
		--set checkpoint.dir="$TMP/run"
	status_is 0
	[ "$(events epoch | wc -l)" -eq 1 ]
}

@test "--set reaches into layer lists: units of the first dense layer" {
	run --separate-stderr fit_blobs -q --set fit.epochs=1 --set model.layers.0.dense.units=8
	status_is 0
	safetensors_header "$TMP/run/latest.safetensors" >"$TMP/h.json"
	[ "$(jq -c '."dense/kernel".shape' "$TMP/h.json")" = "[2,8]" ]
}

@test "bad --set value fit.epochs=abc: exit 2 at --set:1:12 (the value)" {
	run --separate-stderr fit_blobs --set fit.epochs=abc
	status_is 2
	[[ $stderr == *"--set:1:12: error: 'epochs' must be an integer, got 'abc'"* ]]
	[ ! -e "$TMP/run" ]
}

@test "--set without '=': exit 2 at --set:1:1" {
	run --separate-stderr fit_blobs --set nodot
	status_is 2
	[[ $stderr == *"--set:1:1: error: expected 'key=value', got 'nodot'"* ]]
}

@test "--set with an unknown key: exit 2 with its column and a did-you-mean" {
	run --separate-stderr fit_blobs --set fit.epochz=2
	status_is 2
	[[ $stderr == *"--set:1:5: error: unknown key 'epochz' in 'fit'; did you mean 'epochs'?"* ]]
}

@test "--set out of range: exit 2 with the value's column" {
	run --separate-stderr fit_blobs --set fit.epochs=0
	status_is 2
	[[ $stderr == *"--set:1:12: error: 'epochs' must be in [1, 1000000], got 0"* ]]
}

@test "--set with a layer index past the end: exit 2 naming the sequence" {
	run --separate-stderr fit_blobs --set model.layers.5.dense.units=3
	status_is 2
	[[ $stderr == *"--set:1:14: error: 'model.layers' is a sequence of 2 items"* ]]
}

@test "--set with an empty key segment: exit 2" {
	run --separate-stderr fit_blobs --set fit..epochs=2
	status_is 2
	[[ $stderr == *"--set:1:5: error: empty name in key"* ]]
}

@test "--set with malformed YAML: exit 2 on line 1 of the --set" {
	# A --set is one line: the position must say line 1, at the value's end.
	run --separate-stderr fit_blobs --set 'fit.epochs=[1'
	status_is 2
	[[ $stderr == *"--set:1:"*": error: "* ]]
}

@test "checkpoints: one file per epoch, latest.safetensors and best.safetensors" {
	run fit_blobs -q --set fit.epochs=2
	status_is 0
	[ -s "$TMP/run/latest.safetensors" ]
	[ -s "$TMP/run/best.safetensors" ]
	# Written atomically: no temporary file is left behind.
	[ "$(ls "$TMP/run" | sort | tr '\n' ' ')" = "best.safetensors ckpt-001-00025.safetensors ckpt-002-00025.safetensors latest.safetensors " ]
	# latest is a symlink to the newest file
	[ "$(readlink "$TMP/run/latest.safetensors")" = ckpt-002-00025.safetensors ]
}

@test "checkpoints: by default the newest 5 files are kept, plus best (tf.train.CheckpointManager's max_to_keep)" {
	run fit_blobs -q --set fit.epochs=7
	status_is 0
	[ "$(ls "$TMP/run" | grep -c '^ckpt-')" -eq 5 ]
	[ ! -e "$TMP/run/ckpt-002-00025.safetensors" ]
	[ -s "$TMP/run/ckpt-003-00025.safetensors" ] && [ -s "$TMP/run/ckpt-007-00025.safetensors" ]
	[ "$(readlink "$TMP/run/latest.safetensors")" = ckpt-007-00025.safetensors ]
	# best stays a file of its own even when its epoch's file is rotated away.
	[ -s "$TMP/run/best.safetensors" ]
	# keep: 0 keeps every file.
	rm -rf "$TMP/run"
	run fit_blobs -q --set fit.epochs=7 --set checkpoint.keep=0
	[ "$(ls "$TMP/run" | grep -c '^ckpt-')" -eq 7 ]
}

@test "checkpoints are valid safetensors with dense/kernel and __metadata__" {
	run fit_blobs -q --set fit.epochs=2
	status_is 0
	for f in latest best; do
		local file=$TMP/run/$f.safetensors h size len end
		safetensors_header "$file" >"$TMP/$f.json"
		jq -e 'type == "object"' "$TMP/$f.json" >/dev/null
		jq -e 'has("__metadata__") and (."__metadata__" | type == "object")' "$TMP/$f.json" >/dev/null
		jq -e '."__metadata__".format == "dtrain"' "$TMP/$f.json" >/dev/null
		[ "$(jq -c '."dense/kernel" | [.dtype, .shape]' "$TMP/$f.json")" = '["F32",[2,16]]' ]
		[ "$(jq -c '."dense/bias".shape' "$TMP/$f.json")" = '[16]' ]
		[ "$(jq -c '."dense_1/kernel".shape' "$TMP/$f.json")" = '[16,3]' ]
		# The tensors' data fills the rest of the file exactly.
		size=$(stat -L -c %s "$file")
		len=$(od -An -t u8 -N 8 "$file" | tr -d ' ')
		end=$(jq '[to_entries[] | select(.key != "__metadata__") | .value.data_offsets[1]] | max' "$TMP/$f.json")
		[ $((8 + len + end)) -eq "$size" ]
	done
	jq -e '."__metadata__".epoch == "2"' "$TMP/latest.json" >/dev/null
}

@test "checkpoint.enabled=false writes no checkpoint" {
	run fit_blobs -q --set fit.epochs=1 --set checkpoint.enabled=false
	status_is 0
	[ ! -e "$TMP/run" ]
}

@test "a checkpoint dir that cannot be created: exit 1 naming it" {
	touch "$TMP/file"
	run --separate-stderr "$DTRAIN" fit "$BLOBS" -q --set checkpoint.dir="$TMP/file/run"
	status_is 1
	[[ $stderr == *"'$TMP/file/run'"* ]]
}

@test "two runs with the same seed write byte-identical latest.safetensors" {
	# The same checkpoint.dir both times: the resolved config in the metadata holds it.
	fit_blobs -q --set fit.epochs=2
	mv "$TMP/run" "$TMP/first"
	fit_blobs -q --set fit.epochs=2
	cmp "$TMP/first/latest.safetensors" "$TMP/run/latest.safetensors"
	cmp "$TMP/first/best.safetensors" "$TMP/run/best.safetensors"
}

@test "a different seed writes different weights (the identity test can fail)" {
	fit_blobs -q --set fit.epochs=2
	mv "$TMP/run" "$TMP/first"
	fit_blobs -q --set fit.epochs=2 --set fit.seed=8
	run ! cmp -s "$TMP/first/latest.safetensors" "$TMP/run/latest.safetensors"
}

@test "--init-weights of a compatible checkpoint starts from those weights" {
	fit_blobs -q
	mv "$TMP/run" "$TMP/trained"
	run --separate-stderr fit_blobs --json --set fit.epochs=1
	status_is 0
	local scratch
	scratch=$(events epoch | jq '.loss')
	run --separate-stderr fit_blobs --json --set fit.epochs=1 --init-weights "$TMP/trained/latest.safetensors"
	status_is 0
	local warm
	warm=$(events epoch | jq '.loss')
	echo "first-epoch loss from scratch $scratch, from the checkpoint $warm"
	jq -en --argjson s "$scratch" --argjson w "$warm" '$w < $s * 0.8' >/dev/null
	events test | jq -e '.accuracy >= 0.95' >/dev/null
}

@test "--init-weights of an incompatible checkpoint: exit 1 naming the tensor and both shapes" {
	fit_blobs -q --set fit.epochs=1
	mv "$TMP/run" "$TMP/trained"
	run --separate-stderr fit_blobs --set fit.epochs=1 --set model.layers.0.dense.units=8 \
		--init-weights "$TMP/trained/latest.safetensors"
	status_is 1
	[[ $stderr == *"'$TMP/trained/latest.safetensors'"* ]]
	[[ $stderr == *"'dense/kernel'"* ]]
	[[ $stderr == *"(2, 16)"* && $stderr == *"(2, 8)"* ]]
	[[ $stderr != *Epoch* ]]
	[ ! -e "$TMP/run" ]
}

@test "--init-weights of a missing file: exit 1 naming it" {
	run --separate-stderr fit_blobs --init-weights "$TMP/none.safetensors"
	status_is 1
	[[ $stderr == *"cannot open '$TMP/none.safetensors'"* ]]
}

@test "data: FILE reads the data section from a file next to the model" {
	run --separate-stderr "$DTRAIN" fit "$MODELS/blobs.yaml" --json -q --set checkpoint.enabled=false
	status_is 0
	local inline
	inline=$(events test)
	# From another directory: the path is relative to the model file, not the cwd.
	cd "$TMP"
	run --separate-stderr "$DTRAIN" fit "$MODELS/blobs_split.yaml" --json -q --set checkpoint.enabled=false
	status_is 0
	[ "$(events test)" = "$inline" ]
}

@test "data: FILE with an error inside names the data file and the position" {
	cp "$MODELS/blobs_split.yaml" "$TMP/"
	printf 'train: {format: synthetic, samples: 100}\nbatch_size: abc\n' >"$TMP/blobs_data.yaml"
	run --separate-stderr "$DTRAIN" fit "$TMP/blobs_split.yaml" -q
	status_is 2
	[[ $stderr == *"$TMP/blobs_data.yaml:2:13: error: 'batch_size' must be an integer, got 'abc'"* ]]
}

@test "data: FILE with a syntax error names the data file" {
	cp "$MODELS/blobs_split.yaml" "$TMP/"
	printf 'train: {format: synthetic, sampels: 100}\n' >"$TMP/blobs_data.yaml"
	run --separate-stderr "$DTRAIN" fit "$TMP/blobs_split.yaml" -q
	status_is 2
	[[ $stderr == *"$TMP/blobs_data.yaml:1:28: error: unknown key 'sampels' in 'synthetic'; did you mean 'samples'?"* ]]
}

@test "data: FILE that is missing: exit 2 at the 'data:' value" {
	cp "$MODELS/blobs_split.yaml" "$TMP/"
	run --separate-stderr "$DTRAIN" fit "$TMP/blobs_split.yaml" -q
	status_is 2
	[[ $stderr == *"$TMP/blobs_split.yaml:13:7: error: cannot open '$TMP/blobs_data.yaml'"* ]]
}

@test "Fashion-MNIST, one epoch: at least 82% test accuracy" {
	[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] ||
		skip "Fashion-MNIST is not installed (package dataset-fashion-mnist)"
	run --separate-stderr "$DTRAIN" fit "$REPO/models/fashion_mlp.yaml" --json \
		--set fit.epochs=1 --set checkpoint.dir="$TMP/fashion"
	status_is 0
	[ "$(events epoch | wc -l)" -eq 1 ]
	events epoch | jq -e '.epoch == 1 and .epochs == 1' >/dev/null
	events test
	events test | jq -e '.samples == 10000 and .accuracy >= 0.82' >/dev/null
	[ -s "$TMP/fashion/latest.safetensors" ]
}
