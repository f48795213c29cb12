/*
 * Inside the CUDA backend: what its files share. device.cu (device state,
 * caching allocator, pinned host memory, precision, the tables handed to
 * dtrain), kernels.cu (cuBLAS products and own kernels: elementwise,
 * activations, dropout, losses, metrics, optimizers, column reductions),
 * nccl.cu (NCCL communicators and collectives) and dnn.cu (cuDNN
 * convolution, pooling and batch normalization plans). Only those files
 * include this header (C++, compiled by nvcc).
 *
 * libdtrain_cuda.so is dlopen()ed by a dtrain that does not export its
 * symbols: nothing here may call a function defined in dtrain itself
 * (dt_tensor_count, dt_bug, ...). Inline helpers below stand in for them.
 */
#ifndef DT_OPS_CUDA_H
#define DT_OPS_CUDA_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "core/backend.h"
#include "core/cuda/cuda.h"

#define DT_CUDA_MAX_GPUS 16
/* Floats of each GPU's reduction scratch (column partial sums). */
#define DT_CUDA_SCRATCH (4 << 20)
#define DT_CUDA_THREADS 256

/* Prints "dtrain: internal error at file:line: ..." and aborts, as dt_bug does. */
extern "C" __attribute__((noreturn, format(printf, 3, 4))) void dt_cuda_bug(const char *file, int line,
									  const char *fmt, ...);
