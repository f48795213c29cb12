#!/usr/bin/env bats
# The device kit (make device-kit, tests/gpu/make-kit.sh), dry-run here: the
# archive a lent GPU machine unpacks must bring every library dtrain and the
# test binaries load beyond the base set of tests/gpu/kit-base.sh, and fit
# in the device tool's carry limit. Where we are root, the CPU suite test_ops
# and a short fit run in a chroot holding only the kit and the base
# libraries. Skips without nvcc (the kit is a CUDA build). The first run
# builds the kit (a few minutes: nvcc, xz); later runs reuse it from build/.

load helpers

setup_file() {
	REPO=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	. "$REPO/tests/gpu/kit-base.sh"
	[ -n "$(kit_nvcc)" ] || return 0
	make -C "$REPO" --no-print-directory -s device-kit >"$BATS_FILE_TMPDIR/make.log" 2>&1 ||
		{ cat "$BATS_FILE_TMPDIR/make.log" >&2; return 1; }
}

setup() {
	common_setup
	. "$REPO/tests/gpu/kit-base.sh"
	[ -n "$(kit_nvcc)" ] || skip "no nvcc here (PATH, /usr/local/cuda/bin): the device kit is a CUDA build"
	KIT=$REPO/build/device-kit
	ARCHIVE=$REPO/build/device-kit.tar.xz
}

