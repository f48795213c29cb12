#!/usr/bin/env bats
# dtrain fit with fit.callbacks, learning-rate schedules, accumulate_steps and
# class_weight, on the blobs model (1000 records, 800 for training: 25 steps
# of 32 per epoch).

load helpers

setup() {
	common_setup
	BLOBS=$MODELS/blobs.yaml
	export OMP_NUM_THREADS=1
}

fit_blobs() {
	"$DTRAIN" fit "$BLOBS" --set checkpoint.dir="$TMP/run" "$@"
}

@test "terminate_on_nan: a divergent run stops with status 1 naming the step and a layer" {
	run --separate-stderr fit_blobs --set 'compile.optimizer={sgd: {learning_rate: 1e5}}' \
		--set 'fit.callbacks=[terminate_on_nan]'
	status_is 1
	stderr_has "terminate_on_nan" "epoch 1, batch " "the loss is" "layer " "'dense"
	[[ $stderr =~ batch\ [0-9]+: ]]
	# It stopped there: no epoch line, no test result.
	[[ $stderr != *"Epoch 1/5:"* ]]
	[[ $stderr != *"test:"* ]]
}

@test "without terminate_on_nan the same divergent run goes on to the end; nan prints as Keras prints it" {
	run --separate-stderr fit_blobs --set 'compile.optimizer={sgd: {learning_rate: 1e5}}' --set fit.epochs=2
	status_is 0
	stderr_has "Epoch 2/2:" "loss: nan - val_accuracy" "val_loss: nan" "test: 300 samples" "- loss: nan"
	# glibc prints a negative NaN as "-nan"; Keras' logs say "nan"
	[[ $stderr != *-nan* ]]
	run --separate-stderr "$DTRAIN" evaluate "$TMP/run"
	status_is 0
	stderr_has "- loss: nan"
	[[ $stderr != *-nan* ]]
}

@test "csv_logger writes history.csv in the run directory with Keras' columns" {
	run --separate-stderr fit_blobs --set 'fit.callbacks=[csv_logger]' --set fit.epochs=3
	status_is 0
	[ -f "$TMP/run/history.csv" ]
	mapfile -t rows <"$TMP/run/history.csv"
	[ "${#rows[@]}" -eq 4 ]
	[ "${rows[0]}" = "epoch,accuracy,loss,val_accuracy,val_loss" ]
	for i in 0 1 2; do
		[[ ${rows[i + 1]} =~ ^$i,[0-9.e-]+,[0-9.e-]+,[0-9.e-]+,[0-9.e-]+$ ]] || {
			echo "bad row: ${rows[i + 1]}" >&2
			return 1
		}
	done
	# The losses are the ones --json reports.
	run --separate-stderr fit_blobs --set 'fit.callbacks=[{csv_logger: {filename: h2.csv}}]' --set fit.epochs=3 --json
	status_is 0
	local json_loss csv_loss
	json_loss=$(events epoch | jq -r 'select(.epoch == 3) | .loss')
	csv_loss=$(awk -F, 'NR == 4 { print $3 }' "$TMP/run/h2.csv")
	jq -en --argjson a "$json_loss" --argjson b "$csv_loss" '($a - $b) | fabs < 1e-12' >/dev/null
}

@test "csv_logger: append adds rows under one header; a separator; learning_rate with a schedule" {
	fit_blobs --set 'fit.callbacks=[{csv_logger: {append: true}}]' --set fit.epochs=2 -q
	fit_blobs --set 'fit.callbacks=[{csv_logger: {append: true}}]' --set fit.epochs=2 -q
	[ "$(grep -c '^epoch' "$TMP/run/history.csv")" -eq 1 ]
	[ "$(wc -l <"$TMP/run/history.csv")" -eq 5 ]
	fit_blobs --set 'fit.callbacks=[{csv_logger: {separator: ";"}}]' --set fit.epochs=1 -q \
		--set 'compile.optimizer={adam: {learning_rate: {exponential_decay: {initial_learning_rate: 0.01, decay_steps: 25, decay_rate: 0.5}}}}'
	[ "$(head -1 "$TMP/run/history.csv")" = "epoch;accuracy;learning_rate;loss;val_accuracy;val_loss" ]
	# After 25 updates the rate is 0.005, written as Keras writes the float32.
	[ "$(awk -F';' 'NR == 2 { print $3 }' "$TMP/run/history.csv")" = "0.004999999888241291" ]
}

@test "early_stopping stops before fit.epochs and says so" {
	# With min_delta 10 nothing after the first epoch counts as better.
	run --separate-stderr fit_blobs --json --set fit.epochs=20 \
		--set 'fit.callbacks=[{early_stopping: {monitor: val_loss, min_delta: 10, patience: 2}}]'
	status_is 0
	[ "$(events epoch | wc -l)" -eq 3 ]
	stderr_has "Epoch 3: early stopping"
	# The test set is still evaluated.
	[ "$(events test | wc -l)" -eq 1 ]
}

