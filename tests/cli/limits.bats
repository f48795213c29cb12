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
