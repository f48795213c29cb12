#!/usr/bin/env bats
# Regression end to end: a model whose loss is mean_squared_error predicts
# values (not a class and "probabilities"), and fit and evaluate report MAE
# and RMSE. Weights are written by hand (a linear model with known kernel and
# bias), so every number is checked against arithmetic done here with awk.

load helpers

setup() {
	common_setup
	export OMP_NUM_THREADS=1
	# y = 2 x1 - x2 + 0.5 x3 + 3 + noise, 3 features in [0, 2).
	gen_rows 200 1 >"$TMP/train.csv"
	gen_rows 50 2 >"$TMP/test.csv"
	cut -d, -f1-3 "$TMP/test.csv" >"$TMP/features.csv"
	cat >"$TMP/linear.yaml" <<-EOF
		model:
		  layers:
		    - dense: {units: 1}
		compile: {optimizer: {sgd: {learning_rate: 0}}, loss: mean_squared_error}
		data:
		  train: {format: csv, path: train.csv, label: y}
		  test: {format: csv, path: test.csv, label: y}
		  batch_size: 16
		fit: {epochs: 1}
		checkpoint: {dir: run}
	EOF
}

# gen_rows N SEED: a header and N rows x1,x2,x3,y.
gen_rows() {
	awk -v n="$1" -v seed="$2" 'BEGIN { srand(seed); print "x1,x2,x3,y"; for (i = 0; i < n; i++) {
		a = rand() * 2; b = rand() * 2; c = rand() * 2
		printf "%.4f,%.4f,%.4f,%.4f\n", a, b, c, 2 * a - b + 0.5 * c + 3 + (rand() - 0.5) * 0.2 } }'
}

# weights FILE IN OUT KERNEL... BIAS...: a safetensors file with dense/kernel
# (IN, OUT), row by row, and dense/bias (OUT), as float32.
weights() {
	python3 - "$@" <<-'EOF'
		import json, struct, sys
		path, n_in, n_out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
		v = [float(x) for x in sys.argv[4:]]
		kernel, bias = v[:n_in * n_out], v[n_in * n_out:]
		assert len(bias) == n_out
		data = struct.pack("<%df" % len(kernel), *kernel) + struct.pack("<%df" % n_out, *bias)
		head = json.dumps({"dense/kernel": {"dtype": "F32", "shape": [n_in, n_out], "data_offsets": [0, 4 * len(kernel)]},
		                   "dense/bias": {"dtype": "F32", "shape": [n_out], "data_offsets": [4 * len(kernel), len(data)]}})
		head += " " * (-len(head) % 8)
		open(path, "wb").write(struct.pack("<Q", len(head)) + head.encode() + data)
	EOF
}

# close A B: two numbers agree to 1e-5, relative (float32 arithmetic against awk's doubles).
close() {
	awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; s = b < 0 ? -b : b; exit !(d <= 1e-5 * (s > 1 ? s : 1)) }' || {
		echo "$1 is not $2" >&2
		return 1
	}
}

# errors CSV C: "MAE RMSE MSE" of the constant prediction C against column y of CSV.
errors() {
	awk -F, -v c="$2" 'NR > 1 { d = c - $4; a += d < 0 ? -d : d; s += d * d; n++ }
		END { printf "%.9g %.9g %.9g\n", a / n, sqrt(s / n), s / n }' "$1"
}

@test "predict: one value per sample, x.w + b of the known weights, with index,value as the header" {
	weights "$TMP/w.safetensors" 3 1 2 -1 0.5 3
	run --separate-stderr "$DTRAIN" predict "$TMP/linear.yaml" --checkpoint "$TMP/w.safetensors" --header -q \
		"$TMP/features.csv"
	status_is 0
	[ "${lines[0]}" = "index,value" ]
	[ "${#lines[@]}" -eq 51 ]
	local want i=0
	while IFS=, read -r a b c; do
		want=$(awk -v a="$a" -v b="$b" -v c="$c" 'BEGIN { printf "%.9g", 2 * a - b + 0.5 * c + 3 }')
		[ "$(cut -d, -f1 <<<"${lines[i + 1]}")" = "$i" ]
		[ "$(awk -F, '{ print NF }' <<<"${lines[i + 1]}")" = 2 ]
		close "$(cut -d, -f2 <<<"${lines[i + 1]}")" "$want"
		i=$((i + 1))
	done < <(tail -n +2 "$TMP/features.csv")
	# no class, no probability
	[[ $output != *probab* && $output != *class* ]]
}

