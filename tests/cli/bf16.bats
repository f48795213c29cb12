#!/usr/bin/env bats
# compile.precision bf16 on the CPU: where oneDNN's ISA has bfloat16
# instructions (avx512_bf16, AMX) convolutions and matrix products run on
# bfloat16 copies with float32 accumulation; elsewhere, and for tf32, a config
# error at the key. ONEDNN_MAX_CPU_ISA=AVX2 caps the ISA, so the error path is
# tested on every machine; the training cases skip where bf16 does not run.

load helpers

setup() {
	common_setup
	BF16=$("$DTRAIN" devices --json | jq -r '.cpu_precisions | index("bf16") != null')
}

need_bf16() {
	[ "$BF16" = true ] || skip "this CPU has no bfloat16 instructions ($("$DTRAIN" devices --json | jq -r .isa))"
}

# model P: a file whose compile.precision (line 4, column 14) is P, on cpu:0.
model() {
	cat >"$TMP/m.yaml" <<-EOF
		model: {layers: [{dense: {units: 3, activation: softmax}}]}
		compile:
		  loss: sparse_categorical_crossentropy
		  precision: $1
		data:
		  train: {format: synthetic, kind: blobs, samples: 60, classes: 3}
		distribute: {strategy: one_device, device: cpu:0}
	EOF
}

@test "bf16 on a CPU without bfloat16 instructions: a config error at the key naming the ISA" {
	model bf16
	ONEDNN_MAX_CPU_ISA=AVX2 run --separate-stderr "$DTRAIN" fit "$TMP/m.yaml"
	status_is 2
	stderr_has "m.yaml:4:14: error: precision 'bf16' on the CPU needs bfloat16 instructions" "AVX2" "use fp32"
	ONEDNN_MAX_CPU_ISA=AVX2 run --separate-stderr "$DTRAIN" time "$TMP/m.yaml"
	status_is 2
	stderr_has "m.yaml:4:14:" "bfloat16 instructions"
}

@test "tf32 on the CPU: a config error at the key" {
	model tf32
	run --separate-stderr "$DTRAIN" fit "$TMP/m.yaml"
	status_is 2
	stderr_has "m.yaml:4:14: error: precision 'tf32' needs a GPU" "runs on the CPU"
}

@test "devices lists the precisions the CPU runs" {
	ONEDNN_MAX_CPU_ISA=AVX2 run "$DTRAIN" devices --json
	status_is 0
	[ "$(jq -c .cpu_precisions <<<"$output")" = '["fp32"]' ]
	ONEDNN_MAX_CPU_ISA=AVX2 run "$DTRAIN" devices
	[[ $output == *"Precision: fp32 on the CPU"* ]]
	run "$DTRAIN" devices
	if [ "$BF16" = true ]; then
		[[ $output == *"Precision: fp32, bf16 on the CPU"* ]]
	else
		[[ $output == *"Precision: fp32 on the CPU"* ]]
	fi
}

