#!/usr/bin/env bats
# CSV intake that does not eat data: header: auto (a note says how the first
# row was read), skip_rows for preamble lines, a UTF-8 byte-order mark, and
# first rows that look odd (nan, inf, NUL bytes), in fit, evaluate and
# predict. Records are counted with evaluate --json ("samples").

load helpers

# model FILE.csv [KEY: VALUE...]: a small model on that CSV (as data.train
# and data.test), extra keys in the source's mapping, written to m.yaml.
model() {
	local path=$1 extra=""
	shift
	for kv in "$@"; do extra="$extra, $kv"; done
	cat >"$TMP/m.yaml" <<-EOF
		model:
		  layers:
		    - dense: {units: 2, activation: softmax}
		compile: {optimizer: sgd, loss: sparse_categorical_crossentropy}
		data:
		  train: {format: csv, path: $path$extra}
		  test: {format: csv, path: $path$extra}
		  batch_size: 2
		fit: {epochs: 1}
		checkpoint: {dir: $TMP/run}
	EOF
}

# count_samples: fits m.yaml, then sets $samples to the record count of its
# test set (evaluate --json) and $stderr to what evaluate said.
count_samples() {
	"$DTRAIN" fit -q "$TMP/m.yaml" >/dev/null || return 1
	run --separate-stderr "$DTRAIN" evaluate --json "$TMP/m.yaml"
	status_is 0 || return 1
	samples=$(jq -r .samples <<<"$output")
}

setup_file() {
	local dir=$BATS_FILE_TMPDIR
	DTRAIN=${DTRAIN:-$BATS_TEST_DIRNAME/../../build/dtrain}
	# The model predict uses ($D/m.yaml), trained once on two features.
	awk 'BEGIN { srand(2); print "f1,f2,kind"; for (i = 0; i < 60; i++) { c = i % 2;
		printf "%.3f,%.3f,%s\n", c + rand() * 0.3, c + rand() * 0.3, (c ? "b" : "a") } }' >"$dir/train.csv"
	TMP=$dir model train.csv "label: kind"
	OMP_NUM_THREADS=1 "$DTRAIN" fit -q "$dir/m.yaml" >/dev/null 2>&1 || skip "training the fixture failed"
}

setup() {
	common_setup
	D=$BATS_FILE_TMPDIR
	export OMP_NUM_THREADS=1
	cd "$TMP"
}

@test "header: auto keeps every row of a headerless file and says the first row is data" {
	printf '1,2,0\n3,4,1\n5,6,0\n7,8,1\n' >h.csv
	model h.csv
	count_samples
	[ "$samples" -eq 4 ]
	stderr_has "dtrain: note: '$TMP/h.csv': first row is data"
	# String labels in every row are not a header (UCI's iris.data).
	printf '5.1,3.5,setosa\n4.9,3.0,versicolor\n4.7,3.2,setosa\n' >iris.data
	model iris.data
	count_samples
	[ "$samples" -eq 3 ]
	# header: true says the first row is a header without looking, and notes nothing.
	model h.csv "header: true"
	count_samples
	[ "$samples" -eq 3 ]
	[[ $stderr != *"first row"* ]]
}

@test "header: auto finds a header of names and names its columns in a note; -q silences it" {
	printf 'sepal,petal,kind\n1,2,0\n3,4,1\n' >n.csv
	model n.csv
	count_samples
	[ "$samples" -eq 2 ]
	stderr_has "dtrain: note: '$TMP/n.csv': first row is a header ('sepal', 'petal', 'kind')"
	run --separate-stderr "$DTRAIN" fit -q "$TMP/m.yaml"
	status_is 0
	[ -z "$stderr" ]
	# header: false reads the names as a row: a bad one, named.
	model n.csv "header: false"
	run --separate-stderr "$DTRAIN" fit -q "$TMP/m.yaml"
	status_is 1
	stderr_has "'$TMP/n.csv', row 1, column 1: 'sepal' is not a number"
}

