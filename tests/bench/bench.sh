#!/usr/bin/env bash
# The Fashion-MNIST benchmarks: PyTorch and dtrain side by side, in one run,
# same model, batch and data, with 1 and with 2 threads. For each model it
# prints samples/s of each, the ratio at equal thread counts and the ratio of
# each one's best, the test accuracies and the peak RSS of a whole dtrain run
# next to PyTorch's.
#
#   tests/bench/bench.sh [EPOCHS]       (default 2; the best epoch counts)
#
# Models: the MLP of models/fashion_mlp.yaml (whole epochs), then, when
# models/fashion_cnn.yaml exists, Keras' MNIST CNN with epochs cut to
# CNN_STEPS batches (default 100; a whole CNN epoch takes minutes on a CPU):
# dtrain with --set fit.steps_per_epoch, PyTorch with --steps.
#
# Then the residual CNN of models/fashion_resnet.yaml (issue 14), epochs cut
# to RESNET_STEPS batches (default 50), without its random flips on either
# side (the same work: torch_mlp.py --model resnet does not augment) and with
# batch normalization's momentum at PyTorch's default on both sides, and
# `dtrain time`'s per-layer figures for its residual adds and for a
# layer_normalization in place of its first batch normalization.
# Then, when models/fashion_lstm.yaml exists, its LSTM (28 steps of 28 rows,
# LSTM 128, dense 10) against torch.nn.LSTM, epochs cut to LSTM_STEPS
# batches (default 100).
# Then, where the CPU runs bf16 (dtrain devices: cpu_precisions), the MLP and
# the CNN again under compile.precision: bf16 against PyTorch's CPU autocast
# in bfloat16, with dtrain's bf16/fp32 ratio (its fp32 run again right after
# each bf16 run: this kind of machine's speed drifts over minutes).
# Last, `dtrain time` of the MLP and the CNN, five runs at 1 and at 2 threads
# (alternating), each beside a short fit: the step's samples/s and its spread,
# the fraction of the GEMM peak, 2 threads against 1, and fit against the
# step (issue 16).
#
# PyTorch (Debian's python3-torch) runs on the system's libblas.so.3: `make
# bench` installs OpenBLAS (libopenblas0-pthread) so that the reference is not
# the slow netlib BLAS. The header of each table names OpenBLAS's kernel:
# on a CPU it does not recognize it falls back to Prescott (generic SSE3),
# and the bench then sets OPENBLAS_CORETYPE to SkylakeX or Haswell, from the
# CPU's flags, to make the reference fair (a value already set is kept).
# Keras 3 on TensorFlow (tests/bench/keras_fashion.py) joins the MLP and CNN
# tables when KERAS_PY (default build/venv/bin/python; `make keras-venv` makes
# it) imports keras; the other tables are PyTorch's only.
# Not part of `make check`: it takes a few minutes.
set -eu
cd "$(dirname "$0")/../.."
EPOCHS=${1:-2}
CNN_STEPS=${CNN_STEPS:-100}
LSTM_STEPS=${LSTM_STEPS:-100}
DTRAIN=${DTRAIN:-build/dtrain}
PY=/usr/bin/python3
KERAS_PY=${KERAS_PY:-build/venv/bin/python}
KERAS=0
[ -x "$KERAS_PY" ] && "$KERAS_PY" -c 'import keras' 2>/dev/null && KERAS=1
[ -x "$DTRAIN" ] || { echo "bench: build dtrain first (make)"; exit 1; }
[ -x /usr/bin/time ] || { echo "bench: needs /usr/bin/time (Debian package time)"; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rss_mb() { echo $(($(sed -n 's/^\s*Maximum resident set size (kbytes): //p' "$1") / 1024)); }
best() { if jq -en "$1 >= $2" >/dev/null; then echo 1; else echo 2; fi; }

# The machine, in the header: every figure below is this CPU's, with this ISA.
"$DTRAIN" devices | sed -n 's/^\(CPU\|oneDNN\|Precision\): */\1: /p'

# PyTorch's reference on OpenBLAS: on a CPU that OpenBLAS does not recognize (a hypervisor's
# "Intel(R) Xeon(R) Processor") it runs Prescott, its generic SSE3 kernel, several times slower
# than the CPU allows (one such Xeon with AVX-512: PyTorch's MLP at 5,317 samples/s, 13,607
# under SkylakeX). Unless OPENBLAS_CORETYPE is set, the bench then names the kernel of the ISA
# the CPU reports.
if [ -z "${OPENBLAS_CORETYPE:-}" ] &&
	$PY -c 'import sys, torch; sys.path.insert(0, "tests/bench"); import torch_mlp
print(torch_mlp.blas_description())' 2>/dev/null | grep -q 'kernel Prescott'; then
	flags=$(grep -m1 '^flags' /proc/cpuinfo)
	if [[ " $flags " == *" avx512f "* && " $flags " == *" avx512bw "* && " $flags " == *" avx512vl "* ]]; then
		export OPENBLAS_CORETYPE=SkylakeX
	elif [[ " $flags " == *" avx2 "* && " $flags " == *" fma "* ]]; then
		export OPENBLAS_CORETYPE=Haswell
	fi
	[ -n "${OPENBLAS_CORETYPE:-}" ] &&
		echo "PyTorch: OpenBLAS does not know this CPU and would run its Prescott kernel; the bench sets" \
			"OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE, the kernel of the ISA the CPU reports"
fi
echo

# bench MODEL YAML STEPS TITLE [PRECISION]: trains MODEL (mlp, cnn, resnet or lstm) with
# both frameworks, 1 and 2 threads, STEPS batches per epoch (0: whole epochs), in
# PRECISION (fp32, the default, or bf16: PyTorch under CPU autocast), and prints its
# table under TITLE. Returns 1 after printing why when PyTorch cannot run.
bench() {
	local model=$1 yaml=$2 steps=$3 title=$4 prec=${5:-fp32} t line tb db blas torch_acc dtrain_acc length rt
	local -A torch=() dtrain=() keras=() fp32=()
	local -a dset=() tsteps=()
	if [ "$steps" -gt 0 ]; then
		dset=(--set fit.steps_per_epoch="$steps")
		tsteps=(--steps "$steps")
		length="$EPOCHS epoch(s) of $steps steps"
	else
		length="$EPOCHS epoch(s)"
	fi
	for t in 1 2; do
		line=$(/usr/bin/time -v -o "$tmp/torch-$model$t.time" $PY tests/bench/torch_mlp.py --model "$model" \
			--json --threads "$t" --epochs "$EPOCHS" --precision "$prec" "${tsteps[@]}" | tail -1)
		case "$line" in SKIP*) echo "bench: $line"; return 1 ;; esac
		torch[$t]=$(jq -r .samples_per_sec <<<"$line")
		torch_acc=$(jq -r .test_accuracy <<<"$line")
		blas=$(jq -r .blas <<<"$line")
		case "$blas" in */blas/libblas.so*)
			# A ratio against the netlib reference BLAS (~20x slower for the MLP) would mean nothing.
			echo "bench: PyTorch runs on the netlib reference BLAS ($blas): install libopenblas0-pthread" \
				"(make bench does) and run again"
			return 1 ;;
		esac
		if [ "$KERAS" = 1 ] && [[ $model == mlp || $model == cnn ]]; then
			line=$("$KERAS_PY" tests/bench/keras_fashion.py --model "$model" --threads "$t" --epochs "$EPOCHS" \
				--precision "$prec" "${tsteps[@]}" 2>"$tmp/keras-$model$t.err" | tail -1)
			case "$line" in SKIP*) echo "bench: keras: $line" ;; *) keras[$t]=$(jq -r .samples_per_sec <<<"$line") ;; esac
		fi
		# How far apart the 2 threads run just before (dtrain devices): hundreds of ns slow everything.
		[ "$t" = 2 ] && rt=$(OMP_NUM_THREADS=2 "$DTRAIN" devices --json | jq '.thread_round_trip_ns | floor')
		OMP_NUM_THREADS=$t /usr/bin/time -v -o "$tmp/dtrain-$model$t.time" "$DTRAIN" fit "$yaml" \
			--set fit.epochs="$EPOCHS" "${dset[@]}" --set checkpoint.enabled=false --set compile.precision="$prec" \
			--json -q >"$tmp/dtrain-$model$t.json"
		dtrain[$t]=$(jq -s '[.[] | select(.event == "epoch") | .samples_per_sec] | max' "$tmp/dtrain-$model$t.json")
		if [ "$prec" = bf16 ]; then
			# dtrain's fp32 right after its bf16: this machine's speed drifts over minutes.
			OMP_NUM_THREADS=$t "$DTRAIN" fit "$yaml" --set fit.epochs="$EPOCHS" "${dset[@]}" \
				--set checkpoint.enabled=false --set compile.precision=fp32 --json -q >"$tmp/fp32-$model$t.json"
			fp32[$t]=$(jq -s '[.[] | select(.event == "epoch") | .samples_per_sec] | max' "$tmp/fp32-$model$t.json")
		fi
		dtrain_acc=$(jq -s '.[] | select(.event == "test") | .accuracy' "$tmp/dtrain-$model$t.json")
	done

	tb=$(best "${torch[1]}" "${torch[2]}")
	db=$(best "${dtrain[1]}" "${dtrain[2]}")
	printf '%s, batch 128, best of %s; PyTorch on %s\n' "$title" "$length" "$blas"
	printf '  threads   pytorch samples/s   dtrain samples/s   dtrain/pytorch\n'
	for t in 1 2; do
		printf '  %7d   %17.0f   %16.0f   %13.2fx\n' "$t" "${torch[$t]}" "${dtrain[$t]}" \
			"$(jq -n "${dtrain[$t]} / ${torch[$t]}")"
	done
	if [ -n "${keras[1]:-}" ] && [ -n "${keras[2]:-}" ]; then
		printf '  threads     keras samples/s   dtrain samples/s     dtrain/keras\n'
		for t in 1 2; do
			printf '  %7d   %17.0f   %16.0f   %13.2fx\n' "$t" "${keras[$t]}" "${dtrain[$t]}" \
				"$(jq -n "${dtrain[$t]} / ${keras[$t]}")"
		done
	fi
	printf '  best vs best: dtrain (%d thread(s)) / pytorch (%d thread(s)) = %.2fx\n' "$db" "$tb" \
		"$(jq -n "${dtrain[$db]} / ${torch[$tb]}")"
	printf '  test accuracy after %s: pytorch %.4f, dtrain %.4f\n' "$length" "$torch_acc" "$dtrain_acc"
	printf "  dtrain's 2 threads just before its run: a cache line from one to the other and back in %d ns\n" "$rt"
	printf '  peak RSS: pytorch %d MB, dtrain %d MB (whole fit run: load, train, validate, test)\n' \
		"$(rss_mb "$tmp/torch-$model$tb.time")" "$(rss_mb "$tmp/dtrain-$model$db.time")"
	if [ "$prec" = bf16 ]; then
		printf '  dtrain bf16 / dtrain fp32 (run right after): %.2fx at 1 thread (%.0f), %.2fx at 2 threads (%.0f)\n' \
			"$(jq -n "${dtrain[1]} / ${fp32[1]}")" "${fp32[1]}" "$(jq -n "${dtrain[2]} / ${fp32[2]}")" "${fp32[2]}"
	fi
}

