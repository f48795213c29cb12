/*
 * The CPU backend: oneDNN's sgemm for matrix products, OpenMP loops for the
 * rest. Loops go parallel only above PAR_MIN elements, where the threads pay
 * for themselves. The formulas of the elements and rows the CUDA kernels
 * compute too are in core/rows.h; each loop here passes its activation or
 * kind as a constant, so it compiles to that one formula.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <omp.h>
#include <stdint.h>
#if defined(__SSE2__)
#include <immintrin.h>
#endif
#include <string.h>

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>

#include "core/backend.h"
#include "core/error.h"
#include "core/cpu/ops_cpu.h"
#include "core/rows.h"

#define PAR_MIN 32768

static void cpu_mul(const struct dt_tensor *a, const struct dt_tensor *b, struct dt_tensor *c)
{
	int64_t n = dt_tensor_count(c);
	const float *x = a->data, *y = b->data;
	float *z = c->data;
#pragma omp parallel for simd if (parallel: n > PAR_MIN)
	for (int64_t i = 0; i < n; i++)
		z[i] = x[i] * y[i];
}

static void cpu_axpy(float alpha, const struct dt_tensor *xt, struct dt_tensor *yt)
{
	int64_t n = dt_tensor_count(yt);
	const float *x = xt->data;
	float *y = yt->data;
#pragma omp parallel for simd if (parallel: n > PAR_MIN)
	for (int64_t i = 0; i < n; i++)
		y[i] += alpha * x[i];
}

static void cpu_scale(struct dt_tensor *xt, float alpha)
{
	int64_t n = dt_tensor_count(xt);
	float *x = xt->data;
#pragma omp parallel for simd if (parallel: n > PAR_MIN)
	for (int64_t i = 0; i < n; i++)
		x[i] *= alpha;
}

static void cpu_fill(struct dt_tensor *xt, float value)
{
	int64_t n = dt_tensor_count(xt);
	float *x = xt->data;
	for (int64_t i = 0; i < n; i++)
		x[i] = value;
}

static void cpu_copy(const struct dt_tensor *src, struct dt_tensor *dst)
{
	if (src->data != dst->data)
		memmove(dst->data, src->data, (size_t)dt_tensor_count(dst) * sizeof(float));
}

static void cpu_from_host(struct dt_tensor *dst, const float *src)
{
	memcpy(dst->data, src, (size_t)dt_tensor_count(dst) * sizeof(float));
}

static void cpu_to_host(const struct dt_tensor *src, float *dst)
{
	memcpy(dst, src->data, (size_t)dt_tensor_count(src) * sizeof(float));
}

static double cpu_sum_squares(const struct dt_tensor *xt)
{
	int64_t n = dt_tensor_count(xt);
	const float *x = xt->data;
	double s = 0;
#pragma omp parallel for simd reduction(+ : s) if (n > PAR_MIN)
	for (int64_t i = 0; i < n; i++)
		s += (double)x[i] * x[i];
	return s;
}

/* compile.precision on the CPU: fp32, or bf16 where dt_ops_cpu_has_bf16. */
static enum dt_precision cpu_precision = DT_PRECISION_FP32;

enum dt_precision dt_cpu_precision(void) { return cpu_precision; }

int dt_ops_cpu_has_bf16(void)
{
	dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
	return isa == dnnl_cpu_isa_avx512_core_bf16 || isa == dnnl_cpu_isa_avx512_core_amx;
}

int dt_ops_set_cpu_precision(enum dt_precision p, char *err, size_t errsize)
{
	if (p == DT_PRECISION_TF32) {
		snprintf(err, errsize, "precision 'tf32' needs a GPU (TensorFloat-32 is a GPU format), and the model runs "
			 "on the CPU");
		return -1;
	}
	if (p == DT_PRECISION_BF16 && !dt_ops_cpu_has_bf16()) {
		snprintf(err, errsize,
			 "precision 'bf16' on the CPU needs bfloat16 instructions (avx512_bf16 or AMX), and oneDNN "
			 "runs this CPU as %s",
			 dt_ops_cpu_isa());
		return -1;
	}
	cpu_precision = p;
	return 0;
}

static void cpu_gemm(int trans_a, int trans_b, float alpha, const struct dt_tensor *a,
		     const struct dt_tensor *b, float beta, struct dt_tensor *c)
{
	int64_t m = dt_tensor_rows(c), n = dt_tensor_cols(c);
	int64_t k = trans_a ? dt_tensor_rows(a) : dt_tensor_cols(a);
	if (m == 0 || n == 0)
		return;
	/* a b^T, a dense layer's data gradient, on the matmul primitive in float32 too (matmul.c); k 0: sgemm's c = beta c */
	if (k > 0 && (cpu_precision == DT_PRECISION_BF16 || (!trans_a && trans_b)))
		dt_cpu_matmul(cpu_precision == DT_PRECISION_BF16, trans_a, trans_b, m, n, k, alpha, a->data, b->data,
			      beta, c->data);
	else
		dt_cpu_sgemm(trans_a, trans_b, m, n, k, alpha, a->data, b->data, beta, c->data);
}

