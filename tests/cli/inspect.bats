#!/usr/bin/env bats
# dtrain inspect: one training step on the first batch of epoch 1, every
# layer's output statistics, every parameter's norms, the loss beside a
# uniform guess's, warnings (dead ReLUs, non-finite values, vanishing
# gradients, an input not normalized), --step, --checkpoint, --json, --dump,
# and the per-replica tables under mirrored and under mpirun.

load helpers

setup() {
	common_setup
	BLOBS=$MODELS/blobs.yaml
	export OMP_NUM_THREADS=1
	export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$BATS_TEST_DIRNAME/lsan-mpi.supp:fast_unwind_on_malloc=0}
}

need_fashion() {
	[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] ||
		skip "Fashion-MNIST is not installed (Debian: dataset-fashion-mnist)"
}

# idx_model: $TMP/m.yaml, a dense relu layer over an IDX set of 8 images of 4x4
# (pixels 0..255), labels 0..2; extra YAML lines for `data:` come as $1.
idx_model() {
	idx_images 8 4 4 >"$TMP/images.idx"
	idx_labels 8 >"$TMP/labels.idx"
	cat >"$TMP/m.yaml" <<EOF
model:
  name: tiny
  layers:
    - flatten
    - dense: {units: 8, activation: relu, kernel_initializer: ones}
    - dense: {units: 3, activation: softmax}
compile:
  optimizer: adam
  loss: sparse_categorical_crossentropy
data:
  train: {format: idx, images: images.idx, labels: labels.idx}
  batch_size: 8
  $1
EOF
}

# json_of ARGS...: `dtrain inspect ARGS --json` into $output (stdout only), status 0.
json_of() {
	run --separate-stderr "$DTRAIN" inspect --json "$@"
	status_is 0
}

@test "every example model in models/ runs: a row per layer, a row per trainable parameter" {
	need_fashion
	local m
	for m in fashion_mlp fashion_cnn fashion_cnn_bn fruit_csv diabetes_mlp; do
		json_of "$REPO/models/$m.yaml"
		layers=$("$DTRAIN" summary "$REPO/models/$m.yaml" | grep -cE '^│ [a-z]')
		[ "$(jq '.replicas[0].layers | length' <<<"$output")" -eq "$layers" ] || { echo "$m: layers"; false; }
		[ "$(jq '[.replicas[0].params[] | select(.grad_norm > 0)] | length' <<<"$output")" -ge 2 ] ||
			{ echo "$m: no gradients"; false; }
	done
	# fashion_png on a small PNG copy.
	(cd "$TMP" && python3 "$REPO/models/fashion_png.py" --out fp --limit 150 >/dev/null)
	run --separate-stderr "$DTRAIN" inspect "$REPO/models/fashion_png.yaml" --set data.train.directory="$TMP/fp/train" \
		--set data.validation.directory="$TMP/fp/test" --set data.test.directory="$TMP/fp/test"
	status_is 0
	[[ $output == *"dense_2 "* && $output == *"dense_2/kernel"* ]]
}

@test "the table: shapes, statistics, the loss beside ln(classes), no warnings on a sound model" {
	run --separate-stderr "$DTRAIN" inspect "$BLOBS"
	status_is 0
	[[ $output == *"the first batch of epoch 1 (32 samples)"* ]]
	[[ $output == *"a uniform guess over 3 classes: ln 3 = 1.099"* ]]
	grep -E '^input +\(32, 2\) ' <<<"$output"
	grep -E '^dense +\(32, 16\) ' <<<"$output"
	grep -E '^dense_1/kernel +\(16, 3\) ' <<<"$output"
	[[ $output == *"no warnings"* ]]
	# Regression: no uniform guess.
	json_of "$REPO/models/diabetes_mlp.yaml"
	[ "$(jq -c '[.classes, .uniform_loss]' <<<"$output")" = "[0,null]" ]
}

@test "the batch is the one fit trains on first: the loss of fit's first step" {
	json_of "$BLOBS" --set 'model.layers=[{dense: {units: 16, activation: relu}}, {dropout: {rate: 0.3}}, {dense: {units: 3, activation: softmax}}]'
	mine=$(jq '.loss * 1e6 | round' <<<"$output")
	run --separate-stderr "$DTRAIN" fit "$BLOBS" --json --set fit.epochs=1 --set fit.steps_per_epoch=1 \
		--set checkpoint.enabled=false \
		--set 'model.layers=[{dense: {units: 16, activation: relu}}, {dropout: {rate: 0.3}}, {dense: {units: 3, activation: softmax}}]'
	status_is 0
	fit=$(events epoch | jq '.loss * 1e6 | round')
	[ "$mine" = "$fit" ] || { echo "inspect $mine, fit $fit"; false; }
	# Another seed orders the data otherwise: another batch, another loss.
	json_of "$BLOBS" --set fit.seed=8
	[ "$(jq '.loss * 1e6 | round' <<<"$output")" != "$mine" ]
}

