/*
 * The CUDA backend's ops other than the plans: cuBLAS for matrix products,
 * own kernels for the elementwise ops, activations, dropout, losses,
 * metrics, fused optimizer updates and regularization. Their formulas are
 * the CPU backend's, from the one copy in core/rows.h, so both devices
 * train the same model. The plans (cuDNN convolution, pooling, batch
 * normalization) are in dnn.cu.
 *
 * The host waits only where an op returns a value (loss, count_correct,
 * error_sums, sum_squares, regularize, to_host): the value is reduced on the GPU into a
 * few doubles and one small copy brings it back.
 */
#include <math.h>

#include "core/cuda/ops_cuda.h"
#include "core/rows.h"

static struct dt_gpu *gpu_of(const struct dt_tensor *t) { return dt_gpu_use(t->dev); }

/* ---- reductions ---- */

/* Sum of v over the block, valid in thread 0. Every thread of the block must call it. */
template <typename T> __device__ T block_sum(T v)
{
	__shared__ T part[32];
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_down_sync(0xffffffffu, v, o);
	if (lane == 0)
		part[warp] = v;
	__syncthreads();
	v = threadIdx.x < (blockDim.x + 31) / 32 ? part[threadIdx.x] : (T)0;
	if (warp == 0)
		for (int o = 16; o > 0; o >>= 1)
			v += __shfl_down_sync(0xffffffffu, v, o);
	return v;
}

/* Queues zeroing of the result slots. */
static void acc_clear(struct dt_gpu *g)
{
	DT_CUDA_CHECK(cudaMemsetAsync(g->acc, 0, 4 * sizeof(double), g->stream));
	DT_CUDA_CHECK(cudaMemsetAsync(g->count, 0, sizeof(unsigned long long), g->stream));
}

/* Brings the result slots back: the one synchronisation of an op that returns a value. */
static void acc_read(struct dt_gpu *g)
{
	DT_CUDA_CHECK(cudaMemcpyAsync(g->host_acc, g->acc, 4 * sizeof(double), cudaMemcpyDeviceToHost, g->stream));
	DT_CUDA_CHECK(cudaMemcpyAsync(g->host_count, g->count, sizeof(unsigned long long), cudaMemcpyDeviceToHost,
				   g->stream));
	DT_CUDA_CHECK(cudaStreamSynchronize(g->stream));
}

#define COL_TX 32
#define COL_TY 8
#define COL_MAX_CHUNKS 512

template <int OP>
__global__ void col_partial(const float *x, const float *y, const float *mean, const float *aux, int64_t rows,
			    int64_t c, int64_t rows_per_chunk, float *partial)
{
	__shared__ float s[COL_TY][COL_TX + 1];
	int64_t j = (int64_t)blockIdx.x * COL_TX + threadIdx.x;
	int64_t r0 = (int64_t)blockIdx.y * rows_per_chunk, r1 = r0 + rows_per_chunk < rows ? r0 + rows_per_chunk : rows;
	float acc = 0;
	if (j < c)
		for (int64_t r = r0 + threadIdx.y; r < r1; r += COL_TY) {
			float v = x[r * c + j];
			if (OP == COL_SQDEV) {
				float d = v - mean[j];
				v = d * d;
			} else if (OP == COL_DOT_NORM) {
				v = v * (y[r * c + j] - mean[j]) * aux[j];
			}
			acc += v;
		}
	s[threadIdx.y][threadIdx.x] = acc;
	__syncthreads();
	if (threadIdx.y == 0 && j < c) {
		for (int k = 1; k < COL_TY; k++)
			acc += s[k][threadIdx.x];
		partial[(int64_t)blockIdx.y * c + j] = acc;
	}
}

__global__ void col_final(const float *partial, int64_t chunks, int64_t c, float beta, float scale, float *out)
{
	for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < c; j += (int64_t)gridDim.x * blockDim.x) {
		float s = 0;
		for (int64_t k = 0; k < chunks; k++)
			s += partial[k * c + j];
		out[j] = (beta == 0 ? 0 : beta * out[j]) + scale * s;
	}
}

