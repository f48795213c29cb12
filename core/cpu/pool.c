/*
 * The CPU backend's pooling plans (max and average, over NHWC or channel
 * blocks, either layout in and either out: core/op_types.h), by hand, not
 * on oneDNN: on an AVX2 machine oneDNN 2.6's max pooling with a workspace
 * (training) took 13-14 ms for Keras' MNIST CNN pool (batch 128, 24x24x64,
 * 2x2), its backward 10 ms; these loops 3 and 2.6 ms. The workspace holds,
 * per output, which window position won, or DT_POOL_NONE where a window of
 * relu's output has no positive value (dt_pool_geom.after_relu): the backward
 * then routes nothing there, without a pass of relu's derivative over dy
 * (fashion_cnn's pooling, 1 thread, Zen 4, old and new binaries alternating:
 * backward 2.42-3.05 -> 1.84-2.05 ms, forward unchanged at 3.0-3.5).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu/ops_cpu.h"

#define POOL_PAR_MIN 32768

struct pool_plan {
	struct dt_cpu_plan_head head;
	int max_batch;
	struct dt_pool_geom g;
	uint16_t *argmax; /* window positions where y is (its layout), max pooling only */
	int (*cover)[2];  /* in_h rows then in_w columns: the outputs whose windows hold each (pool_covering) */
	int trained_n;    /* batch size of the last training forward, 0: none yet */
};

/* Floor of the output size, as Keras computes it from the padding it chose. */
static int64_t out_size(int in, int k, int stride, int pad_lo, int pad_hi)
{
	int64_t span = (int64_t)in + pad_lo + pad_hi - k;
	return span < 0 ? 0 : span / stride + 1;
}

/* The outputs whose windows hold input index i: [*lo, *hi). */
static void pool_covering(int i, int stride, int pad, int k, int out, int *lo, int *hi)
{
	int64_t a = (int64_t)i + pad - k + 1; /* the first output's window starts at or before i: o*stride >= a */
	int64_t last = ((int64_t)i + pad) / stride + 1;
	*lo = a <= 0 ? 0 : (int)((a + stride - 1) / stride);
	*hi = last < out ? (int)last : out;
}

struct dt_plan *dt_cpu_plan_pool(struct dt_device dev, const struct dt_pool_geom *g, int max_batch)
{
	struct pool_plan *p = dt_calloc(1, sizeof(*p));
	DT_ASSERT(dev.kind == DT_DEVICE_CPU);
	DT_ASSERT(g->kind == DT_POOL_MAX || g->kind == DT_POOL_AVG);
	DT_ASSERT(g->c > 0 && g->kh > 0 && g->kw > 0 && g->stride_h > 0 && g->stride_w > 0);
	DT_ASSERT(g->kind == DT_POOL_AVG || (int64_t)g->kh * g->kw <= DT_POOL_MAX_WINDOW);
	/* A window of padding alone would have no max and no mean. */
	DT_ASSERT(g->pad_top >= 0 && g->pad_top < g->kh && g->pad_bottom >= 0 && g->pad_bottom < g->kh);
	DT_ASSERT(g->pad_left >= 0 && g->pad_left < g->kw && g->pad_right >= 0 && g->pad_right < g->kw);
	DT_ASSERT(g->out_h > 0 && g->out_h == out_size(g->in_h, g->kh, g->stride_h, g->pad_top, g->pad_bottom));
	DT_ASSERT(g->out_w > 0 && g->out_w == out_size(g->in_w, g->kw, g->stride_w, g->pad_left, g->pad_right));
	DT_ASSERT(max_batch > 0);
	p->head.plan.backend = &dt_cpu_backend;
	p->head.kind = DT_CPU_PLAN_POOL;
	p->max_batch = max_batch;
	p->g = *g;
	if (g->kind == DT_POOL_MAX)
		p->argmax = dt_calloc((size_t)max_batch * g->out_h * g->out_w * g->c, sizeof(uint16_t));
	/* Looked up, not worked out per input pixel: two divisions a pixel (idiv) */
	p->cover = dt_calloc((size_t)g->in_h + g->in_w, sizeof(*p->cover));
	for (int i = 0; i < g->in_h; i++)
		pool_covering(i, g->stride_h, g->pad_top, g->kh, g->out_h, &p->cover[i][0], &p->cover[i][1]);
	for (int i = 0; i < g->in_w; i++)
		pool_covering(i, g->stride_w, g->pad_left, g->kw, g->out_w, &p->cover[g->in_h + i][0],
			      &p->cover[g->in_h + i][1]);
	return &p->head.plan;
}