@test "a model built with dead ReLUs: its layer is all zeros and the warning names it" {
	# Inputs in [-1, 0] and a kernel of ones: every pre-activation <= 0.
	idx_model "rescale: -1/255"
	json_of "$TMP/m.yaml"
	[ "$(jq '.replicas[0].layers[1].zeros' <<<"$output")" = 1 ]
	[ "$(jq '.replicas[0].layers[1].name' <<<"$output")" = '"dense"' ]
	jq -e '.warnings | map(select(test("every output of layer .dense. \\(dense\\) is zero.*dead"))) | length == 1' <<<"$output"
	# With inputs in [0, 1] they live.
	idx_model "rescale: 1/255"
	json_of "$TMP/m.yaml"
	jq -e '.replicas[0].layers[1].zeros < 1 and (.warnings | map(select(test("zero"))) | length == 0)' <<<"$output"
}

@test "a model that produces NaN: the first layer with non-finite values is named, the loss is nan" {
	printf 'a,b,label\n3e38,3e38,0\n1,2,1\n3e38,1,0\n2,2,1\n' >"$TMP/big.csv"
	cat >"$TMP/nan.yaml" <<EOF
model:
  layers:
    - dense: {units: 4, activation: relu, kernel_initializer: ones}
    - dense: {units: 4, activation: relu}
    - dense: {units: 2, activation: softmax}
compile:
  optimizer: adam
  loss: sparse_categorical_crossentropy
data:
  train: {format: csv, path: big.csv, header: true, label: label}
  batch_size: 4
EOF
	run --separate-stderr "$DTRAIN" inspect "$TMP/nan.yaml"
	status_is 0
	[[ $output == *"loss: nan"* ]]
	[[ $output == *"layer 'dense' (dense) produced the first non-finite values: 4 of its 16 outputs"* ]]
	[[ $output == *"the loss is not finite"* ]]
	[[ $output == *"the gradients of 'dense/kernel'"*"hold non-finite values"* ]]
	[[ $output != *"layer 'dense_1' (dense) produced"* ]]
	json_of "$TMP/nan.yaml"
	jq -e '.loss == null and .replicas[0].input.nonfinite == 0 and .replicas[0].layers[0].nonfinite == 4' <<<"$output"
}

@test "warnings: an input not normalized, vanishing gradients behind a zero kernel" {
	idx_model ""
	run --separate-stderr "$DTRAIN" inspect "$TMP/m.yaml"
	status_is 0
	[[ $output == *"the input is not normalized: mean 1"* ]]
	# token indices (an embedding first) are not data to normalize: rescale and normalize are refused for them
	run --separate-stderr "$DTRAIN" inspect "$REPO/models/seq_pattern.yaml"
	status_is 0
	[[ $output != *"normalized"* ]]
	run --separate-stderr "$DTRAIN" inspect "$BLOBS" --set 'model.layers=[{dense: {units: 16, activation: relu}},
		{dense: {units: 16, activation: relu, kernel_initializer: zeros}}, {dense: {units: 3, activation: softmax}}]'
	status_is 0
	[[ $output == *"vanishing gradients: the gradient norm falls from "*" at layer 'dense_2' to 0 at 'dense_1'"* ]]
}

@test "--step: update/weight ratios, one identical replica, a warning for too large a step" {
	json_of "$BLOBS" --step
	jq -e '.stepped and .replicas_identical' <<<"$output"
	jq -e '.replicas[0].params[] | select(.name == "dense/kernel") | .update_ratio > 1e-4 and .update_ratio < 1e-1' <<<"$output"
	jq -e '.replicas[0].params[] | select(.name == "dense/bias") | .update_ratio == null' <<<"$output"
	json_of "$BLOBS"
	jq -e '(.stepped | not) and ([.replicas[0].params[].update_ratio] | all(. == null))' <<<"$output"
	run --separate-stderr "$DTRAIN" inspect "$BLOBS" --step --set 'compile.optimizer={sgd: {learning_rate: 100}}'
	status_is 0
	[[ $output == *"after one sgd step (learning rate 100)"$'\n'* ]]
	[[ $output == *"the step changed 'dense/kernel' by "*" of its norm (about 1e-3 is usual): the learning rate may be too high"* ]]
}