#define DT_CUDA_BUG(...) dt_cuda_bug(__FILE__, __LINE__, __VA_ARGS__)
#define DT_CUDA_ASSERT(c) \
	do { \
		if (!(c)) \
			dt_cuda_bug(__FILE__, __LINE__, "assertion failed: %s", #c); \
	} while (0)
#define DT_CUDA_CHECK(call) \
	do { \
		cudaError_t e_ = (call); \
		if (e_ != cudaSuccess) \
			dt_cuda_bug(__FILE__, __LINE__, "%s failed: %s", #call, cudaGetErrorString(e_)); \
	} while (0)
#define DT_CUBLAS_CHECK(call) \
	do { \
		cublasStatus_t s_ = (call); \
		if (s_ != CUBLAS_STATUS_SUCCESS) \
			dt_cuda_bug(__FILE__, __LINE__, "%s failed: %s", #call, cublasGetStatusString(s_)); \
	} while (0)
#define DT_CUDNN_CHECK(call) \
	do { \
		cudnnStatus_t s_ = (call); \
		if (s_ != CUDNN_STATUS_SUCCESS) \
			dt_cuda_bug(__FILE__, __LINE__, "%s failed: %s", #call, cudnnGetErrorString(s_)); \
	} while (0)
/* After a kernel launch: launch errors only, no synchronisation. */
#define DT_CUDA_LAUNCH_CHECK() DT_CUDA_CHECK(cudaGetLastError())

/* One GPU's state, made on its first use. Work runs in order on its one stream. */
struct dt_gpu {
	int ready;
	int index;
	int cc_major, cc_minor;
	cudaStream_t stream;
	cublasHandle_t blas;
	cudnnHandle_t dnn;
	float *scratch;        /* DT_CUDA_SCRATCH floats */
	double *acc;           /* 4 device doubles: results read back (loss, sums) */
	unsigned long long *count; /* 1 device counter */
	double *host_acc;      /* pinned mirrors of acc and count */
	unsigned long long *host_count;
	void *ws;              /* cuDNN's workspace, shared by every plan (dt_gpu_workspace) */
	size_t ws_bytes;
};

/* Makes dev the current device (and its state, on first use). */
struct dt_gpu *dt_gpu_use(struct dt_device dev);
/*
 * The GPU's one cuDNN workspace, at least bytes: every plan runs on the GPU's
 * one stream, one op after another, so all share it, as PyTorch's and
 * TensorFlow's do; a plan keeps only the size its algorithms need. Growing
 * it hands the smaller one back to the allocator (stream-ordered, so safe
 * while an op queued before still reads it).
 */
void *dt_gpu_workspace(struct dt_gpu *g, size_t bytes);
/* The precision set by set_precision. */
enum dt_precision dt_cuda_precision(void);
/* Device memory from the caching allocator, zeroed (asynchronously, on the GPU's stream). */
float *dt_cuda_alloc(int index, int64_t n);
void dt_cuda_free(int index, float *p);

static inline int64_t t_count(const struct dt_tensor *t)
{
	int64_t n = 1;
	for (int i = 0; i < t->shape.ndim; i++)
		n *= t->shape.dim[i];
	return n;
}
static inline int64_t t_rows(const struct dt_tensor *t) { return t->shape.ndim ? t->shape.dim[0] : 1; }
static inline int64_t t_cols(const struct dt_tensor *t) { return t_count(t) / (t_rows(t) ? t_rows(t) : 1); }

/* Blocks for a grid-stride loop over n elements. */
static inline unsigned blocks_for(int64_t n)
{
	int64_t b = (n + DT_CUDA_THREADS - 1) / DT_CUDA_THREADS;
	return (unsigned)(b < 1 ? 1 : b > 8192 ? 8192 : b);
}

/* A grid-stride loop over i in [0, n) and its launch: k_name LAUNCH(g, n)(args) queues k_name on g's stream. */
#define GRID_LOOP(i, n) for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)
#define LAUNCH(g, n) <<<blocks_for(n), DT_CUDA_THREADS, 0, (g)->stream>>>

/*
 * Per-column reductions over a (rows, c) matrix, in a fixed order (the same
 * result every run): out[j] = beta * out[j] + scale * sum_r f(r, j), where f
 * is x[r, j] (COL_SUM), (x[r, j] - mean[j])^2 (COL_SQDEV) or
 * x[r, j] * (y[r, j] - mean[j]) * aux[j] (COL_DOT_NORM: dy, x, mean, invstd).
 */
enum dt_col_op { COL_SUM, COL_SQDEV, COL_DOT_NORM };
void dt_cuda_col_reduce(struct dt_gpu *g, enum dt_col_op op, const float *x, const float *y, const float *mean,
			const float *aux, int64_t rows, int64_t c, float beta, float scale, float *out);

/* The CUDA plans (dnn.cu). */
struct dt_plan *dt_cuda_plan_conv(struct dt_device dev, const struct dt_conv_geom *g, int max_batch);
void dt_cuda_conv_forward(struct dt_plan *p, const struct dt_tensor *x, const struct dt_tensor *w,
			  const struct dt_tensor *b, struct dt_tensor *y);
void dt_cuda_conv_backward(struct dt_plan *p, const struct dt_tensor *x, const struct dt_tensor *w,
			   const struct dt_tensor *dy, struct dt_tensor *dw, struct dt_tensor *db,
			   struct dt_tensor *dx);
struct dt_plan *dt_cuda_plan_pool(struct dt_device dev, const struct dt_pool_geom *g, int max_batch);
void dt_cuda_pool_forward(struct dt_plan *p, const struct dt_tensor *x, struct dt_tensor *y, int training);
void dt_cuda_pool_backward(struct dt_plan *p, const struct dt_tensor *dy, struct dt_tensor *dx);
struct dt_plan *dt_cuda_plan_batchnorm(struct dt_device dev, int channels, int64_t spatial, float epsilon,
				       int max_batch);
void dt_cuda_batchnorm_forward(struct dt_plan *p, int training, float momentum, const struct dt_tensor *x,
			       const struct dt_tensor *gamma, const struct dt_tensor *beta,
			       struct dt_tensor *moving_mean, struct dt_tensor *moving_var, struct dt_tensor *y);
void dt_cuda_batchnorm_backward(struct dt_plan *p, const struct dt_tensor *x, const struct dt_tensor *dy,
				const struct dt_tensor *gamma, struct dt_tensor *dgamma, struct dt_tensor *dbeta,
				struct dt_tensor *dx);
void dt_cuda_plan_free(struct dt_plan *p);

/* Embedding (embedding.cu). */
void dt_cuda_gather(const struct dt_tensor *idx, const struct dt_tensor *table, struct dt_tensor *y);
void dt_cuda_scatter_add(const struct dt_tensor *idx, const struct dt_tensor *dy, struct dt_tensor *dtable);
/*
 * Layer normalization (layernorm.cu). Its plan starts as dnn.cu's do (struct
 * dt_plan, then an int kind): dt_cuda_plan_free hands kind
 * DT_CUDA_PLAN_LAYERNORM to dt_cuda_layernorm_plan_free.
 */
#define DT_CUDA_PLAN_LAYERNORM 100
struct dt_plan *dt_cuda_plan_layernorm(struct dt_device dev, int channels, int64_t rows, float epsilon, int max_batch);
void dt_cuda_layernorm_forward(struct dt_plan *p, const struct dt_tensor *x, const struct dt_tensor *gamma,
			       const struct dt_tensor *beta, struct dt_tensor *y);
void dt_cuda_layernorm_backward(struct dt_plan *p, const struct dt_tensor *x, const struct dt_tensor *dy,
				const struct dt_tensor *gamma, struct dt_tensor *dgamma, struct dt_tensor *dbeta,
				struct dt_tensor *dx);
void dt_cuda_layernorm_plan_free(struct dt_plan *p);

/*
 * Recurrent layers (rnn.cu, cuDNN's RNN API). Their plans start as dnn.cu's
 * do (the dt_plan, then an int kind): dt_cuda_plan_free hands those of kind
 * DT_CUDA_PLAN_RNN to dt_cuda_rnn_plan_free. dt_cuda_plan_rnn gives NULL for
 * a cell cuDNN lacks (GRU reset_after: false).
 */
#define DT_CUDA_PLAN_RNN 101
struct dt_plan *dt_cuda_plan_rnn(struct dt_device dev, const struct dt_rnn_geom *g, int max_batch);
void dt_cuda_rnn_forward(struct dt_plan *p, int training, const struct dt_tensor *x, const struct dt_tensor *w,
			 const struct dt_tensor *u, const struct dt_tensor *b, struct dt_tensor *y);
void dt_cuda_rnn_backward(struct dt_plan *p, const struct dt_tensor *x, const struct dt_tensor *w,
			  const struct dt_tensor *u, const struct dt_tensor *b, const struct dt_tensor *y,
			  const struct dt_tensor *dy, struct dt_tensor *dw, struct dt_tensor *du, struct dt_tensor *db,
			  struct dt_tensor *dx);
void dt_cuda_rnn_merge(enum dt_rnn_merge mode, int steps, const struct dt_tensor *yf, const struct dt_tensor *yb,
		       struct dt_tensor *y);
void dt_cuda_rnn_merge_backward(enum dt_rnn_merge mode, int steps, const struct dt_tensor *dy,
				const struct dt_tensor *yf, const struct dt_tensor *yb, struct dt_tensor *dyf,
				struct dt_tensor *dyb);
void dt_cuda_rnn_plan_free(struct dt_plan *p);

/* The backend's table (device.cu), filled by dt_cuda_backend_init (kernels.cu) with its ops and dnn.cu's plans. */
extern struct dt_backend dt_cuda_backend;
void dt_cuda_backend_init(struct dt_backend *b);
/* Fills the NCCL members of the API table, nccl_version included (nccl.cu). */
void dt_cuda_nccl_init(struct dt_cuda_api *api);

/* cnnparts: fills the table's spatial copies and resampling (resample.cu). */
void dt_cuda_resample_init(struct dt_backend *b);
/* cnnparts: fills the table's plan_deconv (deconv.cu; its plans carry their own table). */
void dt_cuda_deconv_init(struct dt_backend *b);

#endif