bench mlp models/fashion_mlp.yaml 0 "Fashion-MNIST MLP 784-512-512-10" || exit 0
if [ -f models/fashion_cnn.yaml ]; then
	echo
	bench cnn models/fashion_cnn.yaml "$CNN_STEPS" \
		"Fashion-MNIST CNN (Keras' MNIST CNN: conv32-conv64-maxpool-dropout-dense128-dropout-dense10)" || exit 0
else
	echo
	echo "bench: no models/fashion_cnn.yaml in this tree: the CNN comparison is left out"
fi

# ---- the residual CNN (issue 14, resnet) ----
# bench_resnet: fashion_resnet.yaml against the same network in PyTorch, then
# dtrain time's rows of the adds (Add) and of layer normalization.
bench_resnet() {
	local steps=${RESNET_STEPS:-50}
	[ -f models/fashion_resnet.yaml ] || { echo "bench: no models/fashion_resnet.yaml in this tree"; return 0; }
	# No augmentation: PyTorch's side trains on the images as they are.
	sed '/^  augment:/,/^  [a-z]/{/^  augment:/d;/^    /d}' models/fashion_resnet.yaml >"$tmp/fashion_resnet.yaml"
	# Batch normalization's moving statistics with PyTorch's default momentum (0.1, Keras' 0.9): after
	# 100 steps Keras' 0.99 still holds a third of the initial variance and dtrain's test accuracy
	# was 0.14 against 0.72 with 0.9 (the same training loss), PyTorch's 0.79.
	sed 's/^\( *\)- batch_normalization$/\1- batch_normalization: {momentum: 0.9}/' "$tmp/fashion_resnet.yaml" \
		>"$tmp/fashion_resnet_bench.yaml"
	echo
	bench resnet "$tmp/fashion_resnet_bench.yaml" "$steps" \
		"Fashion-MNIST residual CNN (models/fashion_resnet.yaml: stem 32, blocks 64/2 and 128/2 with projections; batch_normalization momentum 0.9, PyTorch's default)" ||
		return 0
	sed '0,/^    - batch_normalization$/s//    - layer_normalization/' "$tmp/fashion_resnet.yaml" >"$tmp/fashion_resnet_ln.yaml"
	echo "  dtrain time, batch 128, per layer (ms; forward / backward):"
	for t in 1 2; do
		OMP_NUM_THREADS=$t "$DTRAIN" time "$tmp/fashion_resnet_ln.yaml" --iterations 5 --warmup 1 --json |
			jq -r --arg t "$t" '.layers[] | select(.type == "Add" or .type == "LayerNormalization") |
				"    \($t) thread(s)  \(.name) (\(.type)): \(.forward_ms * 1000 | round / 1000) / \(.backward_ms * 1000 | round / 1000)"'
	done
}
bench_resnet
if [ -f models/fashion_lstm.yaml ]; then
	echo
	bench lstm models/fashion_lstm.yaml "$LSTM_STEPS" \
		"Fashion-MNIST LSTM (28 steps of 28 rows: LSTM 128, dense 10; torch.nn.LSTM against oneDNN's)" || exit 0
