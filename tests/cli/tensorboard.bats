#!/usr/bin/env bats
# fit.callbacks' tensorboard: event files read back by an independent reader
# (tests/tools/read_tfevents.py: the TFRecord frames, their masked CRC-32C and
# the protobuf Events, always) and by the tensorboard package's own reader
# when build/venv has it (make ref-venv). The blobs model: 25 training
# steps per epoch.

load helpers

setup() {
	common_setup
	export OMP_NUM_THREADS=1
	READ="python3 $REPO/tests/tools/read_tfevents.py"
}

fit_blobs() {
	"$DTRAIN" fit "$MODELS/blobs.yaml" --set checkpoint.dir="$TMP/run" -q "$@"
}

@test "tensorboard: epoch scalars in logs/train and logs/validation equal history.csv" {
	fit_blobs --set 'fit.callbacks=[csv_logger, tensorboard]' --set fit.epochs=3
	local train val
	train=$(echo "$TMP"/run/logs/train/events.out.tfevents.*)
	val=$(echo "$TMP"/run/logs/validation/events.out.tfevents.*)
	[ -f "$train" ] && [ -f "$val" ]
	$READ "$train" >"$TMP/train.jsonl"
	$READ "$val" >"$TMP/val.jsonl"
	# One file_version record first, then one event per epoch at steps 0, 1, 2.
	[ "$(head -1 "$TMP/train.jsonl" | jq -r .file_version)" = "brain.Event:2" ]
	[ "$(head -1 "$TMP/val.jsonl" | jq -r .file_version)" = "brain.Event:2" ]
	[ "$(jq -sc '[.[1:][] | .step]' "$TMP/train.jsonl")" = "[0,1,2]" ]
	[ "$(jq -sc '[.[1:][] | .step]' "$TMP/val.jsonl")" = "[0,1,2]" ]
	[ "$(jq -rc '.values | select(.) | keys_unsorted' "$TMP/train.jsonl" | sort -u)" = \
		'["epoch_accuracy","epoch_loss","epoch_learning_rate"]' ]
	[ "$(jq -rc '.values | select(.) | keys_unsorted' "$TMP/val.jsonl" | sort -u)" = '["epoch_accuracy","epoch_loss"]' ]
	# Each value is history.csv's, rounded to float32 (columns: epoch,accuracy,loss,val_accuracy,val_loss).
	python3 - "$TMP/run/history.csv" "$TMP/train.jsonl" "$TMP/val.jsonl" <<'PY'
import csv, json, struct, sys
f32 = lambda x: struct.unpack("<f", struct.pack("<f", float(x)))[0]
rows = list(csv.DictReader(open(sys.argv[1])))
train = [json.loads(l) for l in open(sys.argv[2])][1:]
val = [json.loads(l) for l in open(sys.argv[3])][1:]
assert len(rows) == len(train) == len(val) == 3
for r, t, v in zip(rows, train, val):
    assert t["step"] == v["step"] == int(r["epoch"])
    assert t["values"]["epoch_loss"] == f32(r["loss"]), (t, r)
    assert t["values"]["epoch_accuracy"] == f32(r["accuracy"]), (t, r)
    assert t["values"]["epoch_learning_rate"] == f32(0.001)
    assert v["values"]["epoch_loss"] == f32(r["val_loss"]), (v, r)
    assert v["values"]["epoch_accuracy"] == f32(r["val_accuracy"]), (v, r)
    assert t["wall_time"] > 1.6e9
PY
}

@test "tensorboard: update_freq N adds batch scalars every N batches, numbered through the run" {
	fit_blobs --set 'fit.callbacks=[{tensorboard: {log_dir: tb, update_freq: 10}}]' --set fit.epochs=3
	$READ "$TMP"/run/tb/train/events.out.tfevents.* >"$TMP/train.jsonl"
	[ "$(jq -sc '[.[] | select(.values.batch_loss) | .step]' "$TMP/train.jsonl")" = "[10,20,30,40,50,60,70]" ]
	[ "$(jq -sc '[.[] | select(.values.epoch_loss) | .step]' "$TMP/train.jsonl")" = "[0,1,2]" ]
	[ "$(jq -rc 'select(.step == 20) | .values | keys_unsorted' "$TMP/train.jsonl")" = '["batch_accuracy","batch_loss"]' ]
	# Batch 25 ends epoch 1: its running loss is the epoch's.
	fit_blobs --set 'fit.callbacks=[{tensorboard: {log_dir: tb1, update_freq: 25}}]' --set fit.epochs=1
	$READ "$TMP"/run/tb1/train/events.out.tfevents.* >"$TMP/one.jsonl"
	[ "$(jq -s '[.[] | .values.batch_loss // empty][0] == [.[] | .values.epoch_loss // empty][0]' "$TMP/one.jsonl")" = true ]
}

