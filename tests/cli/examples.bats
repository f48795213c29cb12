#!/usr/bin/env bats
# The documentation's examples run, and print the figures it quotes.
#
# tests/tools/doc_examples.py finds the examples: every command of the .EX
# blocks of a man page's EXAMPLES section, and of README.md's sh (or
# unmarked) and python fenced blocks; see its header for the rules. There
# is one case per document: it runs the document's examples in its order,
# in a scratch directory of its own, a copy of the one setup_file prepares:
# a copy of models/, `dtrain` (this build) on PATH, stand-ins for the
# made-up m.yaml and model.yaml (a small synthetic model), and the runs the
# examples read: runs/m, runs/fruit_csv, runs/diabetes_mlp and runs/fashion_mlp
# (with DT_EXAMPLES=all the 10 epochs of models/fashion_mlp.yaml, whose
# output also stands for `dtrain fit models/fashion_mlp.yaml` itself, not
# run again; else a short run, see BASE_COMMAND). So no case depends on
# another, and an example depends on the ones before it in its document
# only where it reads what they wrote (a `file` block).
#
# A command must exit 0 (or the status its `exit N` tag gives; 141, SIGPIPE,
# passes when it pipes into head), and its output must show the figures the
# documentation quotes with it: counts, shapes and names exactly, accuracies
# within 0.02, losses within 10%, times and rates not at all
# (doc_examples.py compare). Every failing example is reported, each with
# its document and line (`man/dtrain-fit.1:170: ...`), and fails its case.
#
# What cannot run here is tagged in the documentation's source, a roff
# comment line `.\" example: KIND` (it covers the rest of its .EX block, or
# the next block) or `<!-- example: KIND -->` before a fenced block in
# README.md. KIND is gpu (a GPU), hosts (mpirun across named hosts), make
# (make targets: CI runs them anyway), slow (over a minute here: run with
# DT_EXAMPLES=all), placeholder (files the documentation never defines) or
# bf16 (run only where `dtrain devices` lists bf16 for the CPU).
# A skipped example is a TAP comment line, `# skip (gpu) README.md:406: ...`.
# Other tags: `exit N`, `output of COMMAND` (the next block is what COMMAND
# prints: checked the same way), `file NAME` (the next block is a file the
# later examples use), `run` (a block outside EXAMPLES to run) and `text` (a
# block without commands).
#
# The first case checks the extraction: COUNTS below is the number of
# examples each document holds; change it with the examples.
# `make test T=examples.bats F=dtrain-fit.1` runs one document's case.
#
# Environment: DTRAIN, the binary (default: build/dtrain of this tree);
# DT_EXAMPLES=all runs the slow examples too.

load helpers

# The examples each document holds (doc_examples.py list).
COUNTS='README.md 47
man/dtrain-config.1 4
man/dtrain-devices.1 3
man/dtrain-evaluate.1 7
man/dtrain-export.1 4
man/dtrain-fit.1 13
man/dtrain-inspect.1 6
man/dtrain-plot.1 3
man/dtrain-predict.1 11
man/dtrain-summary.1 4
man/dtrain-time.1 5
man/dtrain.1 6
man/dtrain.yaml.5 2'

# The 10-epoch run that the evaluate and predict examples read: over a
# minute here, so without DT_EXAMPLES=all a short run (SHORT_RUN) stands in
# for it, and the examples that read it (READS_BASE) have their trained
# figures left unchecked (doc_examples.py compare --counts-only).
BASE_COMMAND="dtrain fit models/fashion_mlp.yaml"
SHORT_RUN="$BASE_COMMAND --set fit.epochs=2 --set fit.steps_per_epoch=20"
READS_BASE='dtrain (evaluate|predict)\b.*models/fashion_mlp\.yaml|runs/fashion_mlp/'

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
	export OMP_WAIT_POLICY=PASSIVE # as in setup
	# the examples run mpirun: in a sanitizer build, Open MPI's own leaks are suppressed
	export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$BATS_TEST_DIRNAME/lsan-mpi.supp:fast_unwind_on_malloc=0}
	# A list that fails is reported by the first case.
	(cd "$REPO" && python3 tests/tools/doc_examples.py list $(docs) >"$EX/examples.jsonl" 2>"$EX/list.err") || true
	mkdir -p "$EX/bin" "$EX/base/runs"
	ln -s "$DTRAIN" "$EX/bin/dtrain"
	cp -r "$REPO/models" "$EX/base/models"
	printf '%s\n' "$STAND_IN" >"$EX/base/m.yaml"
	sed 's/name: m$/name: model/' "$EX/base/m.yaml" >"$EX/base/model.yaml"
	# The runs, each trained once; a failure shows in the cases that read it.
	cd "$EX/base"
	export PATH=$EX/bin:$PATH
	local run=$SHORT_RUN status=0 model
	[ "${DT_EXAMPLES:-}" != all ] || run=$BASE_COMMAND
	# (csv_logger: the history.csv that dtrain plot draws; it prints nothing)
	timeout 600 $run --set 'fit.callbacks=[csv_logger]' </dev/null >"$EX/base.out" 2>&1 || status=$?
	echo "$status" >"$EX/base.status"
	for model in models/fruit_csv.yaml models/diabetes_mlp.yaml m.yaml; do
		timeout 120 dtrain fit "$model" -q </dev/null >>"$EX/runs.out" 2>&1 || true
	done
	echo "# the runs of setup_file: $SECONDS s" >&3
}

