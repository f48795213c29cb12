#!/usr/bin/env bats
# The data pipeline end to end: prefetch and cache do not change the weights,
# augmentation trains reproducibly on images, normalize: auto is saved in the
# checkpoint and used by evaluate, and the pipeline keys' errors.

load helpers

setup() {
	common_setup
	cd "$TMP"
	export OMP_NUM_THREADS=1
}

# weights FILE: the tensor data of a safetensors file (after its header).
weights() {
	local len
	len=$(od -An -t u8 -N 8 "$1" | tr -d ' ')
	tail -c +$((len + 9)) "$1"
}

# same_weights A B: two checkpoints hold the same tensors, byte for byte.
same_weights() {
	cmp <(weights "$1") <(weights "$2")
}

@test "data.prefetch=0 and the default prefetch give identical weights" {
	"$DTRAIN" fit -q "$MODELS/blobs.yaml" --set fit.epochs=3 --set checkpoint.dir=on
	"$DTRAIN" fit -q "$MODELS/blobs.yaml" --set fit.epochs=3 --set checkpoint.dir=off --set data.prefetch=0
	same_weights on/latest.safetensors off/latest.safetensors
	# and the control: another seed changes them
	"$DTRAIN" fit -q "$MODELS/blobs.yaml" --set fit.epochs=3 --set checkpoint.dir=seed --set fit.seed=8
	! same_weights on/latest.safetensors seed/latest.safetensors
}

@test "augmented image training is reproducible, with and without prefetch and cache" {
	idx_images 40 6 6 >images.idx
	idx_labels 40 >labels.idx
	local aug='{random_flip: horizontal, random_crop: {padding: 2}, random_translation: {height_factor: 0.2, width_factor: 0.2, fill_mode: constant}}'
	for run in a b c; do
		local extra=()
		[ $run = b ] && extra=(--set data.prefetch=0)
		[ $run = c ] && extra=(--set data.cache=true --set data.prefetch=3)
		run --separate-stderr "$DTRAIN" fit -q "$MODELS/tiny_idx.yaml" --set data.train.images=images.idx \
			--set data.train.labels=labels.idx --set fit.epochs=3 --set checkpoint.enabled=true \
			--set checkpoint.dir=$run --set data.augment="$aug" "${extra[@]}"
		status_is 0
	done
	same_weights a/latest.safetensors b/latest.safetensors
	same_weights a/latest.safetensors c/latest.safetensors
	# without augmentation the weights differ: the augmentation did something
	"$DTRAIN" fit -q "$MODELS/tiny_idx.yaml" --set data.train.images=images.idx --set data.train.labels=labels.idx \
		--set fit.epochs=3 --set checkpoint.enabled=true --set checkpoint.dir=plain
	! same_weights a/latest.safetensors plain/latest.safetensors
}

@test "normalize: auto is printed, saved in the checkpoint and used by evaluate" {
	run --separate-stderr "$DTRAIN" fit "$MODELS/blobs.yaml" --json --set fit.epochs=2 --set checkpoint.dir=run \
		--set data.normalize=auto
	status_is 0
	[[ $stderr == "dtrain: note: normalize: mean ["*"] std ["*"] over 2 channels of 800 training records"* ]]
	local header test_acc eval_acc
	header=$(safetensors_header run/latest.safetensors)
	jq -e '.__metadata__.preprocessing | fromjson | (.mean | length) == 2 and (.std | length) == 2 and .rescale == 1' \
		<<<"$header"
	test_acc=$(jq -r 'select(.event == "test") | .accuracy' <<<"$output")
	run --separate-stderr "$DTRAIN" evaluate "$MODELS/blobs.yaml" --json --set checkpoint.dir=run --set data.normalize=auto \
		--checkpoint run/latest.safetensors
	status_is 0
	eval_acc=$(jq -r .accuracy <<<"$output")
	[ "$eval_acc" = "$test_acc" ]
	# evaluate did not recompute: no normalize line
	[[ $stderr != *normalize:* ]]
}

