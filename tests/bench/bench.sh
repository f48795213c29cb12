#!/usr/bin/env bash
# The Fashion-MNIST MLP benchmark: PyTorch and dtrain side by side, in one run,
# same model, batch and data, with 1 and with 2 threads. Prints samples/s of
# each, the ratio at equal thread counts and the ratio of each one's best, and
# the peak RSS of a whole dtrain run next to PyTorch's.
#
#   tests/bench/bench.sh [EPOCHS]       (default 2; the best epoch counts)
#
# PyTorch (Debian's python3-torch) runs on the system's libblas.so.3: `make
# bench` installs OpenBLAS (libopenblas0-pthread) so that the reference is not
# the slow netlib BLAS. Not part of `make check`: it takes a few minutes.
set -eu
cd "$(dirname "$0")/../.."
EPOCHS=${1:-2}
DTRAIN=${DTRAIN:-build/dtrain}
PY=/usr/bin/python3
[ -x "$DTRAIN" ] || { echo "bench: build dtrain first (make)"; exit 1; }
[ -x /usr/bin/time ] || { echo "bench: needs /usr/bin/time (Debian package time)"; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rss_mb() { echo $(($(sed -n 's/^\s*Maximum resident set size (kbytes): //p' "$1") / 1024)); }

declare -A torch dtrain
for t in 1 2; do
	line=$(/usr/bin/time -v -o "$tmp/torch$t.time" $PY tests/bench/torch_mlp.py --json --threads "$t" --epochs "$EPOCHS" | tail -1)
	case "$line" in SKIP*) echo "bench: $line"; exit 0 ;; esac
	torch[$t]=$(jq -r .samples_per_sec <<<"$line")
	torch_acc=$(jq -r .test_accuracy <<<"$line")
	blas=$(jq -r .blas <<<"$line")
	OMP_NUM_THREADS=$t /usr/bin/time -v -o "$tmp/dtrain$t.time" "$DTRAIN" fit models/fashion_mlp.yaml \
		--set fit.epochs="$EPOCHS" --set checkpoint.enabled=false --json -q >"$tmp/dtrain$t.json"
	dtrain[$t]=$(jq -s '[.[] | select(.event == "epoch") | .samples_per_sec] | max' "$tmp/dtrain$t.json")
	dtrain_acc=$(jq -s '.[] | select(.event == "test") | .accuracy' "$tmp/dtrain$t.json")
done

best() { if jq -en "$1 >= $2" >/dev/null; then echo 1; else echo 2; fi; }
tb=$(best "${torch[1]}" "${torch[2]}")
db=$(best "${dtrain[1]}" "${dtrain[2]}")
printf 'Fashion-MNIST MLP 784-512-512-10, batch 128, best of %s epoch(s); PyTorch on %s\n' "$EPOCHS" "$blas"
printf '  threads   pytorch samples/s   dtrain samples/s   dtrain/pytorch\n'
for t in 1 2; do
	printf '  %7d   %17.0f   %16.0f   %13.2fx\n' "$t" "${torch[$t]}" "${dtrain[$t]}" "$(jq -n "${dtrain[$t]} / ${torch[$t]}")"
done
printf '  best vs best: dtrain (%d thread(s)) / pytorch (%d thread(s)) = %.2fx\n' "$db" "$tb" \
	"$(jq -n "${dtrain[$db]} / ${torch[$tb]}")"
printf '  test accuracy after %s epoch(s): pytorch %.4f, dtrain %.4f\n' "$EPOCHS" "$torch_acc" "$dtrain_acc"
printf '  peak RSS: pytorch %d MB, dtrain %d MB (whole fit run: load, train, validate, test)\n' \
	"$(rss_mb "$tmp/torch$tb.time")" "$(rss_mb "$tmp/dtrain$db.time")"
