#!/usr/bin/env bash
# The Fashion-MNIST MLP benchmark: PyTorch and dtrain side by side, in one run,
# same model, batch, data and thread count. PyTorch runs at its best thread
# count (1 or 2, whichever is faster here); dtrain then runs with the same.
# Prints samples/s of each, their ratio, and peak RSS of each process.
#
#   tests/bench/bench.sh [EPOCHS]       (default 2; the best epoch counts)
#
# Not part of `make check`: it takes a few minutes. `make bench` runs it.
set -eu
cd "$(dirname "$0")/../.."
EPOCHS=${1:-2}
DTRAIN=${DTRAIN:-build/dtrain}
PY=/usr/bin/python3
[ -x "$DTRAIN" ] || { echo "bench: build dtrain first (make)"; exit 1; }
[ -x /usr/bin/time ] || { echo "bench: needs /usr/bin/time (Debian package time)"; exit 1; }

rss_kb() { sed -n 's/^\s*Maximum resident set size (kbytes): //p' "$1"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

torch_line=$(/usr/bin/time -v -o "$tmp/torch.time" $PY tests/bench/torch_mlp.py --json --epochs "$EPOCHS" | tail -1)
case "$torch_line" in
SKIP*) echo "bench: $torch_line"; exit 0 ;;
esac
threads=$(jq -r .threads <<<"$torch_line")
torch_sps=$(jq -r .samples_per_sec <<<"$torch_line")
torch_acc=$(jq -r .test_accuracy <<<"$torch_line")

OMP_NUM_THREADS=$threads /usr/bin/time -v -o "$tmp/dtrain.time" "$DTRAIN" fit models/fashion_mlp.yaml \
	--set fit.epochs="$EPOCHS" --set checkpoint.enabled=false --json -q >"$tmp/dtrain.json"
dtrain_sps=$(jq -s '[.[] | select(.event == "epoch") | .samples_per_sec] | max' "$tmp/dtrain.json")
dtrain_acc=$(jq -s '.[] | select(.event == "test") | .accuracy' "$tmp/dtrain.json")

printf 'Fashion-MNIST MLP 784-512-512-10, batch 128, %s thread(s), best of %s epoch(s)\n' "$threads" "$EPOCHS"
printf '  %-10s %10.0f samples/s   test accuracy %.4f   peak RSS %4d MB\n' pytorch "$torch_sps" "$torch_acc" $(($(rss_kb "$tmp/torch.time") / 1024))
printf '  %-10s %10.0f samples/s   test accuracy %.4f   peak RSS %4d MB\n' dtrain "$dtrain_sps" "$dtrain_acc" $(($(rss_kb "$tmp/dtrain.time") / 1024))
printf '  ratio      dtrain/pytorch = %.2fx\n' "$(jq -n "$dtrain_sps / $torch_sps")"