@test "fit -q: the normalize line is a note, and -q silences it as dtrain-fit(1) says" {
	run --separate-stderr "$DTRAIN" fit -q "$MODELS/blobs.yaml" --set fit.epochs=1 --set checkpoint.dir=run \
		--set data.normalize=auto
	status_is 0
	[ -z "$stderr" ]
}

@test "evaluate with normalize: auto needs the checkpoint's preprocessing metadata" {
	"$DTRAIN" fit -q "$MODELS/blobs.yaml" --set fit.epochs=1 --set checkpoint.dir=run
	run --separate-stderr "$DTRAIN" evaluate "$MODELS/blobs.yaml" --set checkpoint.dir=run --set data.normalize=auto
	status_is 1
	stderr_has "no preprocessing metadata" "data.normalize: auto"
}

@test "given normalization values train, and a wrong channel count is a config error" {
	run --separate-stderr "$DTRAIN" fit -q "$MODELS/blobs.yaml" --set fit.epochs=1 --set checkpoint.enabled=false \
		--set data.normalize='{mean: [0, 0], std: [2, 2]}'
	status_is 0
	run --separate-stderr "$DTRAIN" fit -q "$MODELS/blobs.yaml" --set data.normalize='{mean: [0, 0, 0], std: [1, 1, 1]}'
	status_is 2
	stderr_has "--set:1:" "3 channels" "have 2"
}

@test "augmentation of samples that are not images is a config error" {
	run --separate-stderr "$DTRAIN" fit -q "$MODELS/blobs.yaml" --set data.augment='{random_flip: horizontal}'
	status_is 2
	stderr_has "--set:1:" "data.augment works on images" "(2,)"
}

@test "bad pipeline values are config errors with their position" {
	run --separate-stderr "$DTRAIN" fit -q "$MODELS/blobs.yaml" --set data.on_error=ignore
	status_is 2
	stderr_has "--set:1:" "ignore" "skip"
	run --separate-stderr "$DTRAIN" fit -q "$MODELS/blobs.yaml" --set data.prefetch=100
	status_is 2
	run --separate-stderr "$DTRAIN" fit -q "$MODELS/blobs.yaml" --set data.normalize=yes
	status_is 2
	stderr_has "auto"
}

@test "categorical_crossentropy on class-index labels gets one-hot labels without data.one_hot" {
	run --separate-stderr "$DTRAIN" fit -q "$MODELS/blobs.yaml" --json --set fit.epochs=3 --set checkpoint.enabled=false \
		--set compile.loss=categorical_crossentropy
	status_is 0
	jq -e 'select(.event == "test") | .accuracy > 0.8' <<<"$output"
}

@test "on_error: skip with readable data skips nothing and says nothing" {
	run --separate-stderr "$DTRAIN" fit -q "$MODELS/blobs.yaml" --json --set fit.epochs=1 --set checkpoint.enabled=false \
		--set data.on_error=skip
	status_is 0
	[[ $stderr != *skipped* ]]
	jq -se '[.[] | select(.event == "epoch") | has("skipped")] == [false]' <<<"$output"
}

@test "time --data reads one training epoch through the pipeline and prints the data/training ratio" {
	run --separate-stderr "$DTRAIN" time "$MODELS/blobs.yaml" --data --json --iterations 2 --warmup 0
	status_is 0
	# 1000 records less the 20% validation split
	jq -e '.data_samples == 800 and .data_prefetch == 2 and .data_samples_per_sec > 0 and
		.data_training_ratio > 0' <<<"$output"
	run --separate-stderr "$DTRAIN" time "$MODELS/blobs.yaml" --data --iterations 2 --warmup 0 \
		--set data.prefetch=0 --set fit.steps_per_epoch=5
	status_is 0
	[[ $output == *" Data: "*"samples/s (160 samples in "*"prefetch 0, no training)"* ]]
	[[ $output == *"data/training = "*x* ]]
}