void dt_cuda_col_reduce(struct dt_gpu *g, enum dt_col_op op, const float *x, const float *y, const float *mean,
			const float *aux, int64_t rows, int64_t c, float beta, float scale, float *out)
{
	int64_t chunks = rows / 512, per;
	dim3 grid, block(COL_TX, COL_TY);
	if (c == 0)
		return;
	DT_CUDA_ASSERT(c <= DT_CUDA_SCRATCH);
	if (chunks > COL_MAX_CHUNKS)
		chunks = COL_MAX_CHUNKS;
	if (chunks > DT_CUDA_SCRATCH / c)
		chunks = DT_CUDA_SCRATCH / c;
	if (chunks < 1)
		chunks = 1;
	per = (rows + chunks - 1) / chunks;
	if (per < 1)
		per = 1;
	grid = dim3((unsigned)((c + COL_TX - 1) / COL_TX), (unsigned)chunks);
	switch (op) {
	case COL_SUM:
		col_partial<COL_SUM><<<grid, block, 0, g->stream>>>(x, y, mean, aux, rows, c, per, g->scratch);
		break;
	case COL_SQDEV:
		col_partial<COL_SQDEV><<<grid, block, 0, g->stream>>>(x, y, mean, aux, rows, c, per, g->scratch);
		break;
	case COL_DOT_NORM:
		col_partial<COL_DOT_NORM><<<grid, block, 0, g->stream>>>(x, y, mean, aux, rows, c, per, g->scratch);
		break;
	}
	DT_CUDA_LAUNCH_CHECK();
	col_final<<<blocks_for(c), DT_CUDA_THREADS, 0, g->stream>>>(g->scratch, chunks, c, beta, scale, out);
	DT_CUDA_LAUNCH_CHECK();
}

/* ---- elementwise ---- */

__global__ void k_mul(const float *a, const float *b, float *c, int64_t n)
{
	GRID_LOOP(i, n) c[i] = a[i] * b[i];
}
__global__ void k_axpy(float alpha, const float *x, float *y, int64_t n)
{
	GRID_LOOP(i, n) y[i] += alpha * x[i];
}
__global__ void k_scale(float *x, float alpha, int64_t n)
{
	GRID_LOOP(i, n) x[i] *= alpha;
}
__global__ void k_fill(float *x, float v, int64_t n)
{
	GRID_LOOP(i, n) x[i] = v;
}

static void cuda_mul(const struct dt_tensor *a, const struct dt_tensor *b, struct dt_tensor *c)
{
	struct dt_gpu *g = gpu_of(c);
	int64_t n = t_count(c);
	if (n == 0)
		return;
	k_mul LAUNCH(g, n)(a->data, b->data, c->data, n);
	DT_CUDA_LAUNCH_CHECK();
}

static void cuda_axpy(float alpha, const struct dt_tensor *x, struct dt_tensor *y)
{
	struct dt_gpu *g = gpu_of(y);
	int64_t n = t_count(y);
	if (n == 0)
		return;
	k_axpy LAUNCH(g, n)(alpha, x->data, y->data, n);
	DT_CUDA_LAUNCH_CHECK();
}

static void cuda_scale(struct dt_tensor *x, float alpha)
{
	struct dt_gpu *g = gpu_of(x);
	int64_t n = t_count(x);
	if (n == 0)
		return;
	k_scale LAUNCH(g, n)(x->data, alpha, n);
	DT_CUDA_LAUNCH_CHECK();
}

static void cuda_fill(struct dt_tensor *x, float value)
{
	struct dt_gpu *g = gpu_of(x);
	int64_t n = t_count(x);
	if (n == 0)
		return;
	k_fill LAUNCH(g, n)(x->data, value, n);
	DT_CUDA_LAUNCH_CHECK();
}

static void cuda_copy(const struct dt_tensor *src, struct dt_tensor *dst)
{
	struct dt_gpu *g = gpu_of(dst);
	if (src->data != dst->data && t_count(dst) > 0)
		DT_CUDA_CHECK(cudaMemcpyAsync(dst->data, src->data, (size_t)t_count(dst) * sizeof(float),
					   cudaMemcpyDeviceToDevice, g->stream));
}

/*
 * From page-locked memory (dt_host_alloc_pinned) the copy is asynchronous:
 * the caller must not rewrite src before the GPU has read it, which the
 * trainer's per-step metrics read-back guarantees. From pageable memory CUDA
 * returns once src has been staged, so the caller may reuse it at once.
 */
static void cuda_from_host(struct dt_tensor *dst, const float *src)
{
	struct dt_gpu *g = gpu_of(dst);
	if (t_count(dst) > 0)
		DT_CUDA_CHECK(cudaMemcpyAsync(dst->data, src, (size_t)t_count(dst) * sizeof(float), cudaMemcpyHostToDevice,
					   g->stream));
}

