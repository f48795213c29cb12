#!/usr/bin/env bats
# Full-state checkpoints and --resume: a run killed with SIGKILL anywhere
# (between steps, in the middle of a checkpoint write, during validation) and
# resumed ends with files byte-identical to an uninterrupted run; SIGINT,
# SIGTERM and SIGUSR1; --resume's refusals; keep, filename and save_best.
#
# The crashes and signals hit exact places through test hooks that only
# these tests use (core/testhook.h): DTRAIN_TEST_CRASH_AT=POINT:N and
# DTRAIN_TEST_RAISE_AT=SIG:N.

load helpers

setup() {
	common_setup
	export OMP_NUM_THREADS=1
	# Every run happens in its own directory with checkpoint.dir "run", so that
	# the stored config, and so the whole file, is the same in every run.
	cp "$MODELS/resume.yaml" "$TMP/m.yaml"
	reference
}

# reference: the uninterrupted run, once per test, in $TMP/ref.
reference() {
	mkdir -p "$TMP/ref"
	cp "$TMP/m.yaml" "$TMP/ref/"
	(cd "$TMP/ref" && "$DTRAIN" fit m.yaml -q --json >out.json) || {
		echo "the reference run failed" >&2
		return 1
	}
}

# at DIR CMD...: runs CMD in $TMP/DIR (created, with m.yaml).
at() {
	local d=$TMP/$1
	shift
	mkdir -p "$d"
	cp -n "$TMP/m.yaml" "$d/" 2>/dev/null || true
	(cd "$d" && "$@")
}

# same_as_reference DIR: the final checkpoint of DIR equals the reference's, byte for byte.
same_as_reference() {
	local a=$TMP/ref/run/latest.safetensors b=$TMP/$1/run/latest.safetensors
	[ "$(readlink "$a")" = "$(readlink "$b")" ] || {
		echo "latest is $(readlink "$b"), the reference's $(readlink "$a")" >&2
		return 1
	}
	cmp "$a" "$b"
	cmp "$TMP/ref/run/best.safetensors" "$TMP/$1/run/best.safetensors"
}

# same_weights A B: two checkpoints hold the same tensors, byte for byte
# (their metadata may differ: a signal's checkpoint is one more file in the list).
same_weights() {
	local la lb
	la=$(od -An -t u8 -N 8 "$1" | tr -d ' ')
	lb=$(od -An -t u8 -N 8 "$2" | tr -d ' ')
	cmp <(tail -c +$((9 + la)) "$1") <(tail -c +$((9 + lb)) "$2")
	[ "$(safetensors_header "$1" | jq -cS 'del(."__metadata__")')" = \
		"$(safetensors_header "$2" | jq -cS 'del(."__metadata__")')" ]
	[ "$(safetensors_header "$1" | jq -cS '."__metadata__" | del(."checkpoint.files", .crc32)')" = \
		"$(safetensors_header "$2" | jq -cS '."__metadata__" | del(."checkpoint.files", .crc32)')" ]
}

# metrics FILE: the epoch lines of a --json output without the timings.
metrics() {
	jq -c 'select(.event == "epoch") | del(.seconds, .samples_per_sec)' "$1"
}

# crash_and_resume DIR POINT:N: a run killed at POINT:N, then resumed to the end.
crash_and_resume() {
	local dir=$1 at=$2
	run at "$dir" env DTRAIN_TEST_CRASH_AT="$at" "$DTRAIN" fit m.yaml -q
	[ "$status" -eq 137 ] || {
		echo "the run was not killed at $at (status $status): $output" >&2
		return 1
	}
	run --separate-stderr at "$dir" "$DTRAIN" fit m.yaml --resume --json
	status_is 0
	[[ $stderr == *"resuming from 'run/latest.safetensors'"* ]]
	echo "$output" >"$TMP/$dir/out.json"
}

@test "two uninterrupted runs write the same files (the comparisons below can fail)" {
	at again "$DTRAIN" fit m.yaml -q
	same_as_reference again
	# and a different seed does not
	at other "$DTRAIN" fit m.yaml -q --set fit.seed=6
	run ! cmp -s "$TMP/ref/run/latest.safetensors" "$TMP/other/run/latest.safetensors"
}

