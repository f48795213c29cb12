/*
 * The CUDA backend, loaded on demand.
 *
 * The backend (the .cu files of core/cuda/) is built as its own shared object,
 * libdtrain_cuda.so, linked against cuBLAS, cuDNN and NCCL. dtrain does not
 * link it: loading those libraries costs far more than the 50 ms a CPU-only
 * run may spend on CUDA, so the object is dlopen()ed the first time a GPU is
 * used or listed, as TensorFlow does. Counting GPUs needs only the driver
 * (libcuda.so.1, itself dlopen()ed): a machine without a driver pays nothing.
 *
 * Where the object is looked for: $DTRAIN_CUDA_LIB, then next to the
 * executable, then in ../lib/dtrain/ from it (make install puts it there).
 *
 * This header is plain C and is the whole interface between the two sides:
 * the object exports one function, dt_cuda_api_get, which returns a struct
 * dt_cuda_api whose abi must equal DT_CUDA_ABI.
 */
#ifndef DT_CUDA_H
#define DT_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "core/op_types.h" /* enum dt_precision */

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Declared only: this header does not include core/tensor.h, whose
 * dt_device_alloc calls the loader below (no include circle). A caller of
 * the NCCL members includes core/tensor.h for struct dt_device.
 */
struct dt_backend;
struct dt_device;

#define DT_CUDA_ABI 1
#define DT_NCCL_ID_BYTES 128

struct dt_gpu_info {
	char name[256];
	uint64_t memory;  /* bytes */
	int cc_major, cc_minor;
};

struct dt_cuda_api {
	int abi;
	const struct dt_backend *backend;
	/* GPUs the runtime sees (CUDA_VISIBLE_DEVICES applies); 0 without a driver. */
	int (*device_count)(void);
	/* 0, or -1 when index is not a GPU. */
	int (*device_info)(int index, struct dt_gpu_info *info);
	/* cuDNN's and NCCL's versions, major*10000 + minor*100 + patch; CUDA's runtime, major*1000 + minor*10. */
	int (*cudnn_version)(void);
	int (*nccl_version)(void);
	int (*runtime_version)(void);
	/* Zeroed device memory of n floats on GPU index, from the caching allocator. */
	float *(*alloc)(int index, int64_t n);
	void (*free)(int index, float *p);
	/* Page-locked host memory (for batches copied asynchronously); NULL on failure. */
	void *(*host_alloc)(size_t bytes);
	void (*host_free)(void *p);
	/* Sets the math of every later matrix product and convolution. 0, or -1 (message in err). */
	int (*set_precision)(enum dt_precision p, char *err, size_t errsize);
	/* Waits for the work queued on GPU index. */
	void (*synchronize)(int index);

	/*
	 * NCCL, for the mirrored strategies (strategies/local_gpu.c).
	 * A communicator is one GPU's member of a clique: all of this process's
	 * GPUs at once (nccl_comm_init_all: mirrored), or one GPU of one rank
	 * among nranks, from a unique id that rank 0 made and broadcast over MPI
	 * (nccl_comm_init_rank: multi_worker_mirrored). 0, or -1 with a message
	 * in err.
	 */
	int (*nccl_unique_id)(unsigned char id[DT_NCCL_ID_BYTES], char *err, size_t errsize);
	int (*nccl_comm_init_rank)(void **comm, int device, int nranks, const unsigned char id[DT_NCCL_ID_BYTES],
				   int rank, char *err, size_t errsize);
	int (*nccl_comm_init_all)(void **comms, int ndev, const int *devices, char *err, size_t errsize);
	/*
	 * Queues an in-place sum of buf (n floats on dev) across the clique on
	 * dev's stream. Several devices driven from one thread go between
	 * nccl_group_start and nccl_group_end.
	 */
	void (*nccl_all_reduce_sum)(void *comm, struct dt_device dev, float *buf, int64_t n);
	/* Queues buf (n floats on dev) = root's buf, in place (the initial weights of every replica). */
	void (*nccl_broadcast)(void *comm, struct dt_device dev, float *buf, int64_t n, int root);
	void (*nccl_group_start)(void);
	void (*nccl_group_end)(void);
	void (*nccl_comm_destroy)(void *comm);
};

/* Exported by libdtrain_cuda.so. */
const struct dt_cuda_api *dt_cuda_api_get(void);

/* ---- the loader (core/cuda/cuda.c, in dtrain itself) ---- */

/* 1 when this build made libdtrain_cuda.so (make CUDA=1 or nvcc found). */
int dt_cuda_built(void);
/*
 * GPUs usable by this process: 0 without the CUDA build, without a driver, or
 * with CUDA_VISIBLE_DEVICES empty. Asks the driver only; cheap.
 */
int dt_cuda_device_count(void);
/* The backend, loaded on first call; NULL when it cannot be (reason in dt_cuda_why). */
const struct dt_cuda_api *dt_cuda(void);
/* Why dt_cuda() returned NULL (static text). */
const char *dt_cuda_why(void);
/*
 * 0 when gpu:index can be used: the backend loads and the GPU exists; else -1
 * with a one-line reason in err.
 */
int dt_cuda_check_device(int index, char *err, size_t errsize);
/* Host buffers for batches: page-locked when the backend is loaded, else plain. */
float *dt_host_alloc_pinned(int64_t n);
void dt_host_free_pinned(float *p);
/*
 * Precision of matrix products and convolutions. fp32 always works; tf32 and
 * bf16 need the CUDA backend loaded (-1 with a reason in err otherwise).
 */
int dt_set_precision(enum dt_precision p, char *err, size_t errsize);

#ifdef __cplusplus
}
#endif

#endif