static void cuda_to_host(const struct dt_tensor *src, float *dst)
{
	struct dt_gpu *g = gpu_of(src);
	if (t_count(src) > 0)
		DT_CUDA_CHECK(cudaMemcpyAsync(dst, src->data, (size_t)t_count(src) * sizeof(float), cudaMemcpyDeviceToHost,
					   g->stream));
	DT_CUDA_CHECK(cudaStreamSynchronize(g->stream));
}

__global__ void k_sum_squares(const float *x, int64_t n, double *out)
{
	double s = 0;
	GRID_LOOP(i, n) s += (double)x[i] * x[i];
	s = block_sum(s);
	if (threadIdx.x == 0)
		atomicAdd(out, s);
}

static double cuda_sum_squares(const struct dt_tensor *x)
{
	struct dt_gpu *g = gpu_of(x);
	int64_t n = t_count(x);
	if (n == 0)
		return 0;
	acc_clear(g);
	k_sum_squares LAUNCH(g, n)(x->data, n, g->acc);
	DT_CUDA_LAUNCH_CHECK();
	acc_read(g);
	return g->host_acc[0];
}

/* ---- matrix products ---- */

/*
 * cuBLAS is column-major: a row-major (r, c) matrix is its transpose there.
 * C = op(A) op(B) row-major is C^T = op(B)^T op(A)^T column-major: the
 * operands swap and keep their transpose flags and leading dimensions.
 */
static void cuda_gemm(int trans_a, int trans_b, float alpha, const struct dt_tensor *a, const struct dt_tensor *b,
		      float beta, struct dt_tensor *c)
{
	struct dt_gpu *g = gpu_of(c);
	int64_t m = t_rows(c), n = t_cols(c);
	int64_t k = trans_a ? t_rows(a) : t_cols(a);
	int lda = (int)t_cols(a), ldb = (int)t_cols(b), ldc = (int)n;
	cublasOperation_t oa = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, ob = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
	if (m == 0 || n == 0)
		return;
	DT_CUDA_ASSERT(m <= INT32_MAX && n <= INT32_MAX && k <= INT32_MAX);
	if (lda < 1)
		lda = 1;
	if (ldb < 1)
		ldb = 1;
	if (dt_cuda_precision() == DT_PRECISION_BF16)
		DT_CUBLAS_CHECK(cublasGemmEx(g->blas, ob, oa, (int)n, (int)m, (int)k, &alpha, b->data, CUDA_R_32F, ldb, a->data,
					  CUDA_R_32F, lda, &beta, c->data, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F_FAST_16BF,
					  CUBLAS_GEMM_DEFAULT));
	else
		DT_CUBLAS_CHECK(cublasSgemm(g->blas, ob, oa, (int)n, (int)m, (int)k, &alpha, b->data, ldb, a->data, lda, &beta,
					 c->data, ldc));
}

__global__ void k_bias_add(float *y, const float *b, int64_t n, int64_t c)
{
	GRID_LOOP(i, n) y[i] += b[i % c];
}

static void cuda_bias_add(struct dt_tensor *y, const struct dt_tensor *b)
{
	struct dt_gpu *g = gpu_of(y);
	int64_t n = t_count(y), c = t_count(b);
	if (n == 0)
		return;
	k_bias_add LAUNCH(g, n)(y->data, b->data, n, c);
	DT_CUDA_LAUNCH_CHECK();
}

static void cuda_bias_grad(const struct dt_tensor *dy, float beta, struct dt_tensor *db)
{
	struct dt_gpu *g = gpu_of(db);
	int64_t c = t_count(db), rows = c ? t_count(dy) / c : 0;
	dt_cuda_col_reduce(g, COL_SUM, dy->data, NULL, NULL, NULL, rows, c, beta, 1.0f, db->data);
}

/* ---- activations ---- */

__global__ void k_act_forward(enum dt_activation act, const float *x, float *y, int64_t n)
{
	GRID_LOOP(i, n) y[i] = dt_act_value(act, x[i]);
}

__global__ void k_act_backward(enum dt_activation act, const float *x, const float *y, const float *dy, float *dx,
			       int64_t n)
{
	GRID_LOOP(i, n) dx[i] = dt_act_grad(act, x, y, dy, i);
}