static void cpu_bias_add(struct dt_tensor *yt, const struct dt_tensor *bt)
{
	int64_t c = dt_tensor_count(bt), rows = dt_tensor_count(yt) / c;
	const float *b = bt->data;
	float *y = yt->data;
#pragma omp parallel for if (rows * c > PAR_MIN)
	for (int64_t r = 0; r < rows; r++) {
		float *yr = y + r * c;
#pragma omp simd
		for (int64_t j = 0; j < c; j++)
			yr[j] += b[j];
	}
}

static void cpu_bias_grad(const struct dt_tensor *dyt, float beta, struct dt_tensor *dbt)
{
	int64_t c = dt_tensor_count(dbt), rows = dt_tensor_count(dyt) / c;
	const float *dy = dyt->data;
	float *db = dbt->data;
	/* Columns in blocks, each thread owning whole blocks: no reduction needed. */
#pragma omp parallel for if (rows * c > PAR_MIN)
	for (int64_t j0 = 0; j0 < c; j0 += 64) {
		int64_t j1 = j0 + 64 < c ? j0 + 64 : c;
		float acc[64];
		for (int64_t j = j0; j < j1; j++)
			acc[j - j0] = beta == 0 ? 0 : beta * db[j];
		for (int64_t r = 0; r < rows; r++) {
			const float *dr = dy + r * c;
#pragma omp simd
			for (int64_t j = j0; j < j1; j++)
				acc[j - j0] += dr[j];
		}
		for (int64_t j = j0; j < j1; j++)
			db[j] = acc[j - j0];
	}
}

static void softmax_rows(const float *x, float *y, int64_t rows, int64_t c)
{
#pragma omp parallel for if (rows * c > PAR_MIN)
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * c;
		float *yr = y + r * c;
		float m = xr[0], s = 0;
		for (int64_t j = 1; j < c; j++)
			m = xr[j] > m ? xr[j] : m;
		for (int64_t j = 0; j < c; j++) {
			yr[j] = expf(xr[j] - m);
			s += yr[j];
		}
		for (int64_t j = 0; j < c; j++)
			yr[j] /= s;
	}
}

static void cpu_act_forward(enum dt_activation act, const struct dt_tensor *xt, struct dt_tensor *yt)
{
	int64_t n = dt_tensor_count(yt);
	const float *x = xt->data;
	float *y = yt->data;
	switch (act) {
	case DT_ACT_LINEAR:
		cpu_copy(xt, yt);
		break;
	case DT_ACT_RELU:
#pragma omp parallel for simd if (parallel: n > PAR_MIN)
		for (int64_t i = 0; i < n; i++)
			y[i] = dt_act_value(DT_ACT_RELU, x[i]);
		break;
	case DT_ACT_SIGMOID:
#pragma omp parallel for if (n > PAR_MIN)
		for (int64_t i = 0; i < n; i++)
			y[i] = dt_act_value(DT_ACT_SIGMOID, x[i]);
		break;
	case DT_ACT_TANH:
#pragma omp parallel for if (n > PAR_MIN)
		for (int64_t i = 0; i < n; i++)
			y[i] = dt_act_value(DT_ACT_TANH, x[i]);
		break;
	case DT_ACT_SOFTMAX:
		softmax_rows(x, y, dt_tensor_rows(xt), dt_tensor_cols(xt));
		break;
	case DT_ACT_LEAKY_RELU:
#pragma omp parallel for simd if (parallel: n > PAR_MIN)
		for (int64_t i = 0; i < n; i++)
			y[i] = dt_act_value(DT_ACT_LEAKY_RELU, x[i]);
		break;
	case DT_ACT_ELU:
#pragma omp parallel for if (n > PAR_MIN)
		for (int64_t i = 0; i < n; i++)
			y[i] = dt_act_value(DT_ACT_ELU, x[i]);
		break;
	case DT_ACT_GELU:
#pragma omp parallel for if (n > PAR_MIN)
		for (int64_t i = 0; i < n; i++)
			y[i] = dt_act_value(DT_ACT_GELU, x[i]);
		break;
	case DT_ACT_SWISH:
#pragma omp parallel for if (n > PAR_MIN)
		for (int64_t i = 0; i < n; i++)
			y[i] = dt_act_value(DT_ACT_SWISH, x[i]);
		break;
	case DT_ACT_SOFTPLUS:
#pragma omp parallel for if (n > PAR_MIN)
		for (int64_t i = 0; i < n; i++)
			y[i] = dt_act_value(DT_ACT_SOFTPLUS, x[i]);
		break;
	default:
		DT_BUG("activation %d", (int)act);
	}
}

