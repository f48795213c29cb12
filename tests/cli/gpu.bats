#!/usr/bin/env bats
# GPUs: the CUDA backend end to end. Where there is a GPU, fits of
# fashion_mlp and fashion_cnn on gpu:0 follow the CPU's loss curve (same
# initial weights, batches and dropout masks; only float rounding differs).
# Everywhere: gpu:N without a GPU is a clear config error (tf32 and bf16 on
# the CPU: bf16.bats); `dtrain devices` reports the GPUs it found.

load helpers

setup() {
	common_setup
	GPUS=$("$DTRAIN" devices --json | jq -r .gpus)
}

need_gpu() {
	if [ "$GPUS" -eq 0 ]; then
		skip "no GPU here ($("$DTRAIN" devices | sed -n 's/^GPUs: *//p'))"
	fi
}

need_fashion() {
	[ -r /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] ||
		skip "Fashion-MNIST is not installed (make deps)"
}

# curve YAML DEVICE [PRECISION]: the per-epoch losses (3 epochs of 10 steps) of a fit on
# DEVICE (in PRECISION, default fp32), one per line.
curve() {
	"$DTRAIN" fit "$1" -q --json --set fit.epochs=3 --set fit.steps_per_epoch=10 \
		--set checkpoint.enabled=false --set distribute.strategy=one_device \
		--set distribute.device="$2" --set compile.precision="${3:-fp32}" | jq -r 'select(.event == "epoch") | .loss'
}

# same_curve A B TOL: two loss curves agree within relative TOL at every epoch.
same_curve() {
	paste <(echo "$1") <(echo "$2") | awk -v tol="$3" '
		{ n++; d = $1 - $2; if (d < 0) d = -d; if (d > tol * $2) { print "epoch " n ": " $1 " vs " $2; bad = 1 } }
		END { exit bad || n != 3 }'
}

# follows_cpu MODEL TOL: models/MODEL.yaml on gpu:0 follows the CPU's loss curve within TOL.
follows_cpu() {
	need_gpu
	need_fashion
	local cpu gpu
	cpu=$(curve "$REPO/models/$1.yaml" cpu:0)
	gpu=$(curve "$REPO/models/$1.yaml" gpu:0)
	echo "cpu: $cpu"
	echo "gpu: $gpu"
	same_curve "$gpu" "$cpu" "$2"
}

# near_fp32 PRECISION TOL: fashion_cnn on gpu:0 in PRECISION follows its fp32 loss curve within TOL.
near_fp32() {
	need_gpu
	need_fashion
	local fp32 other
	fp32=$(curve "$REPO/models/fashion_cnn.yaml" gpu:0)
	other=$(curve "$REPO/models/fashion_cnn.yaml" gpu:0 "$1")
	echo "fp32: $fp32"
	echo "$1: $other"
	same_curve "$other" "$fp32" "$2"
}

@test "fashion_mlp on gpu:0 follows the CPU's loss curve" { follows_cpu fashion_mlp 0.01; }

@test "fashion_cnn on gpu:0 follows the CPU's loss curve" { follows_cpu fashion_cnn 0.01; }

@test "the batch-normalized CNN on gpu:0 follows the CPU's loss curve" { follows_cpu fashion_cnn_bn 0.02; }

@test "the LSTM on gpu:0 (cuDNN's RNN) follows the CPU's loss curve" { follows_cpu fashion_lstm 0.02; }

@test "the residual CNN on gpu:0 follows the CPU's loss curve" { follows_cpu fashion_resnet 0.02; }

@test "the separable CNN on gpu:0 (grouped convolutions) follows the CPU's loss curve" {
	follows_cpu fashion_separable 0.02
}

@test "bf16 on gpu:0 trains to a loss close to fp32's" { near_fp32 bf16 0.05; }

@test "tf32 on gpu:0 trains to a loss close to fp32's" { near_fp32 tf32 0.05; }

@test "a GPU that does not exist: a config error naming the device" {
	run --separate-stderr "$DTRAIN" fit "$MODELS/blobs.yaml" --set distribute.device=gpu:$((GPUS + 3))
	status_is 2
	stderr_has "device 'gpu:$((GPUS + 3))'"
	[[ $stderr =~ :[0-9]+:[0-9]+:\ error: ]]
	if [ "$GPUS" -eq 0 ]; then
		stderr_has "no GPU found"
	else
		stderr_has "there is no gpu:"
	fi
}

@test "CUDA_VISIBLE_DEVICES empty: 0 GPUs, and gpu:0 is refused" {
	CUDA_VISIBLE_DEVICES= run "$DTRAIN" devices --json
	status_is 0
	jq -e '.gpus == 0 and .strategy == "one_device"' <<<"$output" >/dev/null
	CUDA_VISIBLE_DEVICES= run --separate-stderr "$DTRAIN" fit "$MODELS/blobs.yaml" --set distribute.device=gpu:0
	status_is 2
	stderr_has "device 'gpu:0'"
}

@test "precision fp32 is accepted on the CPU; an unknown precision is not" {
	run "$DTRAIN" fit "$MODELS/blobs.yaml" --set compile.precision=fp32 --set fit.epochs=1 -q \
		--set checkpoint.enabled=false
	status_is 0
	run --separate-stderr "$DTRAIN" fit "$MODELS/blobs.yaml" --set compile.precision=fp16
	status_is 2
	stderr_has "unknown precision 'fp16'" "fp32, tf32, bf16"
}

