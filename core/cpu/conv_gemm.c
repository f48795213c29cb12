/*
 * A float32 convolution's weight gradient as products on sgemm, where that
 * is faster than oneDNN's own primitive (dt_cpu_conv_gemm_weights):
 *
 *   dw[kh][kw][ci][co] = sum over output positions p of x at (p, kh, kw)[ci] * dy[p][co]
 *
 * The output positions of the batch are taken in chunks of CHUNK rows. For a
 * chunk, its rows of x's patches (im2col: row p holds, for each (kh, kw), the
 * in_c values of x it reads, zeros in the padding) are copied to col, with a
 * last column of ones; then one sgemm adds col^T dy to a sum of (kh * kw *
 * in_c + 1) x out_c, whose last row is the bias gradient (the column of
 * ones sums dy). With several threads each sums the chunks of its share of
 * the positions, and the sums are added at the end. x and dy may be NHWC or
 * in oneDNN's channel blocks; a blocked dy is copied to NHWC rows chunk by
 * chunk.
 *
 * Measured alone on a 2-vCPU Zen 3 (AVX2; oneDNN 2.6.3), batch 128, against
 * oneDNN's weight gradient in its own layouts (reorders not counted;
 * tests/bench/conv_formats.c), ms at 1 thread / 2 threads:
 *
 *   26x26x32 -> 24x24x64 (Keras' MNIST CNN)  41.5 / 22.1 against 32.5 / 17.1
 *   28x28x32 -> 28x28x32 'same'              27.5 / 14.9 against 24.7 / 12.8
 *   28x28x32 -> 28x28x64 'same'              54.5 / 28.9 against 45.3 / 23.1
 *   14x14x64 -> 14x14x64 'same'              26.4 / 13.9 against 21.9 / 11.8
 *    7x7x128 -> 7x7x128 'same'               26.3 / 13.1 against 24.3 / 12.2
 *   1x1 14x14x64 -> 14x14x64                  2.9 /  1.8 against  2.7 /  1.4
 *
 * With fewer input channels the copies cost more than the products gain:
 * 28x28x16 -> 32 ran even (14.5 against 14.0), 28x28x8 -> 16 and 3-channel
 * first layers 1.5-3x slower. So it takes in_c >= 32, float32, one group,
 * where oneDNN runs AVX2; AVX-512's kernels were not measured.
 *
 * A first layer's NHWC x of 1 to 3 channels is copied by patch value
 * instead (im2col_by_value: col transposed, each of its rows a run along
 * the positions), and then the products win: 28x28x1 -> 32 valid 2.33 ms
 * (oneDNN) against 1.39, 5x5 2.9; 32x32x3 -> 32 'same' 4.80 against 4.57
 * (4.86 by position).
 *
 * It takes a first layer's NHWC x with its dy in channel blocks as well,
 * which oneDNN 2.6 runs only in a reference loop on AVX2: so fashion_cnn's
 * first convolution may write its output in blocks, and its 32 -> 64 one
 * run blocked on both sides (no reorder of dy or dx around its data
 * gradient). 1 thread, Zen 3, `dtrain time`, old and new binaries
 * alternating four times: the step 117.6-119.6 -> 115.5-117.4 ms (conv2d_1
 * forward 31.7-32.0 -> 29.9-30.1, backward 64.9-66.3 -> 63.5-64.9; the
 * first layer's backward 3.3-3.4 -> 3.7-3.9, the pooling's, into blocks,
 * 1.8 -> 2.4); at 2 threads 61.1-62.0 -> 59.8-61.8 ms. With the copy by
 * patch value, three times: 115.5-118.3 -> 113.4-114.1 ms (the first
 * layer's backward 3.1-3.3 -> 2.5-2.6 ms).
 */
#include <omp.h>
#include <string.h>

#include "core/cpu/ops_cpu.h"

/* Output positions per sgemm: its k. 256 to 2304 ran within 3% of each other. */
#define CHUNK 512

/*
 * NHWC x of fewer channels than this (a first layer's image) has its
 * patches copied a patch value at a time along the chunk's positions (col
 * transposed: a row per value of the patch, im2col_by_value), not a
 * position at a time: a grey image's 3x3 patch is three runs of 3 floats,
 * and the copies' overhead was twice the product's time.
 */
#define NARROW 4