static int pool_batch(const struct pool_plan *p, const struct dt_tensor *x, const struct dt_tensor *y)
{
	const struct dt_pool_geom *g = &p->g;
	int n = x->shape.dim[0];
	DT_ASSERT(x->shape.ndim >= 1 && y->shape.ndim >= 1 && y->shape.dim[0] == n);
	DT_ASSERT(n >= 0 && n <= p->max_batch);
	DT_ASSERT(dt_tensor_count(x) == (int64_t)n * g->in_h * g->in_w * g->c);
	DT_ASSERT(dt_tensor_count(y) == (int64_t)n * g->out_h * g->out_w * g->c);
	return n;
}

/* The channels the loops take at once: a block where either side is BLOCKED, else every channel. */
static int group_width(const struct dt_pool_geom *g)
{
	return g->x_layout == DT_LAYOUT_BLOCKED || g->y_layout == DT_LAYOUT_BLOCKED ? g->block : g->c;
}

/* The window positions inside the input: [*lo, *hi) of the kernel's, for output index o. */
static void pool_window(int o, int stride, int pad, int k, int in, int *lo, int *hi)
{
	int64_t start = (int64_t)o * stride - pad;
	*lo = start < 0 ? (int)-start : 0;
	*hi = start + k > in ? (int)(in - start) : k;
}

/*
 * Eight channels in one value of GCC's vector types, which the compiler
 * lowers to the ISA's vectors. max_run keeps a run's max and window
 * position in them: written as a select per element of y, GCC if-converted
 * the select into masked stores (vmaskmovps), microcoded on AMD. Zen 3
 * (AVX2), 1 thread, fashion_cnn's 24x24x64 NHWC pooling in `dtrain time`,
 * old and new binaries alternating: forward 3.80-3.92 -> 2.22-2.30 ms,
 * backward (unmax_run, and the plan's cover) 2.17-2.24 -> 1.83 ms.
 */
#define POOL_RUN 8
typedef float pool_vf __attribute__((vector_size(POOL_RUN * sizeof(float))));
typedef int32_t pool_vi __attribute__((vector_size(POOL_RUN * sizeof(int32_t))));
typedef uint16_t pool_vpos __attribute__((vector_size(POOL_RUN * sizeof(uint16_t)))); /* argmax's */

/*
 * Max pooling of POOL_RUN channels at xk (a group's first channel of image
 * b, plus the run's) over the window [i0, i1) x [j0, j1) of output (oh, ow),
 * into yo, and the winning positions into ao where ao.
 */
static inline __attribute__((always_inline)) void max_run(const struct dt_pool_geom *g, const float *xk, int pixel,
							  int oh, int ow, int i0, int i1, int j0, int j1, float *yo,
							  uint16_t *ao)
{
	const int64_t top = (int64_t)oh * g->stride_h - g->pad_top, left = (int64_t)ow * g->stride_w - g->pad_left;
	pool_vf best, v;
	pool_vi won = (pool_vi){ 0 } + (i0 * g->kw + j0);
	memcpy(&best, xk + ((top + i0) * g->in_w + left + j0) * pixel, sizeof(best));
	for (int i = i0; i < i1; i++)
		for (int j = i == i0 ? j0 + 1 : j0; j < j1; j++) {
			memcpy(&v, xk + ((top + i) * g->in_w + left + j) * pixel, sizeof(v));
			pool_vi gt = v > best; /* all ones where v wins */
			best = (pool_vf)((gt & (pool_vi)v) | (~gt & (pool_vi)best));
			won = (gt & (i * g->kw + j)) | (~gt & won);
		}
	memcpy(yo, &best, sizeof(best));
	if (!ao)
		return;
	if (g->after_relu) {
		pool_vi pos = best > (pool_vf){ 0 };
		won = (pos & won) | (~pos & DT_POOL_NONE);
	}
	pool_vpos pos16 = __builtin_convertvector(won, pool_vpos);
	memcpy(ao, &pos16, sizeof(pos16));
}

