#!/usr/bin/env bash
# Runs every libFuzzer harness built by `make fuzz-bins` for SECONDS each
# (default 60), one after another, on its seeds (tests/fuzz/corpus/NAME) and
# past reproducers (tests/fuzz/regress/NAME). New inputs go to
# build/fuzz/corpus/NAME, kept between runs. Prints one line per harness
# (executions, coverage, corpus) and fails when a harness finds something:
# the reproducer is copied to tests/fuzz/regress/NAME/ (commit it with the
# fix: tests/unit/test_fuzz.c replays it in `make check`).
#
#   tests/fuzz/run.sh [SECONDS [NAME...]]
#
# Limits: 2 GB of RSS and 256 MB for one allocation (inputs are at most
# 1 MB: a reader that needs more believes a header), 10 s for one input.
set -u
cd "$(dirname "$0")/../.."
seconds=${1:-60}
shift || true
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
	for f in tests/fuzz/fuzz_*.c; do
		n=${f#tests/fuzz/fuzz_}
		names+=("${n%.c}")
	done
fi
# The harnesses write their inputs to files: in memory where /dev/shm is.
if [ -d /dev/shm ] && [ -w /dev/shm ]; then
	TMPDIR=$(mktemp -d /dev/shm/dtrain-fuzz.XXXXXX)
else
	TMPDIR=$(mktemp -d)
fi
export TMPDIR
trap 'rm -rf "$TMPDIR"' EXIT
failed=0
for name in "${names[@]}"; do
	bin=build/fuzz/fuzz_$name
	if [ ! -x "$bin" ]; then
		echo "fuzz $name: no $bin (make fuzz-bins)"
		failed=1
		continue
	fi
	mkdir -p "build/fuzz/corpus/$name" "build/fuzz/findings/$name" "tests/fuzz/corpus/$name" "tests/fuzz/regress/$name"
	log=build/fuzz/$name.log
	"$bin" -max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=256 -timeout=10 -max_len=65536 \
		-print_final_stats=1 -artifact_prefix="build/fuzz/findings/$name/" \
		"build/fuzz/corpus/$name" "tests/fuzz/corpus/$name" "tests/fuzz/regress/$name" >"$log" 2>&1
	rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[0-9a-zA-Z]+' "$log" | tail -1)
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
	echo "fuzz $name: ${execs:-?} executions (${rate:-?}/s), $cov, ${seconds}s"
	if [ "$rc" -eq 72 ]; then
		# libFuzzer's status when a signal (SIGINT, SIGTERM) stopped it: no finding, but no full run.
		failed=1
		echo "fuzz $name: interrupted by a signal after the executions above"
	elif [ "$rc" -ne 0 ]; then
		failed=1
		echo "fuzz $name: FOUND a failure (exit $rc); the report:"
		grep -E '^==[0-9]+==ERROR|SUMMARY|runtime error|deadly signal|out-of-memory|malloc\(|timeout' "$log" | head -8
		for f in "build/fuzz/findings/$name"/*; do
			[ -f "$f" ] || continue
			cp "$f" "tests/fuzz/regress/$name/"
			echo "fuzz $name: reproducer kept as tests/fuzz/regress/$name/$(basename "$f")"
			rm -f "$f"
		done
		echo "fuzz $name: the whole log is $log"
	fi
done
exit $failed
