#!/usr/bin/env bash
# The GPU benchmark: dtrain and PyTorch on the same GPU, in one run, same
# models, batches and data, at each precision of PRECISIONS (default fp32
# and bf16; tf32 too if named). For each it prints samples/s of each
# framework (the best of EPOCHS epochs: the first one pays for cuDNN's
# algorithm choice and the caching allocator's first allocations), the ratio
# dtrain / PyTorch (the goal: >= 1), and the peak GPU memory of each run
# (nvidia-smi's memory.used, sampled every 100 ms, above what was used
# before the run; "-" without nvidia-smi).
#
#   tests/bench/gpu_bench.sh [EPOCHS]            (default 2)
#
# Models:
#   fashion_mlp  models/fashion_mlp.yaml on Fashion-MNIST, batch 128, STEPS
#                batches per epoch (default 200; 0: whole epochs);
#   fashion_cnn  models/fashion_cnn.yaml, likewise;
#   cnn32        tests/bench/cnn32.yaml, 32x32x3 synthetic inputs, batch 512:
#                nine conv-bn-relu blocks without shortcuts;
#   resnet32     tests/bench/resnet32.yaml, ResNet-20 on the same inputs.
# Environment: DTRAIN (default build/dtrain), GPU (default 0), STEPS,
# PRECISIONS, MODELS (default "fashion_mlp fashion_cnn cnn32 resnet32"), PY
# (default python3), JSON (a file: one JSON object per row is appended to it).
# Needs: a GPU, dtrain built with the CUDA backend, jq, and for the PyTorch
# side python3-torch with CUDA (the script says SKIP for PyTorch otherwise
# and still prints dtrain's figures). Not part of make check;
# tests/gpu/device-run.sh runs it on a lent GPU machine.
set -eu
cd "$(dirname "$0")/../.."
EPOCHS=${1:-2}
STEPS=${STEPS:-200}
GPU=${GPU:-0}
DTRAIN=${DTRAIN:-build/dtrain}
PY=${PY:-python3}
PRECISIONS=${PRECISIONS:-fp32 bf16}
MODELS=${MODELS:-fashion_mlp fashion_cnn cnn32 resnet32}
JSON=${JSON:-}
[ -x "$DTRAIN" ] || { echo "gpu_bench: build dtrain first (make)"; exit 1; }
command -v jq >/dev/null || { echo "gpu_bench: needs jq"; exit 1; }
gpus=$("$DTRAIN" devices --json | jq -r .gpus)
if [ "$gpus" -eq 0 ]; then
	echo "gpu_bench: no GPU: $("$DTRAIN" devices | sed -n 's/^GPUs: *//p')"
	exit 1
fi
"$DTRAIN" devices | sed -n '/^GPUs:/,/^MPI:/p' | grep -v '^MPI:'

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# gpu_mem_used: MiB in use on the GPU now, or nothing without nvidia-smi.
gpu_mem_used() {
	command -v nvidia-smi >/dev/null || return 0
	nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i "$GPU" 2>/dev/null | head -1
}

# peak_mem COMMAND...: runs COMMAND while nvidia-smi samples the GPU's memory;
# writes the peak above the memory used before it to $tmp/peak ("-" without nvidia-smi).
peak_mem() {
	local base sampler rc=0
	base=$(gpu_mem_used)
	if [ -z "$base" ]; then
		echo - >"$tmp/peak"
		"$@"
		return
	fi
	nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i "$GPU" -lms 100 >"$tmp/mem" 2>/dev/null &
	sampler=$!
	"$@" || rc=$?
	kill "$sampler" 2>/dev/null
	wait "$sampler" 2>/dev/null || true
	awk -v base="$base" '$1 + 0 > max { max = $1 + 0 } END { print (max > base ? max - base : 0) }' "$tmp/mem" >"$tmp/peak"
	return $rc
}