/* One warp per row. */
__global__ void k_softmax(const float *x, float *y, int64_t rows, int64_t c)
{
	int64_t r = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5;
	int lane = threadIdx.x & 31;
	const float *xr;
	float *yr, m = -INFINITY, s = 0;
	if (r >= rows)
		return;
	xr = x + r * c;
	yr = y + r * c;
	for (int64_t j = lane; j < c; j += 32)
		m = fmaxf(m, xr[j]);
	for (int o = 16; o > 0; o >>= 1)
		m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
	for (int64_t j = lane; j < c; j += 32) {
		float e = expf(xr[j] - m);
		yr[j] = e;
		s += e;
	}
	for (int o = 16; o > 0; o >>= 1)
		s += __shfl_xor_sync(0xffffffffu, s, o);
	for (int64_t j = lane; j < c; j += 32)
		yr[j] /= s;
}

__global__ void k_softmax_backward(const float *y, const float *dy, float *dx, int64_t rows, int64_t c)
{
	int64_t r = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5;
	int lane = threadIdx.x & 31;
	float dot = 0;
	if (r >= rows)
		return;
	for (int64_t j = lane; j < c; j += 32)
		dot += y[r * c + j] * dy[r * c + j];
	for (int o = 16; o > 0; o >>= 1)
		dot += __shfl_xor_sync(0xffffffffu, dot, o);
	for (int64_t j = lane; j < c; j += 32)
		dx[r * c + j] = y[r * c + j] * (dy[r * c + j] - dot);
}

static unsigned warp_blocks(int64_t rows)
{
	int64_t per = DT_CUDA_THREADS / 32;
	return (unsigned)((rows + per - 1) / per);
}

static void cuda_act_forward(enum dt_activation act, const struct dt_tensor *x, struct dt_tensor *y)
{
	struct dt_gpu *g = gpu_of(y);
	int64_t n = t_count(y);
	if (n == 0)
		return;
	if (act == DT_ACT_LINEAR) {
		cuda_copy(x, y);
	} else if (act == DT_ACT_SOFTMAX) {
		int64_t rows = t_rows(x), c = t_cols(x);
		k_softmax<<<warp_blocks(rows), DT_CUDA_THREADS, 0, g->stream>>>(x->data, y->data, rows, c);
	} else {
		DT_CUDA_ASSERT(act > DT_ACT_LINEAR && act < DT_ACT_COUNT);
		k_act_forward LAUNCH(g, n)(act, x->data, y->data, n);
	}
	DT_CUDA_LAUNCH_CHECK();
}

static void cuda_act_backward(enum dt_activation act, const struct dt_tensor *x, const struct dt_tensor *y,
			      const struct dt_tensor *dy, struct dt_tensor *dx)
{
	struct dt_gpu *g = gpu_of(dx);
	int64_t n = t_count(dx);
	if (n == 0)
		return;
	if (act == DT_ACT_LINEAR) {
		cuda_copy(dy, dx);
	} else if (act == DT_ACT_SOFTMAX) {
		int64_t rows = t_rows(y), c = t_cols(y);
		k_softmax_backward<<<warp_blocks(rows), DT_CUDA_THREADS, 0, g->stream>>>(y->data, dy->data, dx->data,
											  rows, c);
	} else {
		DT_CUDA_ASSERT(act > DT_ACT_LINEAR && act < DT_ACT_COUNT);
		k_act_backward LAUNCH(g, n)(act, x ? x->data : NULL, y->data, dy->data, dx->data, n);
	}
	DT_CUDA_LAUNCH_CHECK();
}

/* The CPU backend's mask: a function of (key, first + i) alone, identical on both devices. */
__global__ void k_dropout(const float *x, float *y, float *mask, float rate, float keep, uint64_t key, int64_t first,
			  int64_t n)
{
	GRID_LOOP(i, n)
	{
		float m = dt_dropout_mask(key, first + i, rate, keep);
		if (mask)
			mask[i] = m;
		y[i] = x[i] * m;
	}
}

static void cuda_dropout(const struct dt_tensor *x, struct dt_tensor *y, struct dt_tensor *mask, float rate,
			 uint64_t key, int64_t first)
{
	struct dt_gpu *g = gpu_of(y);
	int64_t n = t_count(y);
	if (n == 0)
		return;
	k_dropout LAUNCH(g, n)(x->data, y->data, mask ? mask->data : NULL, rate, 1 / (1 - rate), key, first, n);
	DT_CUDA_LAUNCH_CHECK();
}

/* ---- losses and metrics: one thread per row ---- */