@test "early_stopping with restore_best_weights on a metric that keeps improving trains every epoch" {
	run --separate-stderr fit_blobs --json --set fit.epochs=4 \
		--set 'fit.callbacks=[{early_stopping: {monitor: val_accuracy, patience: 3, restore_best_weights: true}}]'
	status_is 0
	[ "$(events epoch | wc -l)" -eq 4 ]
	stderr_has "Restoring model weights from the end of the best epoch"
	# Kept for --resume in the run directory, a safetensors file of the model's weights.
	safetensors_header "$TMP/run/early_stopping_best.safetensors" | jq -e 'has("dense/kernel") and has("dense_1/bias")' >/dev/null
}

@test "restore_best_weights: evaluate takes early_stopping_best.safetensors (normalize: auto too) and scores what fit's test line scored" {
	run --separate-stderr fit_blobs --json --set fit.epochs=6 --set data.normalize=auto \
		--set 'fit.callbacks=[{early_stopping: {monitor: val_accuracy, patience: 1, restore_best_weights: true}}]'
	status_is 0
	stderr_has "Restoring model weights from the end of the best epoch"
	local want
	want=$(events test | jq -r .loss)
	run --separate-stderr "$DTRAIN" evaluate "$TMP/run/early_stopping_best.safetensors" --json
	status_is 0
	[ "$(jq -r .loss <<<"$output")" = "$want" ]
}

@test "a schedule puts the learning rate in the progress lines and in --json" {
	run --separate-stderr fit_blobs --json --set fit.epochs=2 \
		--set 'compile.optimizer={adam: {learning_rate: {exponential_decay: {initial_learning_rate: 0.01, decay_steps: 25, decay_rate: 0.5, staircase: true}}}}'
	status_is 0
	stderr_has "Epoch 1/2:" "learning_rate: 0.0050 - loss:" "learning_rate: 0.0025 - loss:"
	[ "$(events epoch | jq -r '.learning_rate' | tr '\n' ' ')" = "0.005 0.0025 " ]
	# Without a schedule the lines have no learning_rate.
	run --separate-stderr fit_blobs --set fit.epochs=1
	status_is 0
	[[ $stderr != *learning_rate* ]]
}

@test "warmup in front of a schedule" {
	run --separate-stderr fit_blobs --json --set fit.epochs=2 \
		--set 'compile.optimizer={sgd: {learning_rate: {constant: 0.1, warmup: {steps: 50, initial: 0}}}}'
	status_is 0
	[ "$(events epoch | jq -r '.learning_rate' | tr '\n' ' ')" = "0.05 0.1 " ]
}

@test "reduce_lr_on_plateau lowers the rate and says so" {
	run --separate-stderr fit_blobs --json --set fit.epochs=3 \
		--set 'fit.callbacks=[{reduce_lr_on_plateau: {monitor: val_loss, min_delta: 10, patience: 1, factor: 0.5}}]'
	status_is 0
	stderr_has "Epoch 2: ReduceLROnPlateau reducing learning rate to 0.0005" "learning_rate: 0.0010 - loss:"
	# The logs carry the rate at the epoch's end, before the callback lowers it (as Keras' logs).
	[ "$(events epoch | jq -r '.learning_rate' | tr '\n' ' ')" = "0.001 0.001 0.0005 " ]
	stderr_has "Epoch 3: ReduceLROnPlateau reducing learning rate to 0.00025"
}

@test "fit.callbacks errors: unknown name, bad key, a monitor fit does not report, plateau with a schedule" {
	run --separate-stderr fit_blobs --set 'fit.callbacks=[early_stoping]'
	status_is 2
	stderr_has "--set:1:" "unknown callback 'early_stoping'; did you mean 'early_stopping'?"
	run --separate-stderr fit_blobs --set 'fit.callbacks=[{early_stopping: {patiense: 1}}]'
	status_is 2
	stderr_has "did you mean 'patience'"
	run --separate-stderr fit_blobs --set data.validation_split=0 --set 'fit.callbacks=[early_stopping]'
	status_is 2
	stderr_has "monitors 'val_loss' but fit has no validation data"
	run --separate-stderr fit_blobs --set 'fit.callbacks=[reduce_lr_on_plateau]' \
		--set 'compile.optimizer={sgd: {learning_rate: {cosine_decay: {initial_learning_rate: 0.1, decay_steps: 10}}}}'
	status_is 2
	stderr_has "schedule"
	run --separate-stderr fit_blobs --set 'compile.optimizer={sgd: {learning_rate: {cosine_decy: {}}}}'
	status_is 2
	stderr_has "did you mean 'cosine_decay'"
}

