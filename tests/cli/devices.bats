#!/usr/bin/env bats
# dtrain devices: what dtrain found and which strategy fit would choose, on stdout.

load helpers

setup() {
	common_setup
}

@test "human output: CPU, oneDNN, precision, GPUs, MPI and strategy lines on stdout" {
	run --separate-stderr "$DTRAIN" devices
	status_is 0
	[ -z "$stderr" ]
	[[ ${lines[3]} =~ ^GPUs:\ +([0-9]+) ]]
	local gpus=${BASH_REMATCH[1]}
	# One line more per GPU, after the GPUs line.
	[ "${#lines[@]}" -eq $((6 + gpus)) ]
	[[ ${lines[0]} =~ ^CPU:\ +.+,\ [0-9]+\ cores$ ]]
	[[ ${lines[1]} =~ ^oneDNN:\ +[0-9]+\.[0-9]+\.[0-9]+,\ dispatching\ to\ [^,]+,\ ([0-9]+)\ threads?(.*)$ ]]
	if [ "${BASH_REMATCH[1]}" -gt 1 ]; then
		[[ ${BASH_REMATCH[2]} =~ ^\ \(a\ cache\ line\ from\ thread\ 0\ to\ thread\ [1-9][0-9]*\ and\ back:\ [1-9][0-9]*\ ns\)$ ]]
	else
		[ -z "${BASH_REMATCH[2]}" ]
	fi
	[[ ${lines[2]} =~ ^Precision:\ fp32(,\ bf16)?\ on\ the\ CPU\ \(compile\.precision\)$ ]]
	[[ ${lines[-2]} =~ ^MPI:\ +world\ size\ 1,\ rank\ 0$ ]]
	# One process and at most one GPU: one_device.
	[[ ${lines[-1]} =~ ^Strategy:\ +(one_device|mirrored)\ \(.+\)$ ]]
	if [ "$gpus" -le 1 ]; then
		[[ ${lines[-1]} == "Strategy:  one_device "* ]]
	fi
}

@test "human output: the core count is this machine's" {
	run "$DTRAIN" devices
	status_is 0
	[[ ${lines[0]} == *", $(nproc --all) cores" || ${lines[0]} == *", $(getconf _NPROCESSORS_ONLN) cores" ]]
}

@test "--json: one object with cpu, cpu_cores, isa, gpus, mpi_world_size, strategy" {
	run --separate-stderr "$DTRAIN" devices --json
	status_is 0
	[ -z "$stderr" ]
	[ "${#lines[@]}" -eq 1 ]
	jq -e '
		(.cpu | type == "string" and length > 0) and
		(.cpu_cores | type == "number" and . >= 1) and
		(.isa | type == "string" and length > 0) and
		(.gpus | type == "number" and . >= 0) and
		(.mpi_world_size == 1) and
		(.strategy == (if .gpus > 1 then "mirrored" else "one_device" end))' <<<"$output" >/dev/null
}

@test "--json agrees with the human output" {
	run "$DTRAIN" devices --json
	status_is 0
	local json=$output
	run "$DTRAIN" devices
	status_is 0
	[ "${lines[0]}" = "CPU:       $(jq -r '.cpu' <<<"$json"), $(jq -r '.cpu_cores' <<<"$json") cores" ]
	[[ ${lines[1]} == *"dispatching to $(jq -r '.isa' <<<"$json"),"* ]]
	[[ ${lines[2]} == "Precision: $(jq -r '.cpu_precisions | join(", ")' <<<"$json") on the CPU"* ]]
	[[ ${lines[3]} == "GPUs:      $(jq -r '.gpus' <<<"$json")"* ]]
	[[ ${lines[-1]} == "Strategy:  $(jq -r '.strategy' <<<"$json") "* ]]
}

@test "the threads' round trip: a positive time between two threads, none with one" {
	OMP_NUM_THREADS=2 run --separate-stderr "$DTRAIN" devices --json
	status_is 0
	jq -e '.threads == 2 and .thread_round_trip_ns > 0' <<<"$output" >/dev/null
	OMP_NUM_THREADS=2 run "$DTRAIN" devices
	[[ ${lines[1]} == *", 2 threads (a cache line from thread 0 to thread 1 and back: "*" ns)" ]]
	OMP_NUM_THREADS=1 run --separate-stderr "$DTRAIN" devices --json
	jq -e '.threads == 1 and .thread_round_trip_ns == 0' <<<"$output" >/dev/null
	OMP_NUM_THREADS=1 run "$DTRAIN" devices
	[[ ${lines[1]} == *", 1 thread" ]]
}

@test "OMPI_COMM_WORLD_SIZE=4: the strategy is multi_worker_mirrored" {
	OMPI_COMM_WORLD_SIZE=4 run --separate-stderr "$DTRAIN" devices --json
	status_is 0
	jq -e '.mpi_world_size == 4 and .strategy == "multi_worker_mirrored"' <<<"$output" >/dev/null
	OMPI_COMM_WORLD_SIZE=4 run "$DTRAIN" devices
	status_is 0
	[[ ${lines[-2]} == "MPI:       world size 4, rank 0" ]]
	[[ ${lines[-1]} == "Strategy:  multi_worker_mirrored "* ]]
}

@test "the rank comes from OMPI_COMM_WORLD_RANK" {
	OMPI_COMM_WORLD_SIZE=4 OMPI_COMM_WORLD_RANK=3 run "$DTRAIN" devices --json
	status_is 0
	jq -e '.mpi_world_size == 4 and .mpi_rank == 3' <<<"$output" >/dev/null
}

@test "Slurm/PMI: PMI_SIZE=2 also means multi_worker_mirrored" {
	PMI_SIZE=2 run "$DTRAIN" devices --json
	status_is 0
	jq -e '.mpi_world_size == 2 and .strategy == "multi_worker_mirrored"' <<<"$output" >/dev/null
}

@test "OMPI_COMM_WORLD_SIZE=1 is one process: one_device" {
	OMPI_COMM_WORLD_SIZE=1 run "$DTRAIN" devices --json
	status_is 0
	jq -e '.mpi_world_size == 1 and .strategy == "one_device"' <<<"$output" >/dev/null
}
