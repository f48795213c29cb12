# Sourced by tests/gpu/make-kit.sh and tests/cli/device_kit.bats: which
# shared libraries the device kit leaves out because the device's image has
# them. The base set: the C library and its loader, libm, libpthread,
# libdl, librt, libgcc_s, libstdc++ (any glibc system), the kernel's vdso;
# and the CUDA libraries: the driver's libcuda, and cuBLAS, cuDNN, NCCL and
# the CUDA runtime of the image's toolkit and its PyTorch.

KIT_BASE_LIBS="linux-vdso.so.1 ld-linux-x86-64.so.2 libc.so.6 libm.so.6 libpthread.so.0 libdl.so.2 librt.so.1 libgcc_s.so.1 libstdc++.so.6"

# kit_cuda_regex: an extended regex matching the CUDA libraries' names.
kit_cuda_regex() {
	echo '(libcuda\.so|libcublas(Lt)?\.so|libcudnn[a-z_]*\.so|libnccl\.so|libcudart\.so)'
}

# kit_base_lib NAME: true when library NAME (a soname) stays out of the kit.
kit_base_lib() {
	local b
	for b in $KIT_BASE_LIBS; do
		[ "$1" = "$b" ] && return 0
	done
	[[ $1 =~ ^$(kit_cuda_regex) ]]
}

# kit_nvcc: the nvcc the Makefile would use (NVCC if set, even empty; else
# PATH, then /usr/local/cuda/bin), or nothing.
kit_nvcc() {
	if [ -n "${NVCC+set}" ]; then
		echo "$NVCC"
		return
	fi
	command -v nvcc 2>/dev/null || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; } || true
}