@test "SIGKILL between steps, at several places, then --resume: byte-identical" {
	# 8: one step after a checkpoint; 20: the end of epoch 1, before
	# validation; 33, 47: mid-epoch
	for n in 8 20 33 47; do
		crash_and_resume "step$n" "step:$n"
		same_as_reference "step$n"
	done
}

@test "SIGKILL with accumulation and stateful callbacks (plateau, early stopping, csv_logger), then --resume: byte-identical" {
	# accumulate_steps 2 with checkpoints every 7 steps: a checkpoint waits for
	# the end of an accumulation group; the callbacks' states travel in the file
	sed -i '/^  seed: 5$/a\
  accumulate_steps: 2\
  callbacks:\
    - reduce_lr_on_plateau: {monitor: loss, patience: 0, factor: 0.5, min_delta: 1.0}\
    - early_stopping: {monitor: loss, patience: 1, min_delta: 1.0}\
    - csv_logger' "$TMP/m.yaml"
	rm -rf "$TMP/ref"
	reference
	# the callbacks acted: the rate was cut and training stopped early
	[ "$(jq -s 'map(select(.event == "epoch")) | length' "$TMP/ref/out.json")" -lt 3 ] || \
		[ "$(jq -s '[.[] | select(.event == "epoch") | .learning_rate] | unique | length' "$TMP/ref/out.json")" -gt 1 ]
	for n in 9 24; do
		crash_and_resume "acc$n" "step:$n"
		same_as_reference "acc$n"
		cmp "$TMP/ref/run/history.csv" "$TMP/acc$n/run/history.csv"
	done
}

@test "nadam, adagrad, amsgrad, use_ema: SIGKILL then --resume is byte-identical (their slots in the checkpoint)" {
	# nadam's momentum cache product is recomputed from the step count on
	# resume; amsgrad's third slot (vhat) and the weights' moving average
	# (ema) travel in the file like m and v
	for opt in nadam adagrad "{adam: {amsgrad: true}}" "{lion: {use_ema: true, ema_overwrite_frequency: 5}}"; do
		sed -i "s/^  optimizer: .*/  optimizer: $opt/" "$TMP/m.yaml"
		rm -rf "$TMP/ref"
		reference
		name=$(echo "$opt" | tr -cd 'a-z')
		crash_and_resume "$name" "step:33"
		same_as_reference "$name"
	done
	slot_shape() { safetensors_header "$TMP/$1/run/latest.safetensors" | jq -c ".\"optimizer/dense/kernel/$2\".shape"; }
	[ "$(slot_shape adamamsgradtrue vhat)" = "[2,16]" ]
	[ "$(slot_shape adagrad accumulator)" = "[2,16]" ]
	[ "$(slot_shape lionuseematrueemaoverwritefrequency ema)" = "[2,16]" ]
}

@test "SIGKILL before the first checkpoint: nothing to resume, a new run is the same" {
	run at early env DTRAIN_TEST_CRASH_AT=step:3 "$DTRAIN" fit m.yaml -q
	[ "$status" -eq 137 ]
	run --separate-stderr at early "$DTRAIN" fit m.yaml -q --resume
	status_is 1
	stderr_has "nothing to resume"
	run at early "$DTRAIN" fit m.yaml -q
	status_is 0
	same_as_reference early
}

@test "a resumed epoch reports the same metrics as the uninterrupted one" {
	crash_and_resume mid step:30
	same_as_reference mid
	# epochs 2 and 3 ran after the resume; epoch 2 had begun before the crash
	[ "$(metrics "$TMP/mid/out.json")" = "$(metrics "$TMP/ref/out.json" | tail -n 2)" ]
}

@test "a resumed regression epoch reports the same mae and rmse (checkpoints carry the error sums)" {
	sed -i 's/units: 3, activation: softmax/units: 1/; s/loss: sparse_categorical_crossentropy/loss: mean_squared_error/
		/metrics: \[accuracy\]/d' "$TMP/m.yaml"
	rm -rf "$TMP/ref"
	reference
	jq -se 'map(select(.event == "epoch") | has("mae") and has("rmse") and has("val_mae")) | length == 3 and all' \
		"$TMP/ref/out.json" >/dev/null
	crash_and_resume reg step:30
	same_as_reference reg
	[ "$(metrics "$TMP/reg/out.json")" = "$(metrics "$TMP/ref/out.json" | tail -n 2)" ]
}

