#!/usr/bin/env bats
# dtrain predict: a tiny model trained once on a generated CSV (named
# classes), then predictions from a file and from pipes, CSV and JSON lines,
# bad input, an output closed early, and a stream of a million rows through
# bounded memory.

load helpers

# gen_rows N SEED: N rows of 8 features (no label), values in [0, 3).
gen_rows() {
	awk -v n="$1" -v seed="$2" 'BEGIN { srand(seed); for (i = 0; i < n; i++) {
		s = sprintf("%.6f", rand() * 3); for (j = 1; j < 8; j++) s = s sprintf(",%.6f", rand() * 3); print s } }'
}

setup_file() {
	local dir=$BATS_FILE_TMPDIR
	DTRAIN=${DTRAIN:-$BATS_TEST_DIRNAME/../../build/dtrain}
	# Class c has every feature near c: alpha, beta, gamma.
	awk 'BEGIN { srand(1); print "f1,f2,f3,f4,f5,f6,f7,f8,kind"; for (i = 0; i < 300; i++) { c = i % 3; s = "";
		for (j = 0; j < 8; j++) s = s sprintf("%.4f,", c + rand() * 0.5); print s (c == 0 ? "alpha" : c == 1 ? "beta" : "gamma") } }' \
		>"$dir/train.csv"
	cat >"$dir/model.yaml" <<-EOF
		model:
		  layers:
		    - dense: {units: 16, activation: relu}
		    - dense: {units: 3, activation: softmax}
		compile: {optimizer: {adam: {learning_rate: 0.02}}, loss: sparse_categorical_crossentropy, metrics: [accuracy]}
		data:
		  train: {format: csv, path: train.csv, label: kind}
		  batch_size: 32
		fit: {epochs: 20}
		checkpoint: {dir: $dir/run}
	EOF
	OMP_NUM_THREADS=1 "$DTRAIN" fit -q "$dir/model.yaml" >/dev/null 2>&1 || skip "training the fixture failed"
	# A copy that names its input shape: predict then never opens train.csv.
	sed 's/^  layers:/  input_shape: [8]\n  layers:/; s/path: train.csv/path: missing.csv/' "$dir/model.yaml" >"$dir/shaped.yaml"
}

setup() {
	common_setup
	D=$BATS_FILE_TMPDIR
	CKPT=$D/run/latest.safetensors
	export OMP_NUM_THREADS=1
}

@test "the checkpoint stores the class names of the training CSV" {
	run safetensors_header "$CKPT"
	status_is 0
	names=$(jq -r '.__metadata__.class_names' <<<"$output")
	[ "$(jq -c . <<<"$names")" = '["alpha","beta","gamma"]' ]
}

@test "predict a file: one line per row, index,class,probability, the right classes" {
	run --separate-stderr "$DTRAIN" predict "$D/model.yaml" --checkpoint "$CKPT" "$D/train.csv"
	status_is 0
	[ "${#lines[@]}" -eq 300 ]
	[[ ${lines[0]} =~ ^0,alpha,0\.[0-9]+$ ]] || [[ ${lines[0]} =~ ^0,alpha,1$ ]]
	[[ ${lines[1]} == 1,beta,* ]]
	[[ ${lines[299]} == 299,gamma,* ]]
	# The model learned the classes: most predictions match the row's class.
	right=$(paste -d, <(tail -n +2 "$D/train.csv" | cut -d, -f9) <(printf '%s\n' "${lines[@]}" | cut -d, -f2) |
		awk -F, '$1 == $2' | wc -l)
	[ "$right" -ge 270 ]
}

@test "predict from a gzipped pipe composes with cut, sort and uniq" {
	gzip -c <(tail -n +2 "$D/train.csv" | cut -d, -f1-8) >"$D/x.csv.gz"
	run bash -c "zcat '$D/x.csv.gz' | '$DTRAIN' predict -q '$D/shaped.yaml' --checkpoint '$CKPT' - | cut -d, -f2 | sort | uniq -c"
	status_is 0
	[ "${#lines[@]}" -eq 3 ]
	total=$(printf '%s\n' "${lines[@]}" | awk '{ s += $1 } END { print s }')
	[ "$total" -eq 300 ]
	[[ $output == *alpha* && $output == *beta* && $output == *gamma* ]]
	# Gzip straight into standard input works too, and INPUT may be left out.
	run bash -c "'$DTRAIN' predict -q '$D/shaped.yaml' --checkpoint '$CKPT' <'$D/x.csv.gz' | wc -l"
	[ "$output" -eq 300 ]
}

