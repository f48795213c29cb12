#!/usr/bin/env bash
# The strategies benchmark (issue 6): models/fashion_mlp.yaml with
#   1 rank x 1 thread (one_device), 2 ranks x 1 thread (multi_worker_mirrored:
#   the throughput ratio, target >= 1.7, and the all-reduce's time per step and
#   share of the step), and parameter_server with 1 server + 2 workers
#   (throughput and staleness). The 2-rank run is repeated with libnbc's ring
#   all-reduce (OMPI_MCA_coll_libnbc_iallreduce_algorithm=1) to compare.
# Throughput is the best epoch's samples/s of the chief (global samples over
# its training seconds; validation not counted).
#
#   tests/bench/strategies.sh [EPOCHS]    (default 2)
#
# Needs a quiet machine with at least 2 cores (3 processes for the parameter
# server run). Not part of `make check`; `make bench` runs it.
set -eu
cd "$(dirname "$0")/../.."
EPOCHS=${1:-2}
DTRAIN=${DTRAIN:-build/dtrain}
[ -x "$DTRAIN" ] || { echo "bench: build dtrain first (make)"; exit 1; }
command -v mpirun >/dev/null || { echo "bench: no mpirun (openmpi-bin)"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 DTRAIN_STATS=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fit=(fit models/fashion_mlp.yaml --set fit.epochs="$EPOCHS" --set fit.threads=1 --set checkpoint.enabled=false --json)
best() { jq -s '[.[] | select(.event == "epoch") | .samples_per_sec] | max' "$1"; }

"$DTRAIN" "${fit[@]}" -q >"$tmp/one.json"
mpirun --oversubscribe --bind-to core -np 2 "$DTRAIN" "${fit[@]}" -q >"$tmp/mw.json" 2>"$tmp/mw.err"
# The same with libnbc's ring all-reduce (MCA parameter; the default picks by size).
OMPI_MCA_coll_libnbc_iallreduce_algorithm=1 mpirun --oversubscribe --bind-to core -np 2 "$DTRAIN" "${fit[@]}" -q \
	>"$tmp/ring.json" 2>"$tmp/ring.err"
mpirun --oversubscribe --bind-to none -np 3 "$DTRAIN" "${fit[@]}" -q --set distribute.strategy=parameter_server \
	--set distribute.num_ps=1 >"$tmp/ps.json" 2>"$tmp/ps.err"

one=$(best "$tmp/one.json")
mw=$(best "$tmp/mw.json")
ps=$(best "$tmp/ps.json")
ring=$(best "$tmp/ring.json")
echo "Fashion-MNIST MLP 784-512-512-10, batch 128 (global), 1 thread per rank, best of $EPOCHS epoch(s)"
printf '  one_device, 1 rank:                    %8.0f samples/s\n' "$one"
printf '  multi_worker_mirrored, 2 ranks:        %8.0f samples/s   ratio %.2f (target >= 1.7)\n' "$mw" \
	"$(jq -n "$mw / $one")"
sed -n 's/^multi_worker_mirrored: /    /p' "$tmp/mw.err"
printf '  the same, ring all-reduce:             %8.0f samples/s   ratio %.2f\n' "$ring" "$(jq -n "$ring / $one")"
sed -n 's/^multi_worker_mirrored: /    /p' "$tmp/ring.err"
printf '  parameter_server, 1 server + 2 workers: %7.0f samples/s   ratio %.2f\n' "$ps" "$(jq -n "$ps / $one")"
grep -E '^parameter_server: (epoch|[0-9]+ workers)' "$tmp/ps.err" | sed 's/^/    /'
printf '  test accuracy: one_device %.4f, multi_worker %.4f, parameter_server %.4f\n' \
	"$(jq -s '.[] | select(.event == "test") | .accuracy' "$tmp/one.json")" \
	"$(jq -s '.[] | select(.event == "test") | .accuracy' "$tmp/mw.json")" \
	"$(jq -s '.[] | select(.event == "test") | .accuracy' "$tmp/ps.json")"
