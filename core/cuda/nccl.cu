/*
 * The CUDA backend's NCCL part: versions, communicators, all-reduce and
 * broadcast, queued on each GPU's stream (see the NCCL members of struct
 * dt_cuda_api in core/cuda/cuda.h; strategies/local_gpu.c drives them).
 */
#include <stdio.h>
#include <string.h>

#include <nccl.h>

#include "core/cuda/ops_cuda.h"

#define DT_NCCL_CHECK(call) \
	do { \
		ncclResult_t r_ = (call); \
		if (r_ != ncclSuccess) \
			dt_cuda_bug(__FILE__, __LINE__, "%s failed: %s", #call, ncclGetErrorString(r_)); \
	} while (0)

static int nccl_version(void)
{
	int v = 0;
	return ncclGetVersion(&v) == ncclSuccess ? v : 0;
}

static int nccl_fail(ncclResult_t r, const char *what, char *err, size_t errsize)
{
	snprintf(err, errsize, "NCCL %s failed: %s", what, ncclGetErrorString(r));
	return -1;
}

static int nccl_unique_id(unsigned char id[DT_NCCL_ID_BYTES], char *err, size_t errsize)
{
	ncclUniqueId u;
	ncclResult_t r = ncclGetUniqueId(&u);
	static_assert(sizeof(u) == DT_NCCL_ID_BYTES, "NCCL's unique id size");
	if (r != ncclSuccess)
		return nccl_fail(r, "ncclGetUniqueId", err, errsize);
	memcpy(id, &u, sizeof(u));
	return 0;
}

static int nccl_comm_init_rank(void **comm, int device, int nranks, const unsigned char id[DT_NCCL_ID_BYTES],
			       int rank, char *err, size_t errsize)
{
	ncclUniqueId u;
	ncclComm_t c;
	ncclResult_t r;
	memcpy(&u, id, sizeof(u));
	dt_gpu_use((struct dt_device){ DT_DEVICE_CUDA, device });
	if ((r = ncclCommInitRank(&c, nranks, u, rank)) != ncclSuccess)
		return nccl_fail(r, "ncclCommInitRank", err, errsize);
	*comm = c;
	return 0;
}

static int nccl_comm_init_all(void **comms, int ndev, const int *devices, char *err, size_t errsize)
{
	ncclComm_t c[DT_CUDA_MAX_GPUS];
	ncclResult_t r;
	DT_CUDA_ASSERT(ndev > 0 && ndev <= DT_CUDA_MAX_GPUS);
	for (int i = 0; i < ndev; i++)
		dt_gpu_use((struct dt_device){ DT_DEVICE_CUDA, devices[i] });
	if ((r = ncclCommInitAll(c, ndev, devices)) != ncclSuccess)
		return nccl_fail(r, "ncclCommInitAll", err, errsize);
	for (int i = 0; i < ndev; i++)
		comms[i] = c[i];
	return 0;
}

static void nccl_all_reduce_sum(void *comm, struct dt_device dev, float *buf, int64_t n)
{
	struct dt_gpu *g = dt_gpu_use(dev);
	if (n > 0)
		DT_NCCL_CHECK(ncclAllReduce(buf, buf, (size_t)n, ncclFloat, ncclSum, (ncclComm_t)comm, g->stream));
}

static void nccl_broadcast(void *comm, struct dt_device dev, float *buf, int64_t n, int root)
{
	struct dt_gpu *g = dt_gpu_use(dev);
	if (n > 0)
		DT_NCCL_CHECK(ncclBroadcast(buf, buf, (size_t)n, ncclFloat, root, (ncclComm_t)comm, g->stream));
}

static void nccl_group_start(void) { DT_NCCL_CHECK(ncclGroupStart()); }
static void nccl_group_end(void) { DT_NCCL_CHECK(ncclGroupEnd()); }
static void nccl_comm_destroy(void *comm)
{
	if (comm)
		DT_NCCL_CHECK(ncclCommDestroy((ncclComm_t)comm));
}

void dt_cuda_nccl_init(struct dt_cuda_api *api)
{
	api->nccl_version = nccl_version;
	api->nccl_unique_id = nccl_unique_id;
	api->nccl_comm_init_rank = nccl_comm_init_rank;
	api->nccl_comm_init_all = nccl_comm_init_all;
	api->nccl_all_reduce_sum = nccl_all_reduce_sum;
	api->nccl_broadcast = nccl_broadcast;
	api->nccl_group_start = nccl_group_start;
	api->nccl_group_end = nccl_group_end;
	api->nccl_comm_destroy = nccl_comm_destroy;
}