@test "--json lines parse with jq; --all adds probabilities that sum to 1" {
	run --separate-stderr "$DTRAIN" predict "$D/model.yaml" --checkpoint "$CKPT" --json --all "$D/train.csv"
	status_is 0
	[ "${#lines[@]}" -eq 300 ]
	jq -e -s 'length == 300 and all(.[]; (.class | type) == "string" and .probability >= 0 and .probability <= 1
		and (.probabilities | length) == 3 and ((.probabilities | add) - 1 | fabs) < 1e-4
		and .probability == (.probabilities | max))' <<<"$output"
	[ "$(jq -s '.[5].index' <<<"$output")" -eq 5 ]
	run --separate-stderr "$DTRAIN" predict "$D/model.yaml" --checkpoint "$CKPT" --json "$D/train.csv"
	jq -e -s 'all(.[]; has("probabilities") | not)' <<<"$output"
}

@test "--all and --header in CSV" {
	run --separate-stderr "$DTRAIN" predict "$D/model.yaml" --checkpoint "$CKPT" --all --header "$D/train.csv"
	status_is 0
	[ "${lines[0]}" = "index,class,probability,p_alpha,p_beta,p_gamma" ]
	[ "${#lines[@]}" -eq 301 ]
	[ "$(awk -F, 'NR > 1 && NF != 6' <<<"$output" | wc -l)" -eq 0 ]
}