@test "predict applies the normalization fit saved (normalize: auto on features far from 0)" {
	# Class c has every feature near 1000 + 3c: without normalization the
	# inputs are huge and alike, with it the classes are far apart.
	awk 'BEGIN { srand(3); print "f1,f2,f3,f4,kind"; for (i = 0; i < 300; i++) { c = i % 3; s = "";
		for (j = 0; j < 4; j++) s = s sprintf("%.4f,", 1000 + 3 * c + rand()); print s (c == 0 ? "a" : c == 1 ? "b" : "c") } }' \
		>train.csv
	cat >model.yaml <<-EOF
		model:
		  layers:
		    - dense: {units: 16, activation: relu}
		    - dense: {units: 3, activation: softmax}
		compile: {optimizer: {adam: {learning_rate: 0.02}}, loss: sparse_categorical_crossentropy, metrics: [accuracy]}
		data:
		  train: {format: csv, path: train.csv, label: kind}
		  batch_size: 32
		  normalize: auto
		fit: {epochs: 10}
		checkpoint: {dir: run}
	EOF
	run --separate-stderr "$DTRAIN" fit model.yaml
	status_is 0
	stderr_has "normalize: mean [100"
	run --separate-stderr "$DTRAIN" predict model.yaml --checkpoint run/latest.safetensors train.csv
	status_is 0
	[ "${#lines[@]}" -eq 300 ]
	right=$(paste -d, <(tail -n +2 train.csv | cut -d, -f5) <(printf '%s\n' "${lines[@]}" | cut -d, -f2) |
		awk -F, '$1 == $2' | wc -l)
	echo "right: $right of 300"
	[ "$right" -ge 270 ]
	# a checkpoint without the values: predict refuses rather than guess
	"$DTRAIN" fit -q model.yaml --set data.normalize=null --set checkpoint.dir=plain --set fit.epochs=1
	run --separate-stderr "$DTRAIN" predict model.yaml --checkpoint plain/latest.safetensors train.csv
	status_is 1
	stderr_has "no preprocessing metadata"
}

@test "normalize: auto's std is right for a feature far from 0 with a small spread (1e7 + 0 or 1)" {
	# sum(x^2)/n - mean^2 of the raw values cancels to nothing here: the std came out 1e-07
	awk 'BEGIN { print "big,small,y"; for (i = 0; i < 1000; i++) printf "%d,%d,%d\n", 10000000 + i % 2, i % 2, i % 2 }' >t.csv
	cat >m.yaml <<-EOF
		model: {layers: [{dense: {units: 2, activation: softmax}}]}
		compile: {optimizer: adam, loss: sparse_categorical_crossentropy}
		data: {train: {format: csv, path: t.csv, label: y}, normalize: auto}
		checkpoint: {enabled: false}
	EOF
	run --separate-stderr "$DTRAIN" fit m.yaml
	status_is 0
	stderr_has "normalize: mean [1e+07, 0.5] std [0.5, 0.5] over 2 channels of 1000 training records"
	# an unreadable row skipped is not among the records the note counts (it said 1001)
	echo 'oops,1,1' >>t.csv
	run --separate-stderr "$DTRAIN" fit m.yaml --set data.on_error=skip
	status_is 0
	stderr_has "std [0.5, 0.5] over 2 channels of 1000 training records"
}

# skip_model EPOCHS: m.yaml, a softmax on t.csv (f1, f2, label kind) with on_error: skip.
skip_model() {
	cat >m.yaml <<-EOF
		model:
		  layers:
		    - dense: {units: 2, activation: softmax}
		compile: {optimizer: adam, loss: sparse_categorical_crossentropy}
		data:
		  train: {format: csv, path: t.csv, label: kind}
		  batch_size: 8
		  on_error: skip
		fit: {epochs: $1}
		checkpoint: {enabled: false}
	EOF
}