/*
 * One output pixel of image b: its ng groups of cw channels, from the window
 * of x at (oh, ow), into y (and the window positions into argmax, when
 * training max pooling), y0 the pixel's offset in y. Max pooling takes runs
 * of POOL_RUN channels in max_run, and the channels left over below.
 * Inlined with cw a constant 16 or 8 where the layout is blocked (AVX-512's
 * block, AVX2's): no channels are left over.
 */
static inline __attribute__((always_inline)) void pool_pixel(const struct dt_pool_geom *g, const float *xb,
							     struct dt_cpu_strides xs, struct dt_cpu_strides ys, int oh,
							     int ow, float *y, uint16_t *argmax, int64_t y0, int ng, int cw)
{
	const int max = g->kind == DT_POOL_MAX;
	int i0, i1, j0, j1, first = 1, c0 = 0;
	pool_window(oh, g->stride_h, g->pad_top, g->kh, g->in_h, &i0, &i1);
	pool_window(ow, g->stride_w, g->pad_left, g->kw, g->in_w, &j0, &j1);
	if (max) {
		for (int k = 0; k < ng; k++)
			for (int c = 0; c + POOL_RUN <= cw; c += POOL_RUN)
				max_run(g, xb + k * xs.group + c, xs.pixel, oh, ow, i0, i1, j0, j1,
					y + y0 + k * ys.group + c, argmax ? argmax + y0 + k * ys.group + c : NULL);
		c0 = cw - cw % POOL_RUN;
		if (c0 == cw)
			return;
	}
	for (int i = i0; i < i1; i++)
		for (int j = j0; j < j1; j++) {
			int64_t ih = (int64_t)oh * g->stride_h - g->pad_top + i;
			int64_t iw = (int64_t)ow * g->stride_w - g->pad_left + j;
			uint16_t at = max ? (uint16_t)(i * g->kw + j) : 0;
			for (int k = 0; k < ng; k++) {
				const float *xi = xb + k * xs.group + (ih * g->in_w + iw) * xs.pixel;
				float *yo = y + y0 + k * ys.group;
				uint16_t *ao = argmax ? argmax + y0 + k * ys.group : NULL;
				if (first) {
					for (int ch = c0; ch < cw; ch++)
						yo[ch] = xi[ch];
					if (ao)
						for (int ch = c0; ch < cw; ch++)
							ao[ch] = at;
				} else if (!max) {
#pragma omp simd
					for (int ch = c0; ch < cw; ch++)
						yo[ch] += xi[ch];
				} else if (ao) {
#pragma omp simd
					for (int ch = c0; ch < cw; ch++) {
						int gt = xi[ch] > yo[ch];
						yo[ch] = gt ? xi[ch] : yo[ch];
						ao[ch] = gt ? at : ao[ch];
					}
				} else {
#pragma omp simd
					for (int ch = c0; ch < cw; ch++)
						yo[ch] = xi[ch] > yo[ch] ? xi[ch] : yo[ch];
				}
			}
			first = 0;
		}
	if (argmax && g->after_relu)
		for (int k = 0; k < ng; k++) {
			const float *yo = y + y0 + k * ys.group;
			uint16_t *ao = argmax + y0 + k * ys.group;
#pragma omp simd
			for (int ch = c0; ch < cw; ch++)
				ao[ch] = yo[ch] > 0 ? ao[ch] : DT_POOL_NONE;
		}
	if (!max) {
		float inv = 1.0f / (float)((int64_t)(i1 - i0) * (j1 - j0));
		for (int k = 0; k < ng; k++) {
			float *yo = y + y0 + k * ys.group;
#pragma omp simd
			for (int ch = 0; ch < cw; ch++)
				yo[ch] *= inv;
		}
	}
}