@test "header: auto finds pandas' header of numbered columns: a label name over numbers; fit, evaluate, predict" {
	# df.to_csv(index=False) of a DataFrame with integer column names: only the label field is a word.
	printf '0,1,target\n1,2,0\n3,4,1\n\n5,6,0\n' >p.csv
	model p.csv
	count_samples
	[ "$samples" -eq 3 ]
	stderr_has "dtrain: note: '$TMP/p.csv': first row is a header ('0', '1', 'target')"
	# The labels are class numbers: two classes, 'target' is none of them.
	run safetensors_header "$TMP/run/latest.safetensors"
	[ "$(jq -r .__metadata__.num_classes <<<"$output")" = 2 ]
	[ "$(jq -r .__metadata__.class_names <<<"$output")" = null ]
	# predict reads the same file in the training layout: three rows, not four.
	run --separate-stderr "$DTRAIN" predict "$TMP/m.yaml" p.csv
	status_is 0
	[ "${#lines[@]}" -eq 3 ]
	stderr_has "first row is a header ('0', '1', 'target')"
	# A label named in the model file makes the row a header by itself.
	model p.csv "label: target"
	count_samples
	[ "$samples" -eq 3 ]
	# A word over a word is a class, not a name: the first row stays data, in predict too.
	printf '0,1,setosa\n1,2,versicolor\n3,4,setosa\n' >w.csv
	model w.csv
	count_samples
	[ "$samples" -eq 3 ]
	stderr_has "'$TMP/w.csv': first row is data"
	run --separate-stderr "$DTRAIN" predict "$TMP/m.yaml" w.csv
	status_is 0
	[ "${#lines[@]}" -eq 3 ]
}

@test "a first row of nan, inf or 1e999 is data (a bad row, named), not a header" {
	printf 'nan,inf,0\n1e999,-inf,1\n1,2,0\n3,4,1\n' >odd.csv
	model odd.csv
	run --separate-stderr "$DTRAIN" fit -q "$TMP/m.yaml"
	status_is 1
	stderr_has "'$TMP/odd.csv', row 1, column 1: 'nan' is not a finite number"
	# Skipped as unreadable records, they still count: no row was taken for a header.
	run --separate-stderr "$DTRAIN" fit "$TMP/m.yaml" --json --set data.on_error=skip
	status_is 0
	stderr_has "first row is data" "skipped 2 unreadable records" \
		"records 0 (row 1, column 1: 'nan' is not a finite number), 1 (row 2, column 1: '1e999' is beyond float32's range"
}

@test "a value beyond float32's range is named as such, not as a non-finite number" {
	printf 'a,b,label\n1,2,0\n1e39,3,1\n3e38,2,0\n-2e39,3,1\n1e400,1,0\n' >big.csv
	model big.csv
	run --separate-stderr "$DTRAIN" fit -q "$TMP/m.yaml"
	status_is 1
	stderr_has "'$TMP/big.csv', row 3, column 'a': '1e39' is beyond float32's range (+-3.4e38)"
	run --separate-stderr "$DTRAIN" fit -q "$TMP/m.yaml" --set data.on_error=skip
	status_is 0
	stderr_has "records 1 (row 3, column 'a': '1e39' is beyond float32's range (+-3.4e38)), 3 (row 5, column 'a': '-2e39' is beyond" \
		"4 (row 6, column 'a': '1e400' is beyond float32's range"
}

@test "a bad row fails the run before any step, naming the lowest bad row, also in the validation split" {
	awk 'BEGIN { OFS = ","; print "a,b,label"; for (i = 0; i < 100; i++) if (i == 93 || i == 97) print "1,x,0"; else print i % 2, i % 3, i % 2 }' >late.csv
	model late.csv "label: label"
	run --separate-stderr "$DTRAIN" fit "$TMP/m.yaml" --set data.validation_split=0.2 --set checkpoint.every=1
	status_is 1
	stderr_has "'$TMP/late.csv', row 95, column 'b': 'x' is not a number"
	[[ $stderr != *Epoch* ]]
	# not one step ran: checkpoint.every=1 wrote nothing
	[ -z "$(ls -A "$TMP/run" 2>/dev/null)" ]
	# a command that wants only the input shape reads no record: summary still prints
	run --separate-stderr "$DTRAIN" summary "$TMP/m.yaml"
	status_is 0
	[[ $output == *"Total params: 6"* ]]
}

