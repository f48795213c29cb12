#!/usr/bin/env bats
# dtrain time: per-layer forward and backward times of a training step on
# random data, the totals, and the step's GFLOP/s against the measured peak.

load helpers

setup() {
	common_setup
	FASHION=$REPO/models/fashion_mlp.yaml
	# The MLP without its data files: input_shape is enough to time it.
	sed 's#/usr/share/datasets/fashion-mnist/#/nonexistent/fashion-mnist/#' "$FASHION" >"$TMP/fashion.yaml"
}

# Few steps: these tests check the report, not the speed.
quick() { "$DTRAIN" time --iterations 3 --warmup 1 "$@"; }

@test "fashion_mlp: one row per layer, in order, with times and rates" {
	run --separate-stderr quick "$FASHION"
	status_is 0
	[ -z "$stderr" ]
	[[ ${lines[0]} == 'Model: "fashion_mlp", batch 128, '*" training mode, mean of 3 steps after 1 warm-up" ]]
	[[ $output == *"Layer (type)"*"Forward ms"*"Backward ms"*"Forward GFLOP/s"*"Backward GFLOP/s"* ]]
	local rows
	rows=$(grep -E '^[a-z_0-9]+ \(' <<<"$output" | awk '{ print $1, $2 }')
	[ "$rows" = "$(printf '%s\n' 'flatten (Flatten)' 'dense (Dense)' 'dropout (Dropout)' 'dense_1 (Dense)' \
		'dropout_1 (Dropout)' 'dense_2 (Dense)')" ]
	# Dense rows: two times and two positive rates; flatten runs no backward and has no rate.
	[[ $(grep '^dense_1 (Dense)' <<<"$output") =~ ^dense_1\ \(Dense\)\ +[0-9]+\.[0-9]{3}\ +[0-9]+\.[0-9]{3}\ +[0-9]+\.[0-9]\ +[0-9]+\.[0-9]$ ]]
	[[ $(grep '^flatten (Flatten)' <<<"$output") =~ ^flatten\ \(Flatten\)\ +[0-9]+\.[0-9]{3}\ +-\ +-\ +-$ ]]
	[[ $(grep '^dropout (Dropout)' <<<"$output") =~ ^dropout\ \(Dropout\)\ +[0-9]+\.[0-9]{3}\ +[0-9]+\.[0-9]{3}\ +-\ +-$ ]]
}

@test "fashion_mlp: the totals, the work per sample, the peak and the fraction" {
	run --separate-stderr quick "$FASHION"
	status_is 0
	for word in Forward Loss Backward Update; do
		grep -qE "^ $word: +[0-9]+\.[0-9]{3} ms" <<<"$output" || { echo "no total '$word'"; false; }
	done
	grep -qE '^ Update: .* ms \(adam\)$' <<<"$output"
	grep -qE '^ Step: +[0-9]+\.[0-9]{3} ms, [1-9][0-9]* samples/s$' <<<"$output"
	# 784x512 (forward, and dW only: the first dense layer computes no dx) + 512x512 and 512x10 (x3).
	grep -qxF ' Work:     3.209 MFLOP per sample, 0.411 GFLOP per step' <<<"$output"
	grep -qE '^ Achieved: [0-9]+\.[0-9] GFLOP/s$' <<<"$output"
	grep -qE '^ Peak: +[0-9]+\.[0-9] GFLOP/s \(fp32 GEMM 2048x2048x2048, [0-9]+ threads?; [0-9]+\.[0-9] before the steps\)$' <<<"$output"
	grep -qE '^ Fraction: [0-9]+\.[0-9]% of peak$' <<<"$output"
	! grep -qE '^ (Achieved|Peak): +0\.0 ' <<<"$output"
}

