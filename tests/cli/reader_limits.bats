#!/usr/bin/env bats
# Readers are bounded by the bytes present, not by the sizes a header
# declares: a tiny file whose header promises gigabytes ends in an error
# naming it, quickly, in little memory. Each case runs with at most 3 GB of
# address space (so that a reader which believes the header aborts instead of
# taking the machine's memory) and judges the peak RSS. Skipped in sanitizer
# builds: AddressSanitizer reserves terabytes of address space, and its
# shadow memory makes RSS meaningless.

load helpers

setup() {
	common_setup
	if ldd "$DTRAIN" 2>/dev/null | grep -q libasan; then
		skip "a sanitizer build: address-space limits and RSS are not judged"
	fi
	cd "$TMP"
	idx_images 12 4 4 >images.idx
	idx_labels 12 >labels.idx
	IDX=(--set data.train.images="$TMP/images.idx" --set data.train.labels="$TMP/labels.idx")
}

# bounded CMD...: runs CMD with at most 3 GB of address space and 60 s; sets
# status, stderr and rss (CMD's peak resident memory, kB).
bounded() {
	local res
	res=$(
		ulimit -v 3000000
		python3 -c '
import resource, subprocess, sys
with open(sys.argv[1], "w") as err:
    try:
        rc = subprocess.run(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=err, timeout=60).returncode
    except subprocess.TimeoutExpired:
        rc = 124
print(rc if rc >= 0 else 128 - rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
' "$TMP/stderr" "$@"
	)
	status=${res% *}
	rss=${res#* }
	stderr=$(cat "$TMP/stderr")
	echo "# peak RSS $rss kB: $stderr" >&3
}

# fails_small WORDS...: the last bounded command exited 1 with an error holding WORDS, under 100 MB.
fails_small() {
	not_crashed
	status_is 1
	stderr_has "$@"
	[ "$rss" -lt 100000 ] || {
		echo "peak RSS $rss kB" >&2
		return 1
	}
}

# png FILE W H [CHUNKS]: a PNG of W x H 8-bit gray pixels; CHUNKS (python
# bytes) follow IHDR; without CHUNKS, an IDAT of four zero rows and IEND.
png() {
	python3 -c '
import struct, sys, zlib
def chunk(t, d): return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
w, h = int(sys.argv[2]), int(sys.argv[3])
rows = zlib.compress(b"\0" * (w + 1) * 4)
rest = eval(sys.argv[4]) if len(sys.argv) > 4 else chunk(b"IDAT", rows) + chunk(b"IEND", b"")
open(sys.argv[1], "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)) + rest)
' "$@"
}

# png_fit DIR: fit a 2-class grayscale png_folder in DIR (classes a and b).
png_fit() {
	bounded "$DTRAIN" fit -q "$MODELS/tiny_idx.yaml" \
		--set "data.train={format: png_folder, directory: '$1', color_mode: grayscale}"
}

@test "predict: a 16-byte IDX file promising one 46340 x 46340 image" {
	{
		printf '\000\000\010\003'
		be32 1
		be32 46340
		be32 46340
	} >big.idx
	bounded "$DTRAIN" predict "$MODELS/tiny_idx.yaml" big.idx "${IDX[@]}"
	fails_small "'big.idx' is truncated" "image 0 is cut short"
}

@test "predict: an IDX file promising no image cannot give the input shape" {
	{
		printf '\000\000\010\003'
		be32 0
		be32 46340
		be32 46340
	} >none.idx
	bounded "$DTRAIN" predict "$MODELS/tiny_idx.yaml" none.idx "${IDX[@]}"
	fails_small "'none.idx' holds no images"
}

@test "predict: a 128-byte NPY header promising a 536 MB record" {
	python3 -c '
import struct
h = "{\"descr\": \"|u1\", \"fortran_order\": False, \"shape\": (1, 23170, 23170), }"
h += " " * (117 - len(h)) + "\n"
open("big.npy", "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode())
'
	[ "$(stat -c %s big.npy)" -eq 128 ]
	bounded "$DTRAIN" predict "$MODELS/tiny_idx.yaml" big.npy "${IDX[@]}"
	fails_small "'big.npy' is truncated" "record 0 is cut short"
}

@test "fit: a CSV whose first line is 10 MB of commas" {
	head -c 10000000 /dev/zero | tr '\0' , >commas.csv
	echo >>commas.csv
	bounded "$DTRAIN" fit -q "$REPO/models/fruit_csv.yaml" --set data.train.path="$TMP/commas.csv" \
		--set data.train.label=-1
	not_crashed
	status_is 1
	stderr_has "'$TMP/commas.csv' has no readable row" "the field is empty"
	# The line itself, its fields and one row of floats: a few times its 10 MB, not 1024 rows (41 GB).
	[ "$rss" -lt 250000 ]
}

@test "fit: a 41-byte PNG whose text chunk declares 2 GB" {
	mkdir -p text/a text/b
	png text/a/x.png 4 4 'struct.pack(">I", 0x7fffffff) + b"tEXt"'
	[ "$(stat -c %s text/a/x.png)" -eq 41 ]
	cp text/a/x.png text/b/y.png
	png_fit text
	fails_small "text/a/x.png" "truncated"
}

@test "fit: a PNG whose header promises 8192 x 8192 pixels over four rows of data" {
	mkdir -p huge/a huge/b
	png huge/a/x.png 8192 8192
	cp huge/a/x.png huge/b/y.png
	png_fit huge
	fails_small "huge/a/x.png" "truncated"
}

@test "fit: an ancillary chunk of a good PNG is skipped unread" {
	mkdir -p ok/a ok/b
	png ok/a/x.png 4 4 'chunk(b"zTXt", b"k\0\0" + zlib.compress(b"x" * 50000000)) + chunk(b"IDAT", rows) + chunk(b"IEND", b"")'
	cp ok/a/x.png ok/b/y.png
	png_fit ok
	# Four rows of a 4 x 4 image: the IDAT holds them all.
	status_is 0
	[ "$rss" -lt 100000 ]
}

@test "fit: data: /dev/zero (a mapping read from a device) is refused" {
	bounded "$DTRAIN" fit -q "$MODELS/tiny_idx.yaml" --set data=/dev/zero
	not_crashed
	status_is 2
	stderr_has "cannot open '/dev/zero'" "device"
	[ "$rss" -lt 100000 ]
}

@test "fit: a data file that is a character device is refused" {
	bounded "$DTRAIN" fit -q "$MODELS/tiny_idx.yaml" --set data.train.images=/dev/zero \
		--set data.train.labels="$TMP/labels.idx"
	fails_small "cannot read '/dev/zero'" "character device"
	bounded "$DTRAIN" predict "$MODELS/tiny_idx.yaml" /dev/zero --format idx "${IDX[@]}"
	fails_small "cannot read '/dev/zero'" "character device"
	# standard input is what the user redirected: /dev/null is an empty input, not a refused device
	bounded bash -c "'$DTRAIN' predict '$MODELS/tiny_idx.yaml' - --format idx ${IDX[*]} </dev/null"
	fails_small "'<stdin>' is empty"
}

@test "predict: a pipe is read as before" {
	bounded bash -c "cat '$TMP/images.idx' | '$DTRAIN' predict '$MODELS/tiny_idx.yaml' - --format idx \
		--set data.train.images='$TMP/images.idx' --set data.train.labels='$TMP/labels.idx'"
	# No checkpoint: the error comes after the input opened.
	status_is 1
	stderr_has "checkpoint"
}

@test "fit: a CIFAR class-names file that is a device is refused" {
	mkdir cif
	python3 -c 'open("cif/data_batch_1.bin", "wb").write(bytes([3]) + bytes(3072))'
	ln -s /dev/zero cif/batches.meta.txt
	bounded "$DTRAIN" fit -q "$MODELS/tiny_idx.yaml" --set "data.train={format: cifar10, files: ['$TMP/cif/data_batch_1.bin']}"
	fails_small "cannot read '$TMP/cif/batches.meta.txt': not a regular file"
}