@test "skip_rows: N skips preamble lines; rows keep their line numbers" {
	printf '4,2,a,b\n\nf1,f2,kind\n1,2,0\n3,4,1\n5,6,0\n7,x,1\n' >pre.csv
	model pre.csv "skip_rows: 2" "label: kind"
	"$DTRAIN" fit -q "$TMP/m.yaml" --set data.on_error=skip >/dev/null
	run --separate-stderr "$DTRAIN" evaluate --json "$TMP/m.yaml"
	status_is 1
	stderr_has "note: '$TMP/pre.csv': first row (line 3) is a header ('f1', 'f2', 'kind')" \
		"'$TMP/pre.csv', row 7, column 'f2': 'x' is not a number"
	run --separate-stderr "$DTRAIN" evaluate --json "$TMP/m.yaml" --set data.on_error=skip
	status_is 0
	[ "$(jq -r .samples <<<"$output")" -eq 3 ] # 4 records, the bad row skipped: 3 scored
	model pre.csv "skip_rows: 7"
	run --separate-stderr "$DTRAIN" fit -q "$TMP/m.yaml"
	status_is 1
	stderr_has "'$TMP/pre.csv' has no rows after the 7 lines of skip_rows"
}

@test "a preamble line of counts taken for a header: the error suggests skip_rows" {
	# scikit-learn's wine_data.csv starts so: samples, features, then the class names
	printf '4,2,class_0,class_1\n1,2,0\n3,4,1\n5,6,0\n7,8,1\n' >wine.csv
	model wine.csv "label: -1"
	run --separate-stderr "$DTRAIN" fit -q "$TMP/m.yaml"
	status_is 1
	stderr_has "'$TMP/wine.csv' has no readable row; the first: row 2: expected 4 fields, found 3" \
		"(is line 1 a preamble, not the header? skip_rows: N skips N lines)"
	model wine.csv "label: -1" "skip_rows: 1"
	count_samples
	[ "$samples" -eq 4 ]
	# a comment line of one field, or a file of another separator, said only "found 1 field"
	printf '# made by hand\nf1,f2,kind\n1,2,0\n3,4,1\n' >comment.csv
	model comment.csv
	run --separate-stderr "$DTRAIN" fit -q "$TMP/m.yaml"
	status_is 1
	stderr_has "'$TMP/comment.csv', row 1: found 1 field, expected features and a label" \
		"(a preamble? skip_rows: N skips N lines; another separator? delimiter: names it)"
	model comment.csv "skip_rows: 1"
	count_samples
	[ "$samples" -eq 2 ]
}

@test "a UTF-8 byte-order mark before the header: the label is found by name" {
	printf '\357\273\277kind,f1,f2\na,1,2\nb,3,4\na,5,6\n' >bom.csv
	model bom.csv "label: kind"
	count_samples
	[ "$samples" -eq 3 ]
	stderr_has "first row is a header ('kind', 'f1', 'f2')"
}

@test "a label by name on a file without a header: an error naming the file, the column and the row" {
	printf '1,2,0\n3,4,1\n' >h.csv
	model h.csv "label: kind"
	run --separate-stderr "$DTRAIN" fit -q "$TMP/m.yaml"
	status_is 2
	stderr_has "'$TMP/h.csv' has no column 'kind'" "first row (row 1) is data"
	model h.csv "header: maybe"
	run --separate-stderr "$DTRAIN" fit -q "$TMP/m.yaml"
	status_is 2
	stderr_has "header must be auto, true or false, not 'maybe'"
}

