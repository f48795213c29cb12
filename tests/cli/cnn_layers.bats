#!/usr/bin/env bats
# The modern CNN layers of issue 14 (zero_padding2d, cropping2d,
# up_sampling2d, ...): bad arguments fail with exit 2 and one line naming
# FILE:LINE:COL, summary prints Keras' shapes and parameter counts, and a
# model of them trains.

load helpers

setup() {
	common_setup
	cd "$TMP"
}

# model LAYER...: m.yaml, 16 blob features reshaped to a (4, 4, 1) image (the
# test set is the training set); line 4 holds the first LAYER; a flatten and a dense layer follow.
model() {
	{
		printf 'model:\n  layers:\n    - reshape: {target_shape: [4, 4, 1]}\n'
		printf '    - %s\n' "$@"
		printf '    - flatten\n    - dense: {units: 3, activation: softmax}\n'
		printf 'compile: {optimizer: adam, loss: sparse_categorical_crossentropy, metrics: [accuracy]}\n'
		printf 'data:\n  train: {format: synthetic, kind: blobs, samples: 300, classes: 3, features: 16, noise: 0.5, seed: 1}\n'
		printf '  test: {format: synthetic, kind: blobs, samples: 300, classes: 3, features: 16, noise: 0.5, seed: 1}\n'
		printf '  batch_size: 32\nfit: {epochs: 2, seed: 7}\n'
	} >m.yaml
}

# bad COL WORDS LAYER: `dtrain summary` of a model whose line 4 is LAYER
# exits 2 with one line "m.yaml:4:COL: error: ..." holding WORDS.
bad() {
	local col=$1 words=$2
	shift 2
	model "$@"
	run --separate-stderr "$DTRAIN" summary m.yaml
	not_crashed
	status_is 2
	[[ $stderr == "m.yaml:4:$col: error: "* ]] || { echo "got: $stderr" >&2; false; }
	[ "${#stderr_lines[@]}" -eq 1 ]
	stderr_has "$words"
}

@test "zero_padding2d: a list of three, a side of three, a negative size and an unknown key are named" {
	bad 33 "'padding' must be an integer, [height, width] or [[top, bottom], [left, right]]" \
		"zero_padding2d: {padding: [1, 2, 3]}"
	bad 34 "the first (height) entry must be an integer or a list of two integers [top, bottom]" \
		"zero_padding2d: {padding: [[1, 2, 3], 1]}"
	bad 37 "'padding' sizes must be in [0, 1048576], got -2" "zero_padding2d: {padding: [1, -2]}"
	bad 24 "unknown key 'pading' in 'zero_padding2d'; did you mean 'padding'?" "zero_padding2d: {pading: 1}"
}

@test "cropping2d: a cropping that leaves nothing names the input shape" {
	bad 30 "layer 'cropping2d': cropping 2+2 rows and 2+2 columns leaves nothing of the input (4, 4, 1)" \
		"cropping2d: {cropping: [2, 2]}"
	bad 30 "'cropping' sizes must be in [0, 1048576], got -1" "cropping2d: {cropping: -1}"
}

@test "up_sampling2d: an unknown interpolation and a zero size are named" {
	bad 38 "unknown interpolation 'bicubic' (expected one of: nearest, bilinear)" \
		"up_sampling2d: {interpolation: bicubic}"
	bad 29 "'size' must be in [1, 4096], got 0" "up_sampling2d: {size: 0}"
}

@test "depthwise_conv2d and separable_conv2d: missing and bad arguments are named" {
	bad 25 "missing required key 'kernel_size' in 'depthwise_conv2d'" "depthwise_conv2d: {depth_multiplier: 2}"
	bad 60 "'depth_multiplier' must be in [1, 65536], got 0" "depthwise_conv2d: {kernel_size: 3, depth_multiplier: 0}"
	bad 69 "strides > 1 cannot be combined with dilation_rate > 1 (as in Keras)" \
		"depthwise_conv2d: {kernel_size: 3, strides: 2, dilation_rate: 2}"
	bad 39 "the 5x5 kernel does not fit the input (4, 4, 1) with padding 'valid'" "depthwise_conv2d: {kernel_size: 5}"
	bad 25 "missing required key 'filters' in 'separable_conv2d'" "separable_conv2d: {kernel_size: 3}"
	bad 54 "unknown key 'kernel_initializer' in 'separable_conv2d'" \
		"separable_conv2d: {filters: 2, kernel_size: 3, kernel_initializer: zeros}"
}

@test "summary: depthwise and separable parameter counts are Keras' (kh*kw*C*m + C*m*filters + filters)" {
	{
		printf 'model:\n  layers:\n    - reshape: {target_shape: [4, 4, 3]}\n'
		printf '    - depthwise_conv2d: {kernel_size: 3, depth_multiplier: 2, padding: same}\n'
		printf '    - separable_conv2d: {filters: 5, kernel_size: 3, padding: same}\n'
		printf '    - separable_conv2d: {filters: 4, kernel_size: 2, depth_multiplier: 2, use_bias: false}\n'
		printf '    - depthwise_conv2d: {kernel_size: 2, strides: 2, padding: same, use_bias: false}\n'
		printf 'compile: {optimizer: adam, loss: mean_squared_error}\n'
		printf 'data:\n  train: {format: synthetic, kind: blobs, samples: 30, classes: 3, features: 48}\n'
	} >dw.yaml
	run "$DTRAIN" summary dw.yaml
	status_is 0
	# Keras 3: DepthwiseConv2D 3*3*3*2 + 6; SeparableConv2D 3*3*6 + 6*5 + 5 and 2*2*5*2 + 10*4; 2*2*4.
	[[ $output == *"depthwise_conv2d  "*"│ (None, 4, 4, 6)        │            60 │"* ]]
	[[ $output == *"separable_conv2d  "*"│ (None, 4, 4, 5)        │            89 │"* ]]
	[[ $output == *"separable_conv2d_1  "*"│ (None, 3, 3, 4)        │            80 │"* ]]
	[[ $output == *"depthwise_conv2d_1  "*"│ (None, 2, 2, 4)        │            16 │"* ]]
	[[ $output == *"Total params: 245 "* ]]
}

