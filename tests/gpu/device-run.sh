#!/usr/bin/env bash
# The GPU session's one prepared script (issue 18): on a lent GPU machine,
# unpacks the device kit (make device-kit, here), then runs, each stage under
# its own time limit so that a hang cannot eat the lease:
#   env     the machine, the kit, where cuBLAS/cuDNN/NCCL were found, ldd
#   unit    the unit suites with GPU cases (test_cuda_ops: every op against
#           the CPU; test_strategies: the GPU devices)
#   fit     tests/cli/gpu.bats: fits on gpu:0 against the CPU's loss curves
#   bench   tests/bench/gpu_bench.sh: dtrain against the machine's PyTorch on
#           the same GPU, fashion_mlp, fashion_cnn, cnn32, resnet32 at fp32 and bf16,
#           samples/s and peak GPU memory
#   memcheck  compute-sanitizer's memcheck over test_cuda_ops
# and writes to $OUT the log (device-run.log), one JSON summary
# (device-run.json, rewritten after every stage, so a killed run still
# leaves one) and the stages' output and benchmark files (8 files: the tool
# brings back 8). The limits add up to 9 min 35 s, unpacking and the search
# for the CUDA libraries aside; on an H200 (2026-12-04) all five took 145 s
# (env 9, unit 2, fit 41, bench 89 before resnet32 joined it, memcheck 3).
#
# The call (the device tool's `run`, from the repository root here, after
# `make device-kit`):
#   run(command="bash tests/gpu/device-run.sh", carry=["build/device-kit.tar.xz"], timeout_s=540)
# Here, tests/cli/device_kit.bats runs its env stage in a scratch tree that
# holds only this script and the archive.
#
# Environment: OUT (default build/device-out), STAGES (default "env unit fit
# bench memcheck"), KIT (default build/device-kit.tar.xz), KIT_UNPACK (1: unpack the
# archive over the working tree, 0: never; by default where there is no
# build/dtrain, or the kit/ it unpacked came from another archive).
set -u
cd "$(dirname "$0")/../.."
REPO=$PWD
OUT=${OUT:-$REPO/build/device-out}
STAGES=${STAGES:-env unit fit bench memcheck}
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

# cuBLAS, cuDNN and NCCL of the image: PyTorch's wheels first, so that dtrain
# and the PyTorch it is measured against run the same cuDNN (the image's
# system cuDNN was 9.14, PyTorch's 9.19), else the toolkit's folders.
CUDA_DIRS=
for lib in libcublas.so.13 libcublasLt.so.13 libcudnn.so.9 libnccl.so.2; do
	dir=$(timeout 20 find /opt /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda*/lib* \
		/usr/lib/x86_64-linux-gnu /usr/local/lib -name "$lib" -print -quit 2>/dev/null | head -1)
	if [ -n "$dir" ]; then
		dir=$(dirname "$dir")
		[[ ":$CUDA_DIRS:" == *":$dir:"* ]] || CUDA_DIRS=${CUDA_DIRS:+$CUDA_DIRS:}$dir
	else
		echo "device-run: $lib not found on this machine"
	fi
done
# PyTorch runs in the image's own environment: the kit's folders first on
# the path would hand it libraries it was not built with.
export PY="env LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-} python3"
export LD_LIBRARY_PATH=$REPO/kit/lib${CUDA_DIRS:+:$CUDA_DIRS}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$REPO/kit/bin:$REPO/kit/bats/bin:$PATH
export DTRAIN=$REPO/build/dtrain BUILD=build
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-8}
GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
DRIVER=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
GLIBC=$(ldd --version 2>/dev/null | head -1 | grep -o '[0-9.]*$')
# compute-sanitizer of the image (the unit and memcheck stages), or nothing
SANITIZER=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
TMPDIR_RUN=$(mktemp -d)
trap 'rm -rf "$TMPDIR_RUN"' EXIT
export OUT GLIBC TMPDIR_RUN SANITIZER
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
		$PY -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
			"cudnn", torch.backends.cudnn.version(), "gpu", torch.cuda.is_available())'
		! grep -q 'not found' <(ldd build/dtrain build/libdtrain_cuda.so)
	}
	export -f env_check
	stage env 45 env_check
	record env "$STAGE_RC" "$STAGE_S" "{\"devices\": $(jq -c . "$TMPDIR_RUN/devices.json" 2>/dev/null || echo null)}"