static void cpu_act_backward(enum dt_activation act, const struct dt_tensor *xt, const struct dt_tensor *yt,
			     const struct dt_tensor *dyt, struct dt_tensor *dxt)
{
	int64_t n = dt_tensor_count(dxt);
	const float *x = xt ? xt->data : NULL, *y = yt->data, *dy = dyt->data;
	float *dx = dxt->data;
	switch (act) {
	case DT_ACT_LINEAR:
		cpu_copy(dyt, dxt);
		break;
	case DT_ACT_RELU:
#pragma omp parallel for simd if (parallel: n > PAR_MIN)
		for (int64_t i = 0; i < n; i++)
			dx[i] = dt_act_grad(DT_ACT_RELU, x, y, dy, i);
		break;
	case DT_ACT_SIGMOID:
#pragma omp parallel for simd if (parallel: n > PAR_MIN)
		for (int64_t i = 0; i < n; i++)
			dx[i] = dt_act_grad(DT_ACT_SIGMOID, x, y, dy, i);
		break;
	case DT_ACT_TANH:
#pragma omp parallel for simd if (parallel: n > PAR_MIN)
		for (int64_t i = 0; i < n; i++)
			dx[i] = dt_act_grad(DT_ACT_TANH, x, y, dy, i);
		break;
	case DT_ACT_SOFTMAX: {
		int64_t rows = dt_tensor_rows(yt), c = dt_tensor_cols(yt);
#pragma omp parallel for if (n > PAR_MIN)
		for (int64_t r = 0; r < rows; r++) {
			const float *yr = y + r * c, *dr = dy + r * c;
			float *xr = dx + r * c, dot = 0;
			for (int64_t j = 0; j < c; j++)
				dot += yr[j] * dr[j];
			for (int64_t j = 0; j < c; j++)
				xr[j] = yr[j] * (dr[j] - dot);
		}
		break;
	}
	case DT_ACT_LEAKY_RELU:
#pragma omp parallel for simd if (parallel: n > PAR_MIN)
		for (int64_t i = 0; i < n; i++)
			dx[i] = dt_act_grad(DT_ACT_LEAKY_RELU, x, y, dy, i);
		break;
	case DT_ACT_ELU:
#pragma omp parallel for simd if (parallel: n > PAR_MIN)
		for (int64_t i = 0; i < n; i++)
			dx[i] = dt_act_grad(DT_ACT_ELU, x, y, dy, i);
		break;
	case DT_ACT_GELU:
#pragma omp parallel for if (n > PAR_MIN)
		for (int64_t i = 0; i < n; i++)
			dx[i] = dt_act_grad(DT_ACT_GELU, x, y, dy, i);
		break;
	case DT_ACT_SWISH:
#pragma omp parallel for if (n > PAR_MIN)
		for (int64_t i = 0; i < n; i++)
			dx[i] = dt_act_grad(DT_ACT_SWISH, x, y, dy, i);
		break;
	case DT_ACT_SOFTPLUS:
#pragma omp parallel for if (n > PAR_MIN)
		for (int64_t i = 0; i < n; i++)
			dx[i] = dt_act_grad(DT_ACT_SOFTPLUS, x, y, dy, i);
		break;
	default:
		DT_BUG("activation %d", (int)act);
	}
}

/*
 * n floats from src to dst with non-temporal stores, which write the lines
 * without first taking them from the caches that hold them.
 */
static void stream_floats(float *dst, const float *src, int64_t n)
{
	int64_t i = 0;
#if defined(__AVX512F__)
	for (; i < n && ((uintptr_t)(dst + i) & 63); i++)
		dst[i] = src[i];
	for (; i + 16 <= n; i += 16)
		_mm512_stream_ps(dst + i, _mm512_loadu_ps(src + i));
#elif defined(__AVX__)
	for (; i < n && ((uintptr_t)(dst + i) & 31); i++)
		dst[i] = src[i];
	for (; i + 8 <= n; i += 8)
		_mm256_stream_ps(dst + i, _mm256_loadu_ps(src + i));
#elif defined(__SSE2__)
	for (; i < n && ((uintptr_t)(dst + i) & 15); i++)
		dst[i] = src[i];
	for (; i + 4 <= n; i += 4)
		_mm_stream_ps(dst + i, _mm_loadu_ps(src + i));
#endif
	for (; i < n; i++)
		dst[i] = src[i];
}

/*
 * With several threads, the loops whose output every thread's next matrix
 * product reads (the optimizer's weights, dropout's y) write it in tiles of
 * STREAM_TILE floats through an L1 copy and stream_floats: a plain store of a
 * line the other threads' caches hold waits until they give it up, a round
 * trip per line (dt_ops_thread_round_trip_ns).
 */
#define STREAM_TILE 2048

/*
 * dst[0, n) from fill(ctx, tile, b, len), which writes the values of
 * dst[b, b + len) into tile (tile may be dst + b itself). With one thread,
 * or PAR_MIN floats or fewer, fill writes all of dst at once with plain
 * stores: the lines then stay in this cache for the next step. Otherwise the
 * OpenMP threads fill tiles (each thread the same ones at every call) and
 * stream each into dst.
 */