setup() {
	common_setup
	EX=$BATS_FILE_TMPDIR
	export PATH=$EX/bin:$PATH
	# mpirun as root, more ranks than cores
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
	export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
	# OpenMP threads that sleep when they wait: a loaded machine then slows
	# a 2-thread example down by its share, not many times over (the
	# numbers are the same).
	export OMP_WAIT_POLICY=PASSIVE
	export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$BATS_TEST_DIRNAME/lsan-mpi.supp:fast_unwind_on_malloc=0}
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
		timeout 600 bash -o pipefail -c "$1" </dev/null >.out 2>&1 &
		local pid=$!
		set +m
		wait_checkpoint "$pid"
		kill -INT -- "-$pid" 2>/dev/null
		status=0
		wait "$pid" || status=$?
	else
		status=0
		timeout 600 bash -o pipefail -c "$1" </dev/null >.out 2>&1 || status=$?
	fi
}

# skip_reason EXAMPLE: prints why EXAMPLE (a JSON line) is not run here, if so.
skip_reason() {
	local ex=$1 tag m
	if [ "$(jq -r .command <<<"$ex")" = "$BASE_COMMAND" ] && [ "${DT_EXAMPLES:-}" != all ]; then
		echo "slow, over a minute: DT_EXAMPLES=all runs it"
		return
	fi
	for tag in $(jq -r '.tags[]' <<<"$ex"); do
		[ "$tag" = slow ] && [ "${DT_EXAMPLES:-}" = all ] && continue
		[ "$tag" = slow ] && { echo "slow, over a minute: DT_EXAMPLES=all runs it"; return; }
		[ "$tag" = bf16 ] && "$DTRAIN" devices --json | jq -e '.cpu_precisions | index("bf16")' >/dev/null && continue
		[ "$tag" = bf16 ] && { echo "bf16: this CPU has no bfloat16 instructions"; return; }
		echo "$tag"
		return
	done
	for m in $(jq -r '.modules[]' <<<"$ex"); do
		python3 -c "import $m" 2>/dev/null || { echo "python3 has no module '$m' here"; return; }
	done
}

# example EXAMPLE: runs EXAMPLE (a JSON line) in the current directory and
# checks its output; on failure says why, naming its document and line.
example() {
	local ex=$1 where cmd kind expect_status out counts_only=
	where=$(jq -r '"\(.file):\(.line)"' <<<"$ex")
	cmd=$(jq -r .command <<<"$ex")
	kind=$(jq -r .kind <<<"$ex")
	case $kind in
	file)
		jq -j .content <<<"$ex" >"$cmd"
		return 0
		;;
	python)
		jq -j .command <<<"$ex" >.example.py
		cmd="python3 .example.py"
		;;
	esac
	if [ "$cmd" = "$BASE_COMMAND" ]; then
		cp "$EX/base.out" .out
		status=$(cat "$EX/base.status")
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
	out=$(jq -r '.output_file // ".out"' <<<"$ex")
	if [ "${DT_EXAMPLES:-}" != all ] && jq -r .command <<<"$ex" | grep -qE "$READS_BASE"; then
		counts_only=--counts-only
	fi
	python3 "$REPO/tests/tools/doc_examples.py" compare $counts_only .expected "$out" \
		"$(jq -r '"\(.file):\(.expect_line)"' <<<"$ex")" || {
		echo "command: $cmd"
		return 1
	}
}

