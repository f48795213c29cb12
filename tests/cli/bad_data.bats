#!/usr/bin/env bats
# Corrupt IDX data files, made by each test: dtrain fit exits 1 with an error
# that names the file, and never crashes (no status >= 128).

load helpers

setup() {
	common_setup
	cd "$TMP"
	idx_images 12 4 4 >images.idx
	idx_labels 12 >labels.idx
	gzip -kn images.idx
	gzip -kn labels.idx
}

# fit_idx IMAGES LABELS [ARGS...]: fit tiny_idx.yaml on these files.
fit_idx() {
	local images=$1 labels=$2
	shift 2
	run --separate-stderr "$DTRAIN" fit -q "$MODELS/tiny_idx.yaml" \
		--set data.train.images="$images" --set data.train.labels="$labels" "$@"
}

# fails_naming FILE WORDS...: the last fit exited 1, did not crash, printed
# nothing on stdout and one error on stderr that names 'FILE' and holds WORDS.
fails_naming() {
	local file=$1 w
	shift
	not_crashed
	status_is 1
	[ -z "$output" ]
	if [[ $stderr != "dtrain: error: "*"'$file'"* ]]; then
		echo "the error does not name '$file': $stderr" >&2
		return 1
	fi
	stderr_has "$@"
	[[ $stderr != *Epoch* ]]
}

@test "control: the generated files train, raw and gzipped" {
	fit_idx images.idx labels.idx
	status_is 0
	fit_idx images.idx.gz labels.idx.gz
	status_is 0
	# Absolute paths too.
	fit_idx "$TMP/images.idx.gz" "$TMP/labels.idx"
	status_is 0
}

@test "truncated images .gz" {
	head -c $(($(stat -c %s images.idx.gz) / 2)) images.idx.gz >cut.idx.gz
	fit_idx cut.idx.gz labels.idx
	fails_naming cut.idx.gz "is truncated"
}

@test "a .gz that lacks only its gzip trailer" {
	head -c $(($(stat -c %s images.idx.gz) - 8)) images.idx.gz >notrailer.idx.gz
	fit_idx notrailer.idx.gz labels.idx
	fails_naming notrailer.idx.gz "truncated" "gzip trailer"
}

@test "a .gz with a bad CRC" {
	local at byte
	cp images.idx.gz crc.idx.gz
	# The CRC-32 is the first 4 of the last 8 bytes: invert one of them.
	at=$(($(stat -c %s crc.idx.gz) - 8))
	byte=$(od -An -t u1 -j "$at" -N 1 crc.idx.gz)
	printf "\\$(printf '%03o' $((byte ^ 255)))" | dd of=crc.idx.gz bs=1 seek="$at" conv=notrunc 2>/dev/null
	run ! cmp -s crc.idx.gz images.idx.gz
	fit_idx crc.idx.gz labels.idx
	fails_naming crc.idx.gz "corrupt gzip stream"
}

@test "truncated raw images: how many were promised and how many are there" {
	head -c 150 images.idx >cut.idx
	fit_idx cut.idx labels.idx
	fails_naming cut.idx "is truncated" "promises 12 images" "8 whole images"
}

@test "a header cut short" {
	head -c 10 images.idx >short.idx
	fit_idx short.idx labels.idx
	fails_naming short.idx "is truncated" "header"
	head -c 3 images.idx >tiny.idx
	fit_idx tiny.idx labels.idx
	fails_naming tiny.idx "too short for an IDX header"
}

@test "wrong magic: not an IDX file" {
	{
		printf 'PK\003\004'
		tail -c +5 images.idx
	} >zip.idx
	fit_idx zip.idx labels.idx
	fails_naming zip.idx "magic 0x504b0304" "expected 0x00000803" "is it an IDX file?"
}

@test "wrong magic: a labels file given as images" {
	fit_idx labels.idx labels.idx
	fails_naming labels.idx "magic 0x00000801" "it looks like a labels file"
}

@test "wrong magic: an images file given as labels" {
	fit_idx images.idx images.idx.gz
	fails_naming images.idx.gz "magic 0x00000803" "expected 0x00000801"
}

