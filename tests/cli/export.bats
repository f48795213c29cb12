#!/usr/bin/env bats
# dtrain export: every example model of models/ after a short fit (one
# epoch of 2 steps), and the fixtures (tests/cli/models/export_*.yaml) that
# hold every layer type (export_seq.yaml the sequence layers), every activation, rescale and normalize: auto, and
# models that output logits (softmax, and one sigmoid output). ONNX's
# checker (Debian's python3-onnx) accepts each file; under onnxruntime
# (build/venv, make ref-venv) the outputs match dtrain predict's to 1e-5, a
# test that skips without it.

load helpers

# Debian's Python, where python3-onnx lives (PATH may name another).
ONNX_PY=/usr/bin/python3
# The data of models/seattle_weather_conv1d.yaml (Debian's python3-vega-datasets).
SEATTLE_CSV=/usr/lib/python3/dist-packages/vega_datasets/_data/seattle-weather.csv

# fit_short NAME MODEL.yaml [--set ...]: one epoch of 2 steps into $D/NAME, no validation or test pass.
fit_short() {
	local name=$1 model=$2
	shift 2
	"$DTRAIN" fit -q "$model" --set fit.epochs=1 --set fit.steps_per_epoch=2 --set data.validation=null \
		--set data.test=null --set checkpoint.dir="$D/$name" "$@" >"$D/$name.log" 2>&1
}

