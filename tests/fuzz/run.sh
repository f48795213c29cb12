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
# 1 MB: a reader that needs more believes a header), 10 s for one input. A
# timeout counts only when the input, run again alone, takes over 10 s too:
# on a loaded machine the harness may just have waited for a core.
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

# timed_out_alone NAME BIN FILE: does FILE, run alone, still take over 10 s? A
# timeout on a loaded machine (other jobs, nice) is often the harness waiting
# for a core, not an input that loops: 0 when it reproduces, 1 when not.
timed_out_alone() {
	local start=$SECONDS
	"$2" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=256 "$3" >"build/fuzz/$1.recheck.log" 2>&1
	local rc=$?
	echo "fuzz $1: $(basename "$3") alone: exit $rc after $((SECONDS - start)) s"
	[ "$rc" -ne 0 ]
}

# fuzz_one NAME: runs the harness for $seconds in all; a timeout that does not
# reproduce alone is dropped and fuzzing goes on for the time left. Prints
# executions summed over the runs. 0, or 1 after a finding or a signal.
fuzz_one() {
	local name=$1 bin=build/fuzz/fuzz_$1 log=build/fuzz/$1.log
	local deadline=$((SECONDS + seconds)) total=0 left rc execs cov rate f
	if [ ! -x "$bin" ]; then
		echo "fuzz $name: no $bin (make fuzz-bins)"
		return 1
	fi
	mkdir -p "build/fuzz/corpus/$name" "build/fuzz/findings/$name" "tests/fuzz/corpus/$name" "tests/fuzz/regress/$name"
	while left=$((deadline - SECONDS)); [ "$left" -gt 0 ]; do
		rm -f "build/fuzz/findings/$name"/*
		"$bin" -max_total_time="$left" -rss_limit_mb=2048 -malloc_limit_mb=256 -timeout=10 -max_len=65536 \
			-report_slow_units=1000000 -print_final_stats=1 -artifact_prefix="build/fuzz/findings/$name/" \
			"build/fuzz/corpus/$name" "tests/fuzz/corpus/$name" "tests/fuzz/regress/$name" >"$log" 2>&1
		rc=$?
		execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
		total=$((total + ${execs:-0}))
		cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[0-9a-zA-Z]+' "$log" | tail -1)
		rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
		[ "$rc" -eq 70 ] || break # 70: libFuzzer's timeout status
		f=$(ls "build/fuzz/findings/$name"/timeout-* 2>/dev/null | head -1)
		[ -n "$f" ] && ! timed_out_alone "$name" "$bin" "$f" || break
		echo "fuzz $name: a timeout under load that does not reproduce alone: not a finding, fuzzing on"
	done
	echo "fuzz $name: $total executions (${rate:-?}/s in the last run), $cov, ${seconds}s"
	if [ "$rc" -eq 72 ]; then
		# libFuzzer's status when a signal (SIGINT, SIGTERM) stopped it: no finding, but no full run.
		echo "fuzz $name: interrupted by a signal after the executions above"
		return 1
	elif [ "$rc" -ne 0 ]; then
		echo "fuzz $name: FOUND a failure (exit $rc); the report:"
		grep -E '^==[0-9]+==ERROR|SUMMARY|runtime error|deadly signal|out-of-memory|malloc\(|timeout' "$log" | head -8
		for f in "build/fuzz/findings/$name"/*; do
			[ -f "$f" ] || continue
			cp "$f" "tests/fuzz/regress/$name/"
			echo "fuzz $name: reproducer kept as tests/fuzz/regress/$name/$(basename "$f")"
			rm -f "$f"
		done
		echo "fuzz $name: the whole log is $log"
		return 1
	fi
}

for name in "${names[@]}"; do
	fuzz_one "$name" || failed=1
done
exit $failed
