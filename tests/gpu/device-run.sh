#!/usr/bin/env bash
# The GPU session's one prepared script (issue 18): on a lent GPU machine,
# unpacks the device kit (make device-kit, here), then runs, each stage under
# its own time limit so that a hang cannot eat the lease:
#   env     the machine, the kit, where cuBLAS/cuDNN/NCCL were found, ldd
#   unit    the unit suites with GPU cases (test_cuda_ops: every op against
#           the CPU; test_strategies: the GPU devices)
#   fit     tests/cli/gpu.bats: fits on gpu:0 against the CPU's loss curves
#   bench   tests/bench/gpu_bench.sh: dtrain against the machine's PyTorch on
#           the same GPU, fashion_mlp, fashion_cnn, cnn32 at fp32 and bf16,
#           samples/s and peak GPU memory
# and writes to $OUT the log (device-run.log), one JSON summary
# (device-run.json, rewritten after every stage, so a killed run still
# leaves one) and the stages' TAP and benchmark files (7 files: the tool brings
# back 8). In all about 4 minutes when everything passes; the limits add up
# to 7 min 50 s, unpacking and the search for the CUDA libraries aside.
#
# The call (the device tool's `run`, from the repository root here, after
# `make device-kit`):
#   run(command="bash tests/gpu/device-run.sh", carry=["build/device-kit.tar.xz"], timeout_s=540)
# Here, tests/cli/device_kit.bats runs its env stage in a scratch tree that
# holds only this script and the archive.
#
# Environment: OUT (default build/device-out), STAGES (default "env unit fit
# bench"), KIT (default build/device-kit.tar.xz), KIT_UNPACK (1: unpack the
# archive over the working tree, 0: never; by default where there is no
# build/dtrain, or the kit/ it unpacked came from another archive).
set -u
cd "$(dirname "$0")/../.."
REPO=$PWD
OUT=${OUT:-$REPO/build/device-out}
STAGES=${STAGES:-env unit fit bench}
KIT=${KIT:-build/device-kit.tar.xz}
mkdir -p "$OUT"
LOG=$OUT/device-run.log
SUMMARY=$OUT/device-run.json
: >"$LOG"
exec > >(tee -a "$LOG") 2>&1
START=$(date +%s)
stages_json='{}'

say() { echo "== $(date -u +%H:%M:%S) +$(($(date +%s) - START))s: $*"; }

# summary: rewrites $SUMMARY from stages_json and the environment found.
summary() {
	jq -n --argjson stages "$stages_json" --argjson seconds $(($(date +%s) - START)) \
		--arg gpu "${GPU_NAME:-}" --arg driver "${DRIVER:-}" --arg kit "${KIT_COMMIT:-}" \
		--arg cuda_dirs "${CUDA_DIRS:-}" --arg glibc "${GLIBC:-}" \
		'{gpu: $gpu, driver: $driver, glibc: $glibc, kit: $kit, cuda_lib_dirs: $cuda_dirs,
		  seconds: $seconds, stages: $stages}' >"$SUMMARY.tmp" 2>/dev/null &&
		mv "$SUMMARY.tmp" "$SUMMARY"
}

# record NAME RC SECONDS EXTRA_JSON: one stage's result into stages_json.
record() {
	stages_json=$(jq -c --arg n "$1" --argjson rc "$2" --argjson s "$3" --argjson x "$4" \
		'.[$n] = ({rc: $rc, seconds: $s, timed_out: ($rc == 124 or $rc == 137)} + $x)' <<<"$stages_json")
	summary
}

# tap_counts FILE: {"passed": N, "failed": N, "skipped": N, "failures": [names]} of a TAP file.
tap_counts() {
	local f=$1
	jq -Rn '[inputs] as $l |
		($l | map(select(test("^ok ") and (test("# (skip|SKIP)") | not))) | length) as $p |
		($l | map(select(test("^(not )?ok .*# (skip|SKIP)"))) | length) as $s |
		($l | map(select(test("^not ok ") and (test("# (skip|SKIP)") | not)))) as $f |
		{passed: $p, skipped: $s, failed: ($f | length), failures: ($f | map(sub("^not ok [0-9]* *-? *"; "")))}' "$f"
}

# stage NAME LIMIT COMMAND...: runs COMMAND (a program, or a function this
# script exports) under timeout LIMIT seconds, which ends its whole process
# group; its output into the log and $OUT/NAME.txt.
stage() {
	local name=$1 limit=$2 t0 rc
	shift 2
	say "stage $name (limit ${limit}s): $*"
	t0=$(date +%s)
	timeout -k 10 "$limit" bash -c '"$@"' stage "$@" >"$OUT/$name.txt" 2>&1
	rc=$?
	cat "$OUT/$name.txt"
	say "stage $name: exit $rc after $(($(date +%s) - t0))s"
	STAGE_RC=$rc STAGE_S=$(($(date +%s) - t0))
}

wants() { [[ " $STAGES " == *" $1 "* ]]; }