static void stream_tiles(float *dst, int64_t n, void (*fill)(void *ctx, float *tile, int64_t b, int64_t len),
			 void *ctx)
{
	if (n <= PAR_MIN || omp_get_max_threads() == 1) {
		fill(ctx, dst, 0, n);
		return;
	}
#pragma omp parallel
	{
#pragma omp for schedule(static)
		for (int64_t b = 0; b < n; b += STREAM_TILE) {
			_Alignas(64) float tile[STREAM_TILE];
			int64_t len = n - b < STREAM_TILE ? n - b : STREAM_TILE;
			fill(ctx, tile, b, len);
			stream_floats(dst + b, tile, len);
		}
#if defined(__SSE2__)
		_mm_sfence(); /* this thread's streamed lines are written before the region's end */
#endif
	}
}

/*
 * dst[0, n) = src[0, n) in bfloat16, with the instruction where the build
 * has it (-march=native on an avx512_bf16 CPU), non-temporal stores where
 * stream (as stream_floats).
 */
static void to_bf16_range(uint16_t *dst, const float *src, int64_t n, int stream)
{
	int64_t i = 0;
#if defined(__AVX512BF16__)
	for (; i < n && ((uintptr_t)(dst + i) & 63); i++)
		dst[i] = dt_bf16_round(src[i]);
	for (; i + 32 <= n; i += 32) {
		__m512i v = (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + i + 16), _mm512_loadu_ps(src + i));
		if (stream)
			_mm512_stream_si512((void *)(dst + i), v);
		else
			_mm512_store_si512((void *)(dst + i), v);
	}
#endif
#pragma omp simd
	for (int64_t j = i; j < n; j++)
		dst[j] = dt_bf16_round(src[j]);
}

/*
 * The conversion follows stream_tiles: one thread, or PAR_MIN values or
 * fewer, plain stores; else each OpenMP thread converts the same tiles at
 * every call and streams them, since every thread's product then reads them.
 * On a 2-vCPU Zen 4 with the threads 330-350 ns apart, oneDNN's reorder
 * (plain stores) of the MLP's 784 x 512 kernel took 0.34 ms at 2 threads,
 * 0.04 at one.
 */
void dt_cpu_to_bf16(uint16_t *dst, const float *src, int64_t n)
{
	if (n <= PAR_MIN || omp_get_max_threads() == 1) {
		to_bf16_range(dst, src, n, 0);
		return;
	}
#pragma omp parallel
	{
#pragma omp for schedule(static)
		for (int64_t b = 0; b < n; b += STREAM_TILE)
			to_bf16_range(dst + b, src + b, n - b < STREAM_TILE ? n - b : STREAM_TILE, 1);
#if defined(__SSE2__)
		_mm_sfence();
#endif
	}
}

struct dropout_job {
	const float *x;
	float *mask, rate, keep;
	uint64_t key;
	int64_t first;
};

/*
 * The mask's counter is the element index's low 32 bits (dt_dropout_mask),
 * so the loops count in 32 bits, eight to an AVX2 vector, a span of at most
 * 2^30 at a time: with a 64-bit index a vector held four (fashion_cnn's
 * dropout, 1.18 M floats, 1 thread, Zen 3: 0.67 -> 0.49 ms).
 */
#define DROPOUT_SPAN (1 << 30)
static void dropout_tile(void *ctx, float *tile, int64_t b, int64_t len)
{
	const struct dropout_job *d = ctx;
	const float rate = d->rate, keep = d->keep;
	const uint64_t key = d->key;
	for (int64_t s = 0; s < len; s += DROPOUT_SPAN) {
		const float *x = d->x + b + s;
		float *y = tile + s, *mask = d->mask ? d->mask + b + s : NULL;
		const uint32_t first = (uint32_t)(d->first + b + s);
		const int32_t m = (int32_t)(len - s < DROPOUT_SPAN ? len - s : DROPOUT_SPAN);
		if (!mask) {
#pragma omp simd
			for (int32_t i = 0; i < m; i++)
				y[i] = x[i] * dt_dropout_mask(key, first + (uint32_t)i, rate, keep);
			continue;
		}
#pragma omp simd
		for (int32_t i = 0; i < m; i++) {
			mask[i] = dt_dropout_mask(key, first + (uint32_t)i, rate, keep);
			y[i] = x[i] * mask[i];
		}
	}
}

static void cpu_dropout(const struct dt_tensor *xt, struct dt_tensor *yt, struct dt_tensor *mt,
			float rate, uint64_t key, int64_t first)
{
	int64_t n = dt_tensor_count(yt);
	const float *x = xt->data;
	float *y = yt->data, *mask = mt ? mt->data : NULL, keep = 1 / (1 - rate);
	/* y streamed (STREAM_TILE): 0.11-0.13 ms -> 0.025 ms for the MLP's first dropout, threads 330 ns apart */
	stream_tiles(y, n, dropout_tile, &(struct dropout_job){ x, mask, rate, keep, key, first });
}