@test "SIGKILL in the middle of a checkpoint write: the previous checkpoint is intact, resume exact" {
	for n in 2 3 4; do
		run at "write$n" env DTRAIN_TEST_CRASH_AT=checkpoint-write:$n "$DTRAIN" fit m.yaml -q
		[ "$status" -eq 137 ]
		# a temporary file was left half written, latest names a complete file
		ls "$TMP/write$n/run/" | grep -q '\.tmp\.'
		run --separate-stderr "$DTRAIN" evaluate "$TMP/m.yaml" --checkpoint "$TMP/write$n/run/latest.safetensors"
		not_crashed
		[ "$status" -ne 0 ] && [[ $stderr == *"no data.test"* ]] # loads; only the test data is missing
		run --separate-stderr at "write$n" "$DTRAIN" fit m.yaml --resume -q
		status_is 0
		same_as_reference "write$n"
		# the resume removed the temporary file
		! ls "$TMP/write$n/run/" | grep -q '\.tmp\.'
	done
}

@test "SIGKILL during validation, then --resume: byte-identical" {
	crash_and_resume eval evaluate:2
	same_as_reference eval
}

@test "killed twice, resumed twice: byte-identical" {
	run at twice env DTRAIN_TEST_CRASH_AT=step:10 "$DTRAIN" fit m.yaml -q
	[ "$status" -eq 137 ]
	run at twice env DTRAIN_TEST_CRASH_AT=step:25 "$DTRAIN" fit m.yaml -q --resume
	[ "$status" -eq 137 ]
	run at twice "$DTRAIN" fit m.yaml -q --resume
	status_is 0
	same_as_reference twice
}

@test "SIGINT: the step finishes, a checkpoint is written, exit 130 with how to resume" {
	# --default-signal: under a background job (make check &) SIGINT comes ignored, and dtrain keeps it so
	run --separate-stderr at int env --default-signal=INT DTRAIN_TEST_RAISE_AT=INT:12 "$DTRAIN" fit m.yaml -q
	status_is 130
	stderr_has "interrupted (SIGINT)" "dtrain fit m.yaml --resume" "run/ckpt-001-00012.safetensors"
	[ "$(readlink "$TMP/int/run/latest.safetensors")" = ckpt-001-00012.safetensors ]
	safetensors_header "$TMP/int/run/latest.safetensors" | jq -e '."__metadata__" | .epoch == "0" and .step == "12"' >/dev/null
	run at int "$DTRAIN" fit m.yaml -q --resume
	status_is 0
	same_weights "$TMP/ref/run/latest.safetensors" "$TMP/int/run/latest.safetensors"
}

@test "SIGTERM: exit 143 after a checkpoint; resume exact" {
	run --separate-stderr at term env DTRAIN_TEST_RAISE_AT=TERM:45 "$DTRAIN" fit m.yaml -q
	status_is 143
	stderr_has "terminated (SIGTERM)" "--resume"
	[ "$(readlink "$TMP/term/run/latest.safetensors")" = ckpt-003-00005.safetensors ]
	run at term "$DTRAIN" fit m.yaml -q --resume
	status_is 0
	same_weights "$TMP/ref/run/latest.safetensors" "$TMP/term/run/latest.safetensors"
}