# dtrain_rate YAML PRECISION STEPS BATCH: best samples/s over the epochs.
dtrain_rate() {
	local -a steps=()
	[ "$3" -gt 0 ] && steps=(--set fit.steps_per_epoch="$3")
	CUDA_VISIBLE_DEVICES=$GPU peak_mem "$DTRAIN" fit "$1" -q --json --set fit.epochs="$EPOCHS" "${steps[@]}" \
		--set checkpoint.enabled=false --set distribute.strategy=one_device --set distribute.device=gpu:0 \
		--set compile.precision="$2" --set data.batch_size="$4" >"$tmp/dtrain.json"
	jq -s '[.[] | select(.event == "epoch") | .samples_per_sec] | max' "$tmp/dtrain.json"
}

# torch_rate MODEL PRECISION STEPS BATCH: best samples/s, or SKIP: why.
torch_rate() {
	local line
	CUDA_VISIBLE_DEVICES=$GPU peak_mem $PY tests/bench/torch_gpu.py --model "$1" --precision "$2" \
		--epochs "$EPOCHS" --steps "$3" --batch "$4" --json >"$tmp/torch.out"
	line=$(tail -1 "$tmp/torch.out")
	case "$line" in
	SKIP*) echo "$line" ;;
	*) jq -er '.samples_per_sec | numbers' <<<"$line" 2>/dev/null || echo "SKIP: torch_gpu.py printed no rate" ;;
	esac
}

# num VALUE DIGITS: VALUE with DIGITS decimals, or "-" for null.
num() {
	if [ "$1" = null ]; then echo -; else printf "%.$2f" "$1"; fi
}

printf '%-12s %-5s %5s %12s %12s %7s %10s %10s\n' model prec batch "dtrain/s" "pytorch/s" ratio "dtrain MiB" "torch MiB"
for model in $MODELS; do
	case $model in
	fashion_mlp | fashion_cnn)
		yaml=models/$model.yaml steps=$STEPS batch=128
		if [ ! -r /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
			echo "$model: skipped, Fashion-MNIST is not installed (make deps)"
			continue
		fi
		;;
	cnn32 | resnet32) yaml=tests/bench/$model.yaml steps=0 batch=512 ;;
	*)
		echo "gpu_bench: unknown model '$model' (fashion_mlp, fashion_cnn, cnn32, resnet32)"
		exit 1
		;;
	esac
	for prec in $PRECISIONS; do
		# A failed run is reported ("-", null in JSON) and the others still run.
		d=$(dtrain_rate "$yaml" "$prec" "$steps" "$batch") && [[ $d =~ ^[0-9.e+]+$ ]] || d=null
		dmem=$(cat "$tmp/peak")
		t=$(torch_rate "$model" "$prec" "$steps" "$batch") || t="SKIP: torch_gpu.py failed: $(tail -1 "$tmp/torch.out")"
		tmem=$(cat "$tmp/peak") note=
		case "$t" in
		SKIP*) note=${t#SKIP: } t=null tmem=- ;;
		esac
		ratio=null
		[ "$d" != null ] && [ "$t" != null ] && ratio=$(jq -n "$d / $t")
		printf '%-12s %-5s %5d %12s %12s %7s %10s %10s%s\n' "$model" "$prec" "$batch" "$(num "$d" 0)" "$(num "$t" 0)" \
			"$(num "$ratio" 2)" "$dmem" "$tmem" "${note:+   (PyTorch: $note)}"
		if [ -n "$JSON" ]; then
			jq -nc --arg model "$model" --arg prec "$prec" --argjson batch "$batch" --argjson d "$d" \
				--argjson t "$t" --argjson ratio "$ratio" --arg dmem "$dmem" --arg tmem "$tmem" --arg note "$note" \
				'{model: $model, precision: $prec, batch: $batch, dtrain_samples_per_sec: $d,
				  torch_samples_per_sec: $t, ratio: $ratio,
				  dtrain_peak_gpu_mib: ($dmem | tonumber? // null), torch_peak_gpu_mib: ($tmem | tonumber? // null),
				  torch_note: $note}' >>"$JSON"
		fi
	done
done