__global__ void k_loss(enum dt_loss loss, struct dt_loss_args a, enum dt_loss_input input, const float *p,
		       const float *t, const float *cw, int64_t k, float *dp, float grad_scale, int64_t rows, int64_t c,
		       int64_t tc, double *out)
{
	int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
	double l = r < rows ? dt_loss_row(loss, &a, input, p, t, cw, k, dp, grad_scale, r, c, tc) : 0;
	l = block_sum(l);
	if (threadIdx.x == 0)
		atomicAdd(out, l);
}

static double cuda_loss(enum dt_loss loss, const struct dt_loss_args *a, enum dt_loss_input input,
			const struct dt_tensor *pred, const struct dt_tensor *target,
			const struct dt_tensor *class_weight, struct dt_tensor *dpred, float scale)
{
	struct dt_gpu *g = gpu_of(pred);
	int64_t rows = t_rows(pred), c = t_cols(pred), tc = t_cols(target);
	int64_t k = class_weight ? t_count(class_weight) : 0;
	if (rows == 0)
		return 0;
	acc_clear(g);
	k_loss<<<(unsigned)((rows + 127) / 128), 128, 0, g->stream>>>(
		loss, *a, input, pred->data, target->data, class_weight ? class_weight->data : NULL, k,
		dpred ? dpred->data : NULL, scale, rows, c, tc, g->acc);
	DT_CUDA_LAUNCH_CHECK();
	acc_read(g);
	return g->host_acc[0];
}

__global__ void k_count_correct(enum dt_accuracy kind, const float *p, const float *t, float threshold, int64_t rows,
				int64_t c, unsigned long long *out)
{
	int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
	unsigned long long k = r < rows ? (unsigned long long)dt_correct_row(kind, p, t, threshold, r, c) : 0;
	k = block_sum(k);
	if (threadIdx.x == 0)
		atomicAdd(out, k);
}

static int64_t cuda_count_correct(enum dt_accuracy kind, const struct dt_tensor *pred, const struct dt_tensor *target,
				  float threshold)
{
	struct dt_gpu *g = gpu_of(pred);
	int64_t rows = t_rows(pred), c = t_cols(pred);
	if (rows == 0)
		return 0;
	acc_clear(g);
	k_count_correct<<<(unsigned)((rows + 127) / 128), 128, 0, g->stream>>>(kind, pred->data, target->data,
									       threshold, rows, c, g->count);
	DT_CUDA_LAUNCH_CHECK();
	acc_read(g);
	return (int64_t)*g->host_count;
}

__global__ void k_error_sums(const float *p, const float *t, int64_t rows, int64_t c, double *out)
{
	int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
	double a = 0, s = 0;
	if (r < rows)
		dt_error_row(p, t, r, c, &a, &s);
	a = block_sum(a);
	__syncthreads(); /* block_sum's shared slots are used again */
	s = block_sum(s);
	if (threadIdx.x == 0) {
		atomicAdd(&out[0], a);
		atomicAdd(&out[1], s);
	}
}

static void cuda_error_sums(const struct dt_tensor *pred, const struct dt_tensor *target, double sums[2])
{
	struct dt_gpu *g = gpu_of(pred);
	int64_t rows = t_rows(pred), c = t_cols(pred);
	sums[0] = sums[1] = 0;
	if (rows == 0)
		return;
	acc_clear(g);
	k_error_sums<<<(unsigned)((rows + 127) / 128), 128, 0, g->stream>>>(pred->data, target->data, rows, c, g->acc);
	DT_CUDA_LAUNCH_CHECK();
	acc_read(g);
	sums[0] = g->host_acc[0];
	sums[1] = g->host_acc[1];
}

__global__ void k_count_top_k(const float *p, const float *t, int sparse, int64_t k, int64_t rows, int64_t c,
			      unsigned long long *out)
{
	int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
	unsigned long long n = r < rows ? (unsigned long long)dt_top_k_row(p, t, sparse, k, r, c) : 0;
	n = block_sum(n);
	if (threadIdx.x == 0)
		atomicAdd(out, n);
}

static int64_t cuda_count_top_k(const struct dt_tensor *pred, const struct dt_tensor *target, int sparse, int64_t k)
{
	struct dt_gpu *g = gpu_of(pred);
	int64_t rows = t_rows(pred), c = t_cols(pred);
	if (rows == 0)
		return 0;
	acc_clear(g);
	k_count_top_k<<<(unsigned)((rows + 127) / 128), 128, 0, g->stream>>>(pred->data, target->data, sparse, k, rows, c,
									    g->count);
	DT_CUDA_LAUNCH_CHECK();
	acc_read(g);
	return (int64_t)*g->host_count;
}

