#!/usr/bin/env bats
# tests/ref/read_safetensors.py, the NumPy-only reader, loads dtrain's
# checkpoints: the model it rebuilds scores the test data as dtrain evaluate
# does, and its checksums agree with dtrain's. Skipped without NumPy in
# /usr/bin/python3.

load helpers

setup() {
	common_setup
	READER=$REPO/tests/ref/read_safetensors.py
	/usr/bin/python3 -c 'import numpy' 2>/dev/null || skip "/usr/bin/python3 has no NumPy"
	cd "$TMP"
	idx_images 60 4 4 >images.idx
	idx_labels 60 >labels.idx
	"$DTRAIN" fit -q "$MODELS/tiny_idx.yaml" --set data.train.images="$TMP/images.idx" \
		--set data.train.labels="$TMP/labels.idx" --set checkpoint.enabled=true --set checkpoint.dir=run \
		--set fit.epochs=3
}

@test "the reader lists the tensors with their shapes" {
	run /usr/bin/python3 "$READER" run/latest.safetensors
	status_is 0
	[ "$(jq -c '.tensors."dense/kernel".shape' <<<"$output")" = "[16,3]" ]
	[ "$(jq -c '.tensors."optimizer/dense/kernel/m".shape' <<<"$output")" = "[16,3]" ]
	jq -e '.metadata | index("crc32") and index("config")' <<<"$output" >/dev/null
}

@test "the reader's weights score the data as dtrain evaluate does" {
	run --separate-stderr "$DTRAIN" evaluate "$MODELS/tiny_idx.yaml" --json --set checkpoint.dir=run \
		--set "data.test={format: idx, images: $TMP/images.idx, labels: $TMP/labels.idx}"
	status_is 0
	local loss acc
	loss=$(jq -r .loss <<<"$output")
	acc=$(jq -r .accuracy <<<"$output")
	run /usr/bin/python3 - "$READER" "$loss" "$acc" <<'PY'
import sys, importlib.util
import numpy as np
spec = importlib.util.spec_from_file_location("reader", sys.argv[1])
reader = importlib.util.module_from_spec(spec)
spec.loader.exec_module(reader)
w, meta = reader.load("run/latest.safetensors")
raw = open("images.idx", "rb").read()
n = int.from_bytes(raw[4:8], "big")
x = np.frombuffer(raw, np.uint8, n * 16, 16).reshape(n, 16).astype(np.float32) / 255
y = np.frombuffer(open("labels.idx", "rb").read(), np.uint8, n, 8)
z = x @ w["dense/kernel"] + w["dense/bias"]
p = np.exp(z - z.max(1, keepdims=True))
p /= p.sum(1, keepdims=True)
loss = float(-np.log(p[np.arange(n), y]).mean())
acc = float((p.argmax(1) == y).mean())
print(loss, acc)
assert abs(loss - float(sys.argv[2])) < 1e-5, (loss, sys.argv[2])
assert abs(acc - float(sys.argv[3])) < 1e-9, (acc, sys.argv[3])
PY
	status_is 0
}

@test "the reader refuses a file whose bytes changed (the check can fail)" {
	cp -L run/latest.safetensors bad.safetensors
	# Flip every bit of the third byte from the end: writing a fixed byte left the file as it was
	# whenever that byte already held it.
	/usr/bin/python3 -c 'import sys; b = bytearray(open(sys.argv[1], "rb").read()); b[-3] ^= 0xFF; open(sys.argv[1], "wb").write(b)' bad.safetensors
	run /usr/bin/python3 "$READER" bad.safetensors
	[ "$status" -ne 0 ]
	[[ $output == *"fails its checksum"* ]]
}
