#!/usr/bin/env bash
# Runs every test suite (cmocka unit tests, bats CLI tests) in TAP mode and
# ends with one line: "N passed, N failed, N skipped".
#
# Environment: DTRAIN (the binary), BUILD (the build directory).
#
#   tests/run.sh [SUITE [CASE]]
#
# SUITE runs only the suites whose file name contains it (test_pipeline,
# fit.bats, pipeline); CASE runs only the cases whose name contains it: bats
# gets --filter CASE, the unit tests DT_TEST_FILTER=CASE (tests/unit/helpers.h).
# `make test T=SUITE F=CASE` calls this. When a SUITE or CASE matches nothing,
# it says so and fails, so a typo is not mistaken for a pass.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
export DTRAIN=$(realpath "${DTRAIN:-$BUILD/dtrain}")
export CMOCKA_MESSAGE_OUTPUT=TAP
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
filter=${1:-}
case_filter=${2:-}
passed=0 failed=0 skipped=0 suites=0

# count_tap FILE: adds its ok / not ok / skip lines to the totals.
count_tap() {
	local ok skip_ok skip_notok not_ok
	ok=$(grep -cE '^ok ' "$1")
	skip_ok=$(grep -cE '^ok .*# (skip|SKIP)' "$1")
	skip_notok=$(grep -cE '^not ok .*# (skip|SKIP)' "$1")
	not_ok=$(grep -cE '^not ok ' "$1")
	passed=$((passed + ok - skip_ok))
	skipped=$((skipped + skip_ok + skip_notok))
	failed=$((failed + not_ok - skip_notok))
}

run_suite() { # name, command...
	local name=$1 log rc
	shift
	[ -n "$filter" ] && [[ $name != *$filter* ]] && return
	suites=$((suites + 1))
	log=$(mktemp)
	echo "# suite $name"
	"$@" >"$log" 2>&1
	rc=$?
	cat "$log"
	count_tap "$log"
	if [ $rc -ne 0 ] && ! grep -E '^not ok ' "$log" | grep -qvE '# (skip|SKIP)'; then
		echo "not ok - $name exited with status $rc"
		failed=$((failed + 1))
	fi
	rm -f "$log"
}

for t in "$BUILD"/tests/unit/test_*; do
	[ -x "$t" ] && run_suite "$(basename "$t")" env DT_TEST_FILTER="$case_filter" "$t"
done
for t in tests/cli/*.bats; do
	[ -f "$t" ] && run_suite "$(basename "$t")" bats --tap ${case_filter:+--filter "$case_filter"} "$t"
done

if [ -n "$filter" ] && [ "$suites" -eq 0 ]; then
	echo "not ok - no suite matches '$filter'"
	failed=$((failed + 1))
elif [ -n "$case_filter" ] && [ $((passed + failed + skipped)) -eq 0 ]; then
	echo "not ok - no test case matches '$case_filter'"
	failed=$((failed + 1))
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