@test "SIGTERM mid-epoch with regression metrics (r2_score, mse, mape): resume exact, the same epoch lines" {
	# Their sums are not counts (a sum of labels may be negative): the checkpoint's metric_stats hold them too.
	local reg=(--set 'model.layers=[{dense: {units: 1}}]' --set compile.loss=huber
		--set 'compile.metrics=[r2_score, mse, mape]')
	at rref "$DTRAIN" fit m.yaml -q --json "${reg[@]}" >"$TMP/rref.json"
	run --separate-stderr at rterm env DTRAIN_TEST_RAISE_AT=TERM:30 "$DTRAIN" fit m.yaml -q --json "${reg[@]}"
	status_is 143
	[ "$(readlink "$TMP/rterm/run/latest.safetensors")" = ckpt-002-00010.safetensors ]
	run --separate-stderr at rterm "$DTRAIN" fit m.yaml -q --json --resume "${reg[@]}"
	status_is 0
	same_weights "$TMP/rref/run/latest.safetensors" "$TMP/rterm/run/latest.safetensors"
	# epoch 2, resumed at its step 10, reports the whole epoch's metrics as the uninterrupted run did
	local want got
	want=$(jq -c 'select(.event == "epoch" and .epoch == 2) | del(.seconds, .samples_per_sec)' "$TMP/rref.json")
	got=$(jq -c 'select(.event == "epoch" and .epoch == 2) | del(.seconds, .samples_per_sec)' <<<"$output")
	[ -n "$want" ] && [ "$got" = "$want" ]
	[[ $want == *'"r2_score":'* ]]
}

@test "SIGTERM from outside (kill) stops a long run with 143 and a checkpoint" {
	(cd "$TMP/ext" 2>/dev/null || { mkdir -p "$TMP/ext" && cd "$TMP/ext"; } &&
		exec "$DTRAIN" fit "$TMP/m.yaml" -q --set checkpoint.dir=run --set fit.epochs=100000) 2>"$TMP/ext.err" &
	local pid=$! rc=0
	# wait for the first checkpoint: training is under way
	for _ in $(seq 100); do [ -e "$TMP/ext/run/latest.safetensors" ] && break; sleep 0.1; done
	kill -TERM "$pid"
	wait "$pid" || rc=$?
	[ "$rc" -eq 143 ]
	grep -q "resume with: dtrain fit $TMP/m.yaml --resume --set 'checkpoint.dir=run' --set 'fit.epochs=100000'" "$TMP/ext.err"
	[ -s "$TMP/ext/run/latest.safetensors" ]
}

@test "SIGUSR1: a checkpoint at that step, training goes on to the same end" {
	run --separate-stderr at usr env DTRAIN_TEST_RAISE_AT=USR1:10 "$DTRAIN" fit m.yaml -q --set checkpoint.every=epoch
	status_is 0
	[ -s "$TMP/usr/run/ckpt-001-00010.safetensors" ]
	at ref2 "$DTRAIN" fit m.yaml -q --set checkpoint.every=epoch
	same_weights "$TMP/ref2/run/latest.safetensors" "$TMP/usr/run/latest.safetensors"
	# the check can fail: the checkpoint at step 10 is not the final one
	run ! same_weights "$TMP/usr/run/ckpt-001-00010.safetensors" "$TMP/usr/run/latest.safetensors"
	[ ! -e "$TMP/ref2/run/ckpt-001-00010.safetensors" ]
}

@test "--resume with a different model is refused, naming the difference" {
	at chg "$DTRAIN" fit m.yaml -q --set fit.epochs=1
	run --separate-stderr at chg "$DTRAIN" fit m.yaml --resume --set model.layers.0.dense.units=32
	status_is 2
	stderr_has "layer 1 'dense': units 16 in the checkpoint, 32 in 'm.yaml'"
	run --separate-stderr at chg "$DTRAIN" fit m.yaml --resume --set model.layers.1.dropout.rate=0.5
	status_is 2
	stderr_has "layer 2 'dropout': rate 0.3 in the checkpoint, 0.5 in 'm.yaml'"
	run --separate-stderr at chg "$DTRAIN" fit m.yaml --resume --set 'model.layers=[{dense: {units: 3}}]'
	status_is 2
	stderr_has "the model has 3 layers in the checkpoint, 1 in 'm.yaml'"
	run --separate-stderr at chg "$DTRAIN" fit m.yaml --resume --set compile.optimizer=sgd
	status_is 2
	stderr_has "optimizer adam in the checkpoint, sgd in 'm.yaml'"
	run --separate-stderr at chg "$DTRAIN" fit m.yaml --resume --set data.batch_size=8
	status_is 2
	stderr_has "data.batch_size 16 in the checkpoint, 8 in 'm.yaml'"
	# more epochs and another learning rate are fine
	run --separate-stderr at chg "$DTRAIN" fit m.yaml --resume -q --set fit.epochs=2 \
		--set 'compile.optimizer={adam: {learning_rate: 0.01}}'
	status_is 0
	[ "$(readlink "$TMP/chg/run/latest.safetensors")" = ckpt-002-00020.safetensors ]
}