@test "--checkpoint starts from trained weights: a lower loss; a bad file fails" {
	"$DTRAIN" fit "$BLOBS" -q --set fit.epochs=5 --set checkpoint.dir="$TMP/ck"
	json_of "$BLOBS"
	fresh=$(jq .loss <<<"$output")
	json_of "$BLOBS" --checkpoint "$TMP/ck/latest.safetensors"
	trained=$(jq .loss <<<"$output")
	awk -v a="$trained" -v b="$fresh" 'BEGIN { exit !(a < b * 0.8) }' || { echo "trained $trained, fresh $fresh"; false; }
	run --separate-stderr "$DTRAIN" inspect "$BLOBS" --checkpoint "$TMP/nothing.safetensors"
	status_is 1
	stderr_has nothing.safetensors
	run --separate-stderr "$DTRAIN" inspect "$BLOBS" --set 'model.layers=[{dense: {units: 8}}, {dense: {units: 3, activation: softmax}}]' \
		--checkpoint "$TMP/ck/latest.safetensors"
	status_is 1
}

@test "--json: one object with the loss, the replicas, the layers and the warnings" {
	json_of "$BLOBS"
	[ "$(wc -l <<<"$output")" -eq 1 ]
	jq -e '.model == "blobs" and .strategy == "one_device" and .epoch == 1 and .samples == 32 and .classes == 3' <<<"$output"
	jq -e '(.uniform_loss - 1.0986 | fabs) < 1e-4 and (.loss > 0) and (.warnings == [])' <<<"$output"
	jq -e '.replicas | length == 1 and .[0].rows == [0, 32] and .[0].device == "cpu:0"' <<<"$output"
	jq -e '.replicas[0].layers[0] | .name == "dense" and .type == "dense" and .shape == [32, 16] and .min == 0' <<<"$output"
	jq -e '.replicas[0].input | .shape == [32, 2] and .std > 0 and .nonfinite == 0' <<<"$output"
	jq -e '[.replicas[0].params[].name] == ["dense/kernel", "dense/bias", "dense_1/kernel", "dense_1/bias"]' <<<"$output"
}

@test "--dump LAYER -o FILE.npy: the layer's outputs, the shape and statistics of the table" {
	/usr/bin/python3 -c 'import numpy' 2>/dev/null || skip "no numpy (python3-numpy)"
	json_of "$BLOBS" --dump dense -o "$TMP/dense.npy"
	mean=$(jq '.replicas[0].layers[0].mean' <<<"$output")
	zeros=$(jq '.replicas[0].layers[0].zeros' <<<"$output")
	/usr/bin/python3 - "$TMP/dense.npy" "$mean" "$zeros" <<'EOF'
import sys, numpy as np
a = np.load(sys.argv[1])
assert a.shape == (32, 16) and a.dtype == np.float32, (a.shape, a.dtype)
assert abs(a.mean() - float(sys.argv[2])) < 1e-5, (a.mean(), sys.argv[2])
assert abs((a == 0).mean() - float(sys.argv[3])) < 1e-9
EOF
	json_of "$BLOBS" --dump input -o "$TMP/input.npy"
	std=$(jq '.replicas[0].input.std' <<<"$output")
	/usr/bin/python3 -c "import numpy as np; a = np.load('$TMP/input.npy'); assert a.shape == (32, 2); assert abs(a.std() - $std) < 1e-5"
}

@test "bad arguments: an unknown layer for --dump, --dump without -o, -o without --dump" {
	run --separate-stderr "$DTRAIN" inspect "$BLOBS" --dump dense_9 -o "$TMP/x.npy"
	status_is 2
	stderr_has "no layer 'dense_9'" "input, dense, dense_1"
	[ ! -e "$TMP/x.npy" ]
	run --separate-stderr "$DTRAIN" inspect "$BLOBS" --dump dense
	status_is 2
	stderr_has "--dump needs -o"
	run --separate-stderr "$DTRAIN" inspect "$BLOBS" -o "$TMP/x.npy"
	status_is 2
	stderr_has "-o needs --dump"
	run --separate-stderr "$DTRAIN" inspect "$BLOBS" --steps
	status_is 2
	run --separate-stderr "$DTRAIN" inspect
	status_is 2
	stderr_has "missing the model file"
	run --separate-stderr "$DTRAIN" inspect "$BLOBS" --dump dense -o "$TMP/no/such/dir/x.npy"
	status_is 1
	stderr_has "cannot write"
}