@test "predict: a headerless input keeps its first row, and a note says so (-q: none)" {
	printf '0.1,0.1\n1.1,1.1\n0.2,0.2\n' >x.csv
	run --separate-stderr "$DTRAIN" predict "$D/m.yaml" x.csv
	status_is 0
	[ "${#lines[@]}" -eq 3 ]
	stderr_has "dtrain: note: 'x.csv': first row is data"
	printf '\357\273\277f1,f2\n0.1,0.1\n1.1,1.1\n' >bom.csv
	run --separate-stderr "$DTRAIN" predict -q "$D/m.yaml" bom.csv
	status_is 0
	[ "${#lines[@]}" -eq 2 ]
	[ -z "$stderr" ]
	printf '\357\273\2770.1,0.1\n1.1,1.1\n' >bom2.csv
	run --separate-stderr "$DTRAIN" predict -q "$D/m.yaml" bom2.csv
	status_is 0
	[ "${#lines[@]}" -eq 2 ]
}

@test "predict: a first row of nan, inf or 1e999 is a data row (an error naming it), not a header" {
	for row in 'nan,inf' '-inf,1' '1e999,2'; do
		printf '%s\n0.1,0.1\n1.1,1.1\n' "$row" >odd.csv
		run --separate-stderr "$DTRAIN" predict "$D/m.yaml" odd.csv
		status_is 1
		stderr_has "'odd.csv', row 1, column"
		[[ $stderr == *"is not a finite number"* || ($row == 1e999* && $stderr == *"is beyond float32's range"*) ]]
		[ -z "$output" ]
	done
}

@test "predict: a NUL byte in a row is an error naming the row" {
	printf '0.1,0.1\n1.1\0009,1.1\n0.2,0.2\n' >nul.csv
	run --separate-stderr "$DTRAIN" predict "$D/m.yaml" nul.csv
	status_is 1
	not_crashed
	stderr_has "'nul.csv', row 2: the row holds a NUL byte"
	printf '0.1\000,0.1\n1.1,1.1\n' | {
		run --separate-stderr "$DTRAIN" predict "$D/m.yaml" -
		status_is 1
		stderr_has "'<stdin>', row 1: the row holds a NUL byte"
	}
}

# cols_fixture: in $TMP/cols, train.csv (column a decides the class, b and c
# are noise of other scales), test.csv of other rows in the same order,
# moved.csv the same rows with the columns in another order (the label
# first), and cm.yaml trained on train.csv into run/ (fit --json in fit.json).
cols_fixture() {
	mkdir -p "$TMP/cols"
	cd "$TMP/cols"
	for f in train:3:120 test:4:40; do
		IFS=: read -r name seed n <<<"$f"
		awk -v seed="$seed" -v n="$n" 'BEGIN { srand(seed); print "a,b,c,y"; for (i = 0; i < n; i++) { k = i % 2;
			printf "%.3f,%.3f,%.3f,%s\n", 2 * k + rand() * 1.5, rand() * 4, rand() - 3, (k ? "yes" : "no") } }' \
			>"$name.csv"
	done
	awk -F, -v OFS=, '{ print $4, $3, $1, $2 }' test.csv >moved.csv
	cat >cm.yaml <<-EOF
		model: {layers: [dense: {units: 8, activation: relu}, dense: {units: 2, activation: softmax}]}
		compile: {optimizer: {adam: {learning_rate: 0.05}}, loss: sparse_categorical_crossentropy, metrics: [accuracy]}
		data:
		  train: {format: csv, path: train.csv, label: y}
		  test: {format: csv, path: test.csv, label: y}
		  batch_size: 16
		fit: {epochs: 10, seed: 1}
		checkpoint: {dir: $TMP/cols/run}
	EOF
	"$DTRAIN" fit -q --json cm.yaml >fit.json
}

@test "columns by name: the checkpoint keeps the training header's feature names" {
	cols_fixture
	run safetensors_header run/latest.safetensors
	status_is 0
	[ "$(jq -r '.__metadata__.feature_names' <<<"$output")" = '["a","b","c"]' ]
}