fi

# ---- bf16 (issue 16): where the CPU has bfloat16 instructions ----
if "$DTRAIN" devices --json | jq -e '.cpu_precisions | index("bf16")' >/dev/null; then
	echo
	bench mlp models/fashion_mlp.yaml 0 "Fashion-MNIST MLP in bf16 (dtrain compile.precision: bf16; PyTorch autocast)" \
		bf16 || exit 0
	echo
	bench cnn models/fashion_cnn.yaml "$CNN_STEPS" "Fashion-MNIST CNN in bf16 (dtrain compile.precision: bf16; PyTorch autocast)" \
		bf16 || exit 0
else
	echo
	echo "bench: this CPU has no bfloat16 instructions: the bf16 comparison is left out"
fi

# ---- dtrain time, five runs of each example (issue 16) ----
# time_runs MODEL YAML STEPS TITLE: five rounds of `dtrain time` at 1 then 2 threads, each
# followed by a fit of 2 epochs of STEPS batches at the same thread count. Per thread count:
# the step's samples/s (min, median, max, and the spread max/min), the median fraction of the
# fp32 GEMM peak each run measures, and the median of fit's best epochs against the median
# step; then the ratio of the medians, 2 threads against 1.
time_runs() {
	local model=$1 yaml=$2 steps=$3 title=$4 t i lo med hi frac fit
	local -A m=()
	for i in 1 2 3 4 5; do
		for t in 1 2; do
			OMP_NUM_THREADS=$t "$DTRAIN" time "$yaml" --json >>"$tmp/time-$model$t.json"
			OMP_NUM_THREADS=$t "$DTRAIN" fit "$yaml" --set fit.epochs=2 --set fit.steps_per_epoch="$steps" \
				--set checkpoint.enabled=false --json -q |
				jq -s '[.[] | select(.event == "epoch") | .samples_per_sec] | max' >>"$tmp/fit-$model$t"
		done
	done
	printf '%s: dtrain time, batch 128, 5 runs at each thread count, each beside a fit of 2 epochs of %d steps\n' \
		"$title" "$steps"
	printf '  threads   samples/s min / median / max   spread (max/min)   fraction of peak (median)   fit / time\n'
	for t in 1 2; do
		read -r lo med hi frac < <(jq -rs '([.[].samples_per_sec] | sort) as $s | ([.[].peak_fraction] | sort) as $f |
			"\($s[0]) \($s[2]) \($s[4]) \($f[2])"' "$tmp/time-$model$t.json")
		m[$t]=$med
		fit=$(jq -s 'sort | .[2]' "$tmp/fit-$model$t")
		printf '  %7d   %8.0f / %6.0f / %6.0f   %16.2f   %24.1f%%   %9.2fx\n' "$t" "$lo" "$med" "$hi" \
			"$(jq -n "$hi / $lo")" "$(jq -n "$frac * 100")" "$(jq -n "$fit / $med")"
	done
	printf '  2 threads / 1 thread (medians): %.2fx\n' "$(jq -n "${m[2]} / ${m[1]}")"
}
echo
time_runs mlp models/fashion_mlp.yaml 200 "Fashion-MNIST MLP"
if [ -f models/fashion_cnn.yaml ]; then
	echo
	time_runs cnn models/fashion_cnn.yaml 30 "Fashion-MNIST CNN"
fi