@test "accumulate_steps 2 with batches of 32 trains like batches of 64" {
	run --separate-stderr fit_blobs --json --set fit.epochs=2 --set fit.accumulate_steps=2
	status_is 0
	local a b
	a=$(events test | jq -r '.loss')
	run --separate-stderr fit_blobs --json --set fit.epochs=2 --set data.batch_size=64
	status_is 0
	b=$(events test | jq -r '.loss')
	jq -en --argjson a "$a" --argjson b "$b" '($a - $b) | fabs < 1e-5' >/dev/null
	# ... and not like batches of 32.
	run --separate-stderr fit_blobs --json --set fit.epochs=2
	status_is 0
	jq -en --argjson a "$a" --argjson b "$(events test | jq -r '.loss')" '($a - $b) | fabs > 1e-3' >/dev/null
}

@test "class_weight changes the training loss and is checked against the classes" {
	run --separate-stderr fit_blobs --json --set fit.epochs=1
	status_is 0
	local plain
	plain=$(events epoch | jq -r '.loss')
	run --separate-stderr fit_blobs --json --set fit.epochs=1 --set 'fit.class_weight={0: 3, 2: 0.5}'
	status_is 0
	jq -en --argjson a "$plain" --argjson b "$(events epoch | jq -r '.loss')" '($a - $b) | fabs > 1e-3' >/dev/null
	run --separate-stderr fit_blobs --set 'fit.class_weight={3: 2}'
	status_is 2
	stderr_has "--set:1:" "class 3 is not one of the model's 3 classes"
}

@test "a checkpoint trained with class_weight serves evaluate, predict, summary, config and export" {
	# The checkpoint stores its config as JSON, which quotes every key: the
	# class numbers must read back as numbers, not as the string "0".
	run --separate-stderr fit_blobs -q --set fit.epochs=1 --set 'fit.class_weight={0: 3.0, 2: 0.25}'
	status_is 0
	npy_python 'npy("'"$TMP"'/x.npy", "<f4", "(2, 2)", struct.pack("<4f", 0, 0, 1, 1))'
	for ckpt in "$TMP/run" "$TMP/run/best.safetensors"; do
		run --separate-stderr "$DTRAIN" evaluate "$ckpt"
		status_is 0
		stderr_has "300 samples - accuracy"
		run --separate-stderr "$DTRAIN" predict "$ckpt" "$TMP/x.npy"
		status_is 0
		[ "${#lines[@]}" -eq 2 ]
		run --separate-stderr "$DTRAIN" summary "$ckpt"
		status_is 0
		run --separate-stderr "$DTRAIN" export "$ckpt" -o "$TMP/m.onnx"
		status_is 0
		run --separate-stderr "$DTRAIN" config "$ckpt" --json
		status_is 0
		jq -e '.fit.class_weight == {"0": 3, "2": 0.25}' <<<"$output" >/dev/null
	done
}

@test "a regression run monitors val_mae and val_rmse: mode auto takes the lowest, in all four places" {
	run --separate-stderr "$DTRAIN" fit -q --json "$REPO/models/diabetes_mlp.yaml" --set fit.epochs=4 \
		--set data.validation_split=0.2 --set checkpoint.dir="$TMP/run" --set 'checkpoint.save_best={monitor: val_mae}' \
		--set "fit.callbacks=[{reduce_lr_on_plateau: {monitor: val_mae, patience: 0}},
			{early_stopping: {monitor: val_rmse, patience: 0}},
			{model_checkpoint: {filepath: '$TMP/mc/rmse-{epoch:02d}', monitor: val_rmse, save_best_only: true}}]"
	status_is 0
	# The errors fall every epoch: the lowest is the last.
	[ "$(events epoch | jq -s '[.[].val_mae] | all(type == "number") and . == (sort | reverse) and length == 4')" = true ]
	[ "$(events epoch | jq -s '[.[].val_rmse] | . == (sort | reverse)')" = true ]
	# reduce_lr_on_plateau (patience 0) saw each epoch improve: the rate never fell.
	[ "$(events epoch | jq -r '.learning_rate' | sort -u)" = 0.01 ]
	# early_stopping (patience 0) never stopped: four epochs (above); model_checkpoint with
	# save_best_only wrote every epoch, each a new lowest val_rmse.
	[ "$(ls "$TMP/mc" | tr '\n' ' ')" = "rmse-01.safetensors rmse-02.safetensors rmse-03.safetensors rmse-04.safetensors " ]
	# save_best's best.safetensors holds the lowest val_mae: the last epoch's.
	run safetensors_header "$TMP/run/best.safetensors"
	[ "$(jq -r '.__metadata__.monitor' <<<"$output")" = val_mae ]
	[ "$(jq -r '.__metadata__.epoch' <<<"$output")" = 4 ]
}
