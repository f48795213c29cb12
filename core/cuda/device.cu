/*
 * The CUDA backend's devices: each GPU's state (stream, cuBLAS and cuDNN
 * handles, reduction scratch), made on its first use; the precision of
 * products and convolutions; the caching allocator; page-locked host memory;
 * and the two tables the backend hands to dtrain (struct dt_backend, whose
 * ops kernels.cu and dnn.cu fill, and struct dt_cuda_api).
 *
 * Each GPU has one stream; every op is queued on it and returns at once.
 * Memory comes from one caching allocator: freed blocks are kept and handed
 * out again to requests of up to twice their size, so the plans' workspaces
 * and a model rebuilt for another batch size do not go back to cudaMalloc.
 *
 * Built into libdtrain_cuda.so (see core/cuda/cuda.h): nothing here calls
 * into dtrain itself.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/cuda/ops_cuda.h"

extern "C" void dt_cuda_bug(const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "dtrain: internal error at %s:%d: ", file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\n(this is a bug in dtrain; please report it with the command and config)\n", stderr);
	abort();
}

/* ---- devices ---- */

static struct dt_gpu gpus[DT_CUDA_MAX_GPUS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static __thread int current = -1;
static enum dt_precision precision = DT_PRECISION_FP32;

enum dt_precision dt_cuda_precision(void) { return precision; }

static cublasMath_t blas_math(void)
{
	return precision == DT_PRECISION_TF32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH;
}

static void gpu_init(struct dt_gpu *g, int index)
{
	cudaDeviceProp prop;
	g->index = index;
	DT_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
	g->cc_major = prop.major;
	g->cc_minor = prop.minor;
	DT_CUDA_CHECK(cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking));
	DT_CUBLAS_CHECK(cublasCreate(&g->blas));
	DT_CUBLAS_CHECK(cublasSetStream(g->blas, g->stream));
	DT_CUBLAS_CHECK(cublasSetMathMode(g->blas, blas_math()));
	DT_CUDNN_CHECK(cudnnCreate(&g->dnn));
	DT_CUDNN_CHECK(cudnnSetStream(g->dnn, g->stream));
	DT_CUDA_CHECK(cudaMalloc((void **)&g->scratch, (size_t)DT_CUDA_SCRATCH * sizeof(float)));
	DT_CUDA_CHECK(cudaMalloc((void **)&g->acc, 4 * sizeof(double)));
	DT_CUDA_CHECK(cudaMalloc((void **)&g->count, sizeof(unsigned long long)));
	DT_CUDA_CHECK(cudaMallocHost((void **)&g->host_acc, 4 * sizeof(double)));
	DT_CUDA_CHECK(cudaMallocHost((void **)&g->host_count, sizeof(unsigned long long)));
	__atomic_store_n(&g->ready, 1, __ATOMIC_RELEASE);
}

void *dt_gpu_workspace(struct dt_gpu *g, size_t bytes)
{
	if (bytes > g->ws_bytes) {
		dt_cuda_free(g->index, (float *)g->ws);
		g->ws = dt_cuda_alloc(g->index, (int64_t)((bytes + sizeof(float) - 1) / sizeof(float)));
		g->ws_bytes = bytes;
	}
	return g->ws;
}

struct dt_gpu *dt_gpu_use(struct dt_device dev)
{
	struct dt_gpu *g;
	DT_CUDA_ASSERT(dev.kind == DT_DEVICE_CUDA && dev.index >= 0 && dev.index < DT_CUDA_MAX_GPUS);
	g = &gpus[dev.index];
	if (current != dev.index) {
		DT_CUDA_CHECK(cudaSetDevice(dev.index));
		current = dev.index;
	}
	if (!__atomic_load_n(&g->ready, __ATOMIC_ACQUIRE)) {
		pthread_mutex_lock(&lock);
		if (!g->ready)
			gpu_init(g, dev.index);
		pthread_mutex_unlock(&lock);
	}
	return g;
}


static int device_count(void)
{
	int n = 0;
	if (cudaGetDeviceCount(&n) != cudaSuccess)
		return 0;
	return n < DT_CUDA_MAX_GPUS ? n : DT_CUDA_MAX_GPUS;
}

static int device_info(int index, struct dt_gpu_info *info)
{
	cudaDeviceProp prop;
	if (index < 0 || index >= device_count() || cudaGetDeviceProperties(&prop, index) != cudaSuccess)
		return -1;
	snprintf(info->name, sizeof(info->name), "%s", prop.name);
	info->memory = prop.totalGlobalMem;
	info->cc_major = prop.major;
	info->cc_minor = prop.minor;
	return 0;
}

static int cudnn_version(void) { return (int)cudnnGetVersion(); }

static int runtime_version(void)
{
	int v = 0;
	return cudaRuntimeGetVersion(&v) == cudaSuccess ? v : 0;
}