setup_file() {
	local repo
	repo=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	D=$BATS_FILE_TMPDIR
	DTRAIN=${DTRAIN:-$repo/build/dtrain}
	export OMP_NUM_THREADS=1
	(cd "$D" && python3 "$repo/models/fashion_png.py" --out fp --limit 40 >/dev/null)
	for f in "$repo"/models/*.yaml; do
		m=$(basename "$f" .yaml)
		if [ "$m" = fashion_png ]; then
			fit_short "$m" "$f" --set data.train.directory="$D/fp/train"
		elif [ "$m" = seattle_weather_conv1d ]; then
			# Its windows come from python3-vega-datasets' CSV; without the package the model is left out.
			[ -e "$SEATTLE_CSV" ] || continue
			"$ONNX_PY" "$repo/models/seattle_weather.py" --out "$D/sw" >/dev/null &&
				fit_short "$m" "$f" --set data.train.x="$D/sw/train_x.npy" --set data.train.y="$D/sw/train_y.npy"
		else
			fit_short "$m" "$f"
		fi || echo "$m" >>"$D/failed"
	done
	fit_short every "$BATS_TEST_DIRNAME/models/export_every.yaml" || echo every >>"$D/failed"
	fit_short binary "$BATS_TEST_DIRNAME/models/export_binary.yaml" || echo binary >>"$D/failed"
	fit_short cnn "$BATS_TEST_DIRNAME/models/export_cnn.yaml" || echo cnn >>"$D/failed"
	fit_short seq "$BATS_TEST_DIRNAME/models/export_seq.yaml" || echo seq >>"$D/failed"
}

setup() {
	common_setup
	D=$BATS_FILE_TMPDIR
	export OMP_NUM_THREADS=1
	[ ! -e "$D/failed" ] || { cat "$D"/*.log >&2; echo "training failed: $(cat "$D/failed")" >&2; return 1; }
}

# The runs to export: every example model (the Seattle one only with its data package), then the fixtures.
runs() {
	for f in "$REPO"/models/*.yaml; do
		[ "$(basename "$f")" != seattle_weather_conv1d.yaml ] || [ -e "$SEATTLE_CSV" ] || continue
		basename "$f" .yaml
	done
	echo every
	echo binary
	echo cnn
	echo seq
}

@test "export: every example model and the fixtures pass ONNX's checker (python3-onnx), opset 13" {
	for m in $(runs); do
		run --separate-stderr "$DTRAIN" export "$D/$m" -o "$TMP/$m.onnx"
		status_is 0
		stderr_has "wrote '$TMP/$m.onnx' (ONNX opset 13)"
		run "$ONNX_PY" "$REPO/tests/tools/onnx_compare.py" check "$TMP/$m.onnx"
		status_is 0
		[[ $output == "opset 13 "* ]] || { echo "$m: $output"; false; }
	done
	# The fixture holds every kind of node the layers emit.
	run "$ONNX_PY" "$REPO/tests/tools/onnx_compare.py" check "$TMP/every.onnx"
	for op in Reshape Conv Transpose Erf Sigmoid AveragePool MaxPool LeakyRelu Elu Softplus ReduceMean \
		MatMul Tanh Softmax Sub Div; do
		[[ " $output " == *" $op "* ]] || { echo "no $op: $output"; false; }
	done
	# The sequence layers' fixture: 1-D Conv, MaxPool, AveragePool between Transposes, ReduceMax, ReduceMean.
	run "$ONNX_PY" "$REPO/tests/tools/onnx_compare.py" check "$TMP/seq.onnx"
	for op in Conv Transpose AveragePool MaxPool ReduceMax ReduceMean Relu Tanh; do
		[[ " $output " == *" $op "* ]] || { echo "no $op: $output"; false; }
	done
}

@test "export: the modern CNN layers' nodes (export_cnn.yaml): Pad, Slice, Resize, grouped Conv, ConvTranspose" {
	"$DTRAIN" export -q "$D/cnn" -o "$TMP/cnn.onnx"
	run "$ONNX_PY" "$REPO/tests/tools/onnx_compare.py" check "$TMP/cnn.onnx"
	status_is 0
	for op in Pad Slice Resize Conv ConvTranspose; do
		[[ " $output " == *" $op "* ]] || { echo "no $op: $output"; false; }
	done
}

@test "export: the preprocessing comes first, a model of logits ends in softmax or sigmoid" {
	"$DTRAIN" export -q "$D/every" -o "$TMP/every.onnx"
	"$DTRAIN" export -q "$D/binary" -o "$TMP/binary.onnx"
	run "$ONNX_PY" -c '
import sys, onnx
for path in sys.argv[1:]:
    g = onnx.load(path).graph
    print(" ".join(n.op_type for n in g.node[:3]), "...", " ".join(n.op_type for n in g.node[-2:]))
' "$TMP/every.onnx" "$TMP/binary.onnx"
	status_is 0
	[ "${lines[0]}" = "Mul Sub Div ... Softmax Identity" ]
	[ "${lines[1]}" = "Reshape Reshape MatMul ... Sigmoid Identity" ]
}

@test "export: onnxruntime's outputs match dtrain predict's to 1e-5 (build/venv)" {
	local py=$REPO/build/venv/bin/python scale
	[ -x "$py" ] && "$py" -c 'import onnxruntime' 2>/dev/null ||
		skip "no onnxruntime package in build/venv (make ref-venv): the numeric comparison is not run"
	for m in $(runs); do
		"$DTRAIN" export -q "$D/$m" -o "$TMP/$m.onnx"
		case $m in fashion*) scale=255 ;; seq_pattern) scale=tokens:20 ;; *) scale=2 ;; esac
		"$py" "$REPO/tests/tools/onnx_compare.py" input "$TMP/$m.onnx" 64 "$scale" "$TMP/$m.npy"
		# --all: every class's probability; a regression model refuses it (status 2) and prints its values.
		run "$DTRAIN" predict -q "$D/$m" "$TMP/$m.npy" --format npy --all --header
		[ "$status" -ne 2 ] || run "$DTRAIN" predict -q "$D/$m" "$TMP/$m.npy" --format npy --header
		status_is 0
		printf '%s\n' "$output" >"$TMP/$m.csv"
		run "$py" "$REPO/tests/tools/onnx_compare.py" compare "$TMP/$m.onnx" "$TMP/$m.npy" "$TMP/$m.csv" 1e-5
		echo "# $m: $output" >&3
		status_is 0
	done
}

@test "export: a bad checkpoint path is named, exit 1 or 2, nothing written" {
	run --separate-stderr "$DTRAIN" export "$TMP/missing.safetensors" -o "$TMP/m.onnx"
	[ "$status" -ne 0 ]
	not_crashed
	stderr_has "$TMP/missing.safetensors"
	[ ! -e "$TMP/m.onnx" ]
	printf 'not a checkpoint' >"$TMP/bad.safetensors"
	run --separate-stderr "$DTRAIN" export "$MODELS/export_binary.yaml" --checkpoint "$TMP/bad.safetensors" -o "$TMP/m.onnx"
	[ "$status" -ne 0 ]
	not_crashed
	[ ! -e "$TMP/m.onnx" ]
}

@test "export: -o to an unwritable place names it and fails; -o is required" {
	run --separate-stderr "$DTRAIN" export "$D/binary" -o "$TMP/no/such/dir/m.onnx"
	status_is 1
	stderr_has "cannot write '$TMP/no/such/dir/m.onnx'" "No such file or directory"
	run --separate-stderr "$DTRAIN" export "$D/binary"
	status_is 2
	stderr_has "needs -o FILE"
}

@test "export of a model file takes the checkpoint's input shape: the training data need not be there" {
	cd "$TMP"
	printf 'a,b,label\n' >train.csv
	for i in $(seq 40); do echo "$((i % 2)),$((i % 3)),$((i % 2))" >>train.csv; done
	cat >m.yaml <<-YAML
		model:
		  layers: [{dense: {units: 2, activation: softmax}}]
		compile: {optimizer: adam, loss: sparse_categorical_crossentropy}
		data:
		  train: {format: csv, path: train.csv, label: label}
		  batch_size: 8
		fit: {epochs: 1}
		checkpoint: {dir: run}
	YAML
	"$DTRAIN" fit -q m.yaml
	"$DTRAIN" export m.yaml -o with.onnx -q
	mv train.csv gone.csv
	run --separate-stderr "$DTRAIN" export m.yaml -o without.onnx -q
	status_is 0
	[ -z "$stderr" ]
	cmp with.onnx without.onnx
}