int dt_cpu_conv_gemm_weights(const struct dt_conv_geom *g)
{
	dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
	int first_layer = g->x_layout == DT_LAYOUT_NHWC && (g->in_c < NARROW || g->y_layout == DT_LAYOUT_BLOCKED);
	return dt_conv_groups(g) == 1 && (g->in_c >= 32 || first_layer) &&
	       (isa == dnnl_cpu_isa_avx2 || isa == dnnl_cpu_isa_avx2_vnni);
}

/* The rows of one thread's work: the patches (col), dy's rows (when copied), the sum. */
struct gemm_work {
	int64_t kk;        /* kh * kw * in_c: the sum's rows before the bias row */
	int by_value;      /* col is (kk + 1, CHUNK), a row per patch value: NHWC x of fewer than NARROW channels */
	int64_t ld_col;    /* col's row stride */
	int64_t col_floats;
	int64_t ld_dy;     /* the copied dy's row stride */
	int64_t floats;    /* one thread's share of the work buffer */
};

static struct gemm_work gemm_work(const struct dt_conv_geom *g)
{
	struct gemm_work w;
	w.kk = (int64_t)g->kh * g->kw * g->in_c;
	w.by_value = g->x_layout == DT_LAYOUT_NHWC && g->in_c < NARROW;
	w.ld_col = dt_cpu_sgemm_ld(w.by_value ? CHUNK : (w.kk + 1 + 7) / 8 * 8);
	w.col_floats = w.by_value ? (w.kk + 1) * w.ld_col : CHUNK * w.ld_col;
	w.ld_dy = dt_cpu_sgemm_ld(g->out_c);
	w.floats = w.col_floats + CHUNK * w.ld_dy + (w.kk + 1) * g->out_c;
	w.floats = (w.floats + 15) / 16 * 16; /* each thread's share on its own cache lines */
	return w;
}

int64_t dt_cpu_conv_gemm_work(const struct dt_conv_geom *g, int threads) { return threads * gemm_work(g).floats; }

/* Loops the compiler vectorizes for any n (memcpy and memset of a size known only at run time were 2x slower). */
static inline void copy_floats(float *restrict dst, const float *restrict src, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		dst[i] = src[i];
}

static inline void zero_floats(float *dst, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		dst[i] = 0;
}

/*
 * The c channels of a pixel, its first at src, side by side into dst: its
 * groups of cw, `group` apart (one group of c from NHWC, a block from each
 * plane from channel blocks). Inlined with cw a constant for blocks, so
 * that a block is one or two vector moves.
 */
static inline __attribute__((always_inline)) void gather_pixel(float *restrict dst, const float *restrict src, int c,
								int cw, int64_t group)
{
	for (int k = 0; k < c; k += cw, src += group)
		copy_floats(dst + k, src, cw);
}

/*
 * One kernel row of a patch: the kw pixels of image xb (strides xs, groups
 * of cw) at (ih, iw0 + j * dil_w) to dst, in_c values each, zeros outside
 * x. NHWC without dilation: one run.
 */
static inline __attribute__((always_inline)) void patch_row(const struct dt_conv_geom *g, const float *xb,
							     struct dt_cpu_strides xs, int cw, int ih, int iw0,
							     float *dst)
{
	if (ih < 0 || ih >= g->in_h) {
		zero_floats(dst, (int64_t)g->kw * g->in_c);
		return;
	}
	if (g->x_layout == DT_LAYOUT_NHWC && g->dil_w == 1) {
		int j0 = iw0 < 0 ? -iw0 : 0, j1 = iw0 + g->kw > g->in_w ? g->in_w - iw0 : g->kw;
		if (j1 < j0)
			j1 = j0;
		zero_floats(dst, (int64_t)j0 * g->in_c);
		copy_floats(dst + (int64_t)j0 * g->in_c, xb + ((int64_t)ih * g->in_w + iw0 + j0) * xs.pixel,
			    (int64_t)(j1 - j0) * g->in_c);
		zero_floats(dst + (int64_t)j1 * g->in_c, (int64_t)(g->kw - j1) * g->in_c);
		return;
	}
	for (int j = 0; j < g->kw; j++) {
		int iw = iw0 + j * g->dil_w;
		float *d = dst + (int64_t)j * g->in_c;
		if (iw < 0 || iw >= g->in_w)
			zero_floats(d, g->in_c);
		else
			gather_pixel(d, xb + ((int64_t)ih * g->in_w + iw) * xs.pixel, g->in_c, cw, xs.group);
	}
}