@test "wrong element type: float32 IDX" {
	{
		printf '\000\000\015\003'
		tail -c +5 images.idx
	} >f32.idx
	fit_idx f32.idx labels.idx
	fails_naming f32.idx "float32 elements are not supported"
}

@test "label count mismatch: names both files and both counts" {
	idx_labels 10 >ten.idx
	fit_idx images.idx ten.idx
	fails_naming images.idx "12 images" "'ten.idx' has 10 labels"
}

@test "truncated label file" {
	head -c 15 labels.idx >cut-labels.idx
	fit_idx images.idx cut-labels.idx
	fails_naming cut-labels.idx "is truncated" "promises 12 labels"
}

@test "non-gzip garbage named .gz" {
	head -c 3000 /dev/urandom >garbage.idx.gz
	fit_idx garbage.idx.gz labels.idx
	not_crashed
	status_is 1
	[[ $stderr == *"'garbage.idx.gz'"* ]]
}

@test "garbage behind a gzip magic" {
	printf '\037\213\010\000garbage after the gzip magic number' >fake.idx.gz
	fit_idx fake.idx.gz labels.idx
	fails_naming fake.idx.gz "corrupt gzip stream"
}

@test "empty file, raw and gzipped" {
	: >empty.idx
	fit_idx empty.idx labels.idx
	fails_naming empty.idx "is empty"
	gzip -kn empty.idx
	fit_idx empty.idx.gz labels.idx
	fails_naming empty.idx.gz "is empty"
	fit_idx images.idx empty.idx
	fails_naming empty.idx "is empty"
}

@test "a header promising huge dimensions" {
	{
		printf '\000\000\010\003'
		be32 12
		be32 65536
		be32 65536
		head -c 100 /dev/zero
	} >huge.idx
	fit_idx huge.idx labels.idx
	fails_naming huge.idx "in its header"
}

@test "a header promising 4 billion images: a quick truncation error, not a huge allocation" {
	{
		printf '\000\000\010\003'
		be32 4294967295
		be32 28
		be32 28
		head -c 100000 /dev/zero
	} | gzip -n >many.idx.gz
	SECONDS=0
	fit_idx many.idx.gz labels.idx
	fails_naming many.idx.gz "is truncated" "promises 4294967295 images"
	[ "$SECONDS" -lt 20 ]
}

@test "zero records" {
	{
		printf '\000\000\010\003'
		be32 0
		be32 4
		be32 4
	} >none.idx
	fit_idx none.idx labels.idx
	fails_naming none.idx "holds no records"
}

@test "a zero dimension" {
	{
		printf '\000\000\010\003'
		be32 12
		be32 0
		be32 4
	} >zero.idx
	fit_idx zero.idx labels.idx
	fails_naming zero.idx "dimension"
}

@test "trailing data after the promised records" {
	{
		cat images.idx
		printf 'x'
	} >long.idx
	fit_idx long.idx labels.idx
	fails_naming long.idx "trailing data"
}

@test "missing data file: exit 1 with 'cannot open'" {
	fit_idx nowhere.idx labels.idx
	fails_naming nowhere.idx "cannot open" "No such file or directory"
}

@test "a directory as data file" {
	mkdir dir.idx
	fit_idx dir.idx labels.idx
	fails_naming dir.idx
}

@test "relative data paths are resolved against the model file, not the cwd" {
	# tiny_idx.yaml names images.idx: that is tests/cli/models/images.idx, absent.
	run --separate-stderr "$DTRAIN" fit -q "$MODELS/tiny_idx.yaml"
	fails_naming "$MODELS/images.idx" "cannot open"
}

@test "a corrupt test set fails before any training" {
	head -c 150 images.idx >cut.idx
	fit_idx images.idx labels.idx --set data.test.format=idx --set data.test.images=cut.idx \
		--set data.test.labels=labels.idx --set fit.epochs=3
	fails_naming cut.idx "is truncated"
}