fi

if wants unit; then
	# The unit suites with GPU cases (they skip those without a GPU). A CUDA
	# error aborts the process (dt_cuda_bug) or leaves the context unusable
	# for every case after it: in a suite that did not pass, each case that
	# did not pass runs again alone (DT_TEST_FILTER), and one that reports
	# nothing is a failure naming its exit status. The first case that failed
	# alone runs once more under compute-sanitizer, where the image has it.
	suites=$(grep -l 'gpu\|cuda' tests/unit/test_*.c | xargs -n1 basename | sed 's/\.c$//')
	unit_run() {
		local s n rc=0 src=0 out=$TMPDIR_RUN/suite.tap crashed= result
		for s in $suites; do
			echo "# suite $s"
			CMOCKA_MESSAGE_OUTPUT=TAP timeout -k 5 40 "build/tests/unit/$s" >"$out" 2>&1
			src=$?
			if [ $src -eq 0 ]; then
				cat "$out"
				continue
			fi
			rc=1
			# A CUDA error can leave the context unusable for every later case:
			# the suite's failures become comments, and each case that did not
			# pass runs again alone.
			sed -E 's/^(not ok [0-9]+ - )/# in the whole suite: \1/' "$out"
			echo "# suite $s: exit status $src; each case that did not pass, alone"
			for n in $(sed -n 's/.*cmocka_unit_test(\(test_[A-Za-z0-9_]*\)).*/\1/p' "tests/unit/$s.c"); do
				grep -Eq "^ok [0-9]+ - $n( |\$)" "$out" && continue
				DT_TEST_FILTER=$n CMOCKA_MESSAGE_OUTPUT=TAP timeout -k 5 40 "build/tests/unit/$s" \
					>"$out.one" 2>&1
				src=$?
				# only the result line of the case asked for (the filter matches substrings)
				grep -Ev '^(not )?ok [0-9]+ - |^1\.\.' "$out.one"
				result=$(grep -E "^(not )?ok [0-9]+ - $n( |\$)" "$out.one")
				echo "${result:-not ok - $n (no result: exit status $src)}"
				[[ $result == ok* ]] || crashed=${crashed:-$s:$n}
			done
		done
		if [ -n "$crashed" ] && [ -n "$SANITIZER" ]; then
			echo "# compute-sanitizer on ${crashed#*:}"
			DT_TEST_FILTER=${crashed#*:} timeout -k 5 60 "$SANITIZER" --print-limit 5 \
				"build/tests/unit/${crashed%%:*}" 2>&1 | sed 's/^/# /' | head -100
		fi
		return $rc
	}
	export -f unit_run
	export suites
	stage unit 120 unit_run
	record unit "$STAGE_RC" "$STAGE_S" "$(tap_counts "$OUT/unit.txt")"
fi

if wants fit; then
	stage fit 120 bats --tap tests/cli/gpu.bats
	record fit "$STAGE_RC" "$STAGE_S" "$(tap_counts "$OUT/fit.txt")"
fi

if wants bench; then
	rm -f "$OUT/bench.jsonl"
	stage bench 200 env JSON="$OUT/bench.jsonl" tests/bench/gpu_bench.sh 2
	record bench "$STAGE_RC" "$STAGE_S" "{\"rows\": $(cat "$OUT/bench.jsonl" 2>/dev/null | jq -cs .)}"
fi

if wants memcheck; then
	# compute-sanitizer's memcheck over the whole GPU op suite: an
	# out-of-bounds access or a read of memory never written that the
	# comparisons with the CPU happened not to see.
	memcheck_run() {
		[ -n "$SANITIZER" ] || { echo "no compute-sanitizer on this machine"; return 0; }
		"$SANITIZER" --tool memcheck --print-limit 20 --error-exitcode 9 build/tests/unit/test_cuda_ops
	}
	export -f memcheck_run
	stage memcheck 90 memcheck_run
	record memcheck "$STAGE_RC" "$STAGE_S" \
		"{\"summary\": $(grep -o 'ERROR SUMMARY: [0-9]* error' "$OUT/memcheck.txt" | tail -1 | jq -R . || echo null)}"
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
