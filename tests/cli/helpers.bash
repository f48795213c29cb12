# Shared by the CLI suites: `load helpers` in a .bats file, then call
# common_setup from setup().
#
#   REPO     the repository root (computed from this file's place)
#   DTRAIN   the binary: as given (tests/run.sh exports it), else build/dtrain
#   MODELS   tests/cli/models, the fixture models
#   TMP      a fresh directory for this test

bats_require_minimum_version 1.5.0

# npy_python 'PYTHON': runs PYTHON (in the current directory) with
# npy(path, descr, shape, data), which writes a version 1.0 .npy file of raw
# little-endian bytes (struct is imported): no NumPy needed.
npy_python() {
	python3 -c '
import struct
def npy(path, descr, shape, data):
    h = "{\"descr\": \"%s\", \"fortran_order\": False, \"shape\": %s, }" % (descr, shape)
    h += " " * (117 - len(h)) + "\n"
    open(path, "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + data)
'"$1"
}

common_setup() {
	REPO=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	DTRAIN=${DTRAIN:-$REPO/build/dtrain}
	MODELS=$BATS_TEST_DIRNAME/models
	TMP=$BATS_TEST_TMPDIR
	[ -x "$DTRAIN" ] || {
		echo "no dtrain binary at '$DTRAIN'; run make first" >&2
		return 1
	}
	# Nothing in these tests is an MPI job unless a test says so.
	unset OMPI_COMM_WORLD_SIZE OMPI_COMM_WORLD_RANK PMI_SIZE PMI_RANK PMIX_SIZE PMIX_RANK
}

# status_is N: like [ "$status" -eq N ] but says what the command printed.
# stderr_has WORD...: each word appears in $stderr (of the last `run --separate-stderr`).
stderr_has() {
	for w in "$@"; do
		if [[ $stderr != *"$w"* ]]; then
			echo "the message lacks '$w': $stderr" >&2
			return 1
		fi
	done
}

status_is() {
	if [ "$status" -ne "$1" ]; then
		echo "expected exit status $1, got $status; output:" >&2
		echo "$output" >&2
		[ -z "${stderr-}" ] || echo "stderr: $stderr" >&2
		return 1
	fi
}

# not_crashed: the last command ended by exit, not by a signal (no status >= 128).
not_crashed() {
	if [ "$status" -ge 128 ]; then
		echo "dtrain died with status $status (signal $((status - 128))); output:" >&2
		echo "$output" >&2
		return 1
	fi
}

# safetensors_header FILE: prints the JSON header of a safetensors file
# (8-byte little-endian length, then that many bytes of JSON). Fails when the
# length does not fit in the file.
safetensors_header() {
	local file=$1 len size
	size=$(stat -L -c %s "$file")
	[ "$size" -ge 8 ] || return 1
	len=$(od -An -t u8 -N 8 "$file" | tr -d ' ')
	[ "$len" -gt 1 ] && [ $((len + 8)) -le "$size" ] || return 1
	tail -c +9 "$file" | head -c "$len"
}

# be32 N: N as 4 big-endian bytes (IDX headers).
be32() {
	printf "$(printf '\\%03o\\%03o\\%03o\\%03o' $((($1 >> 24) & 255)) $((($1 >> 16) & 255)) \
		$((($1 >> 8) & 255)) $(($1 & 255)))"
}

# idx_images N H W [SEED]: an IDX3 uint8 file of N images of H x W: random
# pixels, the same ones for the same SEED (for tests that compare weights:
# rounding differences some data sets amplify must not make them flaky).
idx_images() {
	local n=$1 h=$2 w=$3 seed=${4:-}
	printf '\000\000\010\003'
	be32 "$n"
	be32 "$h"
	be32 "$w"
	if [ -n "$seed" ]; then
		printf "$(awk -v count=$((n * h * w)) -v seed="$seed" \
			'BEGIN { srand(seed); for (i = 0; i < count; i++) printf "\\%03o", int(rand() * 256) }')"
	else
		head -c $((n * h * w)) /dev/urandom
	fi
}

# idx_labels N: an IDX1 uint8 file of N labels cycling 0, 1, 2.
idx_labels() {
	local n=$1 i
	printf '\000\000\010\001'
	be32 "$n"
	for ((i = 0; i < n; i++)); do
		printf "\\$((i % 3))"
	done
}

# events NAME: the JSON lines of $output whose "event" is NAME, one per line.
# (jq -e over several inputs judges only the last, so filter first.)
events() {
	jq -c --arg e "$1" 'select(.event == $e)' <<<"$output"
}

# ckpt_diff_bin: the ckpt_diff of the build that made $DTRAIN (build/san
# under SANITIZE=1), else build/'s.
ckpt_diff_bin() {
	local d
	d=$(dirname "$DTRAIN")/tests/tools/ckpt_diff
	[ -x "$d" ] || d=$REPO/build/tests/tools/ckpt_diff
	echo "$d"
}

# need_mpi: skip when Open MPI's launcher is missing.
need_mpi() {
	command -v mpirun >/dev/null || skip "no mpirun (openmpi-bin)"
}

# mpi N ARGS...: ARGS under mpirun with N ranks on this host, as root if need be.
# In a sanitizer build, Open MPI's own leaks are suppressed (lsan-mpi.supp).
mpi() {
	local n=$1
	shift
	LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$REPO/tests/cli/lsan-mpi.supp:fast_unwind_on_malloc=0} \
		OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none \
		timeout 120 mpirun --oversubscribe -np "$n" "$@"
}