@test "evaluate with a corrupt test set: exit 1 naming it" {
	fit_idx images.idx labels.idx --set checkpoint.enabled=true --set checkpoint.dir="$TMP/run"
	status_is 0
	head -c 150 images.idx >cut.idx
	run --separate-stderr "$DTRAIN" evaluate "$MODELS/tiny_idx.yaml" --checkpoint "$TMP/run/latest.safetensors" \
		--set data.train.images=images.idx --set data.train.labels=labels.idx \
		--set data.test.format=idx --set data.test.images=cut.idx --set data.test.labels=labels.idx
	fails_naming cut.idx "is truncated"
}

@test "a gzip stream followed by bytes that are no gzip member" {
	{
		cat images.idx.gz
		printf 'garbage after the gzip trailer'
	} >tail.idx.gz
	fit_idx tail.idx.gz labels.idx
	fails_naming tail.idx.gz "trailing bytes after its gzip stream"
}

@test "control: a gzip file of two members reads as one stream, as gzip -d does" {
	head -c 100 images.idx | gzip -n >two.idx.gz
	tail -c +101 images.idx | gzip -n >>two.idx.gz
	fit_idx two.idx.gz labels.idx
	status_is 0
}

# predict_idx INPUT [ARGS...]: predict on INPUT with the checkpoint of a run on images.idx.
predict_idx() {
	local input=$1
	shift
	if [ ! -f "$TMP/run/latest.safetensors" ]; then
		fit_idx images.idx labels.idx --set checkpoint.enabled=true --set checkpoint.dir="$TMP/run"
		status_is 0
	fi
	run --separate-stderr "$DTRAIN" predict -q "$MODELS/tiny_idx.yaml" "$input" --checkpoint "$TMP/run/latest.safetensors" \
		--set data.train.images=images.idx --set data.train.labels=labels.idx "$@"
}

@test "predict: trailing data after the promised images" {
	predict_idx images.idx
	status_is 0
	[ "${#lines[@]}" -eq 12 ]
	{
		cat images.idx
		printf 'x'
	} >long.idx
	predict_idx long.idx
	not_crashed
	status_is 1
	stderr_has "'long.idx' has trailing data after the 12 images its header promises"
}

@test "predict: bytes after a header that promises no image" {
	{
		printf '\000\000\010\003'
		be32 0
		be32 4
		be32 4
		printf 'extra'
	} >zero.idx
	predict_idx zero.idx --set "model.input_shape=[4, 4, 1]"
	not_crashed
	status_is 1
	stderr_has "'zero.idx' has trailing data after the 0 images its header promises"
}

@test "predict: a gzip bomb after the promised images is refused without inflating it" {
	{
		cat images.idx
		head -c 200000000 /dev/zero
	} | gzip -1n >bomb.idx.gz
	SECONDS=0
	predict_idx bomb.idx.gz
	not_crashed
	status_is 1
	stderr_has "'bomb.idx.gz' has trailing data"
	[ "$SECONDS" -lt 10 ]
}

# idx_labels_with N AT VALUE: an IDX1 file of N labels cycling 0, 1, 2, with VALUE at record AT.
idx_labels_with() {
	idx_labels "$1" >lab.tmp
	printf "\\$(printf '%03o' "$3")" | dd of=lab.tmp bs=1 seek=$((8 + $2)) conv=notrunc 2>/dev/null
	cat lab.tmp
}

@test "a label beyond the model's outputs names the labels file and the record (IDX)" {
	idx_labels_with 12 7 200 >big-label.idx
	fit_idx images.idx big-label.idx
	not_crashed
	[ "$status" -ne 0 ]
	stderr_has "'big-label.idx' record 7: label 200 is out of range" "classes 0 to 2"
	[[ $stderr != *"'images.idx'"* ]]
}

@test "a label beyond the model's outputs names the labels file and the record (NPY)" {
	# x: (12, 4, 4) uint8 zeros; y: (12,) int64 labels 0, 1, 2, ... with 200 at record 9.
	npy_python '
npy("x.npy", "|u1", "(12, 4, 4)", bytes(12 * 16))
npy("y.npy", "<i8", "(12,)", struct.pack("<12q", *[200 if i == 9 else i % 3 for i in range(12)]))
'
	run --separate-stderr "$DTRAIN" fit -q "$MODELS/tiny_idx.yaml" \
		--set "data.train={format: npy, x: '$TMP/x.npy', y: '$TMP/y.npy'}"
	not_crashed
	[ "$status" -ne 0 ]
	stderr_has "'$TMP/y.npy' record 9: label 200 is out of range" "classes 0 to 2"
}

