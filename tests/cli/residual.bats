#!/usr/bin/env bats
# Residual blocks (- residual: {layers, shortcut, activation}) and
# layer_normalization through every command: summary (one indented row per
# inner layer, Keras' functional counts), the config errors at their
# file:line:col, fit and --resume (byte-identical), inspect, time and export
# (ONNX Add nodes; the checker, and onnxruntime where build/venv has it).

load helpers

ONNX_PY=/usr/bin/python3

setup() {
	common_setup
	export OMP_NUM_THREADS=1
	RES=$MODELS/residual.yaml
}

# rows FILE: summary's rows, padding squeezed: "| name (Type) | shape | count |".
rows() { "$DTRAIN" summary "$1" | grep '^│' | sed 's/│/|/g; s/  */ /g'; }

@test "summary: a row per inner layer, indented under its block, the Add closing it; Keras' counts" {
	run --separate-stderr rows "$RES"
	status_is 0
	# conv2d_2's block sits inside residual_1's; the projections are named after their block.
	[ "$output" = "$(
		cat <<-'EOF'
			| reshape (Reshape) | (None, 4, 4, 3) | 0 |
			| conv2d (Conv2D) | (None, 4, 4, 4) | 108 |
			| batch_normalization | (None, 4, 4, 4) | 16 |
			| (BatchNormalization) | | |
			| conv2d_1 (Conv2D) | (None, 4, 4, 4) | 148 |
			| layer_normalization | (None, 4, 4, 4) | 8 |
			| (LayerNormalization) | | |
			| activation (Activation) | (None, 4, 4, 4) | 0 |
			| conv2d_2 (Conv2D) | (None, 4, 4, 4) | 20 |
			| residual (Add) | (None, 4, 4, 4) | 0 |
			| residual_1 (Add) | (None, 4, 4, 4) | 0 |
			| conv2d_3 (Conv2D) | (None, 2, 2, 6) | 222 |
			| batch_normalization_1 | (None, 2, 2, 6) | 24 |
			| (BatchNormalization) | | |
			| down_projection (Conv2D) | (None, 2, 2, 6) | 30 |
			| down (Add) | (None, 2, 2, 6) | 0 |
			| global_average_pooling2d | (None, 6) | 0 |
			| (GlobalAveragePooling2D) | | |
			| dense (Dense) | (None, 5) | 35 |
			| residual_3_projection (Dense) | (None, 5) | 35 |
			| residual_3 (Add) | (None, 5) | 0 |
			| dropout (Dropout) | (None, 5) | 0 |
			| dense_2 (Dense) | (None, 3) | 18 |
		EOF
	)" ]
	run "$DTRAIN" summary "$RES"
	[[ $output == *"│   conv2d_1 (Conv2D) "* && $output == *"│     conv2d_2 (Conv2D) "* ]]
	# Keras' functional model of the same graph (Conv2D 1x1 / Dense projections with bias, Add).
	[[ $output == *" Total params: 664 (2.59 KB)"* && $output == *" Non-trainable params: 20 (80.00 B)"* ]]
}

@test "summary of models/fashion_resnet.yaml: Keras' functional counts" {
	run "$DTRAIN" summary "$REPO/models/fashion_resnet.yaml"
	status_is 0
	# 288 + 128 + (18,432 + 256 + 36,864 + 256 + 2,112) + (73,728 + 512 + 147,456 + 512 + 8,320) + 1,290
	[[ $output == *" Total params: 290,154 (1.11 MB)"* ]]
	[[ $output == *" Non-trainable params: 832 (3.25 KB)"* ]]
	[[ $output == *"residual_projection (Conv2D)"*"(None, 14, 14, 64)"*"2,112"* ]]
	[[ $output == *"residual_1_projection"*"(None, 7, 7, 128)"*"8,320"* ]]
}

# bad BODY WHERE WORDS...: a model whose layers are BODY fails with exit 2 at WHERE, with WORDS.
bad() {
	local body=$1 where=$2
	shift 2
	printf 'model:\n  input_shape: %s\n  layers:\n%s\ncompile: {optimizer: adam, loss: mean_squared_error}\n' \
		"${SHAPE:-[8]}" "$body" >"$TMP/bad.yaml"
	run --separate-stderr "$DTRAIN" summary "$TMP/bad.yaml"
	status_is 2
	[ -z "$output" ]
	stderr_has "$TMP/bad.yaml:$where: error:" "$@"
}