@test "spatial_dropout1d and spatial_dropout2d: a missing rate and the wrong input are named" {
	bad 7 "missing required key 'rate' in 'spatial_dropout2d'" "spatial_dropout2d"
	bad 33 "'rate' must be in [0, 1), got 1" "spatial_dropout2d: {rate: 1}"
	bad 26 "layer 'spatial_dropout1d' drops whole channels of a (steps, channels) input but gets (None, 4, 4, 1); use spatial_dropout2d for images" \
		"spatial_dropout1d: {rate: 0.2}"
}

@test "conv2d_transpose: output_padding not below strides, strides with dilation and an empty output are named" {
	bad 82 "layer 'conv2d_transpose': output_padding must be less than strides (as Keras); the height has output_padding 2 and stride 2" \
		"conv2d_transpose: {filters: 2, kernel_size: 3, strides: 2, output_padding: 2}"
	bad 25 "missing required key 'filters' in 'conv2d_transpose'" "conv2d_transpose: {kernel_size: 3}"
	bad 86 "strides > 1 cannot be combined with dilation_rate > 1 (as in Keras)" \
		"conv2d_transpose: {filters: 2, kernel_size: 3, strides: [2, 1], dilation_rate: 2}"
}

@test "summary: conv2d_transpose's output sizes and parameter count are Keras' (kh*kw*filters*C + filters)" {
	{
		printf 'model:\n  layers:\n    - reshape: {target_shape: [4, 4, 3]}\n'
		printf '    - conv2d_transpose: {filters: 4, kernel_size: 3}\n'
		printf '    - conv2d_transpose: {filters: 2, kernel_size: 3, strides: 2, padding: same}\n'
		printf '    - conv2d_transpose: {filters: 2, kernel_size: 3, strides: 2, output_padding: 1, use_bias: false}\n'
		printf '    - conv2d_transpose: {filters: 1, kernel_size: 1, strides: [1, 2]}\n'
		printf 'compile: {optimizer: adam, loss: mean_squared_error}\n'
		printf 'data:\n  train: {format: synthetic, kind: blobs, samples: 30, classes: 3, features: 48}\n'
	} >tr.yaml
	run "$DTRAIN" summary tr.yaml
	status_is 0
	# (4-1)+3 = 6; 6*2 = 12; (12-1)*2+3+1 = 26; valid 1x1 stride 2: (26-1)*2 + max(1, 2) = 52.
	[[ $output == *"conv2d_transpose  "*"│ (None, 6, 6, 4)        │           112 │"* ]]
	[[ $output == *"conv2d_transpose_1  "*"│ (None, 12, 12, 2)      │            74 │"* ]]
	[[ $output == *"conv2d_transpose_2  "*"│ (None, 26, 26, 2)      │            36 │"* ]]
	[[ $output == *"conv2d_transpose_3  "*"│ (None, 26, 52, 1)      │             3 │"* ]]
}

@test "the image layers refuse a flat input and say what to add" {
	{
		printf 'model:\n  layers:\n    - up_sampling2d\n    - dense: {units: 3}\n'
		printf 'compile: {optimizer: adam, loss: mean_squared_error}\n'
		printf 'data:\n  train: {format: synthetic, kind: blobs, samples: 30, classes: 3, features: 16}\n'
	} >flat.yaml
	run --separate-stderr "$DTRAIN" summary flat.yaml
	status_is 2
	[[ $stderr == "flat.yaml:3:7: error: layer 'up_sampling2d' needs an image input (height, width, channels) but gets (None, 16)"* ]] ||
		{ echo "got: $stderr" >&2; false; }
	stderr_has "add '- reshape: {target_shape: [H, W, C]}' before it"
}

@test "summary: padding, upsampling and cropping shapes as Keras computes them" {
	model "zero_padding2d: {padding: [[1, 0], 2]}" "up_sampling2d: {size: [2, 1], interpolation: bilinear}" \
		"cropping2d: {cropping: 1}"
	run "$DTRAIN" summary m.yaml
	status_is 0
	[[ $output == *"zero_padding2d (ZeroPadding2D)  │ (None, 5, 8, 1)"*"│             0 │"* ]]
	[[ $output == *"up_sampling2d (UpSampling2D)    │ (None, 10, 8, 1)"* ]]
	[[ $output == *"cropping2d (Cropping2D)         │ (None, 8, 6, 1)"* ]]
	[[ $output == *"Total params: 147 "* ]]
}

@test "fit: a model of padding, upsampling and cropping trains and evaluates" {
	model "zero_padding2d: {padding: [[1, 0], 2]}" "up_sampling2d: {size: [2, 1], interpolation: bilinear}" \
		"cropping2d: {cropping: 1}" "up_sampling2d"
	run "$DTRAIN" fit -q m.yaml --set fit.epochs=15 --set checkpoint.dir=run
	status_is 0
	run --separate-stderr "$DTRAIN" evaluate m.yaml --set checkpoint.dir=run --json
	status_is 0
	python3 -c 'import json, sys; r = json.loads(sys.argv[1]); assert r["accuracy"] > 0.8, r' "$output"
}