static double cpu_loss(enum dt_loss loss, const struct dt_loss_args *a, enum dt_loss_input input,
		       const struct dt_tensor *predt, const struct dt_tensor *targett, const struct dt_tensor *cwt,
		       struct dt_tensor *dpredt, float grad_scale)
{
	int64_t rows = dt_tensor_rows(predt), c = dt_tensor_cols(predt), tc = dt_tensor_cols(targett);
	int64_t k = cwt ? dt_tensor_count(cwt) : 0;
	const float *p = predt->data, *t = targett->data, *cw = cwt ? cwt->data : NULL;
	float *dp = dpredt ? dpredt->data : NULL;
	double total = 0;

#pragma omp parallel for reduction(+ : total) if (rows * c > PAR_MIN)
	for (int64_t r = 0; r < rows; r++)
		total += dt_loss_row(loss, a, input, p, t, cw, k, dp, grad_scale, r, c, tc);
	return total;
}

static int64_t cpu_count_correct(enum dt_accuracy kind, const struct dt_tensor *predt,
				 const struct dt_tensor *targett, float threshold)
{
	int64_t rows = dt_tensor_rows(predt), c = dt_tensor_cols(predt), correct = 0;
	const float *p = predt->data, *t = targett->data;
	for (int64_t r = 0; r < rows; r++)
		correct += dt_correct_row(kind, p, t, threshold, r, c);
	return correct;
}

static void cpu_error_sums(const struct dt_tensor *predt, const struct dt_tensor *targett, double sums[2])
{
	int64_t rows = dt_tensor_rows(predt), c = dt_tensor_cols(predt);
	const float *p = predt->data, *t = targett->data;
	double a = 0, s = 0;
#pragma omp parallel for reduction(+ : a, s) if (rows * c > PAR_MIN)
	for (int64_t r = 0; r < rows; r++)
		dt_error_row(p, t, r, c, &a, &s);
	sums[0] = a;
	sums[1] = s;
}

static int64_t cpu_count_top_k(const struct dt_tensor *predt, const struct dt_tensor *targett, int sparse, int64_t k)
{
	int64_t rows = dt_tensor_rows(predt), c = dt_tensor_cols(predt), hits = 0;
	for (int64_t r = 0; r < rows; r++)
		hits += dt_top_k_row(predt->data, targett->data, sparse, k, r, c);
	return hits;
}

static void cpu_regression_sums(const struct dt_tensor *predt, const struct dt_tensor *targett,
				struct dt_tensor *sumst)
{
	int64_t rows = dt_tensor_rows(predt), c = dt_tensor_cols(predt);
	for (int64_t j = 0; j < c; j++)
		dt_regression_column(predt->data, targett->data, rows, c, j, sumst->data + DT_REGRESSION_SUMS * j);
}

static void cpu_confusion(enum dt_accuracy kind, const struct dt_tensor *predt, const struct dt_tensor *targett,
			  float threshold, struct dt_tensor *countst)
{
	int64_t rows = dt_tensor_rows(predt), c = dt_tensor_cols(predt);
	int64_t per_row = kind == DT_ACC_BINARY || kind == DT_ACC_MULTI_LABEL ? c : 1;
	const float *p = predt->data, *t = targett->data;
	float *counts = countst->data;
	memset(counts, 0, (size_t)dt_tensor_count(countst) * sizeof(float));
	for (int64_t r = 0; r < rows; r++)
		for (int64_t j = 0; j < per_row; j++) {
			int64_t cell = dt_confusion_cell(kind, p, t, threshold, r, c, j);
			if (cell >= 0)
				counts[cell] += 1;
		}
}

static void cpu_auc_histogram(const struct dt_tensor *predt, const struct dt_tensor *targett, int64_t column,
			      int sparse, int sigmoid, int num_thresholds, struct dt_tensor *histt)
{
	int64_t rows = dt_tensor_rows(predt), c = dt_tensor_cols(predt);
	int64_t first = column < 0 ? 0 : column, last = column < 0 ? c : column + 1;
	const float *p = predt->data, *t = targett->data;
	float *hist = histt->data;
	memset(hist, 0, (size_t)dt_tensor_count(histt) * sizeof(float));
	for (int64_t r = 0; r < rows; r++)
		for (int64_t j = first; j < last; j++)
			hist[dt_auc_slot(p, t, sparse, sigmoid, num_thresholds, r, c, j)] += 1;
}

/* A step's constants, computed once for all of its tiles (dt_adam_alpha and dt_nadam_coefs call pow). */
struct step_consts {
	float lr, gs, cv, decay, c1, c2, eps;
	float alpha;       /* adam, adamw, adamax */
	float cm, cg, bc2; /* nadam */
};

static struct step_consts step_consts(const struct dt_opt_step *s)
{
	struct step_consts k = { .lr = s->lr, .gs = s->grad_scale, .cv = s->clipvalue, .decay = dt_opt_decay(s),
				 .c1 = dt_opt_one_minus(s->beta_1), .c2 = dt_opt_one_minus(s->beta_2), .eps = s->epsilon };
	if (s->kind == DT_OPT_ADAM || s->kind == DT_OPT_ADAMW)
		k.alpha = dt_adam_alpha(s);
	else if (s->kind == DT_OPT_ADAMAX)
		k.alpha = dt_adamax_alpha(s);
	else if (s->kind == DT_OPT_NADAM)
		dt_nadam_coefs(s, &k.cm, &k.cg, &k.bc2);
	return k;
}