# npy_u1 FILE ROWS: a .npy of uint8, (ROWS, 8), row i all i % 3 (version 1.0, as np.save writes it).
npy_u1() {
	local dict="{'descr': '|u1', 'fortran_order': False, 'shape': ($2, 8), }" pad i
	pad=$(((64 - (10 + ${#dict} + 1) % 64) % 64))
	{
		printf '\223NUMPY\001\000'
		printf "\\$(printf %03o $(((${#dict} + pad + 1) & 255)))\\$(printf %03o $(((${#dict} + pad + 1) >> 8)))"
		printf '%s%*s\n' "$dict" "$pad" ""
		for ((i = 0; i < $2; i++)); do printf "\\$((i % 3))%.0s" 1 2 3 4 5 6 7 8; done
	} >"$1"
}

@test "predict reads .npy input and names what is wrong with it" {
	npy_u1 "$D/x.npy" 30
	run --separate-stderr "$DTRAIN" predict "$D/shaped.yaml" --checkpoint "$CKPT" "$D/x.npy"
	status_is 0
	[ "${#lines[@]}" -eq 30 ]
	[[ ${lines[0]} == 0,alpha,* ]]
	[[ ${lines[2]} == 2,gamma,* ]]
	# The same through standard input, with the format named.
	run --separate-stderr bash -c "'$DTRAIN' predict '$D/shaped.yaml' --checkpoint '$CKPT' --format npy - <'$D/x.npy'"
	status_is 0
	[ "${#lines[@]}" -eq 30 ]
	head -c 200 "$D/x.npy" >"$D/cut.npy"
	run --separate-stderr "$DTRAIN" predict "$D/shaped.yaml" --checkpoint "$CKPT" "$D/cut.npy"
	status_is 1
	stderr_has "cut.npy" "truncated" "record 9 is cut short"
}

@test "a bad input row is an error naming the row, exit 1" {
	{ gen_rows 5 3; echo "1,2,3,oops,5,6,7,8"; gen_rows 5 4; } >"$D/bad.csv"
	run --separate-stderr "$DTRAIN" predict "$D/shaped.yaml" --checkpoint "$CKPT" "$D/bad.csv"
	status_is 1
	not_crashed
	stderr_has "bad.csv" "row 6" "column 4" "'oops' is not a number"
	printf '1,2,3\n' >"$D/short.csv"
	run --separate-stderr "$DTRAIN" predict "$D/shaped.yaml" --checkpoint "$CKPT" "$D/short.csv"
	status_is 1
	stderr_has "short.csv" "row 1" "expected 8 fields"
	run --separate-stderr "$DTRAIN" predict "$D/shaped.yaml" --checkpoint "$D/nope.safetensors" "$D/short.csv"
	status_is 1
	run --separate-stderr "$DTRAIN" predict "$D/shaped.yaml" --format parquet "$D/short.csv"
	status_is 2
	stderr_has "unknown input format 'parquet'"
}

@test "an output closed early ends predict quietly" {
	run --separate-stderr bash -c "set -o pipefail; '$DTRAIN' predict -q '$D/model.yaml' --checkpoint '$CKPT' '$D/train.csv' | head -1"
	[ "$output" = "0,alpha,${output#0,alpha,}" ]
	[ -z "$stderr" ]
	[ "$status" -eq 0 ] || [ "$status" -eq 141 ]
}

@test "a million CSV rows stream through predict in bounded memory" {
	# Peak RSS is read from /proc while predict still waits for the end of its input.
	mkfifo "$D/in"
	"$DTRAIN" predict -q "$D/shaped.yaml" --checkpoint "$CKPT" - <"$D/in" >"$D/out" 2>"$D/err" &
	pid=$!
	{
		gen_rows 1000000 7 # 72 bytes a row: 72 MB
		grep VmHWM "/proc/$pid/status" >"$D/hwm"
	} >"$D/in"
	wait "$pid"
	rm -f "$D/in"
	[ -z "$(cat "$D/err")" ] || { cat "$D/err"; false; }
	[ "$(wc -l <"$D/out")" -eq 1000000 ]
	[[ $(tail -1 "$D/out") == 999999,* ]]
	kb=$(awk '{ print $2 }' "$D/hwm")
	echo "# 72 MB of input; peak RSS: $kb kB" >&3
	# AddressSanitizer's shadow memory and quarantine make RSS meaningless there.
	if ldd "$DTRAIN" 2>/dev/null | grep -q libasan; then
		skip "a sanitizer build: peak RSS $kb kB not judged"
	fi
	# Holding the input as text or as floats (32 MB) would pass 40 MB.
	[ "$kb" -lt 40000 ]
}

@test "predict prints a batch's lines while its input is still open" {
	# 40 rows, then the input stays open: the first batch (32 rows) must come out before it ends.
	mkfifo "$TMP/in"
	"$DTRAIN" predict -q "$D/shaped.yaml" --checkpoint "$CKPT" - <"$TMP/in" >"$TMP/out" 2>"$TMP/err" &
	pid=$!
	exec 7>"$TMP/in"
	gen_rows 40 3 >&7
	for _ in $(seq 200); do # up to 20 s
		[ "$(wc -l <"$TMP/out")" -ge 32 ] && break
		sleep 0.1
	done
	early=$(wc -l <"$TMP/out")
	gen_rows 60 4 >&7
	exec 7>&-
	wait "$pid"
	[ -z "$(cat "$TMP/err")" ] || { cat "$TMP/err"; false; }
	[ "$early" -eq 32 ]
	[[ $(sed -n 32p "$TMP/out") == 31,* ]]
	[ "$(wc -l <"$TMP/out")" -eq 100 ]
	[[ $(tail -1 "$TMP/out") == 99,* ]]
}

@test "models/fruit_csv.yaml trains on its CSV and predicts fruit names" {
	run --separate-stderr "$DTRAIN" fit -q "$REPO/models/fruit_csv.yaml" --set fit.epochs=2 --set checkpoint.dir="$TMP/fruit"
	status_is 0
	run --separate-stderr bash -c "cut -d, -f1-4 '$REPO/models/data/fruit.csv' |
		'$DTRAIN' predict '$REPO/models/fruit_csv.yaml' --checkpoint '$TMP/fruit/latest.safetensors' --json"
	status_is 0
	[ "${#lines[@]}" -eq 240 ]
	jq -e -s 'all(.[]; .class | IN("apple", "lemon", "mandarin", "orange"))' <<<"$output"
}

@test "fit reads a CSV (gzipped or not) from standard input with path: -" {
	sed "s|path: train.csv|path: -|; s|dir: .*/run}|dir: $TMP/stdin}|; s|epochs: 20|epochs: 1|" "$D/model.yaml" >"$TMP/stdin.yaml"
	gzip -c "$D/train.csv" >"$TMP/train.csv.gz"
	run --separate-stderr bash -c "'$DTRAIN' fit -q --json '$TMP/stdin.yaml' <'$TMP/train.csv.gz'"
	status_is 0
	[ "$(events epoch | wc -l)" -eq 1 ]
	run safetensors_header "$TMP/stdin/latest.safetensors"
	[ "$(jq -c '.__metadata__.class_names' <<<"$output")" = '"[\"alpha\",\"beta\",\"gamma\"]"' ]
	# Predicting from standard input: the shape comes from the checkpoint, not from that same stream.
	run --separate-stderr bash -c "'$DTRAIN' predict '$TMP/stdin.yaml' --checkpoint '$TMP/stdin/latest.safetensors' - <'$D/train.csv'"
	status_is 0
	[ "${#lines[@]}" -eq "$(($(wc -l <"$D/train.csv") - 1))" ]
}

@test "CHECKPOINT first: a copy of the checkpoint alone, in another directory, predicts as MODEL --checkpoint does" {
	local alone=$TMP/alone
	mkdir -p "$alone"
	cp "$CKPT" "$alone/model.safetensors"
	tail -n +2 "$D/train.csv" | cut -d, -f1-8 | head -50 >"$alone/x.csv"
	run --separate-stderr "$DTRAIN" predict -q "$D/model.yaml" --checkpoint "$CKPT" "$alone/x.csv"
	status_is 0
	local want=$output
	# No model file, no training data: the stored config, input shape and class names.
	cd "$alone"
	mv "$D/train.csv" "$D/train.csv.away"
	run --separate-stderr "$DTRAIN" predict -q model.safetensors - <x.csv
	mv "$D/train.csv.away" "$D/train.csv"
	status_is 0
	[ "$output" = "$want" ]
	[[ ${lines[0]} == 0,alpha,* ]]
	# A run directory names its best, as MODEL.yaml without --checkpoint does.
	run --separate-stderr "$DTRAIN" predict -q "$D/model.yaml" x.csv
	want=$output
	run --separate-stderr "$DTRAIN" predict "$D/run" x.csv
	status_is 0
	[ "$output" = "$want" ]
	stderr_has "using '$D/run/best.safetensors', the run's best checkpoint"
	# The checkpoint is given once.
	run --separate-stderr "$DTRAIN" predict model.safetensors --checkpoint model.safetensors x.csv
	status_is 2
	stderr_has "'model.safetensors' is a checkpoint already: give --checkpoint with a model file only"
}

@test "a diverged model's NaN outputs: null in JSON (valid), nan (not -nan) in CSV, and a warning naming them" {
	cd "$TMP"
	# as callbacks.bats' divergent run: the loss is nan from the first epoch
	"$DTRAIN" fit -q "$MODELS/blobs.yaml" --set 'compile.optimizer={sgd: {learning_rate: 1e5}}' --set fit.epochs=2 \
		--set checkpoint.dir="$TMP/nanrun" 2>/dev/null
	printf '0.5,1\n1,2\n-1,0\n3,3\n0,0\n' >in.csv
	run --separate-stderr "$DTRAIN" predict "$TMP/nanrun" in.csv --all --json -q
	status_is 0
	[ "${#lines[@]}" -eq 5 ]
	jq -se 'all(.[]; .probability == null and (.probabilities | all(. == null)))' <<<"$output" >/dev/null
	stderr_has "warning: the model's outputs are NaN or infinite for 5 of 5 samples (the first: sample 0)"
	run --separate-stderr "$DTRAIN" predict "$TMP/nanrun" in.csv --all -q
	status_is 0
	[[ ${lines[0]} == 0,*,nan,nan,nan,nan ]]
	[[ $output != *-nan* ]]
	# a trained model's predictions are finite: no warning
	gen_rows 5 3 >in8.csv
	run --separate-stderr "$DTRAIN" predict "$BATS_FILE_TMPDIR/model.yaml" in8.csv -q
	status_is 0
	[[ $stderr != *warning* ]]
}