void dt_cpu_pool_forward(struct dt_plan *pl, const struct dt_tensor *xt, struct dt_tensor *yt, int training)
{
	struct pool_plan *p = (struct pool_plan *)pl;
	const struct dt_pool_geom *g = &p->g;
	const int n = pool_batch(p, xt, yt), c = g->c, cw = group_width(g), ng = c / cw;
	const struct dt_cpu_strides xs = dt_cpu_strides_of(g->x_layout, (int64_t)g->in_h * g->in_w, c, cw);
	const struct dt_cpu_strides ys = dt_cpu_strides_of(g->y_layout, (int64_t)g->out_h * g->out_w, c, cw);
	uint16_t *argmax = g->kind == DT_POOL_MAX && training ? p->argmax : NULL; /* where y is */

	DT_ASSERT(p->head.kind == DT_CPU_PLAN_POOL);
#pragma omp parallel for collapse(2) if ((int64_t)n * g->out_h * g->out_w * c > POOL_PAR_MIN)
	for (int b = 0; b < n; b++)
		for (int oh = 0; oh < g->out_h; oh++) {
			const float *xb = xt->data + b * xs.image;
			for (int ow = 0; ow < g->out_w; ow++) {
				int64_t y0 = b * ys.image + ((int64_t)oh * g->out_w + ow) * ys.pixel;
				if (cw == 16)
					pool_pixel(g, xb, xs, ys, oh, ow, yt->data, argmax, y0, ng, 16);
				else if (cw == 8)
					pool_pixel(g, xb, xs, ys, oh, ow, yt->data, argmax, y0, ng, 8);
				else
					pool_pixel(g, xb, xs, ys, oh, ow, yt->data, argmax, y0, ng, cw);
			}
		}
	if (training)
		p->trained_n = n;
}

/*
 * dx of POOL_RUN channels at dxi, max pooling, from the output at dyo and ao
 * (its window positions) whose window position at holds the input: dy where
 * the input won, else 0; stored by the first output that covers the input,
 * added by the next.
 */
static inline __attribute__((always_inline)) void unmax_run(const float *dyo, const uint16_t *ao, int at,
							    int first, float *dxi)
{
	pool_vf d, sum;
	pool_vpos won;
	memcpy(&d, dyo, sizeof(d));
	memcpy(&won, ao, sizeof(won));
	d = (pool_vf)((__builtin_convertvector(won, pool_vi) == at) & (pool_vi)d);
	if (!first) {
		memcpy(&sum, dxi, sizeof(sum));
		d += sum;
	}
	memcpy(dxi, &d, sizeof(d));
}

/*
 * One input pixel (ih, iw) of image b: its ng groups of cw channels of dx,
 * at x0, from the outputs whose windows hold it (rows and cols: the plan's
 * cover of ih and iw). Max pooling takes runs of POOL_RUN channels in
 * unmax_run, and the channels left over below. Inlined as pool_pixel.
 */