@test "bf16 trains a CNN and an MLP on the CPU: close to fp32, not the same weights" {
	need_bf16
	for m in tiny_cnn blobs; do
		for p in fp32 bf16; do
			run --separate-stderr "$DTRAIN" fit "$MODELS/$m.yaml" -q --json --set compile.precision=$p --set fit.epochs=3 \
				--set checkpoint.dir="$TMP/$m-$p"
			status_is 0
			jq -r 'select(.event == "epoch") | .loss' <<<"$output" >"$TMP/$m-$p.loss"
			jq -r 'select(.event == "test") | .accuracy' <<<"$output" >"$TMP/$m-$p.acc"
		done
		# The loss falls in both, and every epoch's loss agrees to 5%.
		paste "$TMP/$m-fp32.loss" "$TMP/$m-bf16.loss" | awk '
			NR == 1 { first32 = $1; first16 = $2 }
			{ d = $1 - $2; if (d < 0) d = -d; if (d > 0.05 * $1) bad = 1; last32 = $1; last16 = $2 }
			END { exit !(NR == 3 && !bad && last32 < first32 && last16 < first16) }' ||
			{ paste "$TMP/$m-fp32.loss" "$TMP/$m-bf16.loss"; false; }
		awk -v a="$(cat "$TMP/$m-fp32.acc")" '{ d = $1 - a; exit !(d < 0.03 && d > -0.03) }' "$TMP/$m-bf16.acc"
		# bfloat16 products round differently: the weights differ, a little (2% here
		# at worst; the optimizer's first moments, small numbers, 22%).
		run "$(ckpt_diff_bin)" "$TMP/$m-fp32/latest.safetensors" "$TMP/$m-bf16/latest.safetensors" 0
		[ "$status" -eq 1 ] || { echo "bf16 gave fp32's weights bit for bit"; false; }
		run "$(ckpt_diff_bin)" "$TMP/$m-fp32/latest.safetensors" "$TMP/$m-bf16/latest.safetensors" 0.5
		status_is 0
	done
}

@test "bf16: the same file and seed give the same weights twice" {
	need_bf16
	for run in a b; do
		run "$DTRAIN" fit "$MODELS/tiny_cnn.yaml" -q --set compile.precision=bf16 --set fit.epochs=2 \
			--set checkpoint.dir="$TMP/$run"
		status_is 0
	done
	run "$(ckpt_diff_bin)" "$TMP/a/latest.safetensors" "$TMP/b/latest.safetensors" 0
	status_is 0
}

@test "dtrain time under bf16 names the precision of its peak" {
	need_bf16
	run "$DTRAIN" time "$MODELS/tiny_cnn.yaml" --iterations 3 --warmup 1 --set compile.precision=bf16
	status_is 0
	[[ $output == *"(bf16 GEMM 2048x2048x2048"* ]]
	run --separate-stderr "$DTRAIN" time "$MODELS/tiny_cnn.yaml" --iterations 3 --warmup 1 --json --set compile.precision=bf16
	[ "$(jq -r .precision <<<"$output")" = bf16 ]
	run "$DTRAIN" time "$MODELS/tiny_cnn.yaml" --iterations 3 --warmup 1 --json
	[ "$(jq -r .precision <<<"$output")" = fp32 ]
}

# gflops P: the peak `dtrain time` measures in precision P (a 2048-cubed GEMM), one thread.
gflops() {
	OMP_NUM_THREADS=1 "$DTRAIN" time --json --iterations 1 --warmup 0 "$TMP/m.yaml" --set compile.precision="$1" |
		jq .peak_gflops
}

@test "bf16 where the CPU's bfloat16 products are slower than float32's: a warning at the key with both speeds" {
	need_bf16
	model bf16
	export OMP_NUM_THREADS=1
	run --separate-stderr "$DTRAIN" fit -q "$TMP/m.yaml"
	status_is 0
	# what this CPU does, measured apart: well below or well above fp32, the warning must say so or stay silent
	ratio=$(jq -n "$(gflops bf16) / $(gflops fp32)")
	if [[ $stderr == *"runs slower than fp32"* ]]; then
		stderr_has "m.yaml:4:14) runs slower than fp32 on this CPU" "set precision: fp32"
		lo=$(grep -o 'reach [0-9]* GFLOP/s' <<<"$stderr" | grep -o '[0-9]*')
		hi=$(grep -o "float32's [0-9]*" <<<"$stderr" | grep -o '[0-9]*$')
		((lo < hi))
		jq -e -n "$ratio < 1.25" >/dev/null
	else
		jq -e -n "$ratio > 0.8" >/dev/null
	fi
	model fp32
	run --separate-stderr "$DTRAIN" fit -q "$TMP/m.yaml"
	status_is 0
	[[ $stderr != *"runs slower"* ]]
}