# document DOC: runs the examples of DOC in a copy of the prepared
# directory; fails when one of them fails, after running all.
document() {
	local doc=$1 dir ex reason took failed=0 ran=0 start=$SECONDS
	[ -s "$EX/examples.jsonl" ] || {
		echo "no examples listed (the first case says why)"
		return 1
	}
	! grep -F "doc_examples.py: $doc:" "$EX/list.err" || return 1 # the extractor could not read this one
	dir=$EX/docs/${doc//\//_}
	rm -rf "$dir"
	mkdir -p "$EX/docs"
	cp -al "$EX/base" "$dir" # hard links: dtrain replaces files, never edits them
	local examples=()
	mapfile -t examples < <(jq -c --arg d "$doc" 'select(.file == $d)' "$EX/examples.jsonl")
	for ex in "${examples[@]}"; do
		reason=$(skip_reason "$ex")
		if [ -n "$reason" ]; then
			echo "# skip ($reason) $(jq -r '"\(.file):\(.line): \(.command | gsub("[\\n\\\\ ]+"; " ") | .[0:70])"' <<<"$ex")" >&3
			continue
		fi
		ran=$((ran + 1))
		took=$SECONDS
		(cd "$dir" && example "$ex") || failed=$((failed + 1))
		took=$((SECONDS - took))
		[ "$took" -lt 10 ] || echo "# $(jq -r '"\(.file):\(.line)"' <<<"$ex") took $took s" >&3
	done
	echo "# $doc: $ran of ${#examples[@]} examples run, $failed failed, in $((SECONDS - start)) s" >&3
	[ "$failed" -eq 0 ]
}

@test "the extractor finds every document's examples (COUNTS)" {
	[ ! -s "$EX/list.err" ] || { cat "$EX/list.err"; false; }
	local doc want n bad=0
	for doc in $(docs); do
		want=$(awk -v d="$doc" '$1 == d { print $2 }' <<<"$COUNTS")
		n=$(jq -r --arg d "$doc" 'select(.file == $d) | .file' "$EX/examples.jsonl" | wc -l)
		[ -n "$want" ] || { echo "$doc: not in COUNTS of $BATS_TEST_FILENAME (it holds $n examples)"; bad=1; continue; }
		grep -qF "@test \"$doc\"" "$BATS_TEST_FILENAME" || { echo "$doc: no case '$doc' in $BATS_TEST_FILENAME"; bad=1; }
		[ "$n" -eq "$want" ] || { echo "$doc: $n examples found, COUNTS says $want"; bad=1; }
	done
	[ "$bad" -eq 0 ]
	# The extraction reads what it must: a quoted output, a redirection,
	# a Ctrl-C, the tags.
	has() { jq -se "any(.[]; $1)" "$EX/examples.jsonl" >/dev/null || { echo "no example with $1"; false; }; }
	has '.command == "dtrain --version" and .expect == ["dtrain 0.1.0"]'
	has '.output_file == "train.log" and (.expect | length) == 3'
	has '.interrupt'
	has '.exit == 2'
	has '.kind == "file" and .command == "spirals.yaml"'
	has '.kind == "python"'
	for k in gpu hosts make slow bf16; do
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
	cmp_fig "89 samples - loss: 3345.9643 - mae: 44.4534" "89 samples - loss: 3300.1 - mae: 46.1"
	run ! cmp_fig "89 samples - loss: 3345.9643 - mae: 44.4534" "89 samples - loss: 3345.9643 - mae: 50.1"
	cmp_fig "0,lemon,0.970002" "0,lemon,0.940002"
	run ! cmp_fig "0,lemon,0.970002" "0,lemon,0.910002"
	cmp_fig "0,181.97787" "0,185.1"
	run ! cmp_fig "0,181.97787" "0,195.1"
	run ! cmp_fig '{"index":0,"values":[181.97787]}' '{"index":0,"values":[195.1]}'
}

# One case per document; the first case checks that every document has one.
@test "README.md" { document README.md; }
@test "man/dtrain.1" { document man/dtrain.1; }
@test "man/dtrain-devices.1" { document man/dtrain-devices.1; }
@test "man/dtrain-config.1" { document man/dtrain-config.1; }
@test "man/dtrain-evaluate.1" { document man/dtrain-evaluate.1; }
@test "man/dtrain-export.1" { document man/dtrain-export.1; }
@test "man/dtrain-fit.1" { document man/dtrain-fit.1; }
@test "man/dtrain-inspect.1" { document man/dtrain-inspect.1; }
@test "man/dtrain-plot.1" { document man/dtrain-plot.1; }
@test "man/dtrain-predict.1" { document man/dtrain-predict.1; }
@test "man/dtrain-summary.1" { document man/dtrain-summary.1; }
@test "man/dtrain-time.1" { document man/dtrain-time.1; }
@test "man/dtrain.yaml.5" { document man/dtrain.yaml.5; }