@test "a negative or fractional class label under sparse_categorical_crossentropy names the labels file and the record (NPY, CSV)" {
	# Such a label added nothing to the loss and training went on, silently (a label -1 of 10 classes).
	for bad in -1 1.5; do
		npy_python "
npy('x.npy', '|u1', '(12, 4, 4)', bytes(12 * 16))
npy('y.npy', '<f4', '(12,)', struct.pack('<12f', *[$bad if i == 7 else i % 3 for i in range(12)]))
"
		run --separate-stderr "$DTRAIN" fit -q "$MODELS/tiny_idx.yaml" \
			--set "data.train={format: npy, x: '$TMP/x.npy', y: '$TMP/y.npy'}"
		not_crashed
		status_is 1
		stderr_has "label $bad of record 7 in '$TMP/y.npy' is not a class index below 3"
	done
	# the same in a CSV file's label column; in data.test the training classes name it by row
	printf 'a,b,y\n' >c.csv
	for i in $(seq 0 11); do printf '%d,%d,%d\n' "$i" "$((i % 4))" "$([ "$i" = 5 ] && echo -1 || echo $((i % 3)))" >>c.csv; done
	local model="model={input_shape: [2], layers: [dense: {units: 3, activation: softmax}]}"
	run --separate-stderr "$DTRAIN" fit -q "$MODELS/tiny_idx.yaml" --set "$model" \
		--set "data.train={format: csv, path: '$TMP/c.csv', label: y}"
	status_is 1
	stderr_has "label -1 of record 5 in '$TMP/c.csv' is not a class index below 3"
	grep -v ',-1$' c.csv >good.csv
	run --separate-stderr "$DTRAIN" fit -q "$MODELS/tiny_idx.yaml" --set "$model" \
		--set "data.train={format: csv, path: '$TMP/good.csv', label: y}" \
		--set "data.test={format: csv, path: '$TMP/c.csv', label: y}"
	status_is 1
	stderr_has "'$TMP/c.csv', row 7: label '-1' is not a class of the training data (0 to 2)"
}

@test "a label outside [0, 1] under binary_crossentropy names the labels file and the record (CSV 1/2, NPY)" {
	# Classes numbered 1 and 2 trained on a negative loss, silently (loss: -1.7 after 5 epochs).
	printf 'a,b,y\n' >c.csv
	for i in $(seq 0 11); do printf '%d,%d,%d\n' "$i" "$((i % 4))" "$((i % 2 + 1))" >>c.csv; done
	local model="model={input_shape: [2], layers: [dense: {units: 1, activation: sigmoid}]}"
	run --separate-stderr "$DTRAIN" fit -q "$MODELS/tiny_idx.yaml" --set "$model" --set compile.loss=binary_crossentropy \
		--set "data.train={format: csv, path: '$TMP/c.csv', label: y}" --set data.shuffle=false
	status_is 1
	stderr_has "label 2 of record 1 in '$TMP/c.csv' is not in [0, 1]"
	# labels 0 and 1 train; a third class of label strings (cat: 2) does not
	awk -F, -v OFS=, 'NR > 1 { $3 = $3 - 1 } 1' c.csv >ok.csv
	run --separate-stderr "$DTRAIN" fit -q "$MODELS/tiny_idx.yaml" --set "$model" --set compile.loss=binary_focal_crossentropy \
		--set "data.train={format: csv, path: '$TMP/ok.csv', label: y}"
	status_is 0
	awk -F, -v OFS=, 'NR > 1 { $3 = $1 % 3 == 0 ? "ant" : $1 % 3 == 1 ? "bee" : "cat" } 1' c.csv >abc.csv
	run --separate-stderr "$DTRAIN" fit -q "$MODELS/tiny_idx.yaml" --set "$model" --set compile.loss=binary_crossentropy \
		--set "data.train={format: csv, path: '$TMP/abc.csv', label: y}" --set data.shuffle=false
	status_is 1
	stderr_has "label 2 of record 2 in '$TMP/abc.csv' is not in [0, 1]"
	npy_python "
npy('x.npy', '<f4', '(4, 2)', struct.pack('<8f', *range(8)))
npy('y.npy', '<f4', '(4,)', struct.pack('<4f', 0, 1, 0.25, -0.5))
"
	run --separate-stderr "$DTRAIN" fit -q "$MODELS/tiny_idx.yaml" --set "$model" --set compile.loss=binary_crossentropy \
		--set "data.train={format: npy, x: '$TMP/x.npy', y: '$TMP/y.npy'}" --set data.shuffle=false
	status_is 1
	stderr_has "label -0.5 of record 3 in '$TMP/y.npy' is not in [0, 1]"
}

