#!/usr/bin/env bats
# The documentation's examples run, and print the figures it quotes.
#
# tests/tools/doc_examples.py finds the examples: every command of the .EX
# blocks of a man page's EXAMPLES section, and of README.md's sh (or
# unmarked) and python fenced blocks; see its header for the rules. Each
# example is one case here, run in the order of its document, in a scratch
# directory of that document: a copy of models/, `dtrain` (this build) on
# PATH, stand-ins for the made-up m.yaml and model.yaml (a small synthetic
# model), and runs/fashion_mlp, the 10-epoch run of models/fashion_mlp.yaml
# made once in setup_file; `dtrain fit models/fashion_mlp.yaml` itself is
# not run again but shows that run's output. A command must exit 0 (or the
# status its `exit N` tag gives; 141, SIGPIPE, passes when it pipes into
# head), and its output must show the figures the documentation quotes with
# it: counts, shapes and names exactly, accuracies within 0.02, losses within
# 10%, times and rates not at all (doc_examples.py compare).
#
# What cannot run here is tagged in the documentation's source, a roff
# comment line `.\" example: KIND` (it covers the rest of its .EX block, or
# the next block) or `<!-- example: KIND -->` before a fenced block in
# README.md. KIND is gpu (a GPU), hosts (mpirun across named hosts), make
# (make targets: CI runs them anyway), slow (over a minute here: run with
# DT_EXAMPLES=all) or placeholder (files the documentation never defines).
# A skipped case names its tag and place; an untagged command that fails is
# a failure naming the document and line. Other tags: `exit N`, `output of
# COMMAND` (the next block is what COMMAND prints: checked the same way),
# `file NAME` (the next block is a file the later examples use), `run` (a
# block outside EXAMPLES to run) and `text` (a block without commands).
#
# bats gathers its cases before running, so there is one `example N` case
# per example, and the first case checks that the documents hold exactly as
# many examples as there are cases: add or remove cases at the end with the
# examples. `make test T=examples.bats` runs this file alone;
# `DT_EXAMPLES=all make test T=examples.bats F='example 47$'` runs one case,
# by its number, slow or not (each case's TAP line names its place).
#
# Environment: DTRAIN, the binary (default: build/dtrain of this tree);
# DT_EXAMPLES=all runs the slow examples too.

load helpers

BASE_COMMAND="dtrain fit models/fashion_mlp.yaml"

# The stand-in for m.yaml and model.yaml: two short epochs on blobs.
STAND_IN='model:
  name: m
  layers:
    - dense: {units: 16, activation: relu}
    - dense: {units: 3, activation: softmax}
compile:
  optimizer: adam
  loss: sparse_categorical_crossentropy
  metrics: [accuracy]
data:
  train: {format: synthetic, kind: blobs, samples: 512, classes: 3}
  validation: {format: synthetic, kind: blobs, samples: 128, classes: 3, seed: 1}
  batch_size: 32
fit: {epochs: 2}'