@test "config errors name file:line:col: identity with two shapes, a projection that cannot be, bad keys" {
	SHAPE='[4, 4, 3]' bad '    - residual:
        layers: [{conv2d: {filters: 5, kernel_size: 3, padding: same}}]
        shortcut: identity' 6:19 "residual block 'residual'" "(None, 4, 4, 3) to (None, 4, 4, 5)" \
		"identity shortcut needs the same shape" "shortcut: projection"
	bad '    - residual: {layers: [{reshape: {target_shape: [2, 4]}}]}' 4:7 \
		"a projection maps images to images" "(None, 8) to (None, 2, 4)"
	# 5 rows: a 1x1 stride gives 5 or 3, never 4
	SHAPE='[5, 5, 2]' bad '    - residual: {layers: [{conv2d: {filters: 2, kernel_size: 2}}]}' \
		4:7 "no strided 1x1 convolution maps its input (None, 5, 5, 2) to its output (None, 4, 4, 2)"
	bad '    - residual: {layers: [], shortcut: identity}' 4:26 "'layers' is empty"
	bad '    - residual: {layer: [dense]}' 4:18 "unknown key 'layer' in 'residual'; did you mean 'layers'?"
	bad '    - residual' 4:7 "missing required key 'layers'"
	bad '    - residual: {layers: [{dense: {units: 8}}], shortcut: skip}' 4:59 "unknown shortcut 'skip'" \
		"auto, identity, projection"
	bad '    - residual: {layers: [{dense: {units: 8}}], activation: relux}' 4:61 "unknown activation 'relux'" "did you mean 'relu'?"
	bad '    - residual: {layers: [{dense: {unit: 8}}]}' 4:36 "unknown key 'unit' in 'dense'"
	bad '    - dense: {units: 4}
    - residual: {name: dense, layers: [{dense: {units: 4}}]}' 5:7 "layer name 'dense' is used twice"
	bad '    - residul: {layers: [dense]}' 4:7 "unknown layer type 'residul'; did you mean 'residual'?"
}

@test "layer_normalization: its arguments checked at file:line:col" {
	SHAPE='[3, 8]' bad '    - layer_normalization: {axis: 1}' 4:35 "only the last axis (axis: -1) is supported, got 1"
	bad '    - layer_normalization: {rms_scaling: true}' 4:29 "unknown key 'rms_scaling' in 'layer_normalization'"
	bad '    - layer_normalization: {epsilon: 0}' 4:38 "epsilon"
	bad '    - layer_normalization: {gamma_initializer: one}' 4:48 "one"
	# axis counts the batch as Keras does: the last axis of a (3, 8) sample is 2.
	printf 'model:\n  input_shape: [3, 8]\n  layers: [{layer_normalization: {axis: 2, center: false}}]\ncompile: {optimizer: adam, loss: mean_squared_error}\n' >"$TMP/ln.yaml"
	run "$DTRAIN" summary "$TMP/ln.yaml"
	status_is 0
	[[ $output == *"layer_normalization"*"(None, 3, 8)"*"8"* && $output == *"Total params: 8 "* ]]
}

@test "fit learns through the blocks; SIGKILL mid-run then --resume is byte-identical" {
	mkdir -p "$TMP/ref" "$TMP/crash"
	cp "$RES" "$TMP/ref/m.yaml"
	cp "$RES" "$TMP/crash/m.yaml"
	(cd "$TMP/ref" && "$DTRAIN" fit m.yaml -q --set fit.epochs=12 --json >out.json)
	# the blobs are separable: the residual network finds them
	jq -e 'select(.event == "epoch" and .epoch == 12) | .val_accuracy >= 0.9' "$TMP/ref/out.json"
	run bash -c "cd '$TMP/crash' && DTRAIN_TEST_CRASH_AT=step:23 '$DTRAIN' fit m.yaml -q --set fit.epochs=12"
	[ "$status" -eq 137 ]
	run --separate-stderr bash -c "cd '$TMP/crash' && '$DTRAIN' fit m.yaml --resume --set fit.epochs=12"
	status_is 0
	[[ $stderr == *"resuming from 'run/latest.safetensors'"* ]]
	cmp "$TMP/ref/run/latest.safetensors" "$TMP/crash/run/latest.safetensors"
	# every layer's parameters are in the checkpoint, by layer and Keras name
	run "$(ckpt_diff_bin)" "$TMP/ref/run/latest.safetensors" "$TMP/crash/run/latest.safetensors"
	status_is 0
	safetensors_header "$TMP/ref/run/latest.safetensors" | jq -e 'has("down_projection/kernel") and
		has("residual_3_projection/bias") and has("layer_normalization/gamma") and has("layer_normalization/beta")' >/dev/null
}

@test "--resume with a block changed is refused, naming the item and its block" {
	mkdir -p "$TMP/r"
	cp "$RES" "$TMP/r/m.yaml"
	(cd "$TMP/r" && "$DTRAIN" fit m.yaml -q --set fit.epochs=1)
	sed -i 's/filters: 6, kernel_size: 3, strides: 2/filters: 8, kernel_size: 3, strides: 2/' "$TMP/r/m.yaml"
	run --separate-stderr bash -c "cd '$TMP/r' && '$DTRAIN' fit m.yaml --resume"
	status_is 2
	# item 5 of the list is the block named down (not the fifth layer of the flattened model)
	stderr_has "layer 5 'down': layers" '"filters":"6"' '"filters":"8"'
}