@test "--json: one object with the layers and every total" {
	run --separate-stderr quick "$FASHION" --json
	status_is 0
	[ -z "$stderr" ]
	[ "${#lines[@]}" -eq 1 ]
	jq -e '
		.model == "fashion_mlp" and .batch == 128 and .global_batch == 128 and .replicas == 1 and
		.iterations == 3 and .warmup == 1 and (.threads | . >= 1) and
		([.layers[].name] == ["flatten", "dense", "dropout", "dense_1", "dropout_1", "dense_2"]) and
		([.layers[].type] == ["Flatten", "Dense", "Dropout", "Dense", "Dropout", "Dense"]) and
		(all(.layers[]; (.forward_ms | type == "number" and . >= 0) and (.backward_ms | . >= 0))) and
		(.forward_ms > 0 and .loss_ms >= 0 and .backward_ms > 0 and .update_ms > 0 and .step_ms > 0) and
		(.samples_per_sec > 0 and .gflops > 0 and .peak_gflops > 0 and .peak_gflops_before > 0 and .peak_gemm == 2048) and
		(.peak_fraction > 0) and .flops_per_sample == 3209216' <<<"$output" >/dev/null
}

@test "--json: GFLOP/s positive for layers with flops, null for the others" {
	run quick "$FASHION" --json
	status_is 0
	jq -e '
		(.layers | map(select(.type == "Dense")) | length == 3) and
		all(.layers[] | select(.type == "Dense"); .forward_gflops > 0 and .backward_gflops > 0 and .forward_flops > 0) and
		all(.layers[] | select(.type != "Dense"); .forward_gflops == null and .backward_gflops == null and
			.forward_flops == 0 and .backward_flops == 0)' <<<"$output" >/dev/null
}

@test "--json: the flops convention: backward = 2x forward, 1x for the first layer with parameters" {
	run quick "$FASHION" --json
	status_is 0
	jq -e '
		.layers as $l |
		$l[1].forward_flops == 802816 and $l[1].backward_flops == 802816 and
		$l[3].forward_flops == 524288 and $l[3].backward_flops == 1048576 and
		$l[5].forward_flops == 10240 and $l[5].backward_flops == 20480 and
		.flops_per_sample == ([$l[] | .forward_flops + .backward_flops] | add)' <<<"$output" >/dev/null
	# Only the layers from the first with parameters on run a backward pass.
	[ "$(jq -c '[.layers[].backward_run]' <<<"$output")" = '[false,true,true,true,true,true]' ]
	[ "$(jq '.layers[0].backward_ms' <<<"$output")" = 0 ]
}

@test "--json: the totals add up and the rates follow from them" {
	run quick "$FASHION" --json
	status_is 0
	jq -e '
		def close(a; b): ((a - b) | fabs) <= 1e-6 * ((a | fabs) + (b | fabs)) + 1e-9;
		close(.forward_ms; [.layers[].forward_ms] | add) and
		close(.backward_ms; [.layers[].backward_ms] | add) and
		(.forward_ms + .loss_ms + .backward_ms + .update_ms <= .step_ms) and
		close(.samples_per_sec; .batch * 1000 / .step_ms) and
		close(.gflops; .flops_per_sample * .batch / (.step_ms * 1e6)) and
		close(.peak_fraction; .gflops / .peak_gflops) and
		close(.layers[3].forward_gflops; .layers[3].forward_flops * .batch / (.layers[3].forward_ms * 1e6))' \
		<<<"$output" >/dev/null
}

@test "the table and --json report the same model and batch" {
	run quick "$FASHION" --set data.batch_size=32 --json
	status_is 0
	[ "$(jq -c '[.batch, .global_batch]' <<<"$output")" = '[32,32]' ]
	run quick "$FASHION" --set data.batch_size=32
	status_is 0
	[[ ${lines[0]} == 'Model: "fashion_mlp", batch 32, '* ]]
	grep -qxF ' Work:     3.209 MFLOP per sample, 0.103 GFLOP per step' <<<"$output"
}

