#!/usr/bin/env bats
# The #include graph keeps the architecture (docs/ARCHITECTURE.md, Folders):
# no circle among core's modules, nothing in core/ includes a header of cmd/,
# layers/, data/ or strategies/, and layers/, data/, strategies/ include
# neither each other nor cmd/. tests/tools/check_includes.py does the check;
# the cases after the first plant each kind of mistake in a small tree and
# check that it is caught and named.

load helpers

setup() {
	command -v python3 >/dev/null || skip "python3 is not installed (Debian: python3)"
	ROOT=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	CHECK="python3 $ROOT/tests/tools/check_includes.py"
	TREE=$BATS_TEST_TMPDIR/tree
	mkdir -p "$TREE"
}

# plant FILE HEADER...: writes TREE/FILE with one #include "HEADER" per argument.
plant() {
	local file=$TREE/$1 h
	shift
	mkdir -p "$(dirname "$file")"
	: >"$file"
	for h in "$@"; do
		echo "#include \"$h\"" >>"$file"
	done
}

# A tree that keeps every rule: includes beside the file and from the root.
plant_clean_tree() {
	plant core/tensor.h
	plant core/tensor.c core/tensor.h
	plant core/fit/train.h core/tensor.h
	plant core/fit/train.c train.h core/tensor.h
	plant layers/layers.h core/tensor.h
	plant layers/dense.c layers.h core/fit/train.h
	plant data/sources.h core/tensor.h
	plant data/idx.c sources.h
	plant strategies/strategies.h core/fit/train.h
	plant cmd/cmd.h
	plant cmd/fit.c cmd.h layers/layers.h data/sources.h strategies/strategies.h core/fit/train.h
}

@test "the source tree's includes keep the architecture" {
	run $CHECK "$ROOT"
	status_is 0
	[[ $output == *"no circle among core's modules, every include points one way"* ]]
}

@test "a tree that keeps the rules passes" {
	plant_clean_tree
	run $CHECK "$TREE"
	status_is 0
	[[ $output == *"check_includes: 11 files, 15 includes"* ]]
}

@test "a circle between two core modules fails and is printed with its includes" {
	plant_clean_tree
	plant core/fit/callbacks.h train.h
	plant core/fit/train.c train.h core/fit/callbacks.h
	run $CHECK "$TREE"
	status_is 1
	[[ $output == *"circle: core/fit/callbacks -> core/fit/train -> core/fit/callbacks"* ]]
	[[ $output == *"core/fit/callbacks.h:1 includes 'core/fit/train.h'"* ]]
	[[ $output == *"core/fit/train.c:2 includes 'core/fit/callbacks.h'"* ]]
	[[ $output == *"check_includes: 1 problem in 12 files"* ]]
}

@test "a circle through three core modules in different folders fails" {
	plant_clean_tree
	plant core/model/model.h core/fit/train.h
	plant core/tensor.c core/tensor.h core/model/model.h
	run $CHECK "$TREE"
	status_is 1
	[[ $output == *"circle: core/fit/train -> core/tensor -> core/model/model -> core/fit/train"* ]]
}

@test "core/ including a header of data/ fails" {
	plant_clean_tree
	plant core/pipeline/pipeline.c core/tensor.h data/sources.h
	run $CHECK "$TREE"
	status_is 1
	[[ $output == *"core/pipeline/pipeline.c:2: includes 'data/sources.h': core/ includes no header from cmd/, layers/, data/, strategies/"* ]]
}

@test "layers/ including data/, and strategies/ including cmd/, fail" {
	plant_clean_tree
	plant layers/dense.c layers.h data/sources.h
	plant strategies/mirrored.c strategies/strategies.h ../cmd/cmd.h
	run $CHECK "$TREE"
	status_is 1
	[[ $output == *"layers/dense.c:2: includes 'data/sources.h': layers/ includes no header from cmd/, data/, strategies/"* ]]
	[[ $output == *"strategies/mirrored.c:2: includes 'cmd/cmd.h': strategies/ includes no header from cmd/, layers/, data/"* ]]
	[[ $output == *"check_includes: 2 problems"* ]]
}

@test "no root, or one that is not a directory, is a usage error" {
	run $CHECK
	status_is 2
	[[ $output == *"usage: check_includes.py ROOT"* ]]
	run $CHECK "$BATS_TEST_TMPDIR/none"
	status_is 2
}

# cmd/ reads as wiring: no function there is over 100 lines (tests/tools/check_lengths.py).
@test "no function in cmd/ is over 100 lines" {
	run python3 "$ROOT/tests/tools/check_lengths.py" 100 "$ROOT"/cmd/*.c
	status_is 0
	[[ $output == *" 0 over 100 lines" ]]
}

@test "the length check counts a function from its name to its closing brace, and fails over the limit" {
	{
		echo "static int short_one(void)"
		echo "{"
		echo "	return 0;"
		echo "}"
		echo "int long_one(int a,"
		echo "	     int b)"
		echo "{"
		for i in $(seq 6); do echo "	a += b;"; done
		echo "	return a;"
		echo "}"
	} >"$TREE/f.c"
	run python3 "$ROOT/tests/tools/check_lengths.py" 11 "$TREE/f.c"
	status_is 0
	[[ $output == *"2 functions, 0 over 11 lines" ]]
	run python3 "$ROOT/tests/tools/check_lengths.py" 10 "$TREE/f.c"
	status_is 1
	[[ $output == *"f.c:5: long_one is 11 lines (over 10)"* ]]
}