/* One thread's update of w[0, n) with its gradient g and its slots m, v and v3 (NULL where unused). */
static void update_range(const struct dt_opt_step *s, const struct step_consts *k, float *w, const float *g,
			 float *m, float *v, float *v3, int64_t n)
{
	const float lr = k->lr, gs = k->gs, cv = k->cv, decay = k->decay, c1 = k->c1, c2 = k->c2, eps = k->eps;

	switch (s->kind) {
	case DT_OPT_SGD:
		if (!m) {
#pragma omp simd
			for (int64_t i = 0; i < n; i++)
				dt_sgd_update(w, g, i, lr, gs, cv, decay);
		} else {
			const float mu = s->momentum;
			const int nest = s->nesterov;
#pragma omp simd
			for (int64_t i = 0; i < n; i++)
				dt_sgd_momentum_update(w, g, m, i, lr, gs, cv, decay, mu, nest);
		}
		break;
	case DT_OPT_ADAM:
	case DT_OPT_ADAMW: {
		const float alpha = k->alpha;
		/* Two loops: a test of vhat in the loop keeps GCC from vectorizing it (8x slower with AVX-512). */
		if (s->amsgrad) {
#pragma omp simd
			for (int64_t i = 0; i < n; i++)
				dt_adam_update(w, g, m, v, v3, i, alpha, gs, cv, decay, c1, c2, eps);
		} else {
#pragma omp simd
			for (int64_t i = 0; i < n; i++)
				dt_adam_update(w, g, m, v, NULL, i, alpha, gs, cv, decay, c1, c2, eps);
		}
		break;
	}
	case DT_OPT_RMSPROP: {
		const float rho = (float)s->rho, c = dt_opt_one_minus(s->rho), mu = s->momentum;
#pragma omp simd
		for (int64_t i = 0; i < n; i++)
			dt_rmsprop_update(w, g, m, v, i, lr, gs, cv, decay, rho, c, eps, mu);
		break;
	}
	case DT_OPT_ADAGRAD:
#pragma omp simd
		for (int64_t i = 0; i < n; i++)
			dt_adagrad_update(w, g, m, i, lr, gs, cv, decay, eps);
		break;
	case DT_OPT_ADADELTA: {
		const float rho = (float)s->rho, c = dt_opt_one_minus(s->rho);
#pragma omp simd
		for (int64_t i = 0; i < n; i++)
			dt_adadelta_update(w, g, m, v, i, lr, gs, cv, decay, rho, c, eps);
		break;
	}
	case DT_OPT_ADAMAX: {
		const float alpha = k->alpha, b2 = (float)s->beta_2;
#pragma omp simd
		for (int64_t i = 0; i < n; i++)
			dt_adamax_update(w, g, m, v, i, alpha, gs, cv, decay, c1, b2, eps);
		break;
	}
	case DT_OPT_NADAM: {
		const float cm = k->cm, cg = k->cg, bc2 = k->bc2;
#pragma omp simd
		for (int64_t i = 0; i < n; i++)
			dt_nadam_update(w, g, m, v, i, lr, gs, cv, decay, c1, c2, cm, cg, bc2, eps);
		break;
	}
	case DT_OPT_LION: {
		const float b1 = (float)s->beta_1, b2 = (float)s->beta_2;
#pragma omp simd
		for (int64_t i = 0; i < n; i++)
			dt_lion_update(w, g, m, i, lr, gs, cv, decay, b1, c1, b2, c2);
		break;
	}
	default:
		DT_BUG("optimizer %d", (int)s->kind);
	}
}

struct update_job {
	const struct dt_opt_step *s;
	const struct step_consts *k;
	float *w;
	const float *g;
	float *m, *v, *v3;
};

static void update_tile(void *ctx, float *tile, int64_t b, int64_t len)
{
	const struct update_job *u = ctx;
	if (tile != u->w + b)
		memcpy(tile, u->w + b, (size_t)len * sizeof(float));
	update_range(u->s, u->k, tile, u->g + b, u->m ? u->m + b : NULL, u->v ? u->v + b : NULL,
		     u->v3 ? u->v3 + b : NULL, len);
}

/*
 * The update. With several threads, each takes tiles of w (the same ones at
 * every step), updates a copy in its L1 cache and streams it back (above):
 * every thread's matrix products read all of the weights.
 * On a 2-vCPU Zen 4 the MLP's Adam update at 2 threads took 0.39-0.43 ms
 * (0.27 at one thread) with the threads 60-78 ns apart, 0.21-0.22 ms so;
 * and 2.2 ms with them 330-370 ns apart, 0.23 ms so. One thread keeps plain
 * stores, 30% faster there: the lines stay in its cache for the next step.
 */
