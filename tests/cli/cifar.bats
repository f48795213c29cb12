#!/usr/bin/env bats
# CIFAR-10 and CIFAR-100 binary files made by the tests: a fit reads them as
# (32, 32, 3) samples; a cut file or a label out of range exits 1 naming the
# file and the record.

load helpers

# cifar_file N LABELS...: N records of random pixels; record i has the label
# bytes given (the same for every record; 1 byte for CIFAR-10, 2 for -100).
cifar_file() {
	local n=$1 i
	shift
	for ((i = 0; i < n; i++)); do
		printf "$(printf '\\%03o' "$@")"
		head -c 3072 /dev/urandom
	done
}

setup() {
	common_setup
	cd "$TMP"
	mkdir c10 c100
	for b in 1 2 3 4 5; do cifar_file 4 $((b % 10)) >c10/data_batch_$b.bin; done
	cifar_file 4 7 >c10/test_batch.bin
	printf 'airplane\nautomobile\nbird\ncat\ndeer\ndog\nfrog\nhorse\nship\ntruck\n' >c10/batches.meta.txt
	cifar_file 6 3 42 >c100/train.bin
	cat >model.yaml <<-'YAML'
		model:
		  layers:
		    - flatten
		    - dense: {units: 10, activation: softmax}
		compile: {optimizer: adam, loss: sparse_categorical_crossentropy, metrics: [accuracy]}
		data:
		  train: {format: cifar10, directory: c10}
		  test: {format: cifar10, directory: c10, split: test}
		  batch_size: 8
		  rescale: 1/255
		fit: {epochs: 2}
		checkpoint: {enabled: false}
	YAML
}

@test "cifar10 from a directory of standard files trains as (32, 32, 3) and evaluates the test split" {
	run --separate-stderr "$DTRAIN" fit -q --json model.yaml
	status_is 0
	[ "$(events epoch | wc -l)" -eq 2 ]
	[ "$(events test | jq -r .samples)" -eq 4 ]
	run "$DTRAIN" summary model.yaml
	status_is 0
	[[ $output == *"(None, 3072)"* ]]
}

@test "cifar100 with coarse labels: 20 classes" {
	run --separate-stderr "$DTRAIN" fit -q model.yaml --set 'data.train={format: cifar100, files: [c100/train.bin], label_mode: coarse}' \
		--set data.test= --set model.layers.1.dense.units=20
	status_is 0
}

@test "a cut file and a label out of range: exit 1 naming the file and the record" {
	head -c 5000 c10/data_batch_1.bin >c10/cut.bin
	run --separate-stderr "$DTRAIN" fit -q model.yaml --set 'data.train={format: cifar10, files: [c10/cut.bin]}'
	not_crashed
	status_is 1
	stderr_has "'c10/cut.bin'" "record 1 is cut after 1927 bytes"
	cifar_file 3 11 >c10/bad.bin
	run --separate-stderr "$DTRAIN" fit -q model.yaml --set 'data.train={format: cifar10, files: [c10/bad.bin]}'
	not_crashed
	status_is 1
	stderr_has "'c10/bad.bin' record 0" "label 11 is out of range"
}

@test "predict on a CIFAR batch file says it reads none, not that a CSV row holds a NUL byte" {
	run --separate-stderr "$DTRAIN" fit -q model.yaml --set checkpoint.enabled=true --set checkpoint.dir="$TMP/ck"
	status_is 0
	run --separate-stderr "$DTRAIN" predict -q model.yaml --set checkpoint.enabled=true --set checkpoint.dir="$TMP/ck" \
		c10/test_batch.bin
	not_crashed
	status_is 2
	stderr_has "dtrain predict does not read CIFAR batch files ('c10/test_batch.bin')" ".npy array (N, 32, 32, 3)"
	[[ $stderr != *"NUL byte"* ]]
}