@test "mirrored on 2 CPU replicas: a table per replica, the loss of one device, the same weights after --step" {
	json_of "$BLOBS"
	one=$(jq '.loss * 1e6 | round' <<<"$output")
	run --separate-stderr "$DTRAIN" inspect "$BLOBS" --step --set distribute.strategy=mirrored \
		--set 'distribute.devices=[cpu:0, cpu:1]'
	status_is 0
	[[ $output == *"replica 0 on cpu:0 (rank 0), rows 0-15 of the batch"* ]]
	[[ $output == *"replica 1 on cpu:1 (rank 0), rows 16-31 of the batch"* ]]
	[ "$(grep -c '^dense_1/kernel ' <<<"$output")" -eq 2 ]
	[[ $output == *"after one adam step (learning rate 0.001): every replica holds the same weights"* ]]
	json_of "$BLOBS" --step --set distribute.strategy=mirrored --set 'distribute.devices=[cpu:0, cpu:1]'
	[ "$(jq '.loss * 1e6 | round' <<<"$output")" = "$one" ]
	jq -e '.replicas_identical and (.replicas | length == 2) and .replicas[1].rows == [16, 32]' <<<"$output"
}

@test "mpirun -np 2: the chief prints both replicas' tables once, the same weights after --step" {
	need_mpi
	json_of "$BLOBS"
	one=$(jq '.loss * 1e6 | round' <<<"$output")
	run --separate-stderr mpi 2 "$DTRAIN" inspect "$BLOBS" --step
	status_is 0
	[ "$(grep -c '^model ' <<<"$output")" -eq 1 ]
	[[ $output == *"replica 0 on cpu:0 (rank 0), rows 0-15"* ]]
	[[ $output == *"replica 1 on cpu:0 (rank 1), rows 16-31"* ]]
	[[ $output == *"after one adam step (learning rate 0.001): every replica holds the same weights"* ]]
	run --separate-stderr mpi 2 "$DTRAIN" inspect "$BLOBS" --step --json
	status_is 0
	[ "$(wc -l <<<"$output")" -eq 1 ]
	[ "$(jq '.loss * 1e6 | round' <<<"$output")" = "$one" ]
	jq -e '.strategy == "multi_worker_mirrored" and .replicas_identical and .replicas[1].rank == 1' <<<"$output"
	jq -e '.replicas[1].params | map(.name) | index("dense_1/bias") == 3' <<<"$output"
}

@test "--dump of a convolution whose output the CPU keeps in channel blocks: NHWC, as the next layer's input" {
	/usr/bin/python3 -c 'import numpy' 2>/dev/null || skip "no numpy (python3-numpy)"
	idx_images 8 10 10 3 >"$TMP/images.idx"
	idx_labels 8 >"$TMP/labels.idx"
	cat >"$TMP/cnn.yaml" <<EOF
model:
  layers:
    - conv2d: {filters: 32, kernel_size: 3, activation: relu}
    - conv2d: {filters: 32, kernel_size: 3, activation: relu}
    - max_pooling2d: {pool_size: 2}
    - flatten
    - dense: {units: 3, activation: softmax}
compile: {optimizer: adam, loss: sparse_categorical_crossentropy}
data:
  train: {format: idx, images: $TMP/images.idx, labels: $TMP/labels.idx}
  batch_size: 8
  rescale: 1/255
checkpoint: {enabled: false}
EOF
	json_of "$TMP/cnn.yaml" --dump conv2d_1 -o "$TMP/conv.npy"
	json_of "$TMP/cnn.yaml" --dump max_pooling2d -o "$TMP/pool.npy"
	# conv2d_1's output, pooled 2x2 in numpy, is what the pooling layer computed from it
	/usr/bin/python3 - "$TMP/conv.npy" "$TMP/pool.npy" <<'EOF'
import sys, numpy as np
c, p = np.load(sys.argv[1]), np.load(sys.argv[2])
assert c.shape == (8, 6, 6, 32) and p.shape == (8, 3, 3, 32), (c.shape, p.shape)
assert (c > 0).mean() > 0.2, "the dump holds few positive values"
pooled = c.reshape(8, 3, 2, 3, 2, 32).max(axis=(2, 4))
assert np.array_equal(pooled, p), np.abs(pooled - p).max()
EOF
}