@test "predict: several outputs are columns y_0, y_1; --json gives {index, values}" {
	sed 's/units: 1/units: 2/; s/^  layers:/  input_shape: [3]\n  layers:/; s/train.csv/missing.csv/' \
		"$TMP/linear.yaml" >"$TMP/two.yaml"
	# y_0 = x1 + x3, y_1 = x2 + x3 + 10
	weights "$TMP/w2.safetensors" 3 2 1 0 0 1 1 1 0 10
	printf '1,2,3\n0.5,0,-1\n' >"$TMP/two.csv"
	run --separate-stderr "$DTRAIN" predict "$TMP/two.yaml" --checkpoint "$TMP/w2.safetensors" --header "$TMP/two.csv"
	status_is 0
	[ "$output" = "$(printf 'index,y_0,y_1\n0,4,15\n1,-0.5,9')" ]
	run --separate-stderr "$DTRAIN" predict "$TMP/two.yaml" --checkpoint "$TMP/w2.safetensors" --json "$TMP/two.csv"
	status_is 0
	[ "${lines[0]}" = '{"index":0,"values":[4,15]}' ]
	[ "${lines[1]}" = '{"index":1,"values":[-0.5,9]}' ]
}

@test "predict --all on a regression model: exit 2, it has no classes" {
	weights "$TMP/w.safetensors" 3 1 2 -1 0.5 3
	run --separate-stderr "$DTRAIN" predict "$TMP/linear.yaml" --checkpoint "$TMP/w.safetensors" --all "$TMP/features.csv"
	status_is 2
	stderr_has "--all" "regression" "mean_squared_error"
}

@test "fit --json: mae and rmse of a constant model are the ones computed by hand (train and test)" {
	# kernel 0, bias 4: every prediction is 4; learning rate 0 keeps it so
	weights "$TMP/c.safetensors" 3 1 0 0 0 4
	run --separate-stderr bash -c "cd '$TMP' && '$DTRAIN' fit linear.yaml --json -q --init-weights c.safetensors"
	status_is 0
	local epoch test want
	epoch=$(jq -c 'select(.event == "epoch")' <<<"$output")
	test=$(jq -c 'select(.event == "test")' <<<"$output")
	read -r -a want < <(errors "$TMP/train.csv" 4)
	close "$(jq -r .mae <<<"$epoch")" "${want[0]}"
	close "$(jq -r .rmse <<<"$epoch")" "${want[1]}"
	close "$(jq -r .loss <<<"$epoch")" "${want[2]}"
	read -r -a want < <(errors "$TMP/test.csv" 4)
	close "$(jq -r .mae <<<"$test")" "${want[0]}"
	close "$(jq -r .rmse <<<"$test")" "${want[1]}"
	# a regression model has no accuracy unless compile.metrics asks
	jq -e 'has("accuracy") | not' <<<"$epoch" >/dev/null
}

@test "fit: the progress line, validation and csv_logger carry mae, rmse, val_mae, val_rmse" {
	weights "$TMP/c.safetensors" 3 1 0 0 0 4
	sed -i 's/^fit: {epochs: 1}$/fit: {epochs: 1, callbacks: [csv_logger]}/' "$TMP/linear.yaml"
	run --separate-stderr bash -c "cd '$TMP' && '$DTRAIN' fit linear.yaml --init-weights c.safetensors \
		--set data.validation_split=0.25"
	status_is 0
	[[ $stderr == *" - loss: "*" - mae: "*" - rmse: "*" - val_loss: "*" - val_mae: "*" - val_rmse: "* ]]
	[ "$(head -n 1 "$TMP/run/history.csv")" = "epoch,loss,mae,rmse,val_loss,val_mae,val_rmse" ]
	# validation is the last quarter of train.csv (rows 151 to 200)
	local want
	read -r -a want < <(tail -n 50 "$TMP/train.csv" | sed '1i h' | errors /dev/stdin 4)
	close "$(cut -d, -f6 <<<"$(tail -n 1 "$TMP/run/history.csv")")" "${want[0]}"
	close "$(cut -d, -f7 <<<"$(tail -n 1 "$TMP/run/history.csv")")" "${want[1]}"
}

