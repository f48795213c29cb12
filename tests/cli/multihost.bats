#!/usr/bin/env bats
# multi_worker_mirrored across "hosts" for real: two network namespaces joined
# by a veth pair, mpirun in the first, its daemon started in the second by a
# plm_rsh_agent that runs `ip netns exec` instead of ssh, and every byte
# between the ranks over TCP on the veth subnet. Skips where namespaces cannot
# be made (not root, no CAP_SYS_ADMIN, no ip). The namespaces are removed even
# when a test fails.

load helpers

setup() {
	common_setup
	command -v mpirun >/dev/null || skip "no mpirun (openmpi-bin)"
	command -v ip >/dev/null || skip "no ip (iproute2)"
	export OMP_NUM_THREADS=1
	# Under SANITIZE=1: Open MPI's own allocations are not our leaks.
	export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$BATS_TEST_DIRNAME/lsan-mpi.supp:fast_unwind_on_malloc=0}
	local k=$(($$ % 200 + 20))
	NS_A=dtrain$$a NS_B=dtrain$$b
	NET=10.77.$k
	ip netns add "$NS_A" 2>/dev/null || skip "cannot make network namespaces here (needs root with CAP_SYS_ADMIN)"
	ip netns add "$NS_B"
	ip link add "dtv$$a" type veth peer name "dtv$$b"
	ip link set "dtv$$a" netns "$NS_A"
	ip link set "dtv$$b" netns "$NS_B"
	ip -n "$NS_A" addr add "$NET.1/24" dev "dtv$$a"
	ip -n "$NS_B" addr add "$NET.2/24" dev "dtv$$b"
	for ns in "$NS_A" "$NS_B"; do
		ip -n "$ns" link set lo up
	done
	ip -n "$NS_A" link set "dtv$$a" up
	ip -n "$NS_B" link set "dtv$$b" up
	# ssh's stand-in: "agent HOST COMMAND..." runs COMMAND in HOST's namespace.
	cat >"$TMP/agent" <<-AGENT
		#!/bin/sh
		host=\$1; shift
		case \$host in
		$NET.1) ns=$NS_A ;;
		$NET.2) ns=$NS_B ;;
		*) echo "agent: unknown host \$host" >&2; exit 1 ;;
		esac
		exec ip netns exec "\$ns" sh -c "\$*"
	AGENT
	chmod +x "$TMP/agent"
}

teardown() {
	for ns in "${NS_A-}" "${NS_B-}"; do
		[ -n "$ns" ] || continue
		ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
		ip netns del "$ns" 2>/dev/null || true
	done
}

# hosts_mpi ARGS...: ARGS as 2 ranks, one per namespace, over TCP only.
hosts_mpi() {
	OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 120 \
		ip netns exec "$NS_A" mpirun --oversubscribe -np 2 -H "$NET.1:1,$NET.2:1" \
		--mca plm_rsh_agent "$TMP/agent" --mca btl tcp,self \
		--mca btl_tcp_if_include "$NET.0/24" --mca oob_tcp_if_include "$NET.0/24" "$@"
}

@test "two namespaces as hosts: one rank in each, over TCP" {
	run hosts_mpi sh -c 'echo "rank $OMPI_COMM_WORLD_RANK on $(ip -4 -o addr show | grep -o "10\.77\.[0-9]*\.[0-9]*" | head -1)"'
	status_is 0
	[[ $output == *"rank 0 on $NET.1"* ]]
	[[ $output == *"rank 1 on $NET.2"* ]]
}

@test "multi_worker_mirrored across two hosts: the weights of one_device" {
	# Beside the binary (make builds it with dtrain), else in this tree's build/.
	CKPT_DIFF=$(dirname "$DTRAIN")/tests/tools/ckpt_diff
	[ -x "$CKPT_DIFF" ] || CKPT_DIFF=$REPO/build/tests/tools/ckpt_diff
	[ -x "$CKPT_DIFF" ] || skip "no tests/tools/ckpt_diff beside '$DTRAIN' or in build/: run make"
	"$DTRAIN" fit "$MODELS/blobs.yaml" -q --set fit.epochs=2 --set checkpoint.dir="$TMP/one"
	run --separate-stderr hosts_mpi "$DTRAIN" fit "$MODELS/blobs.yaml" --json --set fit.epochs=2 \
		--set checkpoint.dir="$TMP/two"
	status_is 0
	[ "$(events epoch | wc -l)" -eq 2 ]
	"$CKPT_DIFF" "$TMP/one/latest.safetensors" "$TMP/two/latest.safetensors"
}

@test "two hosts: communication auto sums over MPI, shared_memory is refused naming the key" {
	# The chief, in the first namespace, has mpirun's environment: DTRAIN_STATS reaches it.
	DTRAIN_STATS=1 run --separate-stderr hosts_mpi "$DTRAIN" fit "$MODELS/blobs.yaml" -q --set fit.epochs=1 \
		--set checkpoint.enabled=false
	status_is 0
	[[ $stderr == *"multi_worker_mirrored: 2 ranks, "*" 1 bucket (1.00 per step posted during backward)"* ]]
	run --separate-stderr hosts_mpi "$DTRAIN" fit "$MODELS/blobs.yaml" -q --set fit.epochs=1 \
		--set checkpoint.enabled=false --set distribute.communication=shared_memory
	echo "$stderr"
	status_is 2
	stderr_has "communication: shared_memory needs every rank on one host"
}
