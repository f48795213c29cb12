#!/usr/bin/env bash
# The GPU benchmark: dtrain and PyTorch on the same GPU, in one run, same
# models, batches and data, at fp32 and at tf32. For each it prints samples/s
# of each framework (the best of EPOCHS epochs: the first one pays for cuDNN's
# algorithm choice and the caching allocator's first allocations) and the
# ratio dtrain / PyTorch (the goal: >= 1).
#
#   tests/bench/gpu_bench.sh [EPOCHS]            (default 2)
#
# Models:
#   fashion_cnn  models/fashion_cnn.yaml on Fashion-MNIST, batch 128, STEPS
#                batches per epoch (default 200; 0: whole epochs);
#   cnn32        tests/bench/cnn32.yaml, 32x32x3 synthetic inputs, batch 512:
#                nine conv-bn-relu blocks, the largest plain CNN dtrain can
#                express (it has no residual layer for a ResNet).
# Environment: DTRAIN (default build/dtrain), GPU (default 0), STEPS.
# Needs: a GPU, dtrain built with the CUDA backend, jq, and for the PyTorch
# side python3-torch with CUDA (the script says SKIP for PyTorch otherwise
# and still prints dtrain's figures). Not part of make check.
set -eu
cd "$(dirname "$0")/../.."
EPOCHS=${1:-2}
STEPS=${STEPS:-200}
GPU=${GPU:-0}
DTRAIN=${DTRAIN:-build/dtrain}
PY=${PY:-python3}
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

# dtrain_rate YAML PRECISION STEPS: best samples/s over the epochs.
dtrain_rate() {
	local -a steps=()
	[ "$3" -gt 0 ] && steps=(--set fit.steps_per_epoch="$3")
	CUDA_VISIBLE_DEVICES=$GPU "$DTRAIN" fit "$1" -q --json --set fit.epochs="$EPOCHS" "${steps[@]}" \
		--set checkpoint.enabled=false --set distribute.strategy=one_device --set distribute.device=gpu:0 \
		--set compile.precision="$2" >"$tmp/dtrain.json"
	jq -s '[.[] | select(.event == "epoch") | .samples_per_sec] | max' "$tmp/dtrain.json"
}

# torch_rate MODEL PRECISION STEPS: best samples/s, or SKIP: why.
torch_rate() {
	local line
	line=$(CUDA_VISIBLE_DEVICES=$GPU $PY tests/bench/torch_gpu.py --model "$1" --precision "$2" \
		--epochs "$EPOCHS" --steps "$3" --json | tail -1)
	case "$line" in
	SKIP*) echo "$line" ;;
	*) jq -r .samples_per_sec <<<"$line" ;;
	esac
}

printf '%-12s %-5s %14s %14s %8s\n' model prec "dtrain/s" "pytorch/s" ratio
for model in fashion_cnn cnn32; do
	if [ "$model" = fashion_cnn ]; then
		yaml=models/fashion_cnn.yaml steps=$STEPS
		if [ ! -r /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
			echo "fashion_cnn: skipped, Fashion-MNIST is not installed (make deps)"
			continue
		fi
	else
		yaml=tests/bench/cnn32.yaml steps=0
	fi
	for prec in fp32 tf32; do
		d=$(dtrain_rate "$yaml" "$prec" "$steps")
		t=$(torch_rate "$model" "$prec" "$steps")
		case "$t" in
		SKIP*)
			printf '%-12s %-5s %14.0f %14s %8s   (PyTorch: %s)\n' "$model" "$prec" "$d" - - "${t#SKIP: }"
			;;
		*)
			printf '%-12s %-5s %14.0f %14.0f %8.2f\n' "$model" "$prec" "$d" "$t" "$(jq -n "$d / $t")"
			;;
		esac
	done
done
