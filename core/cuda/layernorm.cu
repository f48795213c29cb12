/*
 * Layer normalization on the GPU: the CPU backend's semantics
 * (core/cpu/layernorm.c, Keras' LayerNormalization with axis -1) as own
 * kernels over the (rows, C) view of x (N, ..., C). Each row's mean and
 * biased variance are reduced by one block in a fixed order (the same result
 * every run); gamma's and beta's gradients are per-column sums over the rows,
 * one thread per column, in row order. The statistics of the last forward
 * (mean and 1/sqrt(var + epsilon) per row) belong to the plan, sized for
 * max_batch when it is made.
 */
#include <stdlib.h>

#include "core/cuda/ops_cuda.h"

#define LN_THREADS 256

struct ln_plan {
	struct dt_plan head;
	int kind;        /* DT_CUDA_PLAN_LAYERNORM: dt_cuda_plan_free (dnn.cu) dispatches on it */
	struct dt_device dev;
	int max_batch;
	int c;
	int64_t rows;    /* rows per sample */
	float epsilon;
	int trained_n;
	float *mean, *rstd; /* (max_batch * rows) */
};

/* The sum of v over the block (LN_THREADS threads), in a fixed order; every thread gets it. */
__device__ static float block_sum(float v, float *shared)
{
	shared[threadIdx.x] = v;
	__syncthreads();
	for (int s = LN_THREADS / 2; s > 0; s >>= 1) {
		if (threadIdx.x < s)
			shared[threadIdx.x] += shared[threadIdx.x + s];
		__syncthreads();
	}
	v = shared[0];
	__syncthreads();
	return v;
}

/* One block per row: mean, rstd, and y = (x - mean) * rstd * gamma + beta. */
__global__ void k_ln_forward(const float *x, float *y, const float *gamma, const float *beta, float *mean,
			     float *rstd, int64_t rows, int c, float eps)
{
	__shared__ float shared[LN_THREADS];
	for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
		const float *xr = x + r * c;
		float *yr = y + r * c;
		float s = 0, m, v = 0, is;
		for (int j = threadIdx.x; j < c; j += LN_THREADS)
			s += xr[j];
		m = block_sum(s, shared) / (float)c;
		for (int j = threadIdx.x; j < c; j += LN_THREADS)
			v += (xr[j] - m) * (xr[j] - m);
		is = rsqrtf(block_sum(v, shared) / (float)c + eps);
		for (int j = threadIdx.x; j < c; j += LN_THREADS)
			yr[j] = (xr[j] - m) * is * (gamma ? gamma[j] : 1.0f) + (beta ? beta[j] : 0.0f);
		if (threadIdx.x == 0) {
			mean[r] = m;
			rstd[r] = is;
		}
	}
}

/* One block per row: dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma. */
__global__ void k_ln_backward_dx(const float *x, const float *dy, const float *gamma, const float *mean,
				 const float *rstd, float *dx, int64_t rows, int c)
{
	__shared__ float shared[LN_THREADS];
	for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
		const float *xr = x + r * c, *dr = dy + r * c;
		float a = 0, b = 0, mg, mgx;
		for (int j = threadIdx.x; j < c; j += LN_THREADS) {
			float g = dr[j] * (gamma ? gamma[j] : 1.0f);
			a += g;
			b += g * (xr[j] - mean[r]) * rstd[r];
		}
		mg = block_sum(a, shared) / (float)c;
		mgx = block_sum(b, shared) / (float)c;
		for (int j = threadIdx.x; j < c; j += LN_THREADS) {
			float g = dr[j] * (gamma ? gamma[j] : 1.0f), xhat = (xr[j] - mean[r]) * rstd[r];
			dx[r * c + j] = rstd[r] * (g - mg - xhat * mgx);
		}
	}
}

/* One thread per column: dgamma = sum_r dy * xhat, dbeta = sum_r dy, in row order. */
__global__ void k_ln_backward_params(const float *x, const float *dy, const float *mean, const float *rstd,
				     float *dgamma, float *dbeta, int64_t rows, int c)
{
	GRID_LOOP(j, c)
	{
		float sg = 0, sb = 0;
		for (int64_t r = 0; r < rows; r++) {
			float d = dy[r * c + j];
			sg += d * (x[r * c + j] - mean[r]) * rstd[r];
			sb += d;
		}
		if (dgamma)
			dgamma[j] = sg;
		if (dbeta)
			dbeta[j] = sb;
	}
}