static void cpu_optimizer_update(const struct dt_opt_step *s, struct dt_tensor *wt, const struct dt_tensor *gt,
				 struct dt_tensor *s1t, struct dt_tensor *s2t, struct dt_tensor *s3t)
{
	int64_t n = dt_tensor_count(wt);
	float *w = wt->data, *m = s1t ? s1t->data : NULL, *v = s2t ? s2t->data : NULL;
	float *v3 = s3t ? s3t->data : NULL;
	const float *g = gt->data;
	const struct step_consts k = step_consts(s);

	DT_ASSERT(!s->amsgrad || v3);
	stream_tiles(w, n, update_tile, &(struct update_job){ s, &k, w, g, m, v, v3 });
}

static double cpu_regularize(const struct dt_tensor *wt, struct dt_tensor *gt, float l1, float l2, float scale)
{
	int64_t n = dt_tensor_count(wt);
	const float *w = wt->data;
	float *g = gt->data;
	double penalty = 0;
#pragma omp parallel for simd reduction(+ : penalty) if (n > PAR_MIN)
	for (int64_t i = 0; i < n; i++)
		penalty += dt_regularize_update(w, g, i, l1, l2, scale);
	return penalty;
}

/* This thread's SSE/AVX arithmetic flushes denormal results and operands to zero. */
static void flush_denormals(void)
{
#if defined(__SSE2__)
	_mm_setcsr(_mm_getcsr() | 0x8040); /* FTZ (bit 15) and DAZ (bit 6) */
#endif
}

void dt_ops_set_threads(int n)
{
	if (n > 0)
		omp_set_num_threads(n);
	/*
	 * The caller and the OpenMP team (threads made later inherit the
	 * caller's floating-point environment, as POSIX has it).
	 */
	flush_denormals();
#pragma omp parallel
	flush_denormals();
}

int dt_ops_get_threads(void) { return omp_get_max_threads(); }

const char *dt_ops_cpu_isa(void)
{
	switch (dnnl_get_effective_cpu_isa()) {
	case dnnl_cpu_isa_sse41: return "SSE4.1";
	case dnnl_cpu_isa_avx: return "AVX";
	case dnnl_cpu_isa_avx2: return "AVX2";
	case dnnl_cpu_isa_avx2_vnni: return "AVX2 with VNNI";
	case dnnl_cpu_isa_avx512_mic:
	case dnnl_cpu_isa_avx512_mic_4ops: return "AVX-512 (Xeon Phi)";
	case dnnl_cpu_isa_avx512_core: return "AVX-512";
	case dnnl_cpu_isa_avx512_core_vnni: return "AVX-512 with VNNI";
	case dnnl_cpu_isa_avx512_core_bf16: return "AVX-512 with BF16";
	case dnnl_cpu_isa_avx512_core_amx: return "AVX-512 with AMX";
	default: return "generic";
	}
}

const struct dt_backend dt_cpu_backend = {
	.name = "cpu",
	.mul = cpu_mul,
	.axpy = cpu_axpy,
	.scale = cpu_scale,
	.fill = cpu_fill,
	.copy = cpu_copy,
	.from_host = cpu_from_host,
	.to_host = cpu_to_host,
	.sum_squares = cpu_sum_squares,
	.gemm = cpu_gemm,
	.bias_add = cpu_bias_add,
	.bias_grad = cpu_bias_grad,
	.act_forward = cpu_act_forward,
	.act_backward = cpu_act_backward,
	.dropout = cpu_dropout,
	.loss = cpu_loss,
	.count_correct = cpu_count_correct,
	.error_sums = cpu_error_sums,
	.count_top_k = cpu_count_top_k,
	.regression_sums = cpu_regression_sums,
	.confusion = cpu_confusion,
	.auc_histogram = cpu_auc_histogram,
	.optimizer_update = cpu_optimizer_update,
	.regularize = cpu_regularize,
	.channel_block = dt_cpu_channel_block,
	.conv_runs = dt_cpu_conv_runs,
	.plan_conv = dt_cpu_plan_conv,
	.conv_forward = dt_cpu_conv_forward,
	.conv_backward = dt_cpu_conv_backward,
	.plan_pool = dt_cpu_plan_pool,
	.pool_forward = dt_cpu_pool_forward,
	.pool_backward = dt_cpu_pool_backward,
	.plan_batchnorm = dt_cpu_plan_batchnorm,
	.batchnorm_forward = dt_cpu_batchnorm_forward,
	.batchnorm_backward = dt_cpu_batchnorm_backward,
	.plan_free = dt_cpu_plan_free,
	/* cnnparts */
	.shift2d = dt_cpu_shift2d,
	.upsample2d = dt_cpu_upsample2d,
	.upsample2d_backward = dt_cpu_upsample2d_backward,
	/* embedding */
	.gather = dt_cpu_gather,
	.scatter_add = dt_cpu_scatter_add,
	.mul_channels = dt_cpu_mul_channels,
	.plan_deconv = dt_cpu_plan_deconv,
	/* layer normalization (resnet) */
	.plan_layernorm = dt_cpu_plan_layernorm,
	.layernorm_forward = dt_cpu_layernorm_forward,
	.layernorm_backward = dt_cpu_layernorm_backward,
	/* recurrent layers (rnn) */
	.plan_rnn = dt_cpu_plan_rnn,
	.rnn_forward = dt_cpu_rnn_forward,
	.rnn_backward = dt_cpu_rnn_backward,
	.rnn_merge = dt_cpu_rnn_merge,
	.rnn_merge_backward = dt_cpu_rnn_merge_backward,
};