@test "needs no data files when model.input_shape is given" {
	grep -q /nonexistent/ "$TMP/fashion.yaml"
	run --separate-stderr quick "$TMP/fashion.yaml" --json
	status_is 0
	[ -z "$stderr" ]
	jq -e '.batch == 128 and (.layers | length) == 6' <<<"$output" >/dev/null
}

@test "without input_shape it opens the training data for the shape, and says which file is missing" {
	sed '/input_shape/d' "$TMP/fashion.yaml" >"$TMP/no_shape.yaml"
	run --separate-stderr quick "$TMP/no_shape.yaml"
	not_crashed
	status_is 1
	[ -z "$output" ]
	stderr_has "cannot open '/nonexistent/fashion-mnist/train-images-idx3-ubyte.gz'"
}

@test "the synthetic blobs model: input shape and labels from the data" {
	run --separate-stderr quick "$MODELS/blobs.yaml" --json
	status_is 0
	# 2 -> 16 -> 3: the first layer 2x2x16 forward and as much backward, the second 2x16x3, x3.
	jq -e '.model == "blobs" and .batch == 32 and ([.layers[].name] == ["dense", "dense_1"]) and
		.flops_per_sample == (64 + 64 + 96 * 3)' <<<"$output" >/dev/null
}

@test "other losses get valid random labels: one-hot, binary, mean squared error" {
	run --separate-stderr quick "$MODELS/blobs.yaml" --set compile.loss=categorical_crossentropy \
		--set data.one_hot=true --json
	status_is 0
	jq -e '.step_ms > 0' <<<"$output" >/dev/null
	run --separate-stderr quick "$TMP/fashion.yaml" --set compile.loss=mean_squared_error --json
	status_is 0
	jq -e '.step_ms > 0' <<<"$output" >/dev/null
	run --separate-stderr quick "$TMP/fashion.yaml" --set compile.loss=binary_crossentropy \
		--set 'model.layers.5={dense: {units: 1, activation: sigmoid}}' --json
	status_is 0
	jq -e '.layers[5].forward_flops == 1024' <<<"$output" >/dev/null
}

@test "labels that do not suit the loss: the same config error as fit" {
	run --separate-stderr quick "$MODELS/blobs.yaml" --set compile.loss=mean_squared_error
	status_is 2
	[ -z "$output" ]
	stderr_has "--set:1:14: error: 'mean_squared_error' needs labels shaped like the output (None, 3)"
	local err=$stderr
	run --separate-stderr "$DTRAIN" fit "$MODELS/blobs.yaml" --set compile.loss=mean_squared_error
	status_is 2
	[ "$stderr" = "$err" ]
}

@test "--iterations and --warmup set the number of steps" {
	run "$DTRAIN" time "$MODELS/blobs.yaml" --iterations 7 --warmup 0 --json
	status_is 0
	jq -e '.iterations == 7 and .warmup == 0' <<<"$output" >/dev/null
	run "$DTRAIN" time "$MODELS/blobs.yaml" --iterations 20
	status_is 0
	[[ ${lines[0]} == *"mean of 20 steps after 5 warm-up" ]]
	# Without --iterations: 20 steps, or more until they take a second (blobs' steps take microseconds).
	run "$DTRAIN" time "$MODELS/blobs.yaml" --json
	status_is 0
	jq -e '.iterations > 20 and .iterations * .step_ms >= 1000 and .warmup == 5' <<<"$output" >/dev/null
}

@test "--iterations 0, negative or non-numeric counts: a usage error" {
	for args in "--iterations 0" "--iterations -3" "--iterations abc" "--iterations 2x" \
		"--warmup -1" "--warmup 1.5" "--iterations 1000001"; do
		# shellcheck disable=SC2086
		run --separate-stderr "$DTRAIN" time "$MODELS/blobs.yaml" $args
		status_is 2
		[ -z "$output" ]
		stderr_has "option '${args%% *}' needs a whole number" "got '${args#* }'" "usage: dtrain time"
	done
}