# ---- the kit ----
# Unpacked where it is not yet (a fresh machine has no build/), or again when
# a warm machine was sent a new archive; never over a developer's own build.
kit_sum=$(cksum <"$KIT" 2>/dev/null | cut -d' ' -f1)
if [ "${KIT_UNPACK:-}" = 1 ] || { [ -z "${KIT_UNPACK:-}" ] && [ -f "$KIT" ] && { [ ! -x build/dtrain ] ||
	{ [ -d kit ] && [ "$(cat kit/archive.cksum 2>/dev/null)" != "$kit_sum" ]; }; }; }; then
	say "unpacking $KIT"
	if ! tar -xJf "$KIT" -C "$REPO" 2>/dev/null; then
		# no xz on the machine: Python's tarfile reads it too
		python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$KIT" "$REPO" ||
			{ echo "device-run: cannot unpack $KIT"; exit 1; }
	fi
	echo "$kit_sum" >kit/archive.cksum
fi
[ -d kit/lib ] || { echo "device-run: no kit here (kit/lib): make device-kit, and carry $KIT"; exit 1; }
KIT_COMMIT=$(sed -n 's/^commit //p' kit/manifest)
# The models read Fashion-MNIST from its Debian path.
if [ ! -r /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
	mkdir -p /usr/share/datasets 2>/dev/null && cp -r kit/data/fashion-mnist /usr/share/datasets/ ||
		echo "device-run: cannot install Fashion-MNIST under /usr/share/datasets (not root?)"
fi

# cuBLAS, cuDNN and NCCL of the image: the toolkit's folders, else PyTorch's wheels.
CUDA_DIRS=
for lib in libcublas.so.13 libcublasLt.so.13 libcudnn.so.9 libnccl.so.2; do
	dir=$(timeout 20 find /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda*/lib* /usr/lib/x86_64-linux-gnu \
		/opt /usr/local/lib -name "$lib" -print -quit 2>/dev/null | head -1)
	if [ -n "$dir" ]; then
		dir=$(dirname "$dir")
		[[ ":$CUDA_DIRS:" == *":$dir:"* ]] || CUDA_DIRS=${CUDA_DIRS:+$CUDA_DIRS:}$dir
	else
		echo "device-run: $lib not found on this machine"
	fi
done
export LD_LIBRARY_PATH=$REPO/kit/lib${CUDA_DIRS:+:$CUDA_DIRS}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$REPO/kit/bin:$REPO/kit/bats/bin:$PATH
export DTRAIN=$REPO/build/dtrain BUILD=build
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-8}
GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
DRIVER=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
GLIBC=$(ldd --version 2>/dev/null | head -1 | grep -o '[0-9.]*$')
TMPDIR_RUN=$(mktemp -d)
trap 'rm -rf "$TMPDIR_RUN"' EXIT
export OUT GLIBC TMPDIR_RUN
summary

if wants env; then
	env_check() {
		cat kit/manifest
		echo "glibc here: $GLIBC (the kit $(sed -n 's/^needs //p' kit/manifest))"
		echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
		nvidia-smi || true
		echo "-- libraries not found:"
		ldd build/dtrain build/libdtrain_cuda.so build/tests/unit/test_* kit/bin/jq | grep 'not found' | sort -u
		echo "-- (end)"
		build/dtrain version
		build/dtrain devices
		build/dtrain devices --json >"$TMPDIR_RUN/devices.json"
		bats --version
		python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
			"cudnn", torch.backends.cudnn.version(), "gpu", torch.cuda.is_available())'
		! grep -q 'not found' <(ldd build/dtrain build/libdtrain_cuda.so)
	}
	export -f env_check
	stage env 45 env_check
	record env "$STAGE_RC" "$STAGE_S" "{\"devices\": $(jq -c . "$TMPDIR_RUN/devices.json" 2>/dev/null || echo null)}"
fi

if wants unit; then
	# The unit suites with GPU cases (they skip those without a GPU).
	suites=$(grep -l 'gpu\|cuda' tests/unit/test_*.c | xargs -n1 basename | sed 's/\.c$//')
	unit_run() {
		local s rc=0
		for s in $suites; do
			echo "# suite $s"
			CMOCKA_MESSAGE_OUTPUT=TAP "build/tests/unit/$s" || rc=1
		done
		return $rc
	}
	export -f unit_run
	export suites
	stage unit 120 unit_run
	record unit "$STAGE_RC" "$STAGE_S" "$(tap_counts "$OUT/unit.txt")"
fi

if wants fit; then
	stage fit 135 bats --tap tests/cli/gpu.bats
	record fit "$STAGE_RC" "$STAGE_S" "$(tap_counts "$OUT/fit.txt")"
fi

if wants bench; then
	rm -f "$OUT/bench.jsonl"
	stage bench 170 env JSON="$OUT/bench.jsonl" tests/bench/gpu_bench.sh 2
	record bench "$STAGE_RC" "$STAGE_S" "{\"rows\": $(cat "$OUT/bench.jsonl" 2>/dev/null | jq -cs .)}"
fi

say "done; summary in $SUMMARY"
jq . "$SUMMARY"
all_passed=0
jq -e '[.stages[].rc] | all(. == 0)' "$SUMMARY" >/dev/null || all_passed=1
# let tee write the log's last lines before the tool collects $OUT
exec >/dev/null 2>&1
sleep 1
# exit 0 when every stage did
exit $all_passed