/* A thread per column, over the rows in order: the CPU's sums, bit for bit. */
__global__ void k_regression_sums(const float *p, const float *t, int64_t rows, int64_t c, float *sums)
{
	GRID_LOOP(j, c) dt_regression_column(p, t, rows, c, j, sums + DT_REGRESSION_SUMS * j);
}

static void cuda_regression_sums(const struct dt_tensor *pred, const struct dt_tensor *target, struct dt_tensor *sums)
{
	struct dt_gpu *g = gpu_of(pred);
	int64_t rows = t_rows(pred), c = t_cols(pred);
	k_regression_sums LAUNCH(g, c)(pred->data, target->data, rows, c, sums->data);
	DT_CUDA_LAUNCH_CHECK();
}

/* Whole-number counts in float: atomic adds of 1 are exact in any order below 2^24. */
__global__ void k_confusion(enum dt_accuracy kind, const float *p, const float *t, float threshold, int64_t rows,
			    int64_t c, int64_t per_row, float *counts)
{
	GRID_LOOP(i, rows * per_row) {
		int64_t cell = dt_confusion_cell(kind, p, t, threshold, i / per_row, c, i % per_row);
		if (cell >= 0)
			atomicAdd(&counts[cell], 1.0f);
	}
}

static void cuda_confusion(enum dt_accuracy kind, const struct dt_tensor *pred, const struct dt_tensor *target,
			   float threshold, struct dt_tensor *counts)
{
	struct dt_gpu *g = gpu_of(pred);
	int64_t rows = t_rows(pred), c = t_cols(pred), per_row = kind == DT_ACC_BINARY || kind == DT_ACC_MULTI_LABEL ? c : 1;
	int64_t n = rows * per_row;
	DT_CUDA_CHECK(cudaMemsetAsync(counts->data, 0, (size_t)t_count(counts) * sizeof(float), g->stream));
	if (n == 0)
		return;
	k_confusion LAUNCH(g, n)(kind, pred->data, target->data, threshold, rows, c, per_row, counts->data);
	DT_CUDA_LAUNCH_CHECK();
}

__global__ void k_auc_histogram(const float *p, const float *t, int64_t rows, int64_t c, int64_t first, int64_t cols,
				int sparse, int sigmoid, int n, float *hist)
{
	GRID_LOOP(i, rows * cols)
		atomicAdd(&hist[dt_auc_slot(p, t, sparse, sigmoid, n, i / cols, c, first + i % cols)], 1.0f);
}

static void cuda_auc_histogram(const struct dt_tensor *pred, const struct dt_tensor *target, int64_t column,
			       int sparse, int sigmoid, int num_thresholds, struct dt_tensor *hist)
{
	struct dt_gpu *g = gpu_of(pred);
	int64_t rows = t_rows(pred), c = t_cols(pred), first = column < 0 ? 0 : column, cols = column < 0 ? c : 1;
	int64_t n = rows * cols;
	DT_CUDA_CHECK(cudaMemsetAsync(hist->data, 0, (size_t)t_count(hist) * sizeof(float), g->stream));
	if (n == 0)
		return;
	k_auc_histogram LAUNCH(g, n)(pred->data, target->data, rows, c, first, cols, sparse, sigmoid, num_thresholds,
				     hist->data);
	DT_CUDA_LAUNCH_CHECK();
}

/* ---- optimizers and regularization ---- */

__global__ void k_sgd(float *w, const float *g, float lr, float gs, float cv, float decay, int64_t n)
{
	GRID_LOOP(i, n) dt_sgd_update(w, g, i, lr, gs, cv, decay);
}

__global__ void k_sgd_momentum(float *w, const float *g, float *m, float lr, float gs, float cv, float decay, float mu,
			       int nest, int64_t n)
{
	GRID_LOOP(i, n) dt_sgd_momentum_update(w, g, m, i, lr, gs, cv, decay, mu, nest);
}

__global__ void k_adam(float *w, const float *g, float *m, float *v, float *vhat, float alpha, float gs, float cv,
		       float decay, float c1, float c2, float eps, int64_t n)
{
	GRID_LOOP(i, n) dt_adam_update(w, g, m, v, vhat, i, alpha, gs, cv, decay, c1, c2, eps);
}