/* The patches of positions [p0, p1) into col, one row each, a 1 after each; x in groups of cw. */
static inline __attribute__((always_inline)) void im2col_cw(const struct dt_conv_geom *g, const struct gemm_work *w,
							     const float *x, int64_t p0, int64_t p1, float *col, int cw)
{
	int64_t per_sample = (int64_t)g->out_h * g->out_w;
	struct dt_cpu_strides xs = dt_cpu_strides_of(g->x_layout, (int64_t)g->in_h * g->in_w, g->in_c, cw);
	for (int64_t p = p0; p < p1; p++) {
		const float *xb = x + p / per_sample * xs.image;
		int oh = (int)(p % per_sample / g->out_w), ow = (int)(p % g->out_w);
		float *row = col + (p - p0) * w->ld_col;
		for (int i = 0; i < g->kh; i++)
			patch_row(g, xb, xs, cw, oh * g->stride_h - g->pad_top + i * g->dil_h,
				  ow * g->stride_w - g->pad_left, row + (int64_t)i * g->kw * g->in_c);
		row[w->kk] = 1.0f;
	}
}

/* dy's rows [p0, p1) into buf, ld_dy floats apart; dy in groups of cw. */
static inline __attribute__((always_inline)) void dy_copy_cw(const struct dt_conv_geom *g, const struct gemm_work *w,
							      const float *dy, int64_t p0, int64_t p1, float *buf,
							      int cw)
{
	int64_t per_sample = (int64_t)g->out_h * g->out_w;
	struct dt_cpu_strides ys = dt_cpu_strides_of(g->y_layout, per_sample, g->out_c, cw);
	for (int64_t p = p0; p < p1; p++)
		gather_pixel(buf + (p - p0) * w->ld_dy, dy + p / per_sample * ys.image + p % per_sample * ys.pixel,
			     g->out_c, cw, ys.group);
}

/*
 * The patches of positions [p0, p1) of NHWC x into col by value (gemm_work's
 * by_value): row k holds value k of every position's patch, zeros in the
 * padding; row kk ones. An output row's positions at a time, so that a
 * value's run along them reads x at a fixed stride.
 */
static void im2col_by_value(const struct dt_conv_geom *g, const struct gemm_work *w, const float *x, int64_t p0,
			    int64_t p1, float *col)
{
	const int64_t per_sample = (int64_t)g->out_h * g->out_w, ld = w->ld_col;
	const int64_t step = (int64_t)g->stride_w * g->in_c; /* from one position's value to the next one's */
	for (int64_t p = p0; p < p1;) {
		/* positions [p, p + n): image b, output row oh, columns [ow0, ow0 + n) */
		const int64_t b = p / per_sample;
		const int oh = (int)(p % per_sample / g->out_w), ow0 = (int)(p % g->out_w);
		const int n = (int)(p1 - p < g->out_w - ow0 ? p1 - p : g->out_w - ow0);
		float *at = col + (p - p0);
		for (int i = 0; i < g->kh; i++) {
			const int64_t ih = (int64_t)oh * g->stride_h - g->pad_top + (int64_t)i * g->dil_h;
			const int inside = ih >= 0 && ih < g->in_h;
			const int64_t row = (b * g->in_h + ih) * g->in_w; /* x's pixel (b, ih, 0) */
			for (int j = 0; j < g->kw; j++) {
				/* position q reads column iw = first + q * stride_w, inside x for q in [q0, q1) */
				const int64_t first = (int64_t)ow0 * g->stride_w - g->pad_left + (int64_t)j * g->dil_w;
				int64_t q0 = first >= 0 ? 0 : (-first + g->stride_w - 1) / g->stride_w;
				int64_t q1 = first < g->in_w ? (g->in_w - first + g->stride_w - 1) / g->stride_w : 0;
				q1 = !inside ? 0 : q1 < n ? q1 : n;
				q0 = q0 < q1 ? q0 : q1;
				for (int ci = 0; ci < g->in_c; ci++) {
					float *dst = at + (((int64_t)i * g->kw + j) * g->in_c + ci) * ld;
					const int64_t from = (row + first) * g->in_c + ci;
					for (int64_t q = 0; q < q0; q++)
						dst[q] = 0;
					for (int64_t q = q0; q < q1; q++)
						dst[q] = x[from + q * step];
					for (int64_t q = q1; q < n; q++)
						dst[q] = 0;
				}
			}
		}
		for (int q = 0; q < n; q++)
			at[w->kk * ld + q] = 1.0f;
		p += n;
	}
}