# docs: the documents, in the order of their examples.
docs() {
	(cd "$REPO" && LC_ALL=C ls README.md man/*.[1-9])
}

setup_file() {
	common_setup
	EX=$BATS_FILE_TMPDIR
	# A list that fails is reported by the first case.
	(cd "$REPO" && python3 tests/tools/doc_examples.py list $(docs) >"$EX/examples.jsonl" 2>"$EX/list.err") || true
	mkdir -p "$EX/bin" "$EX/base"
	ln -s "$DTRAIN" "$EX/bin/dtrain"
	scratch_init "$EX/base"
	local status=0
	(cd "$EX/base" && PATH=$EX/bin:$PATH timeout 900 $BASE_COMMAND >"$EX/base.out" 2>&1) || status=$?
	echo "$status" >"$EX/base.status"
}

setup() {
	common_setup
	EX=$BATS_FILE_TMPDIR
	export PATH=$EX/bin:$PATH
	# mpirun as root, more ranks than cores
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
	export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
}

# scratch_init DIR: the working directory of a document's examples.
scratch_init() {
	mkdir -p "$1/runs"
	cp -r "$REPO/models" "$1/models"
	printf '%s\n' "$STAND_IN" >"$1/m.yaml"
	sed 's/name: m$/name: model/' "$1/m.yaml" >"$1/model.yaml"
}

# scratch DOC: prints the scratch directory of DOC, made on first use with
# the base run copied in (hard links: dtrain replaces files, never edits them).
scratch() {
	local dir=$EX/docs/${1//\//_}
	if [ ! -d "$dir" ]; then
		scratch_init "$dir"
		[ ! -d "$EX/base/runs/fashion_mlp" ] || cp -al "$EX/base/runs/fashion_mlp" "$dir/runs/"
	fi
	echo "$dir"
}

# wait_checkpoint PID: waits until a checkpoint newer than ./.started exists
# under runs/, or PID has ended.
wait_checkpoint() {
	local i
	for ((i = 0; i < 1200; i++)); do
		[ -n "$(find runs -name '*.safetensors' -newer .started 2>/dev/null)" ] && return 0
		kill -0 "$1" 2>/dev/null || return 0
		sleep 0.5
	done
}

# run_command CMD INTERRUPT: runs CMD in the current directory, its output
# in ./.out; sets status. With INTERRUPT true, CMD gets a Ctrl-C (SIGINT to
# its process group) once it has written a checkpoint.
run_command() {
	if [ "$2" = true ]; then
		touch .started
		set -m
		timeout 900 bash -o pipefail -c "$1" >.out 2>&1 &
		local pid=$!
		set +m
		wait_checkpoint "$pid"
		kill -INT -- "-$pid" 2>/dev/null
		status=0
		wait "$pid" || status=$?
	else
		status=0
		timeout 900 bash -o pipefail -c "$1" >.out 2>&1 || status=$?
	fi
}

# example N: runs the N-th example of the documents and checks its output.
example() {
	local ex where cmd kind tag expect_status
	ex=$(sed -n "$1p" "$EX/examples.jsonl")
	[ -n "$ex" ] || {
		echo "no example $1: the documents hold $(wc -l <"$EX/examples.jsonl") (see the first case)"
		return 1
	}
	where=$(jq -r '"\(.file):\(.line)"' <<<"$ex")
	cmd=$(jq -r .command <<<"$ex")
	kind=$(jq -r .kind <<<"$ex")
	BATS_TEST_DESCRIPTION="$where: $(tr -s '\n\\ ' ' ' <<<"$cmd" | cut -c1-70)"
	for tag in $(jq -r '.tags[]' <<<"$ex"); do
		[ "$tag" = slow ] && [ "${DT_EXAMPLES:-}" = all ] && continue
		[ "$tag" = slow ] && skip "slow, over a minute (DT_EXAMPLES=all runs it): $where"
		skip "$tag: $where"
	done
	cd "$(scratch "$(jq -r .file <<<"$ex")")"
	case $kind in
	file)
		jq -j .content <<<"$ex" >"$cmd"
		return 0
		;;
	python)
		for m in $(jq -r '.modules[]' <<<"$ex"); do
			python3 -c "import $m" 2>/dev/null || skip "python3 has no module '$m' here: $where"
		done
		jq -j .command <<<"$ex" >.example.py
		cmd="python3 .example.py"
		;;
	esac
	if [ "$cmd" = "$BASE_COMMAND" ]; then
		cp "$EX/base.out" .out
		status=$(cat "$EX/base.status")
		rm -rf runs/fashion_mlp
		cp -al "$EX/base/runs/fashion_mlp" runs/
	else
		run_command "$cmd" "$(jq -r .interrupt <<<"$ex")"
	fi
	expect_status=$(jq -r 'if .interrupt then 130 else .exit end' <<<"$ex")
	if [ "$status" -eq 141 ] && [ "$expect_status" -eq 0 ] && grep -qE '\| *head\b' <<<"$cmd"; then
		status=0 # killed by SIGPIPE when head had its lines
	fi
	if [ "$status" -ne "$expect_status" ]; then
		echo "$where: exit status $status, expected $expect_status:"
		echo "$cmd"
		tail -n 20 .out
		return 1
	fi
	jq -j '.expect | map(. + "\n") | join("")' <<<"$ex" >.expected
	[ -s .expected ] || return 0
	local out=.out
	[ "$(jq -r '.output_file // empty' <<<"$ex")" = "" ] || out=$(jq -r .output_file <<<"$ex")
	python3 "$REPO/tests/tools/doc_examples.py" compare .expected "$out" \
		"$(jq -r '"\(.file):\(.expect_line)"' <<<"$ex")" || {
		echo "command: $cmd"
		return 1
	}
}

@test "the documents hold one case per example, and examples in every page" {
	[ ! -s "$EX/list.err" ] || { cat "$EX/list.err"; false; }
	for doc in $(docs); do
		n=$(jq -r --arg d "$doc" 'select(.file == $d) | .file' "$EX/examples.jsonl" | wc -l)
		[ "$n" -gt 0 ] || { echo "no examples found in $doc"; false; }
	done
	found=$(wc -l <"$EX/examples.jsonl")
	cases=$(grep -c '^@test "example [0-9]*"' "$BATS_TEST_FILENAME")
	[ "$found" -eq "$cases" ] || {
		echo "the documents hold $found examples, $BATS_TEST_FILENAME has $cases 'example N' cases"
		false
	}
	# The extraction reads what it must: a quoted output, a redirection,
	# a Ctrl-C, the tags.
	has() { jq -se "any(.[]; $1)" "$EX/examples.jsonl" >/dev/null || { echo "no example with $1"; false; }; }
	has '.command == "dtrain --version" and .expect == ["dtrain 0.1.0"]'
	has '.output_file == "train.log" and (.expect | length) == 3'
	has '.interrupt'
	has '.exit == 2'
	has '.kind == "file" and .command == "spirals.yaml"'
	for k in gpu hosts make slow; do
		has ".tags | index(\"$k\")"
	done
}

@test "the comparison of figures: exact counts, accuracy within 0.02, loss within 10%, times ignored" {
	cmp_fig() { # EXPECTED ACTUAL: compare one line with one line
		printf '%s\n' "$1" >"$BATS_TEST_TMPDIR/e"
		printf '%s\n' "$2" >"$BATS_TEST_TMPDIR/a"
		python3 "$REPO/tests/tools/doc_examples.py" compare "$BATS_TEST_TMPDIR/e" "$BATS_TEST_TMPDIR/a"
	}
	cmp_fig "test: 10000 samples - accuracy: 0.8861 - loss: 0.3188" \
		"test: 10000 samples - accuracy: 0.8731 - loss: 0.3400"
	cmp_fig "Epoch 1/2: 20/20 - 0s - 11ms/step - loss: 1.1554" "Epoch 1/2: 20/20 - 3s - 850us/step - loss: 1.1554"
	cmp_fig '{"epoch":1,"loss":1.14,"seconds":0.2}' '{"epoch":1,"loss":1.10,"seconds":9.5}'
	cmp_fig " Total params: 669,706 (2.55 MB)" " Total params: 669,706 (2.55 MB)"
	run ! cmp_fig " Total params: 669,706 (2.55 MB)" " Total params: 669,707 (2.55 MB)"
	run ! cmp_fig "test: 10000 samples - accuracy: 0.8861" "test: 10000 samples - accuracy: 0.8561"
	run ! cmp_fig "test: 10000 samples - loss: 0.3188" "test: 10000 samples - loss: 0.3600"
	run ! cmp_fig "test: 10000 samples" "test: 9999 samples"
	run ! cmp_fig '{"epoch":1,"loss":1.14}' '{"epoch":2,"loss":1.14}'
	run ! cmp_fig '{"checkpoint":"runs/a/latest.safetensors"}' '{"checkpoint":"runs/a/best.safetensors"}'
	run ! cmp_fig "dtrain 0.1.0" "dtrain 0.2.0"
}

@test "example 1" { example 1; }
@test "example 2" { example 2; }
@test "example 3" { example 3; }
@test "example 4" { example 4; }
@test "example 5" { example 5; }
@test "example 6" { example 6; }
@test "example 7" { example 7; }
@test "example 8" { example 8; }
@test "example 9" { example 9; }
@test "example 10" { example 10; }
@test "example 11" { example 11; }
@test "example 12" { example 12; }
@test "example 13" { example 13; }
@test "example 14" { example 14; }
@test "example 15" { example 15; }
@test "example 16" { example 16; }
@test "example 17" { example 17; }
@test "example 18" { example 18; }
@test "example 19" { example 19; }
@test "example 20" { example 20; }
@test "example 21" { example 21; }
@test "example 22" { example 22; }
@test "example 23" { example 23; }
@test "example 24" { example 24; }
@test "example 25" { example 25; }
@test "example 26" { example 26; }
@test "example 27" { example 27; }
@test "example 28" { example 28; }
@test "example 29" { example 29; }
@test "example 30" { example 30; }
@test "example 31" { example 31; }
@test "example 32" { example 32; }
@test "example 33" { example 33; }
@test "example 34" { example 34; }
@test "example 35" { example 35; }
@test "example 36" { example 36; }
@test "example 37" { example 37; }
@test "example 38" { example 38; }
@test "example 39" { example 39; }
@test "example 40" { example 40; }
@test "example 41" { example 41; }
@test "example 42" { example 42; }
@test "example 43" { example 43; }
@test "example 44" { example 44; }
@test "example 45" { example 45; }
@test "example 46" { example 46; }
@test "example 47" { example 47; }
@test "example 48" { example 48; }
@test "example 49" { example 49; }
@test "example 50" { example 50; }
@test "example 51" { example 51; }
@test "example 52" { example 52; }
@test "example 53" { example 53; }
@test "example 54" { example 54; }
@test "example 55" { example 55; }
@test "example 56" { example 56; }
@test "example 57" { example 57; }
@test "example 58" { example 58; }
@test "example 59" { example 59; }
@test "example 60" { example 60; }
@test "example 61" { example 61; }
@test "example 62" { example 62; }
@test "example 63" { example 63; }
@test "example 64" { example 64; }
@test "example 65" { example 65; }
@test "example 66" { example 66; }
@test "example 67" { example 67; }
@test "example 68" { example 68; }
@test "example 69" { example 69; }
@test "example 70" { example 70; }
@test "example 71" { example 71; }
@test "example 72" { example 72; }
