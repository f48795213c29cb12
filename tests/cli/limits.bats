#!/usr/bin/env bats
# Configs at the edges of the documented ranges: a model too big for the
# memory, a window a backend cannot run, shapes whose sizes overflow 32 bits.
# Each is a configuration error (exit 2) at the layer's file:line:col that
# names the layer and the numbers, or it runs; never an abort or a crash. Memory
# that runs out while training is an error with exit status 1.

load helpers

setup() {
	common_setup
	cd "$TMP"
}

# model FILE INPUT_SHAPE LAYER...: a model file on 16 synthetic features (3
# classes) with the given model.input_shape and layers (one YAML item each).
model() {
	local file=$1 shape=$2
	shift 2
	{
		echo "model:"
		echo "  name: t"
		[ -z "$shape" ] || echo "  input_shape: $shape"
		echo "  layers:"
		for l in "$@"; do
			echo "    - $l"
		done
		echo "compile: {optimizer: adam, loss: sparse_categorical_crossentropy}"
		echo "data:"
		echo "  train: {format: synthetic, kind: blobs, samples: 64, classes: 3, features: 16, seed: 1}"
		echo "  batch_size: 32"
		echo "fit: {epochs: 1}"
		echo "checkpoint: {enabled: false}"
	} >"$file"
}

# fails_at FILE LINE WORDS... (after `run --separate-stderr`): exit 2, one
# line on stderr at FILE:LINE:COL that holds every word.
fails_at() {
	local file=$1 line=$2
	shift 2
	not_crashed
	status_is 2
	if [[ $stderr != "$file:$line:"[0-9]*": error: "* ]]; then
		echo "expected an error at $file:$line, got: $stderr" >&2
		return 1
	fi
	[ "${#stderr_lines[@]}" -eq 1 ] || {
		echo "expected one line on stderr: $stderr" >&2
		return 1
	}
	stderr_has "$@"
}

@test "global_average_pooling2d over a 300x300 image trains (its window holds 90,000 values)" {
	idx_images 64 300 300 >img.idx
	{
		printf '\000\000\010\001'
		be32 64
		for i in $(seq 64); do printf "\\00$((i % 3))"; done
	} >lab.idx
	cat >m.yaml <<-EOF
		model:
		  name: gap
		  layers:
		    - global_average_pooling2d
		    - dense: {units: 3, activation: softmax}
		compile: {optimizer: adam, loss: sparse_categorical_crossentropy}
		data:
		  train: {format: idx, images: img.idx, labels: lab.idx}
		  batch_size: 32
		  rescale: 1/255
		fit: {epochs: 1}
		checkpoint: {enabled: false}
	EOF
	run --separate-stderr "$DTRAIN" fit m.yaml --json
	not_crashed
	status_is 0
	jq -e 'select(.event == "epoch") | .loss > 0' <<<"$output"
	# and so does an average pooling window of the same size
	run --separate-stderr "$DTRAIN" fit -q m.yaml --set 'model.layers=[{average_pooling2d: {pool_size: 300}}, flatten, {dense: {units: 3, activation: softmax}}]'
	not_crashed
	status_is 0
}

@test "max pooling over more than 65,536 values: refused at pool_size, naming the layer" {
	model m.yaml "[300, 300, 1]" "max_pooling2d: {pool_size: 300}" "flatten" "dense: {units: 3}"
	run --separate-stderr "$DTRAIN" summary m.yaml
	fails_at m.yaml 5 "layer 'max_pooling2d'" "300x300 max pooling window holds 90000 positions" "65536"
	model m.yaml "[256, 256, 1]" "max_pooling2d: {pool_size: 256}" "flatten" "dense: {units: 3}"
	run --separate-stderr "$DTRAIN" summary m.yaml
	status_is 0
}

@test "dilation_rate: 65536: refused at the key, naming the layer" {
	model m.yaml "" "reshape: {target_shape: [4, 4, 1]}" \
		"conv2d: {filters: 2, kernel_size: 3, dilation_rate: 65536, padding: same}" "flatten" "dense: {units: 3}"
	run --separate-stderr "$DTRAIN" fit -q m.yaml
	fails_at m.yaml 5 "layer 'conv2d'" "a kernel of 3 dilated by 65536 spans 131073 positions"
	[[ $stderr == "m.yaml:5:59: "* ]] # the dilation_rate value
	# past 2^31 too, where the plans' int sizes wrapped
	model m.yaml "" "reshape: {target_shape: [4, 4, 1]}" \
		"conv2d: {filters: 2, kernel_size: [1, 40000], dilation_rate: 65536, padding: same}" "flatten" "dense: {units: 3}"
	run --separate-stderr "$DTRAIN" fit -q m.yaml
	fails_at m.yaml 5 "layer 'conv2d'" "spans 2621374465 positions"
}