# kit_elfs: the kit's binaries and libraries.
kit_elfs() {
	ls "$KIT"/build/dtrain "$KIT"/build/libdtrain_cuda.so "$KIT"/build/tests/unit/test_* "$KIT"/build/tests/tools/* \
		"$KIT"/kit/bin/jq "$KIT"/kit/lib/* | grep -v '/libdtrain_cuda.so$' | grep -v 'tests/unit/libdtrain_cuda'
	echo "$KIT/build/libdtrain_cuda.so"
}

# need_chroot: root with mount namespaces (unshare), else skip.
need_chroot() {
	[ "$(id -u)" = 0 ] || skip "not root: no chroot for the dry run (the ldd checks still ran)"
	unshare -m true 2>/dev/null || skip "unshare -m is refused here: no chroot for the dry run"
}

# make_root: a root folder with only the base libraries; the kit, the models
# and the data are bind-mounted into it by in_root.
make_root() {
	ROOT=$BATS_FILE_TMPDIR/root
	[ -d "$ROOT" ] && return
	mkdir -p "$ROOT"/lib/x86_64-linux-gnu "$ROOT"/lib64 "$ROOT"/build "$ROOT"/kit "$ROOT"/models \
		"$ROOT"/usr/share/datasets/fashion-mnist "$ROOT"/proc "$ROOT"/dev "$ROOT"/tmp
	local name path
	ldd "$KIT"/build/dtrain "$KIT"/kit/lib/* | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' | sort -u |
		while read -r name path; do
			if kit_base_lib "$name" && ! [[ $name =~ ^$(kit_cuda_regex) ]]; then
				cp -L "$path" "$ROOT/lib/x86_64-linux-gnu/$name"
			fi
		done
	cp -L /lib64/ld-linux-x86-64.so.2 "$ROOT/lib64/"
}

# in_root COMMAND...: COMMAND in the chroot, its environment only
# LD_LIBRARY_PATH=$ROOT_LD (default /kit/lib), HOME, OMP_NUM_THREADS and
# CMOCKA_MESSAGE_OUTPUT=TAP.
in_root() {
	ROOT_LD=${ROOT_LD-/kit/lib} unshare -m sh -c 'set -e
		r=$1; k=$2; m=$3; c=$4; shift 4
		mount --bind "$k/build" "$r/build"
		mount --bind "$k/kit" "$r/kit"
		mount --bind "$k/kit/data/fashion-mnist" "$r/usr/share/datasets/fashion-mnist"
		mount --bind "$m" "$r/models"
		mount -t proc proc "$r/proc"
		mount --rbind /dev "$r/dev"
		mount -t tmpfs tmpfs "$r/tmp"
		exec env -i LD_LIBRARY_PATH="$ROOT_LD" HOME=/tmp OMP_NUM_THREADS=2 CMOCKA_MESSAGE_OUTPUT=TAP "$c" "$r" "$@"' \
		in_root "$ROOT" "$KIT" "$REPO/models" "$(PATH=$PATH:/usr/sbin:/sbin command -v chroot)" "$@"
}

@test "the kit's archive fits the device tool's carry limit with the working tree" {
	[ -f "$ARCHIVE" ]
	local packed tree
	packed=$(stat -c %s "$ARCHIVE")
	tree=$(cd "$REPO" && git ls-files -co --exclude-standard -z | xargs -0 stat -c %s 2>/dev/null | awk '{ s += $1 } END { print s }')
	echo "archive $((packed >> 20)) MiB, working tree $((tree >> 20)) MiB"
	[ "$packed" -le $((60 << 20)) ]
	[ $((packed + tree)) -le $((64 << 20)) ]
}

@test "every library the kit's binaries load is in the kit or the base set" {
	local bad
	bad=$(kit_elfs | while read -r f; do
		LD_LIBRARY_PATH=$KIT/kit/lib ldd "$f" | awk -v f="${f#"$KIT"/}" '
			$2 == "=>" { print f, $1, $3 } $2 == "not" { print f, $1, "not-found" }'
	done | while read -r f name path; do
		case $path in "$KIT"/kit/lib/*) continue ;; esac
		kit_base_lib "$name" && continue
		echo "$f: $name => $path"
	done)
	[ -z "$bad" ] || { echo "outside the kit and the base set:"; echo "$bad"; return 1; }
}

@test "the kit records its commit and the glibc it needs" {
	grep -q '^commit [0-9a-f]\{40\}' "$KIT/kit/manifest"
	grep -q '^needs GLIBC_2\.[0-9]*$' "$KIT/kit/manifest"
	[ -x "$KIT/kit/bats/bin/bats" ] && [ -x "$KIT/kit/bin/jq" ]
	[ -r "$KIT/kit/data/fashion-mnist/train-images-idx3-ubyte.gz" ]
}

@test "chroot with the kit alone: every binary's libraries resolve, the CUDA ones aside" {
	need_chroot
	make_root
	local f out bad=
	for f in /build/dtrain "$KIT"/build/tests/unit/test_* "$KIT"/build/tests/tools/* /kit/bin/jq /build/libdtrain_cuda.so; do
		f=${f#"$KIT"}
		[ "$f" = /build/tests/unit/libdtrain_cuda.so ] && continue
		out=$(in_root /lib64/ld-linux-x86-64.so.2 --list "$f" 2>&1) && continue
		# the loader names the first library it misses: only the image's CUDA ones may be
		[ "$f" = /build/libdtrain_cuda.so ] && [[ $out =~ loading\ shared\ libraries:\ $(kit_cuda_regex) ]] && continue
		bad+="$f: $out"$'\n'
	done
	[ -z "$bad" ] || { echo "$bad"; return 1; }
	# and the chroot hides this machine's libraries: without the kit's, dtrain does not load
	out=$(ROOT_LD= in_root /lib64/ld-linux-x86-64.so.2 --list /build/dtrain 2>&1) && return 1
	[[ $out == *"error while loading shared libraries"* ]]
}

@test "chroot with the kit alone: the CPU suite test_ops passes" {
	need_chroot
	make_root
	run in_root /build/tests/unit/test_ops
	status_is 0
	[[ $output == *"ok 1 "* ]]
	[[ $output != *"not ok"* ]]
}

@test "chroot with the kit alone: dtrain fits fashion_mlp on the kit's Fashion-MNIST" {
	need_chroot
	make_root
	run --separate-stderr in_root /build/dtrain fit /models/fashion_mlp.yaml -q --json --set fit.epochs=1 \
		--set fit.steps_per_epoch=20 --set checkpoint.enabled=false
	status_is 0
	echo "$output" | grep '"event"' | tail -1
	[[ $output == *'"event":"epoch"'* ]] || [[ $output == *'"event": "epoch"'* ]]
}

@test "device-run.sh: the env stage runs from the archive alone" {
	local dir=$BATS_TEST_TMPDIR/tree
	mkdir -p "$dir/build" "$dir/tests/gpu"
	cp "$REPO/tests/gpu/device-run.sh" "$dir/tests/gpu/"
	cp "$ARCHIVE" "$dir/build/"
	OUT=$BATS_TEST_TMPDIR/out STAGES=env PATH=/usr/bin:/bin LD_LIBRARY_PATH= run "$dir/tests/gpu/device-run.sh"
	status_is 0
	jq -e '.stages.env.rc == 0 and .stages.env.devices.cuda_backend == true' "$BATS_TEST_TMPDIR/out/device-run.json"
	[ -f "$BATS_TEST_TMPDIR/out/device-run.log" ]
}