@test "on_error: skip names the 10 lowest of many skipped records, the same in every shuffled epoch" {
	awk 'BEGIN { srand(5); print "f1,f2,kind"; for (i = 0; i < 200; i++) { c = i % 2;
		if (i % 13 == 5) print "1.0,oops,a"; else printf "%.3f,%.3f,%s\n", c + rand(), rand(), (c ? "b" : "a") } }' >t.csv
	skip_model 3
	run --separate-stderr "$DTRAIN" fit m.yaml -q
	status_is 0
	# 15 bad rows (records 5, 18, ..., 187); the shuffle meets them in another order each epoch
	local want="records $(seq -s ' ' 5 13 122 | sed -E 's/([0-9]+)/\1 (row R\1, column '"'f2'"': '"'oops'"' is not a number)/g; s/\) /), /g')"
	want=$(perl -pe 's/R(\d+)/$1 + 2/ge' <<<"$want")
	[ "$(grep -cF "skipped 15 unreadable records in epoch" <<<"$stderr")" -eq 3 ]
	[ "$(grep -cF "of 't.csv': $want, ..." <<<"$stderr")" -eq 3 ]
}

@test "on_error: skip drops unreadable CSV rows, counts them and names them every epoch" {
	awk 'BEGIN { srand(3); print "f1,f2,kind"; for (i = 0; i < 40; i++) { c = i % 2;
		if (i == 7) print "1.0,oops,a"; else if (i == 20) print "2.0,,b";
		else printf "%.3f,%.3f,%s\n", c + rand(), rand(), (c ? "b" : "a") } }' >t.csv
	skip_model 2
	run --separate-stderr "$DTRAIN" fit m.yaml --json
	status_is 0
	[ "$(grep -c "dtrain: warning: skipped 2 unreadable records in epoch [12] of 't.csv': records 7 (row 9, column 'f2': 'oops' is not a number), 20 (row 22, column 'f2': the field is empty)$" <<<"$stderr")" -eq 2 ]
	jq -se '[.[] | select(.event == "epoch") | .skipped] == [2, 2]' <<<"$output"
	# the default stops at the first one, naming it
	run --separate-stderr "$DTRAIN" fit -q m.yaml --set data.on_error=error
	status_is 1
	stderr_has "'t.csv'" "'oops' is not a number"
}

@test "normalize: auto with data.test_split: the commands that read the data for its shape alone work" {
	awk 'BEGIN { srand(3); print "a,b,y"; for (i = 0; i < 60; i++) printf "%.3f,%.3f,%d\n", 50 + rand() * 10, rand(), i % 2 }' >t.csv
	cat >m.yaml <<-EOF2
		model: {layers: [{dense: {units: 2, activation: softmax}}]}
		compile: {optimizer: adam, loss: sparse_categorical_crossentropy}
		data: {train: {format: csv, path: t.csv, label: y}, batch_size: 8, test_split: 0.2, normalize: auto}
		fit: {epochs: 1}
		checkpoint: {dir: run}
	EOF2
	"$DTRAIN" fit -q m.yaml
	# Each built the test part of the file and gave it training's statistics, which a shape pass has not
	# computed: 'normalization has 0 channels but the samples of 't.csv' ((2,)) have 2'.
	run --separate-stderr "$DTRAIN" summary m.yaml
	status_is 0
	run --separate-stderr "$DTRAIN" config m.yaml
	status_is 0
	run --separate-stderr "$DTRAIN" export -q m.yaml -o m.onnx
	status_is 0
	run --separate-stderr "$DTRAIN" predict -q m.yaml t.csv
	status_is 0
	[ "${#lines[@]}" -eq 60 ]
	[ "$output" = "$("$DTRAIN" predict -q run t.csv)" ]
}