@test "a NaN or an infinity in .npy features is a bad record naming the file and the record (fit, on_error: skip, predict)" {
	# A NaN went into training silently (relu made it 0); a CSV file refuses such a field.
	for bad in "float('nan')" "float('inf')"; do
		npy_python "
v = [0.5] * (12 * 16)
v[3 * 16 + 2] = $bad
npy('x.npy', '<f4', '(12, 4, 4)', struct.pack('<%df' % len(v), *v))
npy('y.npy', '<i8', '(12,)', struct.pack('<12q', *[i % 3 for i in range(12)]))
"
		run --separate-stderr "$DTRAIN" fit -q "$MODELS/tiny_idx.yaml" \
			--set "data.train={format: npy, x: '$TMP/x.npy', y: '$TMP/y.npy'}"
		not_crashed
		status_is 1
		stderr_has "'$TMP/x.npy', record 3: value 2 of the sample is" "not a finite number"
	done
	run --separate-stderr "$DTRAIN" fit "$MODELS/tiny_idx.yaml" --json --set checkpoint.enabled=true \
		--set checkpoint.dir="$TMP/run" --set data.on_error=skip \
		--set "data.train={format: npy, x: '$TMP/x.npy', y: '$TMP/y.npy'}"
	status_is 0
	stderr_has "skipped 1 unreadable record in epoch 1 of '$TMP/x.npy': record 3"
	run --separate-stderr "$DTRAIN" predict "$TMP/run" "$TMP/x.npy"
	status_is 1
	stderr_has "'$TMP/x.npy', record 3: value 2 of the sample is inf, not a finite number"
}

@test "test labels of another shape than training's name the labels file, not the features file (NPY)" {
	# Training labels one-hot (12, 3) under categorical_crossentropy; test labels class indices (12,).
	npy_python '
npy("x.npy", "|u1", "(12, 4, 4)", bytes(12 * 16))
npy("y1h.npy", "<f4", "(12, 3)", struct.pack("<36f", *[float(i % 3 == k) for i in range(12) for k in range(3)]))
npy("y.npy", "<i8", "(12,)", struct.pack("<12q", *[i % 3 for i in range(12)]))
'
	run --separate-stderr "$DTRAIN" fit -q "$MODELS/tiny_idx.yaml" --set compile.loss=categorical_crossentropy \
		--set "data.train={format: npy, x: '$TMP/x.npy', y: '$TMP/y1h.npy'}" \
		--set "data.test={format: npy, x: '$TMP/x.npy', y: '$TMP/y.npy'}"
	not_crashed
	status_is 2
	stderr_has "the labels of '$TMP/y.npy' are (1,) but the training labels are (3,): class indices against one-hot" \
		"one-hot these labels too, or give class indices in both"
	[[ $stderr != *"'$TMP/x.npy'"* ]]
	# The other way round: no hint, and still the labels file.
	run --separate-stderr "$DTRAIN" fit -q "$MODELS/tiny_idx.yaml" \
		--set "data.train={format: npy, x: '$TMP/x.npy', y: '$TMP/y.npy'}" \
		--set "data.test={format: npy, x: '$TMP/x.npy', y: '$TMP/y1h.npy'}"
	not_crashed
	status_is 2
	stderr_has "the labels of '$TMP/y1h.npy' are (3,) but the training labels are (1,)"
}