@test "usage errors: a missing value, an unknown option, no model file" {
	run --separate-stderr "$DTRAIN" time "$MODELS/blobs.yaml" --iterations
	status_is 2
	stderr_has "option '--iterations' needs a value"
	run --separate-stderr "$DTRAIN" time "$MODELS/blobs.yaml" --checkpoint x
	status_is 2
	stderr_has "unknown option '--checkpoint'"
	run --separate-stderr "$DTRAIN" time
	status_is 2
	stderr_has "missing the model file"
}

@test "a config error names its place: exit 2, nothing on stdout" {
	run --separate-stderr quick "$FASHION" --set model.layers.1.dense.units=abc
	status_is 2
	[ -z "$output" ]
	stderr_has "--set:1:28: error: 'units' must be an integer, got 'abc'"
	run --separate-stderr quick "$FASHION" --set 'model.layers.0={dropout: {rate: 0.1}}'
	status_is 2
	stderr_has "fashion_mlp.yaml:10:14: error: layer 'dense' needs a flat input"
}

@test "-h lists the options; 'dtrain help' lists time" {
	run --separate-stderr "$DTRAIN" time -h
	status_is 0
	[[ $output == "usage: dtrain time [options] MODEL.yaml"* ]]
	for o in --iterations --warmup --set --json; do
		[[ $output == *"$o"* ]] || { echo "-h lacks $o"; false; }
	done
	run "$DTRAIN" help
	status_is 0
	grep -qE '^  time +time each layer' <<<"$output"
}

@test "the thread count is the one OMP_NUM_THREADS asks for" {
	OMP_NUM_THREADS=1 run "$DTRAIN" time "$MODELS/blobs.yaml" --iterations 1 --json
	status_is 0
	[ "$(jq .threads <<<"$output")" = 1 ]
	OMP_NUM_THREADS=1 run "$DTRAIN" time "$MODELS/blobs.yaml" --iterations 1
	[[ $output == *"Peak: "*"(fp32 GEMM 2048x2048x2048, 1 thread; "* ]]
}

@test "with two threads a Threads line gives the cache line's round trip between them, before and after the steps" {
	OMP_NUM_THREADS=2 run --separate-stderr "$DTRAIN" time "$MODELS/blobs.yaml" --iterations 1 --json
	status_is 0
	jq -e '.threads == 2 and .thread_round_trip_ns > 0 and .thread_round_trip_ns_before > 0' <<<"$output" >/dev/null
	OMP_NUM_THREADS=2 run --separate-stderr "$DTRAIN" time "$MODELS/blobs.yaml" --iterations 1
	status_is 0
	[[ ${lines[-1]} =~ ^\ Threads:\ +a\ cache\ line\ from\ thread\ 0\ to\ thread\ 1\ and\ back\ in\ [1-9][0-9]*\ ns\ \([1-9][0-9]*\ before\ the\ steps\)$ ]]
	# One thread has nobody to hand a line to: 0 in the JSON, no line in the table.
	OMP_NUM_THREADS=1 run --separate-stderr "$DTRAIN" time "$MODELS/blobs.yaml" --iterations 1 --json
	jq -e '.thread_round_trip_ns == 0 and .thread_round_trip_ns_before == 0' <<<"$output" >/dev/null
	OMP_NUM_THREADS=1 run --separate-stderr "$DTRAIN" time "$MODELS/blobs.yaml" --iterations 1
	[[ $output != *Threads:* ]]
}

@test "a model file without data: model.input_shape is enough" {
	sed '/^data:/,/^[a-z]/{/^data:/d;/^  /d}' "$FASHION" >"$TMP/nodata.yaml"
	! grep -q '^data:' "$TMP/nodata.yaml"
	run --separate-stderr quick "$TMP/nodata.yaml"
	status_is 0
	[[ ${lines[0]} == 'Model: "fashion_mlp", batch 32, '* ]]
}