@test "summary: shapes whose sizes overflow are refused, not wrapped or truncated" {
	model m.yaml "[2147483647, 2147483647, 2147483647]" "flatten" "dense: {units: 3}"
	run --separate-stderr "$DTRAIN" summary m.yaml
	fails_at m.yaml 3 "'input_shape'" "more than 9.2 x 10^18 values per sample" "2,147,483,647"
	[ -z "$output" ]
	# flatten used to cut (65537, 65536) to 65536 values
	model m.yaml "[65537, 65536]" "flatten" "dense: {units: 3}"
	run --separate-stderr "$DTRAIN" summary m.yaml
	fails_at m.yaml 3 "4,295,032,832 values per sample"
	# a layer's output past 2^31 - 1 values, and a model past 2^31 - 1 parameters
	model m.yaml "[16, 16, 16]" "conv2d: {filters: 16777216, kernel_size: 1}"
	run --separate-stderr "$DTRAIN" summary m.yaml
	fails_at m.yaml 5 "layer 'conv2d' maps input (None, 16, 16, 16) to (None, 16, 16, 16777216)" \
		"4,294,967,296 values per sample"
	model m.yaml "[784]" "dense: {units: 16777216}"
	run --separate-stderr "$DTRAIN" summary m.yaml
	fails_at m.yaml 5 "layer 'dense' brings the model's parameters to 13,153,337,344"
}

@test "time with an input of four 2^31 - 1 dimensions: exit 2, nothing allocated" {
	model m.yaml "[2147483647, 2147483647, 2147483647, 2147483647]" "flatten" "dense: {units: 3}"
	run --separate-stderr "$DTRAIN" time m.yaml --iterations 1 --warmup 0
	fails_at m.yaml 3 "'input_shape'" "values per sample"
}

@test "units: 16777216 past fit.max_memory: exit 2 naming the layer and the bytes" {
	model m.yaml "" "dense: {units: 16777216}" "dense: {units: 3, activation: softmax}"
	run --separate-stderr "$DTRAIN" fit -q m.yaml --set fit.max_memory=1G
	fails_at m.yaml 4 "layer 'dense' needs 8.25 GB (8,858,370,048 bytes) at batch 32" \
		"the model needs 9.00 GB (9,663,679,280 bytes) in all" "1.00 GB (1,073,741,824 bytes) of fit.max_memory (on cpu:0)"
	# time, evaluate and predict build the model the same way
	run --separate-stderr "$DTRAIN" time m.yaml --set fit.max_memory=1G
	fails_at m.yaml 4 "layer 'dense' needs" "of fit.max_memory"
	# (.npy input: a CSV input reads the checkpoint first, for its column names, as evaluate does)
	npy_python 'npy("x.npy", "<f4", "(1, 16)", bytes(64))'
	run --separate-stderr "$DTRAIN" predict m.yaml x.npy --set fit.max_memory=1G
	fails_at m.yaml 4 "layer 'dense' needs" "of fit.max_memory"
	# a budget that holds it passes the check (summary builds nothing)
	run --separate-stderr "$DTRAIN" summary m.yaml --set fit.max_memory=8G
	status_is 0
}

@test "by default the limit is the host's memory, before anything is allocated" {
	# 2^20 samples of 4x4x16777216 activations: petabytes, on any machine
	model m.yaml "" "reshape: {target_shape: [4, 4, 1]}" "conv2d: {filters: 16777216, kernel_size: 1}" \
		"global_average_pooling2d" "dense: {units: 3, activation: softmax}"
	run --separate-stderr "$DTRAIN" fit -q m.yaml --set data.batch_size=1048576
	fails_at m.yaml 5 "layer 'conv2d' needs" "at batch 1048576" "of the host's memory (set fit.max_memory"
}

@test "fit.max_memory: bytes with K, M, G or T; anything else is an error at the value" {
	model m.yaml "" "dense: {units: 3, activation: softmax}"
	for v in 1048576 512K 64M 8G 8GiB 1tb; do
		run --separate-stderr "$DTRAIN" fit -q m.yaml --set fit.max_memory=$v
		status_is 0
	done
	for v in 8X -1 0 1.5G G 99999999999T; do
		run --separate-stderr "$DTRAIN" fit -q m.yaml --set "fit.max_memory=$v"
		not_crashed
		status_is 2
		[[ $stderr == "--set:1:"*"fit.max_memory"* ]] || {
			echo "$v: $stderr" >&2
			return 1
		}
	done
}

@test "memory that runs out while the model is allocated: exit 1 with an error, not an abort" {
	# AddressSanitizer reserves terabytes of address space: no ulimit -v there.
	if ldd "$DTRAIN" 2>/dev/null | grep -q libasan; then
		skip "a sanitizer build cannot run under ulimit -v"
	fi
	# 4.5 GB of parameters and Adam's slots, past the budget check (fit.max_memory), under a 1 GB address space
	model m.yaml "" "dense: {units: 16777216}" "dense: {units: 3, activation: softmax}"
	run --separate-stderr bash -c "ulimit -v 1000000 && exec '$DTRAIN' fit -q m.yaml --set fit.max_memory=1T"
	not_crashed
	status_is 1
	stderr_has "dtrain: error: out of memory: cannot allocate" "bytes on cpu:0"
	[[ $stderr != *"internal error"* ]]
}