@test "inspect: a row per layer with the blocks' adds and projections, gradients everywhere" {
	run --separate-stderr "$DTRAIN" inspect --json "$RES"
	status_is 0
	jq -e '[.replicas[0].layers[].name] == ["reshape", "conv2d", "batch_normalization", "conv2d_1",
		"layer_normalization", "activation", "conv2d_2", "residual", "residual_1", "conv2d_3",
		"batch_normalization_1", "down_projection", "down", "global_average_pooling2d", "dense",
		"residual_3_projection", "residual_3", "dropout", "dense_2"]' <<<"$output" >/dev/null
	# the first conv's kernel gets its gradient through both paths of the blocks
	jq -e '[.replicas[0].params[] | select(.grad_norm > 0)] | length == 21' <<<"$output" >/dev/null
}

@test "time: rows and flops for layer_normalization and the residual adds" {
	run --separate-stderr "$DTRAIN" time --iterations 2 --warmup 1 "$RES" --json
	status_is 0
	jq -e '(.layers | map(select(.type == "Add")) | length == 4) and
		all(.layers[] | select(.type == "Add" or .type == "LayerNormalization");
		    .forward_flops > 0 and .forward_ms >= 0 and .backward_ms >= 0) and
		(.layers[] | select(.name == "residual") | .forward_flops == 64 and .backward_flops == 128)' <<<"$output" >/dev/null
	run "$DTRAIN" time --iterations 2 --warmup 1 "$RES"
	status_is 0
	[[ $output == *"layer_normalization (LayerNormalization)"* && $output == *"down (Add)"* ]]
}

@test "export: each block an ONNX Add of the block's output and its (projected) input; checker passes" {
	(cd "$TMP" && "$DTRAIN" fit -q "$RES" --set fit.epochs=1 --set checkpoint.dir=run >/dev/null)
	run --separate-stderr "$DTRAIN" export "$TMP/run" -o "$TMP/r.onnx"
	status_is 0
	run "$ONNX_PY" "$REPO/tests/tools/onnx_compare.py" check "$TMP/r.onnx"
	status_is 0
	[[ $output == *"opset 13"*" ReduceMean "* ]]
	# down's Add reads the block's batch norm and the projection's Conv (transposed back to NHWC)
	"$ONNX_PY" -c '
import sys, onnx
g = onnx.load(sys.argv[1]).graph
made = {o: n for n in g.node for o in n.output}
adds = [n for n in g.node if n.op_type == "Add" and n.name.split("/")[0] in ("residual", "residual_1", "down", "residual_3")]
assert len(adds) == 4, [n.name for n in adds]
down = [n for n in adds if n.name.startswith("down/")][0]
src = sorted(made[i].name.split("/")[0] for i in down.input)
assert src == ["batch_normalization_1", "down_projection"], src
res = [n for n in adds if n.name.startswith("residual_1/")][0]
src = sorted(made[i].name.split("/")[0] for i in res.input)
assert src == ["batch_normalization", "residual"], src
' "$TMP/r.onnx"
	local py=$REPO/build/venv/bin/python
	[ -x "$py" ] && "$py" -c 'import onnx, onnxruntime' 2>/dev/null ||
		skip "no onnx and onnxruntime in build/venv (make ref-venv): the numeric comparison is not run"
	"$py" "$REPO/tests/tools/onnx_compare.py" input "$TMP/r.onnx" 32 2 "$TMP/r.npy"
	run "$DTRAIN" predict -q "$TMP/run" "$TMP/r.npy" --format npy --all --header
	status_is 0
	printf '%s\n' "$output" >"$TMP/r.csv"
	run "$py" "$REPO/tests/tools/onnx_compare.py" compare "$TMP/r.onnx" "$TMP/r.npy" "$TMP/r.csv" 1e-5
	status_is 0
}

@test "mirrored on 2 CPU replicas: the weights of one_device (layer normalization, no batch statistics)" {
	# batch normalization's statistics are per replica (as Keras' MirroredStrategy): swap it for
	# layer normalization, and drop the dropout, so both runs compute the same function
	sed -e 's/^    - batch_normalization$/    - layer_normalization: {name: ln_a}/' \
		-e 's/^          - batch_normalization$/          - layer_normalization: {name: ln_b}/' \
		-e '/dropout/d' "$RES" >"$TMP/m.yaml"
	(cd "$TMP" && "$DTRAIN" fit -q m.yaml --set fit.epochs=2 --set checkpoint.dir=one)
	(cd "$TMP" && "$DTRAIN" fit -q m.yaml --set fit.epochs=2 --set checkpoint.dir=mir \
		--set distribute.strategy=mirrored --set 'distribute.devices=[cpu:0, cpu:1]')
	run "$(ckpt_diff_bin)" "$TMP/one/latest.safetensors" "$TMP/mir/latest.safetensors"
	status_is 0
	[[ $output == *"ln_b/gamma"* && $output == *"down_projection/kernel"* ]]
}

@test "dtrain config: the blocks' defaults (shortcut: auto) and their inner layers' arguments; it builds the same model" {
	run --separate-stderr "$DTRAIN" config "$RES"
	status_is 0
	[[ $output == *"    - residual:"*"          - layer_normalization:"*"              epsilon: 0.001"* ]]
	[[ $output == *"        shortcut: auto"* ]]
	printf '%s\n' "$output" >"$TMP/resolved.yaml"
	[ "$(rows "$TMP/resolved.yaml")" = "$(rows "$RES")" ]
}
