#!/usr/bin/env bash
# Gathers the device kit (`make device-kit`): what a bare GPU machine (the
# CUDA image: driver, toolkit, cuDNN, NCCL, Python with PyTorch; none of our
# Debian packages) needs to run dtrain's GPU checks, packed into one archive
# that the device tool carries (tests/gpu/device-run.sh unpacks it there).
#
#   tests/gpu/make-kit.sh BUILD KITDIR ARCHIVE
#
# KITDIR is the unpacked tree (it is also the root of the dry run's chroot,
# tests/cli/device_kit.bats); ARCHIVE holds its build/ and kit/ folders:
#   build/dtrain, build/libdtrain_cuda.so, build/tests/unit/test_*,
#   build/tests/tools/*   the binaries, stripped of debug information
#   kit/lib/              every shared library they (and jq) load outside
#                         the base set below, found with ldd on this machine
#   kit/bin/jq, kit/bats/ jq (the tests and the benchmark parse --json) and bats
#   kit/data/fashion-mnist/  the data set of the example models
#   kit/manifest          what is in it, from which commit, the glibc it needs
# The tests and models themselves are tracked files: they travel with the
# working tree, so the kit does not copy them.
#
# The base set, expected on any glibc system (the device's image has them):
# the C library and its loader, libm, libpthread, libdl, librt, libgcc_s,
# libstdc++; and the CUDA libraries of the image (the driver's libcuda,
# cuBLAS, cuDNN, NCCL), which are far over the size limit.
set -eu
BUILD=${1:?usage: make-kit.sh BUILD KITDIR ARCHIVE}
KIT=${2:?usage: make-kit.sh BUILD KITDIR ARCHIVE}
ARCHIVE=${3:?usage: make-kit.sh BUILD KITDIR ARCHIVE}
DATA=${DATA:-/usr/share/datasets/fashion-mnist}
cd "$(dirname "$0")/../.."
. tests/gpu/kit-base.sh

[ -x "$BUILD/dtrain" ] && [ -f "$BUILD/libdtrain_cuda.so" ] ||
	{ echo "make-kit: $BUILD/dtrain and $BUILD/libdtrain_cuda.so are not built (make CUDA=1)" >&2; exit 1; }
for f in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz; do
	[ -r "$DATA/$f" ] || { echo "make-kit: $DATA/$f is missing (make deps)" >&2; exit 1; }
done
for tool in jq bats ldd strip xz; do
	command -v $tool >/dev/null || { echo "make-kit: needs $tool" >&2; exit 1; }
done

rm -rf "$KIT"
mkdir -p "$KIT/build/tests/unit" "$KIT/build/tests/tools" "$KIT/kit/lib" "$KIT/kit/bin" "$KIT/kit/data"

# The binaries, without their debug information (a third of their size).
copy_bin() { # SRC DEST
	strip --strip-debug -o "$2" "$1"
	chmod 755 "$2"
}
copy_bin "$BUILD/dtrain" "$KIT/build/dtrain"
copy_bin "$(readlink -f "$BUILD/libdtrain_cuda.so")" "$KIT/build/libdtrain_cuda.so"
for t in "$BUILD"/tests/unit/test_* "$BUILD"/tests/tools/*; do
	[ -f "$t" ] && [ -x "$t" ] && [[ $t != *.d ]] || continue
	copy_bin "$t" "$KIT/build/tests/${t#"$BUILD"/tests/}"
done
# The unit tests find the CUDA backend next to themselves (as in the build tree).
ln -s ../../libdtrain_cuda.so "$KIT/build/tests/unit/libdtrain_cuda.so"
cp "$(command -v jq)" "$KIT/kit/bin/jq"

# Every library the binaries load outside the base set, and what those load.
elfs=("$KIT"/build/dtrain "$KIT"/build/libdtrain_cuda.so "$KIT"/build/tests/unit/test_* "$KIT"/build/tests/tools/* "$KIT"/kit/bin/jq)
ldd "${elfs[@]}" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' | sort -u |
	while read -r name path; do
		kit_base_lib "$name" && continue
		cp -L "$path" "$KIT/kit/lib/$name"
	done
missing=$(LD_LIBRARY_PATH=$KIT/kit/lib ldd "${elfs[@]}" 2>/dev/null | grep 'not found' |
	grep -vE "$(kit_cuda_regex)" | sort -u || true)
[ -z "$missing" ] || { echo "make-kit: libraries not found:" >&2; echo "$missing" >&2; exit 1; }

# bats, laid out as its own tree (bin/bats finds libexec/ and lib/ beside it).
mkdir -p "$KIT/kit/bats/bin" "$KIT/kit/bats/lib" "$KIT/kit/bats/libexec"
# (Inside a bats run, `bats` on PATH is its libexec/bats-core/bats.)
bats_bin=$(readlink -f "$(command -v bats)")
case $bats_bin in
*/libexec/bats-core/bats) bats_root=${bats_bin%/libexec/bats-core/bats} ;;
*) bats_root=$(dirname "$(dirname "$bats_bin")") ;;
esac
cp "$bats_root/bin/bats" "$KIT/kit/bats/bin/"
cp -r "$bats_root/lib/bats-core" "$KIT/kit/bats/lib/"
cp -r "$bats_root/libexec/bats-core" "$KIT/kit/bats/libexec/"

cp -r "$DATA" "$KIT/kit/data/fashion-mnist"

# The newest glibc symbol version any of them asks for (the device needs at least that).
glibc=$(objdump -T "${elfs[@]}" "$KIT"/kit/lib/* 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
{
	echo "commit $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- 2>/dev/null || echo ' (with changes)')"
	echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release && echo "$PRETTY_NAME")"
	echo "needs ${glibc:-GLIBC_unknown}"
	echo "flags NATIVE=0 (no -march=native: any x86-64 processor)"
	echo "nvcc $("$(kit_nvcc)" --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
	echo "libraries $(cd "$KIT/kit/lib" && ls | tr '\n' ' ')"
} >"$KIT/kit/manifest"

# One archive: xz over the whole tree (the test binaries share most of their code).
rm -f "$ARCHIVE"
tar -C "$KIT" -cf - build kit | xz -T2 -6 >"$ARCHIVE.tmp"
mv "$ARCHIVE.tmp" "$ARCHIVE"
printf 'device kit: %s, %s packed, %s unpacked\n' "$ARCHIVE" \
	"$(du -h "$ARCHIVE" | cut -f1)" "$(du -sh "$KIT" | cut -f1)"