__global__ void k_rmsprop(float *w, const float *g, float *m, float *v, float lr, float gs, float cv, float decay,
			  float rho, float c, float eps, float mu, int64_t n)
{
	GRID_LOOP(i, n) dt_rmsprop_update(w, g, m, v, i, lr, gs, cv, decay, rho, c, eps, mu);
}

__global__ void k_adagrad(float *w, const float *g, float *a, float lr, float gs, float cv, float decay, float eps,
			  int64_t n)
{
	GRID_LOOP(i, n) dt_adagrad_update(w, g, a, i, lr, gs, cv, decay, eps);
}

__global__ void k_adadelta(float *w, const float *g, float *ag, float *ad, float lr, float gs, float cv, float decay,
			   float rho, float c, float eps, int64_t n)
{
	GRID_LOOP(i, n) dt_adadelta_update(w, g, ag, ad, i, lr, gs, cv, decay, rho, c, eps);
}

__global__ void k_adamax(float *w, const float *g, float *m, float *u, float alpha, float gs, float cv, float decay,
			 float c1, float b2, float eps, int64_t n)
{
	GRID_LOOP(i, n) dt_adamax_update(w, g, m, u, i, alpha, gs, cv, decay, c1, b2, eps);
}

__global__ void k_nadam(float *w, const float *g, float *m, float *v, float lr, float gs, float cv, float decay,
			float c1, float c2, float cm, float cg, float bc2, float eps, int64_t n)
{
	GRID_LOOP(i, n) dt_nadam_update(w, g, m, v, i, lr, gs, cv, decay, c1, c2, cm, cg, bc2, eps);
}

__global__ void k_lion(float *w, const float *g, float *m, float lr, float gs, float cv, float decay, float b1,
		       float c1, float b2, float c2, int64_t n)
{
	GRID_LOOP(i, n) dt_lion_update(w, g, m, i, lr, gs, cv, decay, b1, c1, b2, c2);
}

static void cuda_optimizer_update(const struct dt_opt_step *s, struct dt_tensor *wt, const struct dt_tensor *gt,
				  struct dt_tensor *s1, struct dt_tensor *s2, struct dt_tensor *s3)
{
	struct dt_gpu *g = gpu_of(wt);
	int64_t n = t_count(wt);
	float *w = wt->data, *m = s1 ? s1->data : NULL, *v = s2 ? s2->data : NULL, *v3 = s3 ? s3->data : NULL;
	const float *gr = gt->data;
	const float lr = s->lr, gs = s->grad_scale, cv = s->clipvalue, decay = dt_opt_decay(s);
	const float c1 = dt_opt_one_minus(s->beta_1), c2 = dt_opt_one_minus(s->beta_2);
	if (n == 0)
		return;
	switch (s->kind) {
	case DT_OPT_SGD:
		if (!m)
			k_sgd LAUNCH(g, n)(w, gr, lr, gs, cv, decay, n);
		else
			k_sgd_momentum LAUNCH(g, n)(w, gr, m, lr, gs, cv, decay, s->momentum, s->nesterov, n);
		break;
	case DT_OPT_ADAM:
	case DT_OPT_ADAMW:
		DT_CUDA_ASSERT(m && v && (!s->amsgrad || v3));
		k_adam LAUNCH(g, n)(w, gr, m, v, s->amsgrad ? v3 : NULL, dt_adam_alpha(s), gs, cv, decay, c1, c2,
				    s->epsilon, n);
		break;
	case DT_OPT_RMSPROP:
		DT_CUDA_ASSERT(v);
		k_rmsprop LAUNCH(g, n)(w, gr, m, v, lr, gs, cv, decay, (float)s->rho, dt_opt_one_minus(s->rho),
				       s->epsilon, s->momentum, n);
		break;
	case DT_OPT_ADAGRAD:
		DT_CUDA_ASSERT(m);
		k_adagrad LAUNCH(g, n)(w, gr, m, lr, gs, cv, decay, s->epsilon, n);
		break;
	case DT_OPT_ADADELTA:
		DT_CUDA_ASSERT(m && v);
		k_adadelta LAUNCH(g, n)(w, gr, m, v, lr, gs, cv, decay, (float)s->rho, dt_opt_one_minus(s->rho),
					s->epsilon, n);
		break;
	case DT_OPT_ADAMAX:
		DT_CUDA_ASSERT(m && v);
		k_adamax LAUNCH(g, n)(w, gr, m, v, dt_adamax_alpha(s), gs, cv, decay, c1, (float)s->beta_2, s->epsilon, n);
		break;
	case DT_OPT_NADAM: {
		float cm, cg, bc2;
		DT_CUDA_ASSERT(m && v);
		dt_nadam_coefs(s, &cm, &cg, &bc2);
		k_nadam LAUNCH(g, n)(w, gr, m, v, lr, gs, cv, decay, c1, c2, cm, cg, bc2, s->epsilon, n);
		break;
	}
	case DT_OPT_LION:
		DT_CUDA_ASSERT(m);
		k_lion LAUNCH(g, n)(w, gr, m, lr, gs, cv, decay, (float)s->beta_1, c1, (float)s->beta_2, c2, n);
		break;
	default:
		DT_CUDA_BUG("optimizer %d", (int)s->kind);
	}
	DT_CUDA_LAUNCH_CHECK();
}