@test "--resume: a loss under its Keras alias is the same loss (mse, mean_squared_error); another loss is refused" {
	local reg=("--set" 'model.layers=[{dense: {units: 1}}]' "--set" "compile.metrics=[]")
	at alias "$DTRAIN" fit m.yaml -q --set fit.epochs=1 "${reg[@]}" --set compile.loss=mean_squared_error
	run --separate-stderr at alias "$DTRAIN" fit m.yaml --resume -q --set fit.epochs=2 "${reg[@]}" --set compile.loss=mse
	status_is 0
	[ "$(readlink "$TMP/alias/run/latest.safetensors")" = ckpt-002-00020.safetensors ]
	run --separate-stderr at alias "$DTRAIN" fit m.yaml --resume --set fit.epochs=3 "${reg[@]}" --set compile.loss=mae
	status_is 2
	stderr_has "compile.loss mean_squared_error in the checkpoint, mean_absolute_error in 'm.yaml'"
}

@test "--resume with nothing to resume: a clear error" {
	run --separate-stderr at none "$DTRAIN" fit m.yaml --resume
	status_is 1
	stderr_has "nothing to resume" "'run' holds no checkpoint"
	[ ! -e "$TMP/none/run/latest.safetensors" ]
	run --separate-stderr at none "$DTRAIN" fit m.yaml --resume --set checkpoint.enabled=false
	status_is 2
	stderr_has "--resume needs checkpoints"
	run --separate-stderr at none "$DTRAIN" fit m.yaml --resume --init-weights x.safetensors
	status_is 2
	stderr_has "not both"
}

@test "--resume of a finished run trains nothing and says so" {
	cd "$TMP/ref" && run --separate-stderr "$DTRAIN" fit m.yaml --resume
	status_is 0
	stderr_has "nothing to resume" "has done 3 epochs"
}

@test "--resume refuses a corrupt latest checkpoint, naming it" {
	at bad "$DTRAIN" fit m.yaml -q --set fit.epochs=1
	local f
	f=$TMP/bad/run/$(readlink "$TMP/bad/run/latest.safetensors")
	printf 'X' | dd of="$f" bs=1 seek=$(($(stat -c %s "$f") - 10)) conv=notrunc 2>/dev/null
	run --separate-stderr at bad "$DTRAIN" fit m.yaml --resume
	not_crashed
	status_is 1
	stderr_has "run/latest.safetensors" "fails its checksum"
}

@test "keep: K rotates old files, never the one latest names" {
	run at keep "$DTRAIN" fit m.yaml -q --set checkpoint.keep=2
	status_is 0
	[ "$(ls "$TMP/keep/run" | sort | tr '\n' ' ')" = "best.safetensors ckpt-003-00016.safetensors ckpt-003-00020.safetensors latest.safetensors " ]
	run at keep1 "$DTRAIN" fit m.yaml -q --set checkpoint.keep=1
	[ "$(ls "$TMP/keep1/run" | sort | tr '\n' ' ')" = "best.safetensors ckpt-003-00020.safetensors latest.safetensors " ]
	# rotation goes on across a resume
	run at keep3 env DTRAIN_TEST_CRASH_AT=step:30 "$DTRAIN" fit m.yaml -q --set checkpoint.keep=2
	run at keep3 "$DTRAIN" fit m.yaml -q --resume --set checkpoint.keep=2
	status_is 0
	[ "$(ls "$TMP/keep3/run" | sort | tr '\n' ' ')" = "best.safetensors ckpt-003-00016.safetensors ckpt-003-00020.safetensors latest.safetensors " ]
}