@test "DTRAIN_CUDA_LIB pointing nowhere: gpu:0 is refused with the reason" {
	DTRAIN_CUDA_LIB=/nonexistent/libdtrain_cuda.so run --separate-stderr "$DTRAIN" fit "$MODELS/blobs.yaml" \
		--set distribute.device=gpu:0
	status_is 2
	not_crashed
	stderr_has "device 'gpu:0'"
	if [ "$("$DTRAIN" devices --json | jq -r .cuda_backend)" = true ]; then
		stderr_has "DTRAIN_CUDA_LIB='/nonexistent/libdtrain_cuda.so'"
	fi
}

@test "devices: the GPU line names the backend's state; one line per GPU" {
	run "$DTRAIN" devices
	status_is 0
	[[ ${lines[3]} =~ ^GPUs:\ +$GPUS\ \(.+\)$ ]]
	if [ "$GPUS" -gt 0 ]; then
		[[ ${lines[3]} =~ cuDNN\ [0-9]+\.[0-9]+\.[0-9]+ ]]
		[[ ${lines[4]} =~ ^\ \ gpu:0\ +.+,\ [0-9.]+\ GiB,\ compute\ capability\ [0-9]+\.[0-9]+$ ]]
	fi
	run "$DTRAIN" devices --json
	jq -e --argjson n "$GPUS" '(.cuda_backend | type == "boolean") and
		(if $n > 0 then (.gpu_list | length) == $n and (.cudnn | test("^[0-9]+\\.")) else true end)' \
		<<<"$output" >/dev/null
}

# ---- mirrored and multi_worker_mirrored on GPUs (NCCL) ----

need_gpus() {
	if [ "$GPUS" -lt "$1" ]; then
		skip "needs $1 GPUs, this machine has $GPUS"
	fi
}

# fit_blobs DIR ARGS...: 2 epochs of blobs, checkpoints in $TMP/DIR.
fit_blobs() {
	local dir=$1
	shift
	"$DTRAIN" fit "$MODELS/blobs.yaml" -q --set fit.epochs=2 --set checkpoint.dir="$TMP/$dir" "$@"
}

ckpt_diff() {
	local diff
	diff=$(dirname "$DTRAIN")/tests/tools/ckpt_diff
	[ -x "$diff" ] || diff=$REPO/build/tests/tools/ckpt_diff
	"$diff" "$@"
}

@test "mirrored on [gpu:0, gpu:1] (NCCL): the weights of one_device on gpu:0" {
	need_gpus 2
	fit_blobs one --set distribute.strategy=one_device --set distribute.device=gpu:0
	fit_blobs mir --set distribute.strategy=mirrored --set 'distribute.devices=[gpu:0, gpu:1]'
	ckpt_diff "$TMP/one/latest.safetensors" "$TMP/mir/latest.safetensors" 1e-5
	# and they did train: not the weights of one epoch
	fit_blobs one_e1 --set distribute.strategy=one_device --set distribute.device=gpu:0 --set fit.epochs=1
	run ckpt_diff "$TMP/one/latest.safetensors" "$TMP/one_e1/latest.safetensors"
	status_is 1
}

@test "strategy auto with several GPUs: mirrored over all of them, and it trains" {
	need_gpus 2
	run "$DTRAIN" devices --json
	jq -e '.strategy == "mirrored"' <<<"$output" >/dev/null
	run --separate-stderr "$DTRAIN" fit "$MODELS/blobs.yaml" --json --set fit.epochs=1 \
		--set checkpoint.enabled=false
	status_is 0
	jq -se 'map(select(.event == "epoch")) | length == 1 and (.[0].loss | . > 0 and . < 10)' <<<"$output" >/dev/null
}

@test "GPU replicas without the GPUs, or mixed with CPUs: config errors at the item" {
	local missing=gpu:$((GPUS + 3))
	run --separate-stderr "$DTRAIN" fit "$MODELS/blobs.yaml" --set distribute.strategy=mirrored \
		--set "distribute.devices=[$missing]"
	status_is 2
	not_crashed
	stderr_has "device '$missing': "
	[[ $stderr =~ :[0-9]+:[0-9]+:\ error: ]]
	CUDA_VISIBLE_DEVICES= run --separate-stderr "$DTRAIN" fit "$MODELS/blobs.yaml" \
		--set distribute.strategy=mirrored --set 'distribute.devices=[gpu:0, gpu:1]'
	status_is 2
	stderr_has "device 'gpu:0': no GPU found"
	run --separate-stderr "$DTRAIN" fit "$MODELS/blobs.yaml" --set distribute.strategy=mirrored \
		--set 'distribute.devices=[cpu:0, gpu:0]'
	status_is 2
	stderr_has "device 'gpu:0': the replicas are all CPUs or all GPUs"
	CUDA_VISIBLE_DEVICES= run --separate-stderr "$DTRAIN" fit "$MODELS/blobs.yaml" \
		--set distribute.strategy=multi_worker_mirrored --set 'distribute.devices=[gpu:0]'
	status_is 2
	stderr_has "device 'gpu:0': no GPU found"
	run --separate-stderr "$DTRAIN" fit "$MODELS/blobs.yaml" --set distribute.strategy=parameter_server \
		--set 'distribute.devices=[gpu:0]'
	status_is 2
	stderr_has "devices is [cpu:0] or auto"
}

@test "mirrored with devices auto and no GPU: one CPU replica, as before" {
	CUDA_VISIBLE_DEVICES= run --separate-stderr "$DTRAIN" fit "$MODELS/blobs.yaml" -q --set fit.epochs=1 \
		--set distribute.strategy=mirrored --set distribute.devices=auto --set checkpoint.enabled=false
	status_is 0
}
