#!/usr/bin/env bats
# --resume trusts no metadata because its checksum is valid: a checkpoint
# edited by hand with the checksum recomputed (tests/tools/ckpt_meta.py) is
# refused, exit 1, naming the file and the field, before anything changes.
# And a fresh fit removes the temporary files a killed write left.

load helpers

setup_file() {
	export OMP_NUM_THREADS=1
	# One epoch of the resume tests' model (20 steps, checkpoints every 7),
	# with reduce_lr_on_plateau so that the file carries a callback state.
	mkdir -p "$BATS_FILE_TMPDIR/ref"
	cp "$BATS_TEST_DIRNAME/models/resume.yaml" "$BATS_FILE_TMPDIR/ref/m.yaml"
	(cd "$BATS_FILE_TMPDIR/ref" && "${DTRAIN:-$BATS_TEST_DIRNAME/../../build/dtrain}" fit m.yaml -q \
		--set fit.epochs=1 --set 'fit.callbacks=[reduce_lr_on_plateau]') || {
		echo "the reference run failed" >&2
		return 1
	}
}

setup() {
	common_setup
	export OMP_NUM_THREADS=1
	META="$REPO/tests/tools/ckpt_meta.py"
	cp -r "$BATS_FILE_TMPDIR/ref/." "$TMP/"
	cd "$TMP"
	LATEST=run/$(readlink run/latest.safetensors)
	cp "$LATEST" "$TMP/original"
}

# resume: fit --resume to 3 epochs, as the first run's command.
resume() {
	run --separate-stderr "$DTRAIN" fit m.yaml -q --resume --set fit.epochs=3 \
		--set 'fit.callbacks=[reduce_lr_on_plateau]'
}

# refused KEY=VALUE WORDS...: with KEY set to VALUE (checksum kept valid),
# --resume exits 1 with one error naming the file and KEY, and the run
# directory is left as it was.
refused() {
	local kv=$1 before
	shift
	cp "$TMP/original" "$LATEST"
	python3 "$META" "$LATEST" "$kv"
	before=$(ls run)
	resume
	not_crashed
	status_is 1
	[ "${#stderr_lines[@]}" -eq 1 ] || {
		echo "$kv: expected one line on stderr: $stderr" >&2
		return 1
	}
	stderr_has "dtrain: error: 'run/latest.safetensors': metadata '${kv%%=*}' is" "$@"
	[ "$(ls run)" = "$before" ]
}

@test "the edits keep the checksum valid: a file edited to the same values resumes" {
	# a byte changed without the tool is caught by the checksum, as before
	sed -i 's/"global_step":"20"/"global_step":"21"/' "$LATEST"
	resume
	status_is 1
	stderr_has "fails its checksum"
	cp "$TMP/original" "$LATEST"
	[ "$(python3 "$META" "$LATEST" step global_step)" = $'0\n20' ]
	python3 "$META" "$LATEST" step=0 global_step=20
	resume
	status_is 0
}

@test "step past the epoch's steps (it printed 1000000/20 and wrote ckpt-002-1000000)" {
	refused step=1000000 "not a step of an epoch of 20 steps (0 to 20)"
	refused step=21 "(0 to 20)"
	refused step=abc "not a whole number"
	refused step=-1 "not a whole number from 0"
	refused "step= 3" "not a whole number"
	refused step=3x "not a whole number"
}

@test "global_step: a whole number, at least the step" {
	python3 "$META" "$TMP/original" step=5
	refused global_step=12x "not a whole number"
	refused global_step=4 "at least the step in the epoch, 5"
	refused global_step=1e3 "not a whole number"
}

@test "epoch: a huge one is named, not read as epoch -1" {
	refused epoch=99999999999 "not a whole number from 0 to 1000000"
	refused epoch=-1 "not a whole number from 0"
	refused epoch=one "not a whole number"
}

@test "optimizer.iterations and optimizer.learning_rate (they made NaN weights)" {
	refused optimizer.iterations=-7 "not a whole number from 0"
	refused optimizer.iterations=7.5 "not a whole number"
	refused optimizer.learning_rate=nan "not a number from 0 to 1e+06"
	refused optimizer.learning_rate=-0.1 "not a number from 0 to 1e+06"
	refused optimizer.learning_rate=inf "not a number"
	refused optimizer.learning_rate=0.1x "not a number"
}

@test "sums, checkpoint.files and best" {
	refused 'sums=[1,2]' "not a JSON array of 3 or 5 numbers"
	refused 'sums=[1,-2,3]' "numbers >= 0"
	refused 'sums=[1,2,3.5]' "numbers >= 0"
	refused 'checkpoint.files=not json' "not a JSON array of file names"
	refused 'checkpoint.files=["../x.safetensors"]' "(without '/')"
	refused 'checkpoint.files={"a":1}' "not a JSON array"
	refused best=zz "not a finite number"
}

@test "callbacks: a JSON object of states that the callbacks accept" {
	refused 'callbacks=[1]' "not a JSON object"
	# the plateau callback's state sets the learning rate: checked like the optimizer's
	cp "$TMP/original" "$LATEST"
	python3 "$META" "$LATEST" \
		'callbacks={"reduce_lr_on_plateau":{"best":1,"wait":0,"cooldown_counter":0,"learning_rate":-5},"checkpoint":{"files":[]}}'
	resume
	status_is 1
	stderr_has "'run/latest.safetensors': metadata 'callbacks' sets the learning rate to -5"
	cp "$TMP/original" "$LATEST"
	python3 "$META" "$LATEST" 'callbacks={"reduce_lr_on_plateau":{"best":"x"}}'
	resume
	status_is 1
	stderr_has "reduce_lr_on_plateau" "metadata 'callbacks'"
}

@test "a fresh fit removes the temporary file of a write killed before the first checkpoint" {
	rm -rf run
	run env DTRAIN_TEST_CRASH_AT=checkpoint-write:1 "$DTRAIN" fit m.yaml -q
	[ "$status" -eq 137 ]
	ls run | grep -q '\.safetensors\.tmp\.'
	[ ! -e run/latest.safetensors ]
	# a live process's temporary file (another run writing here) is left alone
	sleep 60 3>&- &
	local live=$!
	touch "run/other.safetensors.tmp.$live"
	run --separate-stderr "$DTRAIN" fit m.yaml -q --set fit.epochs=1
	kill "$live"
	status_is 0
	[ "$(ls run | grep '\.tmp\.')" = "other.safetensors.tmp.$live" ]
	[ -e run/latest.safetensors ]
}