@test "filename: a Keras template with epoch, step and metrics" {
	run at tpl "$DTRAIN" fit m.yaml -q --set checkpoint.every=epoch \
		--set "checkpoint.filename='w-{epoch:02d}-{step}-{val_loss:.3f}'"
	status_is 0
	local names
	names=$(ls "$TMP/tpl/run" | grep '^w-' | tr '\n' ' ')
	[[ $names =~ ^w-01-20-[0-9]\.[0-9]{3}\.safetensors\ w-02-40-[0-9.]{5}\.safetensors\ w-03-60-[0-9.]{5}\.safetensors\ $ ]]
	# the name holds val_loss as the metadata has it
	local f v
	f=$(readlink "$TMP/tpl/run/latest.safetensors")
	v=$(safetensors_header "$TMP/tpl/run/$f" | jq -r '."__metadata__".monitor_value')
	[ "$f" = "w-03-60-$(printf '%.3f' "$v").safetensors" ]
}

@test "filename: a bad template is a config error at its place" {
	cat >>"$TMP/m.yaml" <<'YAML'
  filename: "{epoch:03x}"
YAML
	run --separate-stderr "$DTRAIN" fit "$TMP/m.yaml"
	status_is 2
	stderr_has "m.yaml:28:13: error:" "bad format '03x'"
	run --separate-stderr "$DTRAIN" fit "$MODELS/resume.yaml" --set "checkpoint.filename='{val_loss:.4f}'"
	status_is 2
	stderr_has "exists only at the end of an epoch"
	run --separate-stderr "$DTRAIN" fit "$MODELS/resume.yaml" --set "checkpoint.filename='{lr}'"
	status_is 2
	stderr_has "unknown field '{lr}'"
}

@test "save_best: mode max keeps the highest val_accuracy, mode min the lowest val_loss" {
	local best
	for mode in max min; do
		local mon=val_accuracy
		[ "$mode" = min ] && mon=val_loss
		at "b$mode" "$DTRAIN" fit m.yaml -q --json --set fit.epochs=4 --set checkpoint.every=epoch \
			--set "checkpoint.save_best={monitor: $mon, mode: $mode}" >"$TMP/b$mode.json"
		best=$(safetensors_header "$TMP/b$mode/run/best.safetensors" | jq -r '."__metadata__" | .monitor + " " + .monitor_value')
		local want
		if [ "$mode" = max ]; then
			want=$(jq -s "map(select(.event == \"epoch\")) | max_by(.$mon) | .$mon" "$TMP/b$mode.json")
		else
			want=$(jq -s "map(select(.event == \"epoch\")) | min_by(.$mon) | .$mon" "$TMP/b$mode.json")
		fi
		[ "${best%% *}" = "$mon" ]
		jq -en --argjson a "${best#* }" --argjson b "$want" '($a - $b) | fabs < 1e-9' >/dev/null || {
			echo "best.safetensors has $best; the $mode is $want" >&2
			return 1
		}
	done
	# auto: max for accuracy
	run --separate-stderr "$DTRAIN" fit "$MODELS/resume.yaml" --set checkpoint.save_best.mode=best
	status_is 2
}

