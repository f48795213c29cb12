#!/usr/bin/env bats
# dtrain plot and fit.plot: the PNG is decoded by tests/tools/check_curves.py
# (zlib and the row filters, no dtrain code), its size checked, and every
# value of history.csv looked for in its run's colour at the pixel the data
# puts it (the layout from --json says where each panel's data lies).

load helpers

setup() {
	common_setup
	export OMP_NUM_THREADS=1
	CHECK="python3 $REPO/tests/tools/check_curves.py"
}

# fit_blobs DIR ARGS...: the blobs model into run directory DIR, with history.csv.
fit_blobs() {
	local dir=$1
	shift
	"$DTRAIN" fit "$MODELS/blobs.yaml" --set checkpoint.dir="$dir" --set 'fit.callbacks=[csv_logger]' -q "$@"
}

@test "plot: one run, one panel per metric, every point in its place" {
	fit_blobs "$TMP/a" --set fit.epochs=4
	cd "$TMP"
	"$DTRAIN" plot a --json >layout.json
	[ -f curves.png ]
	[ "$($CHECK size curves.png)" = "1120 402" ] # 2 panels of 560x360 and the legend (42 pixels)
	[ "$(jq -c '[.panels[].metric]' layout.json)" = '["loss","accuracy"]' ]
	[ "$(jq -c '[.runs[] | [.name, .color]]' layout.json)" = '[["a","#1f77b4"]]' ]
	run $CHECK curves curves.png layout.json a/history.csv
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[ "$output" = "16 points" ] # 4 epochs x loss, accuracy, val_loss, val_accuracy
	$CHECK legend curves.png layout.json
}

@test "plot: two runs overlaid in two colours with a legend; -o and --size" {
	fit_blobs "$TMP/a" --set fit.epochs=3
	fit_blobs "$TMP/b" --set fit.epochs=5 --set 'compile.optimizer={sgd: {learning_rate: 0.5}}'
	"$DTRAIN" plot "$TMP/a/history.csv" "$TMP/b" -o "$TMP/both.png" --size 900x700 --json >"$TMP/layout.json"
	[ "$($CHECK size "$TMP/both.png")" = "900 700" ]
	[ "$(jq -c '[.runs[] | [.name, .color]]' "$TMP/layout.json")" = '[["a","#1f77b4"],["b","#ff7f0e"]]' ]
	run $CHECK curves "$TMP/both.png" "$TMP/layout.json" "$TMP/a/history.csv" "$TMP/b/history.csv"
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[ "$output" = "32 points" ]
	$CHECK legend "$TMP/both.png" "$TMP/layout.json"
	# The colours are the runs': swapped, the points are not found.
	run $CHECK curves "$TMP/both.png" "$TMP/layout.json" "$TMP/b/history.csv" "$TMP/a/history.csv"
	[ "$status" -eq 1 ]
}

@test "plot: a learning-rate schedule and a regression run get their panels" {
	fit_blobs "$TMP/lr" --set fit.epochs=3 \
		--set 'compile.optimizer={sgd: {learning_rate: {exponential_decay: {initial_learning_rate: 0.1, decay_steps: 25, decay_rate: 0.5}}}}'
	"$DTRAIN" plot "$TMP/lr" -o "$TMP/lr.png" --json >"$TMP/layout.json"
	[ "$(jq -c '[.panels[].metric]' "$TMP/layout.json")" = '["loss","accuracy","learning_rate"]' ]
	[ "$($CHECK size "$TMP/lr.png")" = "1120 762" ]
	$CHECK curves "$TMP/lr.png" "$TMP/layout.json" "$TMP/lr/history.csv"
	# A history.csv written by hand: one metric, no validation, a missing value.
	printf 'epoch,mae\n0,3.5\n1,\n2,1.25\n' >"$TMP/h.csv"
	"$DTRAIN" plot "$TMP/h.csv" -o "$TMP/h.png" --json >"$TMP/layout.json"
	[ "$($CHECK size "$TMP/h.png")" = "560 402" ]
	[ "$($CHECK curves "$TMP/h.png" "$TMP/layout.json" "$TMP/h.csv")" = "2 points" ]
}

@test "fit.plot: true rewrites curves.png in the run directory at each epoch's end" {
	fit_blobs "$TMP/run" --set fit.epochs=3 --set fit.plot=true
	[ -f "$TMP/run/curves.png" ]
	[ ! -e "$TMP/run/curves.png.tmp" ]
	# The same picture dtrain plot draws from history.csv.
	"$DTRAIN" plot "$TMP/run" -o "$TMP/again.png" --json >"$TMP/layout.json"
	cmp "$TMP/run/curves.png" "$TMP/again.png"
	$CHECK curves "$TMP/run/curves.png" "$TMP/layout.json" "$TMP/run/history.csv"
	# Interrupted after epoch 2 and resumed: the picture still has every epoch.
	fit_blobs "$TMP/res" --set fit.epochs=2 --set fit.plot=true
	fit_blobs "$TMP/res" --set fit.epochs=3 --set fit.plot=true --resume
	"$DTRAIN" plot "$TMP/res" -o "$TMP/res.png"
	cmp "$TMP/res/curves.png" "$TMP/res.png"
	[ "$(awk 'END { print NR }' "$TMP/res/history.csv")" -eq 4 ]
}

@test "plot: errors name the file and row, exit 2 for usage and 1 for data" {
	run --separate-stderr "$DTRAIN" plot
	status_is 2
	stderr_has "no run to plot"
	run --separate-stderr "$DTRAIN" plot --size 100 x
	status_is 2
	stderr_has "--size must be WIDTHxHEIGHT"
	run --separate-stderr "$DTRAIN" plot --frobnicate x
	status_is 2
	stderr_has "unknown option '--frobnicate'"
	mkdir "$TMP/empty"
	run --separate-stderr "$DTRAIN" plot "$TMP/empty" -o "$TMP/x.png"
	status_is 1
	stderr_has "no history.csv in '$TMP/empty'" "csv_logger"
	printf 'epoch,loss\n0,1.5\n1,abc\n' >"$TMP/bad.csv"
	run --separate-stderr "$DTRAIN" plot "$TMP/bad.csv" -o "$TMP/x.png"
	status_is 1
	stderr_has "$TMP/bad.csv:3: 'abc' (column 'loss') is not a number"
	printf 'epoch,loss\n0,1.5,2\n' >"$TMP/bad.csv"
	run --separate-stderr "$DTRAIN" plot "$TMP/bad.csv" -o "$TMP/x.png"
	status_is 1
	stderr_has "$TMP/bad.csv:2: 3 fields, the header has 2"
	printf 'step,loss\n' >"$TMP/bad.csv"
	run --separate-stderr "$DTRAIN" plot "$TMP/bad.csv" -o "$TMP/x.png"
	status_is 1
	stderr_has "$TMP/bad.csv:1: the header must be 'epoch'"
	printf 'epoch,loss\n0,1\n' >"$TMP/ok.csv"
	run --separate-stderr "$DTRAIN" plot "$TMP/ok.csv" -o "$TMP/x.png" --size 100x100
	status_is 1
	stderr_has "too small"
	[ ! -e "$TMP/x.png" ]
	run --separate-stderr "$DTRAIN" plot "$TMP/ok.csv" -o "$TMP/no/such/dir/x.png"
	status_is 1
	stderr_has "cannot open '$TMP/no/such/dir/x.png.tmp'"
}