/*
 * The channels a layout's loops take at once (dt_cpu_strides_of's cw):
 * every one of c for NHWC, else the geometry's block; the blocks (8 or 16)
 * as constants for the inlined loops.
 */
static void im2col(const struct dt_conv_geom *g, const struct gemm_work *w, const float *x, int64_t p0, int64_t p1,
		   float *col)
{
	if (w->by_value)
		im2col_by_value(g, w, x, p0, p1, col);
	else if (g->x_layout == DT_LAYOUT_NHWC)
		im2col_cw(g, w, x, p0, p1, col, g->in_c);
	else if (g->block == 8)
		im2col_cw(g, w, x, p0, p1, col, 8);
	else
		im2col_cw(g, w, x, p0, p1, col, 16);
}

/*
 * dy's rows [p0, p1) as sgemm reads them, *ld floats apart: in place when
 * NHWC with rows sgemm reads fast, else copied to buf.
 */
static const float *dy_rows(const struct dt_conv_geom *g, const struct gemm_work *w, const float *dy, int64_t p0,
			    int64_t p1, float *buf, int64_t *ld)
{
	if (g->y_layout == DT_LAYOUT_NHWC && w->ld_dy == g->out_c) {
		*ld = g->out_c;
		return dy + p0 * g->out_c;
	}
	if (g->y_layout == DT_LAYOUT_NHWC)
		dy_copy_cw(g, w, dy, p0, p1, buf, g->out_c);
	else if (g->block == 8)
		dy_copy_cw(g, w, dy, p0, p1, buf, 8);
	else
		dy_copy_cw(g, w, dy, p0, p1, buf, 16);
	*ld = w->ld_dy;
	return buf;
}

void dt_cpu_conv_gemm_backward_weights(const struct dt_conv_geom *g, int n, int threads, const float *x,
				       const float *dy, float *dw, float *db, float *work)
{
	struct gemm_work w = gemm_work(g);
	int64_t positions = (int64_t)n * g->out_h * g->out_w, chunks = (positions + CHUNK - 1) / CHUNK;
	int64_t sum_floats = (w.kk + 1) * g->out_c;
	int nt = threads < omp_get_max_threads() ? threads : omp_get_max_threads();

	DT_ASSERT(dt_conv_groups(g) == 1 && threads >= 1);
	DT_ASSERT((g->x_layout == DT_LAYOUT_NHWC && g->y_layout == DT_LAYOUT_NHWC) || g->block == 8 || g->block == 16);
	if (nt > chunks)
		nt = chunks > 0 ? (int)chunks : 1;
#pragma omp parallel num_threads(nt)
	{
		int t = omp_get_thread_num();
		float *col = work + t * w.floats, *buf = col + w.col_floats, *sum = buf + CHUNK * w.ld_dy;
		int64_t first = chunks * t / nt, last = chunks * (t + 1) / nt;
		if (first == last)
			memset(sum, 0, (size_t)sum_floats * sizeof(float));
		for (int64_t c = first; c < last; c++) {
			int64_t p0 = c * CHUNK, p1 = p0 + CHUNK < positions ? p0 + CHUNK : positions;
			int64_t ld;
			const float *rows;
			im2col(g, &w, x, p0, p1, col);
			rows = dy_rows(g, &w, dy, p0, p1, buf, &ld);
			/* sum (kk + 1, out_c) += col^T (kk + 1, rows) dy (rows, out_c); the first chunk sets it */
			DT_DNNL_CHECK(dnnl_sgemm(w.by_value ? 'N' : 'T', 'N', w.kk + 1, g->out_c, p1 - p0, 1.0f, col,
						 w.ld_col, rows, ld, c == first ? 0.0f : 1.0f, sum, g->out_c));
		}
	}
	/* dw, then db, from the threads' sums, added in thread order */
	for (int64_t i = 0; i < sum_floats; i++) {
		float s = 0;
		for (int t = 0; t < nt; t++)
			s += work[t * w.floats + w.col_floats + CHUNK * w.ld_dy + i];
		if (i < w.kk * g->out_c)
			dw[i] = s;
		else if (db)
			db[i - w.kk * g->out_c] = s;
	}
}