@test "tensorboard: compile.metrics beyond accuracy are scalars too, in train and validation" {
	fit_blobs --set 'fit.callbacks=[csv_logger, tensorboard]' --set fit.epochs=2 \
		--set 'compile.metrics=[accuracy, auc, {precision: {average: macro}}]'
	$READ "$TMP"/run/logs/train/events.out.tfevents.* >"$TMP/train.jsonl"
	$READ "$TMP"/run/logs/validation/events.out.tfevents.* >"$TMP/val.jsonl"
	[ "$(jq -rc '.values | select(.) | keys_unsorted' "$TMP/train.jsonl" | sort -u)" = \
		'["epoch_accuracy","epoch_auc","epoch_loss","epoch_precision","epoch_learning_rate"]' ]
	[ "$(jq -rc '.values | select(.) | keys_unsorted' "$TMP/val.jsonl" | sort -u)" = \
		'["epoch_accuracy","epoch_auc","epoch_loss","epoch_precision"]' ]
	# the values are history.csv's (float32)
	python3 - "$TMP/run/history.csv" "$TMP/train.jsonl" "$TMP/val.jsonl" <<'PY'
import csv, json, struct, sys
f32 = lambda x: struct.unpack("<f", struct.pack("<f", float(x)))[0]
rows = list(csv.DictReader(open(sys.argv[1])))
for path, pre in ((sys.argv[2], ""), (sys.argv[3], "val_")):
    events = [e for e in map(json.loads, open(path)) if e.get("values")]
    assert len(events) == len(rows) == 2, (len(events), len(rows))
    for e, r in zip(events, rows):
        for m in ("auc", "precision"):
            got, want = e["values"]["epoch_" + m], f32(r[pre + m])
            assert abs(got - want) <= 1e-6 * max(1, abs(want)), (path, m, got, want)
PY
}

@test "tensorboard: an absolute log_dir; no validation data, no validation file" {
	"$DTRAIN" fit "$MODELS/blobs.yaml" --set checkpoint.enabled=false --set data.validation_split=0 \
		--set "fit.callbacks=[{tensorboard: {log_dir: $TMP/abs}}]" --set fit.epochs=2 -q
	$READ "$TMP"/abs/train/events.out.tfevents.* >"$TMP/train.jsonl"
	[ "$(jq -sc '[.[1:][] | .step]' "$TMP/train.jsonl")" = "[0,1]" ]
	[ ! -e "$TMP/abs/validation" ]
}

@test "the reader refuses a file whose data or length CRC is wrong" {
	fit_blobs --set 'fit.callbacks=[tensorboard]' --set fit.epochs=1
	local f
	f=$(echo "$TMP"/run/logs/train/events.out.tfevents.*)
	$READ "$f" >/dev/null
	cp "$f" "$TMP/bad"
	# Flip one byte of the last record's data.
	python3 -c "import sys; b = bytearray(open(sys.argv[1], 'rb').read()); b[-8] ^= 1; open(sys.argv[1], 'wb').write(b)" "$TMP/bad"
	run --separate-stderr $READ "$TMP/bad"
	status_is 1
	stderr_has "bad data CRC"
	cp "$f" "$TMP/bad"
	python3 -c "import sys; b = bytearray(open(sys.argv[1], 'rb').read()); b[9] ^= 1; open(sys.argv[1], 'wb').write(b)" "$TMP/bad"
	run --separate-stderr $READ "$TMP/bad"
	status_is 1
	stderr_has "bad length CRC"
}

@test "tensorboard: a wrong update_freq is a config error at its position" {
	run --separate-stderr fit_blobs --set 'fit.callbacks=[{tensorboard: {update_freq: often}}]'
	status_is 2
	stderr_has "--set:1:" "'update_freq' must be 'epoch', 'batch' or a number of batches" "'often'"
}

@test "tensorboard: the tensorboard package reads the scalars (build/venv)" {
	local py=$REPO/build/venv/bin/python
	[ -x "$py" ] && "$py" -c 'import tensorboard' 2>/dev/null || skip "no tensorboard package in build/venv (make ref-venv)"
	fit_blobs --set 'fit.callbacks=[csv_logger, {tensorboard: {update_freq: 25}}]' --set fit.epochs=2
	"$py" - "$TMP/run" <<'PY'
import csv, struct, sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
f32 = lambda x: struct.unpack("<f", struct.pack("<f", float(x)))[0]
run = sys.argv[1]
rows = list(csv.DictReader(open(run + "/history.csv")))
train = EventAccumulator(run + "/logs/train"); train.Reload()
val = EventAccumulator(run + "/logs/validation"); val.Reload()
assert sorted(train.Tags()["scalars"]) == ["batch_accuracy", "batch_loss", "epoch_accuracy", "epoch_learning_rate", "epoch_loss"], train.Tags()
assert sorted(val.Tags()["scalars"]) == ["epoch_accuracy", "epoch_loss"], val.Tags()
assert [e.step for e in train.Scalars("epoch_loss")] == [0, 1]
assert [e.step for e in train.Scalars("batch_loss")] == [25, 50]
for r, t, v in zip(rows, train.Scalars("epoch_loss"), val.Scalars("epoch_accuracy")):
    assert t.value == f32(r["loss"]) and v.value == f32(r["val_accuracy"]), (r, t, v)
PY
}