static int set_precision(enum dt_precision p, char *err, size_t errsize)
{
	int n = device_count();
	if (p == DT_PRECISION_BF16)
		for (int i = 0; i < n; i++) {
			struct dt_gpu_info info;
			if (device_info(i, &info) == 0 && info.cc_major < 8) {
				snprintf(err, errsize,
					 "precision 'bf16' needs compute capability 8.0 or newer; gpu:%d (%s) has %d.%d",
					 i, info.name, info.cc_major, info.cc_minor);
				return -1;
			}
		}
	pthread_mutex_lock(&lock);
	precision = p;
	for (int i = 0; i < DT_CUDA_MAX_GPUS; i++)
		if (gpus[i].ready) {
			DT_CUDA_CHECK(cudaSetDevice(i));
			current = i;
			DT_CUBLAS_CHECK(cublasSetMathMode(gpus[i].blas, blas_math()));
		}
	pthread_mutex_unlock(&lock);
	return 0;
}

static void synchronize(int index)
{
	struct dt_gpu *g = dt_gpu_use((struct dt_device){ DT_DEVICE_CUDA, index });
	DT_CUDA_CHECK(cudaStreamSynchronize(g->stream));
}

/* ---- the caching allocator ---- */

struct block {
	char *p;
	size_t bytes;
	int dev;
	int used;
};
static struct block *blocks;
static int nblocks, cap_blocks;

static size_t round_bytes(int64_t n)
{
	size_t b = (size_t)(n > 0 ? n : 1) * sizeof(float);
	return (b + 511) & ~(size_t)511;
}

/* Gives the unused blocks of dev back to CUDA (under lock). */
static void release_cached(int dev)
{
	int k = 0;
	for (int i = 0; i < nblocks; i++) {
		if (blocks[i].dev == dev && !blocks[i].used)
			DT_CUDA_CHECK(cudaFree(blocks[i].p));
		else
			blocks[k++] = blocks[i];
	}
	nblocks = k;
}

float *dt_cuda_alloc(int index, int64_t n)
{
	struct dt_gpu *g = dt_gpu_use((struct dt_device){ DT_DEVICE_CUDA, index });
	size_t bytes = round_bytes(n);
	int best = -1;
	char *p = NULL;

	pthread_mutex_lock(&lock);
	for (int i = 0; i < nblocks; i++) {
		struct block *b = &blocks[i];
		if (b->dev == index && !b->used && b->bytes >= bytes && b->bytes <= 2 * bytes &&
		    (best < 0 || b->bytes < blocks[best].bytes))
			best = i;
	}
	if (best >= 0) {
		blocks[best].used = 1;
		p = blocks[best].p;
		bytes = blocks[best].bytes;
	} else {
		if (cudaMalloc((void **)&p, bytes) != cudaSuccess) {
			(void)cudaGetLastError();
			DT_CUDA_CHECK(cudaStreamSynchronize(g->stream));
			release_cached(index);
			if (cudaMalloc((void **)&p, bytes) != cudaSuccess) {
				/* The environment's limit, not a bug: an error and exit status 1, as on the CPU. */
				fprintf(stderr, "dtrain: error: out of memory: cannot allocate %zu bytes on gpu:%d\n",
					bytes, index);
				exit(1);
			}
		}
		if (nblocks == cap_blocks) {
			cap_blocks = cap_blocks ? 2 * cap_blocks : 256;
			blocks = (struct block *)realloc(blocks, (size_t)cap_blocks * sizeof(*blocks));
			DT_CUDA_ASSERT(blocks);
		}
		blocks[nblocks++] = (struct block){ p, bytes, index, 1 };
	}
	pthread_mutex_unlock(&lock);
	DT_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, g->stream));
	return (float *)p;
}

void dt_cuda_free(int index, float *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&lock);
	for (int i = 0; i < nblocks; i++)
		if (blocks[i].p == (char *)p) {
			DT_CUDA_ASSERT(blocks[i].used && blocks[i].dev == index);
			blocks[i].used = 0;
			pthread_mutex_unlock(&lock);
			return;
		}
	pthread_mutex_unlock(&lock);
	DT_CUDA_BUG("freeing %p, which the CUDA allocator did not hand out", (void *)p);
}

static void *host_alloc(size_t bytes)
{
	void *p = NULL;
	if (cudaMallocHost(&p, bytes) != cudaSuccess) {
		(void)cudaGetLastError();
		return NULL;
	}
	return p;
}

static void host_free(void *p) { DT_CUDA_CHECK(cudaFreeHost(p)); }

/* ---- the tables ---- */

struct dt_backend dt_cuda_backend;
static struct dt_cuda_api api;
static pthread_once_t api_once = PTHREAD_ONCE_INIT;

static void api_init(void)
{
	dt_cuda_backend_init(&dt_cuda_backend);
	api.abi = DT_CUDA_ABI;
	api.backend = &dt_cuda_backend;
	api.device_count = device_count;
	api.device_info = device_info;
	api.cudnn_version = cudnn_version;
	api.runtime_version = runtime_version;
	api.alloc = dt_cuda_alloc;
	api.free = dt_cuda_free;
	api.host_alloc = host_alloc;
	api.host_free = host_free;
	api.set_precision = set_precision;
	api.synchronize = synchronize;
	dt_cuda_nccl_init(&api);
}

extern "C" __attribute__((visibility("default"))) const struct dt_cuda_api *dt_cuda_api_get(void)
{
	pthread_once(&api_once, api_init);
	return &api;
}