static inline __attribute__((always_inline)) void unpool_pixel(const struct dt_pool_geom *g, const float *dy,
							       const uint16_t *argmax, struct dt_cpu_strides xs,
							       struct dt_cpu_strides ys, int b, int ih, int iw,
							       const int *rows, const int *cols, float *dx, int64_t x0,
							       int ng, int cw)
{
	const int max = g->kind == DT_POOL_MAX, c0 = max ? cw - cw % POOL_RUN : 0;
	const int oh0 = rows[0], oh1 = rows[1], ow0 = cols[0], ow1 = cols[1];
	int first = 1;
	for (int k = 0; k < ng; k++)
		for (int ch = oh0 < oh1 && ow0 < ow1 ? c0 : 0; ch < cw; ch++)
			dx[x0 + k * xs.group + ch] = 0;
	for (int oh = oh0; oh < oh1; oh++)
		for (int ow = ow0; ow < ow1; ow++) {
			int64_t o = b * ys.image + ((int64_t)oh * g->out_w + ow) * ys.pixel;
			int i = (int)(ih - ((int64_t)oh * g->stride_h - g->pad_top));
			int j = (int)(iw - ((int64_t)ow * g->stride_w - g->pad_left));
			float inv = 0;
			if (!max) {
				int i0, i1, j0, j1;
				pool_window(oh, g->stride_h, g->pad_top, g->kh, g->in_h, &i0, &i1);
				pool_window(ow, g->stride_w, g->pad_left, g->kw, g->in_w, &j0, &j1);
				inv = 1.0f / (float)((int64_t)(i1 - i0) * (j1 - j0));
			}
			const uint16_t at = (uint16_t)(i * g->kw + j);
			for (int k = 0; k < ng; k++) {
				const float *dyo = dy + o + k * ys.group;
				float *dxi = dx + x0 + k * xs.group;
				if (max) {
					const uint16_t *ao = argmax + o + k * ys.group;
					if (first)
						for (int c = 0; c < c0; c += POOL_RUN)
							unmax_run(dyo + c, ao + c, at, 1, dxi + c);
					else
						for (int c = 0; c < c0; c += POOL_RUN)
							unmax_run(dyo + c, ao + c, at, 0, dxi + c);
#pragma omp simd
					for (int ch = c0; ch < cw; ch++)
						dxi[ch] += ao[ch] == at ? dyo[ch] : 0.0f;
				} else {
#pragma omp simd
					for (int ch = 0; ch < cw; ch++)
						dxi[ch] += dyo[ch] * inv;
				}
			}
			first = 0;
		}
}

/*
 * Each input element gathers from the outputs whose windows hold it: every dx
 * element is written once, no thread writes another's.
 */
void dt_cpu_pool_backward(struct dt_plan *pl, const struct dt_tensor *dyt, struct dt_tensor *dxt)
{
	struct pool_plan *p = (struct pool_plan *)pl;
	const struct dt_pool_geom *g = &p->g;
	const int n = pool_batch(p, dxt, dyt), c = g->c, cw = group_width(g), ng = c / cw;
	const struct dt_cpu_strides xs = dt_cpu_strides_of(g->x_layout, (int64_t)g->in_h * g->in_w, c, cw);
	const struct dt_cpu_strides ys = dt_cpu_strides_of(g->y_layout, (int64_t)g->out_h * g->out_w, c, cw);

	DT_ASSERT(p->head.kind == DT_CPU_PLAN_POOL);
	/* Max pooling reads the window positions its training forward of this batch left. */
	DT_ASSERT(g->kind != DT_POOL_MAX || n == 0 || p->trained_n == n);
#pragma omp parallel for collapse(2) if ((int64_t)n * g->in_h * g->in_w * c > POOL_PAR_MIN)
	for (int b = 0; b < n; b++)
		for (int ih = 0; ih < g->in_h; ih++)
			for (int iw = 0; iw < g->in_w; iw++) {
				int64_t x0 = b * xs.image + ((int64_t)ih * g->in_w + iw) * xs.pixel;
				const int *rows = p->cover[ih], *cols = p->cover[g->in_h + iw];
				if (cw == 16)
					unpool_pixel(g, dyt->data, p->argmax, xs, ys, b, ih, iw, rows, cols, dxt->data, x0,
						     ng, 16);
				else if (cw == 8)
					unpool_pixel(g, dyt->data, p->argmax, xs, ys, b, ih, iw, rows, cols, dxt->data, x0,
						     ng, 8);
				else
					unpool_pixel(g, dyt->data, p->argmax, xs, ys, b, ih, iw, rows, cols, dxt->data, x0,
						     ng, cw);
			}
}

void dt_cpu_pool_plan_free(struct dt_plan *pl)
{
	struct pool_plan *p = (struct pool_plan *)pl;
	DT_ASSERT(p->head.kind == DT_CPU_PLAN_POOL);
	free(p->argmax);
	free(p->cover);
	free(p);
}