__global__ void k_regularize(const float *w, float *g, float l1, float l2, float scale, int64_t n, double *out)
{
	double penalty = 0;
	GRID_LOOP(i, n) penalty += dt_regularize_update(w, g, i, l1, l2, scale);
	penalty = block_sum(penalty);
	if (threadIdx.x == 0)
		atomicAdd(out, penalty);
}

static double cuda_regularize(const struct dt_tensor *w, struct dt_tensor *gt, float l1, float l2, float scale)
{
	struct dt_gpu *g = gpu_of(gt);
	int64_t n = t_count(w);
	if (n == 0)
		return 0;
	acc_clear(g);
	k_regularize LAUNCH(g, n)(w->data, gt->data, l1, l2, scale, n, g->acc);
	DT_CUDA_LAUNCH_CHECK();
	acc_read(g);
	return g->host_acc[0];
}

/* ---- the table ---- */

void dt_cuda_backend_init(struct dt_backend *b)
{
	b->name = "cuda";
	b->mul = cuda_mul;
	b->axpy = cuda_axpy;
	b->scale = cuda_scale;
	b->fill = cuda_fill;
	b->copy = cuda_copy;
	b->from_host = cuda_from_host;
	b->to_host = cuda_to_host;
	b->sum_squares = cuda_sum_squares;
	b->gemm = cuda_gemm;
	b->bias_add = cuda_bias_add;
	b->bias_grad = cuda_bias_grad;
	b->act_forward = cuda_act_forward;
	b->act_backward = cuda_act_backward;
	b->dropout = cuda_dropout;
	b->loss = cuda_loss;
	b->count_correct = cuda_count_correct;
	b->error_sums = cuda_error_sums;
	b->count_top_k = cuda_count_top_k;
	b->regression_sums = cuda_regression_sums;
	b->confusion = cuda_confusion;
	b->auc_histogram = cuda_auc_histogram;
	b->optimizer_update = cuda_optimizer_update;
	b->regularize = cuda_regularize;
	b->plan_conv = dt_cuda_plan_conv;
	b->conv_forward = dt_cuda_conv_forward;
	b->conv_backward = dt_cuda_conv_backward;
	b->plan_pool = dt_cuda_plan_pool;
	b->pool_forward = dt_cuda_pool_forward;
	b->pool_backward = dt_cuda_pool_backward;
	b->plan_batchnorm = dt_cuda_plan_batchnorm;
	b->batchnorm_forward = dt_cuda_batchnorm_forward;
	b->batchnorm_backward = dt_cuda_batchnorm_backward;
	b->plan_free = dt_cuda_plan_free;
	dt_cuda_resample_init(b);
	/* embedding */
	b->gather = dt_cuda_gather;
	b->scatter_add = dt_cuda_scatter_add;
	dt_cuda_deconv_init(b);
	/* layer normalization (resnet) */
	b->plan_layernorm = dt_cuda_plan_layernorm;
	b->layernorm_forward = dt_cuda_layernorm_forward;
	b->layernorm_backward = dt_cuda_layernorm_backward;
	/* recurrent layers (rnn) */
	b->plan_rnn = dt_cuda_plan_rnn;
	b->rnn_forward = dt_cuda_rnn_forward;
	b->rnn_backward = dt_cuda_rnn_backward;
	b->rnn_merge = dt_cuda_rnn_merge;
	b->rnn_merge_backward = dt_cuda_rnn_merge_backward;
}