@test "evaluate: mae and rmse of a regression model, text and --json" {
	weights "$TMP/c.safetensors" 3 1 0 0 0 4
	local want
	read -r -a want < <(errors "$TMP/test.csv" 4)
	run --separate-stderr "$DTRAIN" evaluate "$TMP/linear.yaml" --checkpoint "$TMP/c.safetensors" --json
	status_is 0
	close "$(jq -r .mae <<<"$output")" "${want[0]}"
	close "$(jq -r .rmse <<<"$output")" "${want[1]}"
	close "$(jq -r .loss <<<"$output")" "${want[2]}"
	run --separate-stderr "$DTRAIN" evaluate "$TMP/linear.yaml" --checkpoint "$TMP/c.safetensors"
	status_is 0
	# the last line (a note on the CSV's header comes first)
	[[ ${stderr##*$'\n'} == "50 samples - loss: "*" - mae: $(printf '%.4f' "${want[0]}") - rmse: $(printf '%.4f' "${want[1]}")" ]]
}

@test "evaluate and fit's test line: a loss below 0.001 prints as Keras prints it (1.2345e-07), not as 0.0000" {
	weights "$TMP/w.safetensors" 3 1 2 -1 0.5 3
	# the weights' own function, give or take 0.001: a loss near 3e-7
	awk 'BEGIN { srand(4); print "x1,x2,x3,y"; for (i = 0; i < 40; i++) { a = rand(); b = rand(); c = rand()
		printf "%.4f,%.4f,%.4f,%.7f\n", a, b, c, 2 * a - b + 0.5 * c + 3 + (rand() - 0.5) * 0.002 } }' >"$TMP/test.csv"
	run --separate-stderr "$DTRAIN" evaluate "$TMP/linear.yaml" --checkpoint "$TMP/w.safetensors" --json -q
	status_is 0
	local loss mae
	loss=$(printf '%.4e' "$(jq -r .loss <<<"$output")")
	mae=$(printf '%.4e' "$(jq -r .mae <<<"$output")")
	[[ $loss == *e-0[67] && $mae == *e-04 ]]
	run --separate-stderr "$DTRAIN" evaluate "$TMP/linear.yaml" --checkpoint "$TMP/w.safetensors" -q
	status_is 0
	[[ $stderr == "40 samples - loss: $loss - mae: $mae - rmse: "*e-04 ]]
	run --separate-stderr bash -c "cd '$TMP' && '$DTRAIN' fit linear.yaml --init-weights w.safetensors"
	status_is 0
	[[ ${stderr##*$'\n'} == "test: 40 samples - loss: $loss - mae: $mae - rmse: "*e-04 ]]
}

@test "compile.metrics: [mae] beside accuracy on a classifier with one-hot labels; a bad name is a config error" {
	cat >"$TMP/cls.yaml" <<-EOF
		model:
		  layers:
		    - dense: {units: 3, activation: softmax}
		compile: {optimizer: adam, loss: categorical_crossentropy, metrics: [accuracy, mean_absolute_error]}
		data:
		  train: {format: synthetic, kind: blobs, samples: 64, classes: 3, features: 2, seed: 1}
		  batch_size: 16
		  one_hot: true
		fit: {epochs: 1}
		checkpoint: {enabled: false}
	EOF
	run --separate-stderr "$DTRAIN" fit "$TMP/cls.yaml" --json -q
	status_is 0
	jq -se 'map(select(.event == "epoch") | has("accuracy") and has("mae") and has("rmse")) | length == 1 and all' \
		<<<"$output" >/dev/null
	# sparse labels are not shaped like the output: no error to compare
	run --separate-stderr "$DTRAIN" fit "$TMP/cls.yaml" -q --set data.one_hot=false \
		--set compile.loss=sparse_categorical_crossentropy
	status_is 2
	stderr_has "cls.yaml:4:" "mean_absolute_error"
	run --separate-stderr "$DTRAIN" fit "$TMP/cls.yaml" -q --set 'compile.metrics=[rmes]'
	status_is 2
	stderr_has "did you mean 'rmse'"
}

@test "models/diabetes_mlp.yaml: trains; predict's values square-average to evaluate's loss; evaluate prints mae, rmse" {
	local model=$REPO/models/diabetes_mlp.yaml test=$REPO/models/data/diabetes_test.csv
	run --separate-stderr "$DTRAIN" fit "$model" -q --json --set fit.epochs=3 --set checkpoint.dir="$TMP/run"
	status_is 0
	jq -se 'map(select(.event == "epoch") | has("mae") and has("rmse") and has("val_mae") and has("val_rmse"))
		| length == 3 and all' <<<"$output" >/dev/null
	run --separate-stderr "$DTRAIN" evaluate "$model" --set checkpoint.dir="$TMP/run" --json
	status_is 0
	local eval=$output
	[ "$(jq -r .samples <<<"$eval")" = 89 ]
	# predict reads the test file with its label column (skipped): one value per row
	run --separate-stderr "$DTRAIN" predict "$model" --set checkpoint.dir="$TMP/run" "$test"
	status_is 0
	[ "${#lines[@]}" -eq 89 ]
	local got
	got=$(paste -d, <(printf '%s\n' "${lines[@]}") <(tail -n +2 "$test" | cut -d, -f11) |
		awk -F, 'NF != 3 { exit 1 } { d = $2 - $3; a += d < 0 ? -d : d; s += d * d; n++ }
			END { printf "%.9g %.9g %.9g\n", s / n, a / n, sqrt(s / n) }')
	read -r -a got <<<"$got"
	close "${got[0]}" "$(jq -r .loss <<<"$eval")"
	close "${got[1]}" "$(jq -r .mae <<<"$eval")"
	close "${got[2]}" "$(jq -r .rmse <<<"$eval")"
	run --separate-stderr "$DTRAIN" evaluate "$model" --set checkpoint.dir="$TMP/run"
	status_is 0
	# The last line: a note naming the checkpoint read comes first.
	[[ ${stderr##*$'\n'} == "89 samples - loss: "*" - mae: "*" - rmse: "* ]]
}

@test "validation_split on a regression model: no warning about classes (its targets are values)" {
	run --separate-stderr "$DTRAIN" fit "$REPO/models/diabetes_mlp.yaml" --set fit.epochs=1 \
		--set data.validation_split=0.2 --set checkpoint.enabled=false
	status_is 0
	[[ $stderr == *"val_rmse"* ]]
	[[ $stderr != *"classes"* && $stderr != *"one class"* ]]
}

@test "whole-number targets are values, not classes: a test target above every training target is scored (fit and evaluate)" {
	# The diabetes data's targets are whole numbers; they were taken for class numbers, and a
	# test target above the training data's largest was "not a class of the training data".
	printf 'x1,x2,x3,y\n1,0,0,3\n0,1,0,7\n0,0,1,12\n1,1,1,5\n' >"$TMP/train.csv"
	printf 'x1,x2,x3,y\n1,0,0,40\n0,1,0,2\n' >"$TMP/test.csv"
	weights "$TMP/c.safetensors" 3 1 0 0 0 4
	run --separate-stderr bash -c "cd '$TMP' && '$DTRAIN' fit linear.yaml --json -q --init-weights c.safetensors"
	status_is 0
	local test want
	test=$(jq -c 'select(.event == "test")' <<<"$output")
	read -r -a want < <(errors "$TMP/test.csv" 4)
	[ "$(jq -r .samples <<<"$test")" = 2 ]
	close "$(jq -r .mae <<<"$test")" "${want[0]}"
	close "$(jq -r .rmse <<<"$test")" "${want[1]}"
	# the checkpoint keeps no classes, and evaluate scores the same file alike
	! grep -a -q num_classes "$TMP/run/latest.safetensors"
	run --separate-stderr "$DTRAIN" evaluate "$TMP/run/latest.safetensors" --data "$TMP/test.csv" --json
	status_is 0
	close "$(jq -r .mae <<<"$output")" "${want[0]}"
}