static unsigned row_blocks(int64_t rows) { return (unsigned)(rows < 65535 ? (rows < 1 ? 1 : rows) : 65535); }

struct dt_plan *dt_cuda_plan_layernorm(struct dt_device dev, int channels, int64_t rows, float epsilon, int max_batch)
{
	struct ln_plan *p = (struct ln_plan *)calloc(1, sizeof(*p));
	DT_CUDA_ASSERT(p);
	DT_CUDA_ASSERT(dev.kind == DT_DEVICE_CUDA && channels > 0 && rows > 0 && epsilon > 0 && max_batch > 0);
	dt_gpu_use(dev);
	p->head.backend = &dt_cuda_backend;
	p->kind = DT_CUDA_PLAN_LAYERNORM;
	p->dev = dev;
	p->max_batch = max_batch;
	p->c = channels;
	p->rows = rows;
	p->epsilon = epsilon;
	p->mean = dt_cuda_alloc(dev.index, (int64_t)max_batch * rows);
	p->rstd = dt_cuda_alloc(dev.index, (int64_t)max_batch * rows);
	return &p->head;
}

static int ln_batch(const struct ln_plan *p, const struct dt_tensor *x)
{
	int n = x->shape.dim[0];
	DT_CUDA_ASSERT(p->kind == DT_CUDA_PLAN_LAYERNORM);
	DT_CUDA_ASSERT(n <= p->max_batch && t_count(x) == (int64_t)n * p->rows * p->c);
	return n;
}

void dt_cuda_layernorm_forward(struct dt_plan *pl, const struct dt_tensor *x, const struct dt_tensor *gamma,
			       const struct dt_tensor *beta, struct dt_tensor *y)
{
	struct ln_plan *p = (struct ln_plan *)pl;
	struct dt_gpu *g = dt_gpu_use(p->dev);
	int n = ln_batch(p, x);
	int64_t rows = (int64_t)n * p->rows;

	DT_CUDA_ASSERT(!gamma || t_count(gamma) == p->c);
	DT_CUDA_ASSERT(!beta || t_count(beta) == p->c);
	if (n == 0)
		return;
	k_ln_forward<<<row_blocks(rows), LN_THREADS, 0, g->stream>>>(x->data, y->data, gamma ? gamma->data : NULL,
								      beta ? beta->data : NULL, p->mean, p->rstd,
								      rows, p->c, p->epsilon);
	DT_CUDA_LAUNCH_CHECK();
	p->trained_n = n;
}

void dt_cuda_layernorm_backward(struct dt_plan *pl, const struct dt_tensor *x, const struct dt_tensor *dy,
				const struct dt_tensor *gamma, struct dt_tensor *dgamma, struct dt_tensor *dbeta,
				struct dt_tensor *dx)
{
	struct ln_plan *p = (struct ln_plan *)pl;
	struct dt_gpu *g = dt_gpu_use(p->dev);
	int n = ln_batch(p, x);
	int64_t rows = (int64_t)n * p->rows;

	DT_CUDA_ASSERT(t_count(dy) == t_count(x));
	DT_CUDA_ASSERT(!dgamma || t_count(dgamma) == p->c);
	DT_CUDA_ASSERT(!dbeta || t_count(dbeta) == p->c);
	if (n == 0) {
		if (dgamma)
			dt_cuda_backend.fill(dgamma, 0);
		if (dbeta)
			dt_cuda_backend.fill(dbeta, 0);
		return;
	}
	DT_CUDA_ASSERT(p->trained_n == n);
	if (dgamma || dbeta) {
		k_ln_backward_params LAUNCH(g, p->c)(x->data, dy->data, p->mean, p->rstd, dgamma ? dgamma->data : NULL,
						     dbeta ? dbeta->data : NULL, rows, p->c);
		DT_CUDA_LAUNCH_CHECK();
	}
	if (dx) {
		k_ln_backward_dx<<<row_blocks(rows), LN_THREADS, 0, g->stream>>>(x->data, dy->data,
										  gamma ? gamma->data : NULL, p->mean,
										  p->rstd, dx->data, rows, p->c);
		DT_CUDA_LAUNCH_CHECK();
	}
}

void dt_cuda_layernorm_plan_free(struct dt_plan *pl)
{
	struct ln_plan *p = (struct ln_plan *)pl;
	dt_gpu_use(p->dev);
	dt_cuda_free(p->dev.index, p->mean);
	dt_cuda_free(p->dev.index, p->rstd);
	free(p);
}