@test "columns by name: fit's data.test, evaluate and evaluate --data score a file of moved columns as in order" {
	cols_fixture
	local want got
	want=$(jq -c 'select(.event == "test") | [.accuracy, .loss]' fit.json)
	[ "$(jq -r '.[0]' <<<"$want")" != 0.5 ] # the data teaches something, so that an order that mixes the columns up shows
	run --separate-stderr "$DTRAIN" fit --json cm.yaml --set data.test.path=moved.csv
	status_is 0
	[ "$(jq -c 'select(.event == "test") | [.accuracy, .loss]' <<<"$output")" = "$want" ]
	stderr_has "dtrain: note: 'moved.csv': columns taken by name, in another order than the training data's"
	run --separate-stderr "$DTRAIN" fit -q cm.yaml --set data.test.path=moved.csv
	[[ $stderr != *"columns taken by name"* ]]

	want=$("$DTRAIN" evaluate --json cm.yaml 2>/dev/null | jq -c '[.accuracy, .loss, .samples]')
	run --separate-stderr "$DTRAIN" evaluate --json cm.yaml --set data.test.path=moved.csv
	status_is 0
	[ "$(jq -c '[.accuracy, .loss, .samples]' <<<"$output")" = "$want" ]
	stderr_has "dtrain: note: 'moved.csv': columns taken by name, in another order than the training data's"
	run --separate-stderr "$DTRAIN" evaluate --json run/latest.safetensors --data moved.csv
	status_is 0
	got=$("$DTRAIN" evaluate --json run/latest.safetensors --data test.csv 2>/dev/null | jq -c '[.accuracy, .loss]')
	[ "$(jq -c '[.accuracy, .loss]' <<<"$output")" = "$got" ]
}

@test "columns by name: predict prints the same lines for a file of moved columns, and for features alone" {
	cols_fixture
	"$DTRAIN" predict -q run test.csv >want.txt
	[ -s want.txt ]
	run --separate-stderr "$DTRAIN" predict run moved.csv
	status_is 0
	[ "$output" = "$(cat want.txt)" ]
	stderr_has "dtrain: note: 'moved.csv': columns taken by name, in another order than the training data's"
	cut -d, -f2-4 moved.csv >features.csv # c,a,b: no label
	run --separate-stderr "$DTRAIN" predict -q run features.csv
	status_is 0
	[ "$output" = "$(cat want.txt)" ]
	[ -z "$stderr" ]
}

@test "columns by name: a training feature missing, or a column training lacked, is an error naming the file and column" {
	cols_fixture
	cut -d, -f1-3 moved.csv >missing.csv # y,c,a: no b
	sed '1s/$/,d/; 2,$s/$/,7/' moved.csv >extra.csv
	for cmd in "fit -q cm.yaml --set data.test.path=missing.csv" "evaluate cm.yaml --set data.test.path=missing.csv" \
		"predict run missing.csv"; do
		run --separate-stderr "$DTRAIN" $cmd
		not_crashed
		status_is 1
		stderr_has "'missing.csv' has no column 'b' in its header (row 1), a feature of the training data"
	done
	for cmd in "evaluate cm.yaml --set data.test.path=extra.csv" "predict run extra.csv"; do
		run --separate-stderr "$DTRAIN" $cmd
		status_is 1
		stderr_has "'extra.csv' has a column 'd' (row 1, its header) that is not a feature of the training data"
	done
}

@test "columns by name: a test file without a header, and a checkpoint without feature_names, read by position" {
	cols_fixture
	local want
	want=$("$DTRAIN" evaluate --json cm.yaml 2>/dev/null | jq -c '[.accuracy, .loss]')
	tail -n +2 test.csv >plain.csv
	run --separate-stderr "$DTRAIN" evaluate --json cm.yaml --set data.test.path=plain.csv --set data.test.label=-1
	status_is 0
	[ "$(jq -c '[.accuracy, .loss]' <<<"$output")" = "$want" ]
	# An older checkpoint: the header's columns in the file's order, as before.
	python3 "$REPO/tests/tools/ckpt_meta.py" run/latest.safetensors -feature_names
	run --separate-stderr "$DTRAIN" evaluate --json run/latest.safetensors --data test.csv
	status_is 0
	[ "$(jq -c '[.accuracy, .loss]' <<<"$output")" = "$want" ]
	run --separate-stderr "$DTRAIN" evaluate --json run/latest.safetensors --data moved.csv
	status_is 0
	[[ $stderr != *"columns taken by name"* ]]
	[ "$(jq -c '[.accuracy, .loss]' <<<"$output")" != "$want" ]
}
