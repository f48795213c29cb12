#!/usr/bin/env bats
# dtrain summary against Keras 3 itself: every layer type's output shape and
# parameter count, and the total, as Keras computes them for the same list
# (tests/tools/keras_summary.py). Needs tensorflow-cpu in build/venv
# (make keras-venv); skips, saying so, without it. Layer names are not
# compared: Keras numbers them across a Bidirectional's inner layer too.

load helpers

setup() {
	common_setup
	PY=$REPO/build/venv/bin/python
	[ -x "$PY" ] && "$PY" -c 'import keras, yaml' 2>/dev/null ||
		skip "no keras in build/venv (make keras-venv)"
}

# dtrain_rows MODEL: "shape|params" per layer, then "total|N", from dtrain summary.
dtrain_rows() {
	"$DTRAIN" summary "$1" | sed -n 's/^│ \([a-z][^ ]*\)[^│]*│ *\(([^│]*)\) *│ *\([0-9,]*\) *│$/\2|\3/p; s/^ Total params: \([0-9,]*\) .*/total|\1/p' |
		awk -F'|' '{ gsub(",", "", $2); print $1 "|" $2 }'
}


compare() { # MODEL
	local d k
	d=$(dtrain_rows "$1")
	k=$("$PY" "$REPO/tests/tools/keras_summary.py" "$1" 2>/dev/null | sed 's/^[^|]*|//')
	[ -n "$d" ] && [ -n "$k" ]
	# Keras' total line is "total|N": its first field went with the name.
	k=$(sed 's/^\([0-9]*\)$/total|\1/' <<<"$k")
	if [ "$d" != "$k" ]; then
		diff <(echo "$d") <(echo "$k") || true
		false
	fi
	[ "$(wc -l <<<"$d")" -ge 10 ]
}

@test "keras: the sequence layers (embedding, conv1d, 1-D pools, recurrent, bidirectional, layer_normalization) as Keras counts them" {
	compare "$BATS_TEST_DIRNAME/models/keras_seq.yaml"
}

@test "keras: the image layers (padding, cropping, upsampling, transposed, depthwise and separable convolutions, global max pooling) as Keras counts them" {
	compare "$BATS_TEST_DIRNAME/models/keras_img.yaml"
}