/*
 * Thread 0's trips with thread `other`: thread 0 writes an odd value into one
 * cache line, `other` answers with the next even one. The first
 * ROUND_TRIP_WARM seconds are not counted (a sleeping CPU wakes, a virtual
 * one is placed); then up to ROUND_TRIPS trips or ROUND_TRIP_S seconds (an
 * oversubscribed CPU hands the line over once per time slice). The mean in ns.
 */
#define ROUND_TRIPS 20000
#define ROUND_TRIP_WARM 0.002
#define ROUND_TRIP_S 0.05

static double round_trip_with(int other)
{
	static _Alignas(64) atomic_long ball;
	const long stop = -1;
	double ns = 0;

	atomic_store(&ball, 0);
#pragma omp parallel
	{
		int me = omp_get_thread_num();
		if (omp_get_num_threads() <= other) {
			/* a smaller team than asked for: nobody to play with */
		} else if (me == 0) {
			double start = omp_get_wtime(), now;
			long trips = -1; /* -1 while warming up */
			for (long i = 0; trips < ROUND_TRIPS; i++) {
				atomic_store_explicit(&ball, 2 * i + 1, memory_order_release);
				while (atomic_load_explicit(&ball, memory_order_acquire) != 2 * i + 2)
					;
				if (trips >= 0 && ++trips % 256)
					continue;
				now = omp_get_wtime();
				if (trips < 0 && now - start >= ROUND_TRIP_WARM) {
					trips = 0;
					start = now;
				} else if (trips > 0 && now - start >= ROUND_TRIP_S) {
					break;
				}
			}
			ns = (omp_get_wtime() - start) * 1e9 / (double)trips;
			atomic_store_explicit(&ball, stop, memory_order_release);
		} else if (me == other) {
			long v;
			while ((v = atomic_load_explicit(&ball, memory_order_acquire)) != stop)
				if (v & 1)
					atomic_store_explicit(&ball, v + 1, memory_order_release);
		}
	}
	return ns;
}

/*
 * The partners of thread 0 measured: every thread up to ROUND_TRIP_PAIRS of
 * them, else ROUND_TRIP_PAIRS spread evenly from thread 1 to the last (on a
 * 64-thread machine every pair would take up to 63 x 52 ms).
 */
#define ROUND_TRIP_PAIRS 8

double dt_ops_thread_round_trip_ns(int *slowest)
{
	const int others = omp_get_max_threads() - 1;
	const int pairs = others < ROUND_TRIP_PAIRS ? others : ROUND_TRIP_PAIRS;
	double worst = 0;
	*slowest = 0;
	for (int k = 0; k < pairs; k++) {
		int other = pairs == 1 ? 1 : 1 + (int)((int64_t)k * (others - 1) / (pairs - 1));
		double ns = round_trip_with(other);
		if (ns > worst) {
			worst = ns;
			*slowest = other;
		}
	}
	return worst;
}

double dt_ops_gemm_gflops(enum dt_precision p, int64_t n)
{
	const double flops = 2.0 * n * n * n;
	float *a = dt_device_alloc(DT_CPU, n * n), *b = dt_device_alloc(DT_CPU, n * n);
	float *c = dt_device_alloc(DT_CPU, n * n);
	double best = 0;

	DT_ASSERT(n > 0 && n <= DT_PEAK_GEMM_SIZE);
	DT_ASSERT(p != DT_PRECISION_BF16 || dt_ops_cpu_has_bf16());
	for (int64_t i = 0; i < n * n; i++) {
		a[i] = (float)(i % 7) * 0.125f - 0.375f;
		b[i] = (float)(i % 5) * 0.25f - 0.5f;
	}
	/* The first call pays for thread start-up and page faults; it does not count. */
	for (int rep = 0; rep < 3; rep++) {
		double t = omp_get_wtime(), s;
		if (p == DT_PRECISION_BF16)
			dt_cpu_matmul(1, 0, 0, n, n, n, 1.0f, a, b, 0.0f, c);
		else
			DT_DNNL_CHECK(dnnl_sgemm('N', 'N', n, n, n, 1.0f, a, n, b, n, 0.0f, c, n));
		s = omp_get_wtime() - t;
		if (rep > 0 && s > 0 && flops / s > best)
			best = flops / s;
	}
	dt_device_free(DT_CPU, a);
	dt_device_free(DT_CPU, b);
	dt_device_free(DT_CPU, c);
	return best * 1e-9;
}

double dt_ops_peak_gflops(void)
{
	return dt_ops_gemm_gflops(cpu_precision, DT_PEAK_GEMM_SIZE); /* fp32 or bf16: the CPU refuses tf32 */
}