@test "model_checkpoint in fit.callbacks: save_best_only, save_weights_only, save_freq, filepath with a directory" {
	cat >"$TMP/cb.yaml" <<'YAML'
fit:
  callbacks:
    - model_checkpoint: {filepath: "top/best-{epoch:02d}-{val_accuracy:.3f}.safetensors",
        monitor: val_accuracy, save_best_only: true}
    - model_checkpoint: {filepath: "w-{step}", save_weights_only: true, save_freq: 25}
YAML
	sed -n '/^fit:/,/^checkpoint:/p' "$TMP/m.yaml" | grep -v '^fit:\|^checkpoint:' >>"$TMP/cb.yaml"
	sed -n '/^checkpoint:/,$p' "$TMP/m.yaml" >>"$TMP/cb.yaml"
	sed -n '1,/^fit:/p' "$TMP/m.yaml" | grep -v '^fit:' >"$TMP/mc.yaml"
	cat "$TMP/cb.yaml" >>"$TMP/mc.yaml"
	mkdir -p "$TMP/mc"
	cp "$TMP/mc.yaml" "$TMP/mc/m.yaml"
	run --separate-stderr at mc "$DTRAIN" fit m.yaml -q --json
	status_is 0
	# every N steps only, weights only: no optimizer tensors
	[ "$(ls "$TMP/mc/run" | grep '^w-' | tr '\n' ' ')" = "w-25.safetensors w-50.safetensors " ]
	[ "$(safetensors_header "$TMP/mc/run/w-25.safetensors" | jq '[keys[] | select(startswith("optimizer/"))] | length')" -eq 0 ]
	[ "$(safetensors_header "$TMP/mc/run/ckpt-003-00020.safetensors" | jq '[keys[] | select(startswith("optimizer/"))] | length')" -gt 0 ]
	# one file per epoch whose val_accuracy beat the earlier ones
	local want got
	want=$(jq -r 'select(.event == "epoch") | "\(.epoch) \(.val_accuracy)"' <<<"$output" |
		awk '!seen || $2 > best { best = $2; seen = 1; printf "best-%02d-%.3f.safetensors ", $1, $2 }')
	got=$(ls "$TMP/mc/top" | tr '\n' ' ')
	[ "$got" = "$want" ]
	# its state (best value, files) is in the checkpoint section's files, for --resume
	safetensors_header "$TMP/mc/run/latest.safetensors" |
		jq -e '."__metadata__".callbacks | fromjson | .model_checkpoint | has("best") and (.files | length > 0)' >/dev/null
	# resumed after a crash, it writes the same files
	mkdir -p "$TMP/mc2" && cp "$TMP/mc.yaml" "$TMP/mc2/m.yaml"
	run at mc2 env DTRAIN_TEST_CRASH_AT=step:45 "$DTRAIN" fit m.yaml -q
	[ "$status" -eq 137 ]
	run at mc2 "$DTRAIN" fit m.yaml -q --resume
	status_is 0
	[ "$(ls "$TMP/mc2/top" | tr '\n' ' ')" = "$got" ]
	[ "$(ls "$TMP/mc2/run" | tr '\n' ' ')" = "$(ls "$TMP/mc/run" | tr '\n' ' ')" ]
	cmp "$TMP/mc/run/w-50.safetensors" "$TMP/mc2/run/w-50.safetensors"
}

@test "model_checkpoint: bad arguments are config errors" {
	run --separate-stderr "$DTRAIN" fit "$MODELS/resume.yaml" --set 'fit.callbacks=[model_checkpoint]'
	status_is 2
	stderr_has "needs its arguments"
	run --separate-stderr "$DTRAIN" fit "$MODELS/resume.yaml" \
		--set 'fit.callbacks=[{model_checkpoint: {filepath: "a-{val_loss}", save_freq: 3}}]'
	status_is 2
	stderr_has "exists only at the end of an epoch"
	run --separate-stderr "$DTRAIN" fit "$MODELS/resume.yaml" \
		--set 'fit.callbacks=[{model_checkpoint: {filepath: a, save_freq: 3, save_best_only: true}}]'
	status_is 2
	stderr_has "save_best_only"
	run --separate-stderr "$DTRAIN" fit "$MODELS/resume.yaml" \
		--set 'fit.callbacks=[{model_checkpoint: {filepath: a, monitr: loss}}]'
	status_is 2
	stderr_has "monitr"
}

@test "SIGTERM during validation: validation stops, the checkpoint resumes at the epoch's end, exact" {
	run --separate-stderr at teval env DTRAIN_TEST_RAISE_AT=TERM:evaluate "$DTRAIN" fit m.yaml -q
	status_is 143
	# all 20 steps of epoch 1 done, validation and the epoch's end still to come
	safetensors_header "$TMP/teval/run/latest.safetensors" | jq -e '."__metadata__" | .epoch == "0" and .step == "20"' >/dev/null
	run --separate-stderr at teval "$DTRAIN" fit m.yaml --resume --json
	status_is 0
	echo "$output" >"$TMP/teval.json"
	[ "$(metrics "$TMP/teval.json")" = "$(metrics "$TMP/ref/out.json")" ]
	same_weights "$TMP/ref/run/latest.safetensors" "$TMP/teval/run/latest.safetensors"
}
