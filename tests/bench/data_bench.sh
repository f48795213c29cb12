#!/usr/bin/env bash
# The data pipeline against training, for any model files (default:
# models/fashion_mlp.yaml, and models/fashion_png.yaml when it exists):
#
#   1. `dtrain time --data`: one epoch of the training data read through the
#      pipeline alone (after an untimed one that fills the page cache; prefetch
#      on, as configured; then data.prefetch=0), next
#      to the samples/s of a training step, and the ratio data/training
#      (the targets: >= 10x from IDX, >= 2x from PNG folders);
#   2. `dtrain fit`: training samples/s with prefetch on and off, whole epochs
#      or STEPS batches per epoch (default 200), best of EPOCHS (default 2).
#
#   tests/bench/data_bench.sh [MODEL.yaml...]
#
# Not part of `make check`. OMP_NUM_THREADS defaults to 1 (the thread count
# PyTorch is fastest with on this kind of machine); set it to compare others.
set -eu
cd "$(dirname "$0")/../.."
DTRAIN=${DTRAIN:-build/dtrain}
EPOCHS=${EPOCHS:-2}
STEPS=${STEPS:-200}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
[ -x "$DTRAIN" ] || { echo "data_bench: build dtrain first (make)"; exit 1; }
command -v jq >/dev/null || { echo "data_bench: needs jq"; exit 1; }

models=("$@")
if [ ${#models[@]} -eq 0 ]; then
	models=(models/fashion_mlp.yaml)
	[ -f models/fashion_png.yaml ] && models+=(models/fashion_png.yaml)
fi
# models/fashion_png.yaml reads the PNG folders its script writes (once, about a minute).
for yaml in "${models[@]}"; do
	if [ "$(basename "$yaml")" = fashion_png.yaml ] && [ ! -d fashion-png/train ]; then
		echo "data_bench: writing fashion-png/ (python3 models/fashion_png.py)"
		/usr/bin/python3 models/fashion_png.py
	fi
done

# fit_rate YAML ARGS...: the best epoch samples/s of a short fit.
fit_rate() {
	local yaml=$1
	shift
	"$DTRAIN" fit "$yaml" -q --json --set fit.epochs="$EPOCHS" --set fit.steps_per_epoch="$STEPS" \
		--set checkpoint.enabled=false "$@" |
		jq -s '[.[] | select(.event == "epoch") | .samples_per_sec] | max'
}

for yaml in "${models[@]}"; do
	echo "$yaml ($OMP_NUM_THREADS thread(s))"
	# One untimed pass first: with the 60,000 PNG files not yet in the page cache, the first
	# timed pass (prefetch on) read 11k samples/s against 81-83k with them cached.
	"$DTRAIN" time "$yaml" --data --json >/dev/null
	for prefetch in on off; do
		args=()
		[ $prefetch = off ] && args=(--set data.prefetch=0)
		j=$("$DTRAIN" time "$yaml" --data --json "${args[@]}")
		printf '  pipeline alone, prefetch %-3s: %9.0f samples/s over %d samples; training step %7.0f samples/s; data/training = %.1fx\n' \
			"$prefetch" "$(jq .data_samples_per_sec <<<"$j")" "$(jq .data_samples <<<"$j")" \
			"$(jq .samples_per_sec <<<"$j")" "$(jq .data_training_ratio <<<"$j")"
	done
	on=$(fit_rate "$yaml")
	off=$(fit_rate "$yaml" --set data.prefetch=0)
	printf '  fit, %s epoch(s) of %s steps: prefetch on %.0f samples/s, off %.0f samples/s, on/off = %.2fx\n' \
		"$EPOCHS" "$STEPS" "$on" "$off" "$(jq -n "$on / $off")"
done
