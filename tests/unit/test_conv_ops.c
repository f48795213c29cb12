/*
 * The CPU backend's plans (convolution, pooling, batch normalization) against
 * naive loops over NHWC tensors and HWIO kernels in double precision, over
 * many geometries, and over batch sizes below the plan's largest (each one a
 * primitive set of its own in the plan's cache).
 */
#include <math.h>

#include "helpers.h"

#include "core/ops.h"
#include "core/cpu/ops_cpu.h"
#include "core/rng.h"

#define TOL 1e-4

static float *rnd(int64_t n, uint64_t seed)
{
	struct dt_rng r;
	float *x = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
	dt_rng_seed(&r, seed, 7);
	for (int64_t i = 0; i < n; i++)
		x[i] = (float)(2 * dt_rng_uniform(&r) - 1);
	return x;
}

static double *zeros_d(int64_t n) { return calloc((size_t)(n > 0 ? n : 1), sizeof(double)); }

static struct dt_tensor t4(float *d, int n, int h, int w, int c)
{
	return (struct dt_tensor){ d, { 4, { n, h, w, c } }, DT_CPU };
}

static struct dt_tensor t1(float *d, int n) { return (struct dt_tensor){ d, { 1, { n } }, DT_CPU }; }

/*
 * got ~ want element by element: |got - want| <= TOL * (|want| + mean |want|),
 * relative where values are large, against the tensor's scale where a sum
 * cancels to near zero.
 */
static void assert_close(const float *got, const double *want, int64_t n, const char *what)
{
	double scale = 0;
	for (int64_t i = 0; i < n; i++)
		scale += fabs(want[i]);
	scale = n ? scale / n : 0;
	for (int64_t i = 0; i < n; i++)
		if (!(fabs(got[i] - want[i]) <= TOL * (fabs(want[i]) + scale) + 1e-12))
			fail_msg("%s[%lld]: got %.8g, want %.8g (scale %.3g)", what, (long long)i, got[i], want[i],
				 scale);
}

/* ---- convolution ---- */

struct conv_case {
	int h, w, c, oc, kh, kw, sh, sw, dh, dw;
	int same; /* Keras padding: 'same' (1) or 'valid' (0) */
};

/* Keras' output size and padding: 'same' pads (out-1)*s + span - in, the odd one at the bottom/right. */
static void keras_pad(int in, int k, int s, int d, int same, int *out, int *lo, int *hi)
{
	int span = (k - 1) * d + 1;
	if (same) {
		int total;
		*out = (in + s - 1) / s;
		total = (*out - 1) * s + span - in;
		total = total > 0 ? total : 0;
		*lo = total / 2;
		*hi = total - *lo;
	} else {
		*out = (in - span) / s + 1;
		*lo = *hi = 0;
	}
}

static struct dt_conv_geom conv_geom(const struct conv_case *k)
{
	struct dt_conv_geom g = { .in_h = k->h, .in_w = k->w, .in_c = k->c, .out_c = k->oc, .kh = k->kh,
				  .kw = k->kw, .stride_h = k->sh, .stride_w = k->sw, .dil_h = k->dh, .dil_w = k->dw };
	keras_pad(k->h, k->kh, k->sh, k->dh, k->same, &g.out_h, &g.pad_top, &g.pad_bottom);
	keras_pad(k->w, k->kw, k->sw, k->dw, k->same, &g.out_w, &g.pad_left, &g.pad_right);
	return g;
}

static const struct conv_case conv_cases[] = {
	/* h   w   c  oc kh kw sh sw dh dw same */
	{ 28, 28, 1, 32, 3, 3, 1, 1, 1, 1, 0 },  /* Keras' MNIST CNN, first conv */
	{ 12, 12, 32, 64, 3, 3, 1, 1, 1, 1, 0 }, /* its second, smaller */
	{ 10, 12, 8, 16, 3, 3, 1, 1, 1, 1, 1 },  /* same, stride 1 */
	{ 8, 6, 3, 5, 3, 3, 2, 2, 1, 1, 1 },     /* same, stride 2: pad top 0, bottom 1 */
	{ 9, 7, 3, 5, 3, 3, 2, 2, 1, 1, 1 },     /* same, stride 2: pad 1 and 1 */
	{ 6, 7, 4, 6, 2, 2, 1, 1, 1, 1, 1 },     /* even kernel: pad 0 before, 1 after */
	{ 11, 9, 4, 6, 5, 5, 2, 2, 1, 1, 0 },    /* 5x5 valid, stride 2 */
	{ 13, 14, 6, 7, 5, 5, 1, 1, 1, 1, 1 },   /* 5x5 same */
	{ 12, 10, 6, 7, 3, 3, 1, 1, 2, 2, 1 },   /* dilation 2, same */
	{ 12, 11, 16, 8, 3, 3, 1, 1, 2, 2, 0 },  /* dilation 2, valid */
	{ 9, 13, 5, 4, 1, 1, 1, 1, 1, 1, 0 },    /* 1x1 */
	{ 9, 13, 16, 32, 1, 1, 2, 2, 1, 1, 1 },  /* 1x1, stride 2 */
	{ 7, 11, 16, 8, 3, 5, 1, 1, 1, 1, 1 },   /* rectangular kernel, same */
	{ 7, 15, 3, 4, 1, 7, 1, 2, 1, 1, 0 },    /* 1x7, strides 1 and 2 */
	{ 5, 5, 2, 3, 5, 5, 1, 1, 1, 1, 0 },     /* the kernel covers the input: 1x1 out */
	{ 6, 6, 32, 32, 3, 3, 1, 1, 1, 1, 1 },   /* VGG-style same, blocked channels */
	{ 4, 20, 24, 40, 3, 3, 2, 1, 1, 1, 1 },  /* wide input, stride 2 by 1 */
	/* 32 channels in and more: the weight gradient on sgemm where the CPU runs AVX2 (conv_gemm.c) */
	{ 9, 9, 32, 16, 3, 3, 2, 2, 1, 1, 1 },   /* same, stride 2 */
	{ 10, 9, 32, 8, 3, 3, 1, 1, 2, 2, 1 },   /* dilation 2, same */
	{ 8, 9, 48, 8, 5, 3, 1, 1, 1, 1, 1 },    /* rectangular kernel, same */
	{ 7, 8, 40, 12, 1, 1, 2, 2, 1, 1, 0 },   /* 1x1, stride 2, channels not a block's multiple */
	{ 4, 5, 32, 512, 3, 3, 1, 1, 1, 1, 1 },  /* dy's rows 2 KiB apart: copied to longer ones */
	{ 3, 4, 511, 8, 1, 1, 1, 1, 1, 1, 0 },   /* 511 patch values and the bias column: 2 KiB rows */
};

static int64_t conv_x_count(const struct dt_conv_geom *g, int n) { return (int64_t)n * g->in_h * g->in_w * g->in_c; }
static int64_t conv_y_count(const struct dt_conv_geom *g, int n) { return (int64_t)n * g->out_h * g->out_w * g->out_c; }
static int64_t conv_w_count(const struct dt_conv_geom *g) { return (int64_t)g->kh * g->kw * g->in_c * g->out_c; }

/* Calls f(input index, output index, weight index) for every product of the convolution. */
#define CONV_FOR_EACH(g, n, body) \
	for (int b_ = 0; b_ < (n); b_++) \
		for (int oh = 0; oh < (g)->out_h; oh++) \
			for (int ow = 0; ow < (g)->out_w; ow++) \
				for (int i_ = 0; i_ < (g)->kh; i_++) \
					for (int j_ = 0; j_ < (g)->kw; j_++) { \
						int ih = oh * (g)->stride_h - (g)->pad_top + i_ * (g)->dil_h; \
						int iw = ow * (g)->stride_w - (g)->pad_left + j_ * (g)->dil_w; \
						if (ih < 0 || ih >= (g)->in_h || iw < 0 || iw >= (g)->in_w) \
							continue; \
						for (int ic = 0; ic < (g)->in_c; ic++) \
							for (int oc = 0; oc < (g)->out_c; oc++) { \
								int64_t xi = (((int64_t)b_ * (g)->in_h + ih) * (g)->in_w + iw) * (g)->in_c + ic; \
								int64_t yi = (((int64_t)b_ * (g)->out_h + oh) * (g)->out_w + ow) * (g)->out_c + oc; \
								int64_t wi = (((int64_t)i_ * (g)->kw + j_) * (g)->in_c + ic) * (g)->out_c + oc; \
								body; \
							} \
					}

static void ref_conv_forward(const struct dt_conv_geom *g, int n, const float *x, const float *w, const float *b,
			     double *y)
{
	for (int64_t i = 0; i < conv_y_count(g, n); i++)
		y[i] = b ? b[i % g->out_c] : 0;
	CONV_FOR_EACH(g, n, y[yi] += (double)x[xi] * w[wi]);
}

static void ref_conv_backward(const struct dt_conv_geom *g, int n, const float *x, const float *w, const float *dy,
			      double *dw, double *db, double *dx)
{
	for (int64_t i = 0; i < conv_y_count(g, n); i++)
		db[i % g->out_c] += dy[i];
	CONV_FOR_EACH(g, n, {
		dw[wi] += (double)x[xi] * dy[yi];
		dx[xi] += (double)w[wi] * dy[yi];
	});
}

/* A geometry's activation on reference outputs: relu, or none. */
static void ref_relu(const struct dt_conv_geom *g, double *y, int64_t n)
{
	for (int64_t i = 0; g->act == DT_ACT_RELU && i < n; i++)
		y[i] = y[i] > 0 ? y[i] : 0;
}

/*
 * Forward (with and without bias) and backward of one geometry at batch n of
 * a plan for max_batch. bf16: the plan was made under precision bf16, so the
 * references multiply x, w and dy rounded to bfloat16 (the plan gets them
 * unrounded: a plan that stayed float32 fails) and the plan's float32
 * accumulation must match them to TOL. A geometry with act relu: y is
 * relu's, and backward gets dy masked by y, as a layer gives it.
 */
static void check_conv(struct dt_plan *p, const struct dt_conv_geom *g, int n, uint64_t seed, const char *name,
		       int bf16)
{
	int64_t nx = conv_x_count(g, n), ny = conv_y_count(g, n), nw = conv_w_count(g);
	float *x = rnd(nx, seed), *w = rnd(nw, seed + 1), *b = rnd(g->out_c, seed + 2), *dy = rnd(ny, seed + 3);
	float *y = rnd(ny, 0), *dw = rnd(nw, 0), *db = rnd(g->out_c, 0), *dx = rnd(nx, 0);
	float *xr = dt_test_bf16_copy(x, nx, bf16), *wr = dt_test_bf16_copy(w, nw, bf16);
	float *dyr = dt_test_bf16_copy(dy, ny, bf16);
	double *ry = zeros_d(ny), *rdw = zeros_d(nw), *rdb = zeros_d(g->out_c), *rdx = zeros_d(nx);
	struct dt_tensor X = t4(x, n, g->in_h, g->in_w, g->in_c), Y = t4(y, n, g->out_h, g->out_w, g->out_c);
	struct dt_tensor W = t4(w, g->kh, g->kw, g->in_c, g->out_c), B = t1(b, g->out_c);
	struct dt_tensor DY = t4(dy, n, g->out_h, g->out_w, g->out_c), DX = t4(dx, n, g->in_h, g->in_w, g->in_c);
	struct dt_tensor DW = t4(dw, g->kh, g->kw, g->in_c, g->out_c), DB = t1(db, g->out_c);
	char what[160];

	snprintf(what, sizeof what, "%s n=%d y", name, n);
	dt_op_conv_forward(p, &X, &W, &B, &Y);
	ref_conv_forward(g, n, xr, wr, b, ry);
	ref_relu(g, ry, ny);
	assert_close(y, ry, ny, what);
	snprintf(what, sizeof what, "%s n=%d y (no bias)", name, n);
	dt_op_conv_forward(p, &X, &W, NULL, &Y);
	ref_conv_forward(g, n, xr, wr, NULL, ry);
	ref_relu(g, ry, ny);
	assert_close(y, ry, ny, what);

	for (int64_t i = 0; i < ny; i++)
		if (g->act == DT_ACT_RELU && !(y[i] > 0))
			dy[i] = dyr[i] = 0;
	ref_conv_backward(g, n, xr, wr, dyr, rdw, rdb, rdx);
	dt_op_conv_backward(p, &X, &W, &DY, &DW, &DB, &DX);
	snprintf(what, sizeof what, "%s n=%d dw", name, n);
	assert_close(dw, rdw, nw, what);
	snprintf(what, sizeof what, "%s n=%d db", name, n);
	assert_close(db, rdb, g->out_c, what);
	snprintf(what, sizeof what, "%s n=%d dx", name, n);
	assert_close(dx, rdx, nx, what);

	/* dw is overwritten, not accumulated; without dx and db (a first layer without bias) */
	for (int64_t i = 0; i < nw; i++)
		dw[i] = 1e6f;
	dt_op_conv_backward(p, &X, &W, &DY, &DW, NULL, NULL);
	snprintf(what, sizeof what, "%s n=%d dw (no dx, db)", name, n);
	assert_close(dw, rdw, nw, what);

	free(x), free(w), free(b), free(dy), free(y), free(dw), free(db), free(dx);
	free(xr), free(wr), free(dyr);
	free(ry), free(rdw), free(rdb), free(rdx);
}

/*
 * Every geometry at batch 3, 1 and 3 again; bf16: plans made under precision
 * bf16 (see check_conv); act: the plans' activation.
 */
static void conv_geometries(int bf16, enum dt_activation act)
{
	enum { MAX_BATCH = 3 };
	for (size_t i = 0; i < sizeof conv_cases / sizeof conv_cases[0]; i++) {
		const struct conv_case *k = &conv_cases[i];
		struct dt_conv_geom g = conv_geom(k);
		struct dt_plan *p;
		g.act = act;
		p = dt_plan_conv(DT_CPU, &g, MAX_BATCH);
		char name[96];
		snprintf(name, sizeof name, "conv %dx%dx%d->%dx%dx%d k%dx%d s%d,%d d%d,%d %s", k->h, k->w, k->c, g.out_h,
			 g.out_w, k->oc, k->kh, k->kw, k->sh, k->sw, k->dh, k->dw, k->same ? "same" : "valid");
		check_conv(p, &g, MAX_BATCH, 100 + 10 * i, name, bf16);
		check_conv(p, &g, 1, 200 + 10 * i, name, bf16);
		check_conv(p, &g, MAX_BATCH, 300 + 10 * i, name, bf16); /* back to a cached size */
		dt_plan_free(p);
	}
}

static void test_conv_geometries(void **state) { conv_geometries(0, DT_ACT_LINEAR); }

/*
 * Geometries whose weight gradient runs on sgemm in chunks of 512 output
 * positions (conv_gemm.c, where the CPU runs AVX2), at batches that make
 * one chunk and several, at 1, 2 and 3 threads: a thread without a chunk,
 * a short last chunk, the threads' sums added.
 */
static void test_conv_gemm_threads(void **state)
{
	static const struct conv_case cases[] = {
		{ 28, 28, 32, 16, 3, 3, 1, 1, 1, 1, 1 }, /* 784 positions a sample */
		{ 13, 11, 32, 24, 3, 3, 1, 1, 1, 1, 0 }, /* 99 */
		{ 20, 20, 32, 8, 3, 3, 1, 1, 2, 2, 1 },  /* dilated, padded: a pixel at a time */
	};
	(void)state;
	for (int threads = 1; threads <= 3; threads++) {
		dt_ops_set_threads(threads);
		for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
			struct dt_conv_geom g = conv_geom(&cases[i]);
			struct dt_plan *p = dt_plan_conv(DT_CPU, &g, 6);
			char name[96];
			snprintf(name, sizeof name, "conv %dx%dx%d->%d, %d threads", g.in_h, g.in_w, g.in_c, g.out_c,
				 threads);
			check_conv(p, &g, 6, 500 + 10 * i, name, 0);
			check_conv(p, &g, 1, 600 + 10 * i, name, 0);
			dt_plan_free(p);
		}
	}
	dt_ops_set_threads(1);
}

/* NHWC src (n images of `pixels` pixels, c channels) into dst in channel blocks of b. */
static void to_blocks(const float *src, float *dst, int n, int64_t pixels, int c, int b)
{
	for (int i = 0; i < n; i++)
		for (int64_t px = 0; px < pixels; px++)
			for (int ch = 0; ch < c; ch++)
				dst[((i * (int64_t)(c / b) + ch / b) * pixels + px) * b + ch % b] =
					src[(i * pixels + px) * c + ch];
}

/*
 * The weight gradient on sgemm (conv_gemm.c) called directly, so on every
 * CPU whichever its plans take: x and dy in NHWC and in blocks of 8 and 16,
 * at 1, 2 and 3 threads, at batches of several chunks and of one, with and
 * without db; few channels too: NHWC, and a first layer's NHWC x with dy in
 * blocks, which the plans on AVX2 take here (dt_cpu_conv_gemm_weights).
 */
static void test_conv_gemm_direct(void **state)
{
	static const struct conv_case cases[] = {
		{ 28, 28, 32, 16, 3, 3, 1, 1, 1, 1, 1 }, /* 784 positions a sample: several chunks */
		{ 20, 20, 32, 8, 3, 3, 1, 1, 2, 2, 1 },  /* dilated, padded */
		{ 9, 9, 16, 32, 3, 3, 2, 2, 1, 1, 1 },   /* stride 2 */
		{ 7, 8, 48, 16, 5, 3, 1, 1, 1, 1, 1 },   /* rectangular kernel */
		{ 10, 10, 3, 8, 3, 3, 1, 1, 1, 1, 0 },   /* 3 channels: NHWC x, dy NHWC or in blocks */
		{ 28, 28, 1, 32, 3, 3, 1, 1, 1, 1, 0 },  /* a grey image's first layer, as fashion_cnn's */
		{ 9, 8, 3, 16, 3, 3, 2, 2, 1, 1, 1 },    /* an RGB image's, same, stride 2 */
		{ 11, 12, 2, 8, 3, 3, 1, 2, 2, 2, 1 },   /* 2 channels, dilated, same, strides 1 and 2 */
	};
	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		for (int b = 0; b <= 16; b += 8) {
			struct dt_conv_geom g = conv_geom(&cases[i]);
			int n = 4, x_blocked = b && g.in_c % b == 0;
			if (b && g.out_c % b)
				continue;
			int64_t nx = conv_x_count(&g, n), ny = conv_y_count(&g, n), nw = conv_w_count(&g);
			float *x = rnd(nx, 900 + i), *dy = rnd(ny, 950 + i), *xb = rnd(nx, 0), *dyb = rnd(ny, 0);
			float *w = rnd(nw, 990 + i), *dw = rnd(nw, 0), *db = rnd(g.out_c, 0);
			float *work = rnd(dt_cpu_conv_gemm_work(&g, 3), 0);
			double *rdw = zeros_d(nw), *rdb = zeros_d(g.out_c), *rdx = zeros_d(nx);
			char what[128];
			/* a first layer's few channels stay NHWC in x, its dy in blocks (dt_cpu_conv_gemm_weights) */
			g.x_layout = x_blocked ? DT_LAYOUT_BLOCKED : DT_LAYOUT_NHWC;
			g.y_layout = b ? DT_LAYOUT_BLOCKED : DT_LAYOUT_NHWC;
			g.block = b;
			if (x_blocked)
				to_blocks(x, xb, n, (int64_t)g.in_h * g.in_w, g.in_c, b);
			if (b)
				to_blocks(dy, dyb, n, (int64_t)g.out_h * g.out_w, g.out_c, b);
			ref_conv_backward(&g, n, x, w, dy, rdw, rdb, rdx);
			for (int threads = 1; threads <= 3; threads++) {
				dt_ops_set_threads(threads);
				snprintf(what, sizeof what, "conv %dx%dx%d->%d block %d (x %s), %d threads: dw", g.in_h,
					 g.in_w, g.in_c, g.out_c, b, x_blocked ? "blocked" : "NHWC", threads);
				dt_cpu_conv_gemm_backward_weights(&g, n, threads, x_blocked ? xb : x, b ? dyb : dy, dw, db,
								  work);
				assert_close(dw, rdw, nw, what);
				assert_close(db, rdb, g.out_c, "db");
				for (int64_t k = 0; k < nw; k++)
					dw[k] = 1e6f;
				dt_cpu_conv_gemm_backward_weights(&g, n, threads, x_blocked ? xb : x, b ? dyb : dy, dw, NULL,
								  work);
				assert_close(dw, rdw, nw, what);
			}
			dt_ops_set_threads(1);
			free(x), free(dy), free(xb), free(dyb), free(w), free(dw), free(db), free(work);
			free(rdw), free(rdb), free(rdx);
		}
}

/* A plan's own relu (dt_conv_geom.act, oneDNN's post-op on the CPU), under bf16 too where the CPU has it. */
static void test_conv_relu(void **state)
{
	char why[256];
	conv_geometries(0, DT_ACT_RELU);
	if (!dt_ops_cpu_has_bf16())
		return;
	assert_int_equal(dt_ops_set_cpu_precision(DT_PRECISION_BF16, why, sizeof why), 0);
	conv_geometries(1, DT_ACT_RELU);
	assert_int_equal(dt_ops_set_cpu_precision(DT_PRECISION_FP32, why, sizeof why), 0);
}

/*
 * Precision bf16: where oneDNN's ISA has bfloat16 instructions, every
 * geometry multiplies bfloat16-rounded inputs with float32 accumulation;
 * elsewhere bf16 is refused with the ISA named.
 */
static void test_conv_bf16(void **state)
{
	char why[256];
	if (!dt_ops_cpu_has_bf16()) {
		assert_int_equal(dt_ops_set_cpu_precision(DT_PRECISION_BF16, why, sizeof why), -1);
		assert_non_null(strstr(why, "bfloat16 instructions"));
		assert_non_null(strstr(why, dt_ops_cpu_isa()));
		return;
	}
	assert_int_equal(dt_ops_set_cpu_precision(DT_PRECISION_BF16, why, sizeof why), 0);
	conv_geometries(1, DT_ACT_LINEAR);
	assert_int_equal(dt_ops_set_cpu_precision(DT_PRECISION_FP32, why, sizeof why), 0);
}

/* Keras' padding arithmetic itself, against hand-computed values. */
static void test_conv_keras_padding(void **state)
{
	struct dt_conv_geom g = conv_geom(&(struct conv_case){ 8, 9, 1, 1, 3, 3, 2, 2, 1, 1, 1 });
	assert_int_equal(g.out_h, 4);
	assert_int_equal(g.pad_top, 0);
	assert_int_equal(g.pad_bottom, 1);
	assert_int_equal(g.out_w, 5);
	assert_int_equal(g.pad_left, 1);
	assert_int_equal(g.pad_right, 1);
	g = conv_geom(&(struct conv_case){ 12, 12, 1, 1, 3, 3, 1, 1, 2, 2, 0 });
	assert_int_equal(g.out_h, 8);
}

/* A 2x2 input, 2x2 kernel: one output, every value by hand. */
static void test_conv_by_hand(void **state)
{
	struct dt_conv_geom g = { .in_h = 2, .in_w = 2, .in_c = 1, .out_h = 1, .out_w = 1, .out_c = 2, .kh = 2,
				  .kw = 2, .stride_h = 1, .stride_w = 1, .dil_h = 1, .dil_w = 1 };
	float x[4] = { 1, 2, 3, 4 }, w[8] = { 1, 0, 0, 1, 0, 2, 1, -1 }, b[2] = { 0.5f, -1 }, y[2], dy[2] = { 1, 2 };
	float dw[8], db[2], dx[4];
	struct dt_tensor X = t4(x, 1, 2, 2, 1), W = t4(w, 2, 2, 1, 2), B = t1(b, 2), Y = t4(y, 1, 1, 1, 2);
	struct dt_tensor DY = t4(dy, 1, 1, 1, 2), DW = t4(dw, 2, 2, 1, 2), DB = t1(db, 2), DX = t4(dx, 1, 2, 2, 1);
	struct dt_plan *p = dt_plan_conv(DT_CPU, &g, 1);
	dt_op_conv_forward(p, &X, &W, &B, &Y);
	/* out 0: 1*1 + 2*0 + 3*0 + 4*1 + 0.5; out 1: 1*0 + 2*1 + 3*2 + 4*(-1) - 1 */
	assert_float_equal(y[0], 5.5, 1e-6);
	assert_float_equal(y[1], 3, 1e-6);
	dt_op_conv_backward(p, &X, &W, &DY, &DW, &DB, &DX);
	assert_float_equal(db[0], 1, 1e-6);
	assert_float_equal(db[1], 2, 1e-6);
	assert_float_equal(dw[0], 1, 1e-6); /* x[0] * dy[0] */
	assert_float_equal(dw[7], 8, 1e-6); /* x[3] * dy[1] */
	assert_float_equal(dx[0], 1 * 1 + 0 * 2, 1e-6);
	assert_float_equal(dx[3], 1 * 1 + -1 * 2, 1e-6);
	dt_plan_free(p);
}

/* ---- pooling ---- */

struct pool_case {
	enum dt_pool kind;
	int h, w, c, kh, kw, sh, sw, same;
};

static struct dt_pool_geom pool_geom(const struct pool_case *k)
{
	struct dt_pool_geom g = { .kind = k->kind, .in_h = k->h, .in_w = k->w, .c = k->c, .kh = k->kh, .kw = k->kw,
				  .stride_h = k->sh, .stride_w = k->sw };
	keras_pad(k->h, k->kh, k->sh, 1, k->same, &g.out_h, &g.pad_top, &g.pad_bottom);
	keras_pad(k->w, k->kw, k->sw, 1, k->same, &g.out_w, &g.pad_left, &g.pad_right);
	return g;
}

static const struct pool_case pool_cases[] = {
	{ DT_POOL_MAX, 24, 24, 8, 2, 2, 2, 2, 0 }, /* Keras' MNIST CNN, fewer channels */
	{ DT_POOL_MAX, 7, 8, 5, 3, 3, 2, 2, 1 },   /* same: pads 1,1 and 0,1 */
	{ DT_POOL_MAX, 5, 7, 3, 2, 3, 1, 2, 0 },   /* rectangular */
	{ DT_POOL_MAX, 9, 9, 16, 3, 3, 3, 3, 0 },
	{ DT_POOL_MAX, 6, 5, 4, 1, 1, 2, 2, 0 },   /* 1x1, stride 2 */
	{ DT_POOL_MAX, 5, 5, 3, 2, 2, 1, 1, 1 },   /* same, overlapping: pad 0 before, 1 after */
	{ DT_POOL_AVG, 24, 24, 8, 2, 2, 2, 2, 0 },
	{ DT_POOL_AVG, 5, 6, 3, 3, 3, 1, 1, 1 },   /* same: border windows average fewer values */
	{ DT_POOL_AVG, 5, 5, 4, 2, 2, 2, 2, 1 },   /* same: pad 0 before, 1 after */
	{ DT_POOL_AVG, 7, 9, 6, 3, 3, 2, 2, 0 },
	{ DT_POOL_AVG, 8, 6, 16, 3, 2, 2, 1, 1 },
	{ DT_POOL_MAX, 17, 16, 3, 17, 16, 1, 1, 0 }, /* global: 272 window positions */
	{ DT_POOL_AVG, 17, 16, 3, 17, 16, 1, 1, 0 },
	{ DT_POOL_MAX, 3, 3, 2, 2, 2, 1, 1, 0 },     /* most inputs in several windows */
	{ DT_POOL_MAX, 7, 6, 21, 3, 3, 1, 2, 1 },    /* two runs of 8 channels in vectors and 5 left over */
	{ DT_POOL_MAX, 4, 4, 64, 2, 2, 2, 2, 0 },    /* fashion_cnn's channels: eight runs */
};

/*
 * y and the gradient rule: dx[argmax] += dy for max, dx[every value] += dy /
 * count for average; with g->after_relu, none where the max is not positive.
 */
static void ref_pool(const struct dt_pool_geom *g, int n, const float *x, double *y, const float *dy, double *dx)
{
	for (int b = 0; b < n; b++)
		for (int oh = 0; oh < g->out_h; oh++)
			for (int ow = 0; ow < g->out_w; ow++)
				for (int c = 0; c < g->c; c++) {
					int64_t yi = (((int64_t)b * g->out_h + oh) * g->out_w + ow) * g->c + c, arg = -1;
					double acc = g->kind == DT_POOL_MAX ? -INFINITY : 0;
					int count = 0;
					for (int i = 0; i < g->kh; i++)
						for (int j = 0; j < g->kw; j++) {
							int ih = oh * g->stride_h - g->pad_top + i;
							int iw = ow * g->stride_w - g->pad_left + j;
							int64_t xi = (((int64_t)b * g->in_h + ih) * g->in_w + iw) * g->c + c;
							if (ih < 0 || ih >= g->in_h || iw < 0 || iw >= g->in_w)
								continue;
							count++;
							if (g->kind == DT_POOL_AVG)
								acc += x[xi];
							else if (x[xi] > acc)
								acc = x[xi], arg = xi;
						}
					y[yi] = g->kind == DT_POOL_MAX ? acc : acc / count;
					if (g->kind == DT_POOL_MAX) {
						if (!g->after_relu || acc > 0)
							dx[arg] += dy[yi];
						continue;
					}
					for (int i = 0; i < g->kh; i++)
						for (int j = 0; j < g->kw; j++) {
							int ih = oh * g->stride_h - g->pad_top + i;
							int iw = ow * g->stride_w - g->pad_left + j;
							if (ih >= 0 && ih < g->in_h && iw >= 0 && iw < g->in_w)
								dx[(((int64_t)b * g->in_h + ih) * g->in_w + iw) * g->c + c] +=
									dy[yi] / count;
						}
				}
}

/* g's plan p against ref_pool; with g->after_relu, on relu's output (x clipped at 0: some windows all 0). */
static void check_pool(struct dt_plan *p, const struct dt_pool_geom *g, int n, uint64_t seed, const char *name)
{
	int64_t nx = (int64_t)n * g->in_h * g->in_w * g->c, ny = (int64_t)n * g->out_h * g->out_w * g->c;
	float *x = rnd(nx, seed), *dy = rnd(ny, seed + 1), *y = rnd(ny, 0), *dx = rnd(nx, 0);
	double *ry = zeros_d(ny), *rdx = zeros_d(nx);
	struct dt_tensor X = t4(x, n, g->in_h, g->in_w, g->c), Y = t4(y, n, g->out_h, g->out_w, g->c);
	struct dt_tensor DY = t4(dy, n, g->out_h, g->out_w, g->c), DX = t4(dx, n, g->in_h, g->in_w, g->c);
	char what[160];

	for (int64_t i = 0; g->after_relu && i < nx; i++)
		x[i] = x[i] > 0.5f ? x[i] : 0; /* mostly zeros: whole windows of them */
	ref_pool(g, n, x, ry, dy, rdx);
	snprintf(what, sizeof what, "%s n=%d y (inference)", name, n);
	dt_op_pool_forward(p, &X, &Y, 0);
	assert_close(y, ry, ny, what);
	for (int64_t i = 0; i < ny; i++)
		y[i] = 0;
	snprintf(what, sizeof what, "%s n=%d y (training)", name, n);
	dt_op_pool_forward(p, &X, &Y, 1);
	assert_close(y, ry, ny, what);
	snprintf(what, sizeof what, "%s n=%d dx", name, n);
	dt_op_pool_backward(p, &DY, &DX);
	assert_close(dx, rdx, nx, what);
	free(x), free(dy), free(y), free(dx), free(ry), free(rdx);
}

/* Every case, and every max pooling again after relu (dt_pool_geom.after_relu). */
static void test_pool_geometries(void **state)
{
	enum { MAX_BATCH = 4 };
	for (size_t i = 0; i < sizeof pool_cases / sizeof pool_cases[0]; i++)
		for (int relu = 0; relu <= (pool_cases[i].kind == DT_POOL_MAX); relu++) {
			const struct pool_case *k = &pool_cases[i];
			struct dt_pool_geom g = pool_geom(k);
			struct dt_plan *p;
			char name[112];
			g.after_relu = relu;
			p = dt_plan_pool(DT_CPU, &g, MAX_BATCH);
			snprintf(name, sizeof name, "%s pool %dx%dx%d->%dx%d k%dx%d s%d,%d %s%s",
				 k->kind == DT_POOL_MAX ? "max" : "avg", k->h, k->w, k->c, g.out_h, g.out_w, k->kh, k->kw,
				 k->sh, k->sw, k->same ? "same" : "valid", relu ? " after relu" : "");
			check_pool(p, &g, MAX_BATCH, 1000 + 10 * i, name);
			check_pool(p, &g, 3, 2000 + 10 * i, name);
			check_pool(p, &g, MAX_BATCH, 3000 + 10 * i, name);
			dt_plan_free(p);
		}
}

/* The max-pool backward uses the argmax of its training forward, not of a later inference one. */
static void test_pool_inference_keeps_workspace(void **state)
{
	struct dt_pool_geom g = pool_geom(&(struct pool_case){ DT_POOL_MAX, 4, 4, 2, 2, 2, 2, 2, 0 });
	int nx = 2 * 4 * 4 * 2, ny = 2 * 2 * 2 * 2;
	float *x = rnd(nx, 5), *x2 = rnd(nx, 6), *dy = rnd(ny, 7), y[16], dx[64];
	double ry[16], rdx[64] = { 0 }, ry2[16], rdx2[64] = { 0 };
	struct dt_tensor X = t4(x, 2, 4, 4, 2), X2 = t4(x2, 2, 4, 4, 2), Y = t4(y, 2, 2, 2, 2);
	struct dt_tensor DY = t4(dy, 2, 2, 2, 2), DX = t4(dx, 2, 4, 4, 2);
	struct dt_plan *p = dt_plan_pool(DT_CPU, &g, 2);
	ref_pool(&g, 2, x, ry, dy, rdx);
	ref_pool(&g, 2, x2, ry2, dy, rdx2);
	dt_op_pool_forward(p, &X, &Y, 1);
	dt_op_pool_forward(p, &X2, &Y, 0);
	assert_close(y, ry2, ny, "inference y");
	dt_op_pool_backward(p, &DY, &DX);
	assert_close(dx, rdx, nx, "dx from the training forward");
	dt_plan_free(p);
	free(x), free(x2), free(dy);
}

/* ---- batch normalization ---- */

struct bn_ref {
	double *y, *dx, *mean, *var, *mm, *mv, dgamma[64], dbeta[64];
};

/* Keras' BatchNormalization on rows (m = n*spatial of them) of c channels. */
static void ref_bn(int64_t m, int c, float eps, float momentum, int training, const float *x, const float *gamma,
		   const float *beta, const float *mm, const float *mv, const float *dy, struct bn_ref *r)
{
	for (int j = 0; j < c; j++) {
		double mean = 0, var = 0, g = gamma ? gamma[j] : 1, b = beta ? beta[j] : 0, inv, sdy = 0, sdyx = 0;
		for (int64_t i = 0; i < m; i++)
			mean += x[i * c + j];
		mean /= m;
		for (int64_t i = 0; i < m; i++)
			var += (x[i * c + j] - mean) * (x[i * c + j] - mean);
		var /= m; /* biased, as Keras */
		r->mean[j] = mean;
		r->var[j] = var;
		r->mm[j] = training ? momentum * mm[j] + (1 - momentum) * mean : mm[j];
		r->mv[j] = training ? momentum * mv[j] + (1 - momentum) * var : mv[j];
		if (!training) {
			mean = mm[j];
			var = mv[j];
		}
		inv = 1 / sqrt(var + eps);
		for (int64_t i = 0; i < m; i++)
			r->y[i * c + j] = g * (x[i * c + j] - mean) * inv + b;
		if (!dy)
			continue;
		for (int64_t i = 0; i < m; i++) {
			sdy += dy[i * c + j];
			sdyx += dy[i * c + j] * (x[i * c + j] - mean) * inv;
		}
		r->dbeta[j] = sdy;
		r->dgamma[j] = sdyx;
		for (int64_t i = 0; i < m; i++) {
			double xh = (x[i * c + j] - mean) * inv;
			r->dx[i * c + j] = g * inv / m * (m * dy[i * c + j] - sdy - xh * sdyx);
		}
	}
}

struct bn_case {
	int n, h, w, c; /* h = w = 0: a flat (n, c) input */
};

static void check_bn(struct dt_plan *p, const struct bn_case *k, int n, int affine, uint64_t seed)
{
	int c = k->c;
	int64_t sp = k->h ? (int64_t)k->h * k->w : 1, m = n * sp, cnt = m * c;
	const float eps = 1e-3f, momentum = 0.9f;
	float *x = rnd(cnt, seed), *dy = rnd(cnt, seed + 1), *y = rnd(cnt, 0), *dx = rnd(cnt, 0);
	float *gamma = rnd(c, seed + 2), *beta = rnd(c, seed + 3), *mm = rnd(c, seed + 4), *mv = rnd(c, seed + 5);
	float *mm0 = malloc(c * sizeof(float)), *mv0 = malloc(c * sizeof(float)), dgamma[64], dbeta[64];
	struct bn_ref r = { .y = zeros_d(cnt), .dx = zeros_d(cnt), .mean = zeros_d(c), .var = zeros_d(c), .mm = zeros_d(c), .mv = zeros_d(c) };
	struct dt_tensor X, Y, DY, DX, G = t1(gamma, c), B = t1(beta, c), MM = t1(mm, c), MV = t1(mv, c);
	struct dt_tensor DG = t1(dgamma, c), DB = t1(dbeta, c);
	char what[96];

	assert_true(c <= 64);
	for (int j = 0; j < c; j++) {
		x[j] += 3;                      /* a mean away from 0 */
		mv[j] = 0.5f + fabsf(mv[j]);    /* a variance */
		gamma[j] += 1.5f;
	}
	memcpy(mm0, mm, c * sizeof(float));
	memcpy(mv0, mv, c * sizeof(float));
	if (k->h) {
		X = t4(x, n, k->h, k->w, c), Y = t4(y, n, k->h, k->w, c);
		DY = t4(dy, n, k->h, k->w, c), DX = t4(dx, n, k->h, k->w, c);
	} else {
		X = (struct dt_tensor){ x, { 2, { n, c } }, DT_CPU }, Y = (struct dt_tensor){ y, { 2, { n, c } }, DT_CPU };
		DY = (struct dt_tensor){ dy, { 2, { n, c } }, DT_CPU }, DX = (struct dt_tensor){ dx, { 2, { n, c } }, DT_CPU };
	}

	/* inference: the moving statistics, left as they are */
	ref_bn(m, c, eps, momentum, 0, x, affine ? gamma : NULL, affine ? beta : NULL, mm0, mv0, NULL, &r);
	dt_op_batchnorm_forward(p, 0, momentum, &X, affine ? &G : NULL, affine ? &B : NULL, &MM, &MV, &Y);
	snprintf(what, sizeof what, "bn n=%d c=%d affine=%d inference y", n, c, affine);
	assert_close(y, r.y, cnt, what);
	assert_memory_equal(mm, mm0, c * sizeof(float));
	assert_memory_equal(mv, mv0, c * sizeof(float));

	/* training: the batch's statistics, moving ones updated */
	ref_bn(m, c, eps, momentum, 1, x, affine ? gamma : NULL, affine ? beta : NULL, mm0, mv0, dy, &r);
	dt_op_batchnorm_forward(p, 1, momentum, &X, affine ? &G : NULL, affine ? &B : NULL, &MM, &MV, &Y);
	snprintf(what, sizeof what, "bn n=%d c=%d affine=%d training y", n, c, affine);
	assert_close(y, r.y, cnt, what);
	snprintf(what, sizeof what, "bn n=%d c=%d moving mean", n, c);
	assert_close(mm, r.mm, c, what);
	snprintf(what, sizeof what, "bn n=%d c=%d moving variance", n, c);
	assert_close(mv, r.mv, c, what);

	dt_op_batchnorm_backward(p, &X, &DY, affine ? &G : NULL, affine ? &DG : NULL, affine ? &DB : NULL, &DX);
	snprintf(what, sizeof what, "bn n=%d c=%d affine=%d dx", n, c, affine);
	assert_close(dx, r.dx, cnt, what);
	if (affine) {
		assert_close(dgamma, r.dgamma, c, "dgamma");
		assert_close(dbeta, r.dbeta, c, "dbeta");
	}
	free(x), free(dy), free(y), free(dx), free(gamma), free(beta), free(mm), free(mv), free(mm0), free(mv0);
	free(r.y), free(r.dx), free(r.mean), free(r.var), free(r.mm), free(r.mv);
}

static const struct bn_case bn_cases[] = {
	{ 6, 0, 0, 5 },    /* after a dense layer */
	{ 4, 3, 5, 8 },    /* after a conv */
	{ 5, 4, 4, 32 },
	{ 3, 7, 2, 3 },
	{ 16, 0, 0, 64 },
};

static void test_batchnorm(void **state)
{
	for (size_t i = 0; i < sizeof bn_cases / sizeof bn_cases[0]; i++) {
		const struct bn_case *k = &bn_cases[i];
		int64_t sp = k->h ? (int64_t)k->h * k->w : 1;
		struct dt_plan *p = dt_plan_batchnorm(DT_CPU, k->c, sp, 1e-3f, k->n);
		check_bn(p, k, k->n, 1, 4000 + 10 * i);
		check_bn(p, k, k->n - 1, 1, 5000 + 10 * i);
		check_bn(p, k, k->n, 0, 6000 + 10 * i); /* gamma, beta NULL; dgamma, dbeta not wanted */
		dt_plan_free(p);
	}
}

/* Normalized outputs by hand: two samples, one channel, values 1 and 3. */
static void test_batchnorm_by_hand(void **state)
{
	float x[2] = { 1, 3 }, y[2], mm[1] = { 0 }, mv[1] = { 1 };
	struct dt_tensor X = { x, { 2, { 2, 1 } }, DT_CPU }, Y = { y, { 2, { 2, 1 } }, DT_CPU };
	struct dt_tensor MM = t1(mm, 1), MV = t1(mv, 1);
	struct dt_plan *p = dt_plan_batchnorm(DT_CPU, 1, 1, 1e-3f, 2);
	dt_op_batchnorm_forward(p, 1, 0.99f, &X, NULL, NULL, &MM, &MV, &Y);
	/* mean 2, biased variance 1 */
	assert_float_equal(y[0], -1 / sqrt(1.001), 1e-6);
	assert_float_equal(y[1], 1 / sqrt(1.001), 1e-6);
	assert_float_equal(mm[0], 0.01 * 2, 1e-7);
	assert_float_equal(mv[0], 0.99 + 0.01 * 1, 1e-7);
	dt_plan_free(p);
}

/* ---- transposed convolution ---- */

/*
 * conv2d_transpose against a direct loop: the full result z[i*s + a*d][j*s +
 * b*d] += x[i][j] * w[a][b], kernel (kh, kw, filters, in); y is z from row
 * top and column left on, zeros past z's end (a negative end padding), plus
 * the bias. The gradients follow: dz is dy placed back into z's frame.
 */
static void deconv_check(int n, int h, int w, int cin, int cout, int k, int s, int d, int lo, int hi, int threads)
{
	struct dt_conv_geom g = { .in_h = h, .in_w = w, .in_c = cin, .out_c = cout, .kh = k, .kw = k,
				  .stride_h = s, .stride_w = s, .dil_h = d, .dil_w = d,
				  .pad_top = lo, .pad_left = lo, .pad_bottom = hi, .pad_right = hi };
	int fh = (h - 1) * s + (k - 1) * d + 1, fw = (w - 1) * s + (k - 1) * d + 1;
	int oh = fh - lo - hi, ow = fw - lo - hi;
	int64_t nx = (int64_t)n * h * w * cin, ny = (int64_t)n * oh * ow * cout, nw = (int64_t)k * k * cout * cin;
	float *x = rnd(nx, 40), *wt = rnd(nw, 41), *b = rnd(cout, 42), *dy = rnd(ny, 43);
	float *y = rnd(ny, 44), *dx = rnd(nx, 45), *dw = rnd(nw, 46), *db = rnd(cout, 47); /* poisoned */
	double *ry = zeros_d(ny), *rdx = zeros_d(nx), *rdw = zeros_d(nw), *rdb = zeros_d(cout);
	struct dt_tensor tx = t4(x, n, h, w, cin), tw = t4(wt, k, k, cout, cin), tb = t1(b, cout);
	struct dt_tensor ty = t4(y, n, oh, ow, cout), tdy = t4(dy, n, oh, ow, cout);
	struct dt_tensor tdx = t4(dx, n, h, w, cin), tdw = t4(dw, k, k, cout, cin), tdb = t1(db, cout);
	struct dt_plan *p;
	char what[96];

	g.out_h = oh;
	g.out_w = ow;
	for (int i = 0; i < n * oh * ow; i++)
		for (int f = 0; f < cout; f++)
			ry[(int64_t)i * cout + f] = b[f];
	for (int in = 0; in < n; in++)
		for (int i = 0; i < h; i++)
			for (int j = 0; j < w; j++)
				for (int a = 0; a < k; a++)
					for (int bb = 0; bb < k; bb++) {
						int r = i * s + a * d - lo, c = j * s + bb * d - lo;
						if (r < 0 || r >= oh || c < 0 || c >= ow)
							continue;
						for (int f = 0; f < cout; f++)
							for (int ci = 0; ci < cin; ci++) {
								int64_t xi = (((int64_t)in * h + i) * w + j) * cin + ci;
								int64_t yi = (((int64_t)in * oh + r) * ow + c) * cout + f;
								int64_t wi = (((int64_t)a * k + bb) * cout + f) * cin + ci;
								ry[yi] += (double)x[xi] * wt[wi];
								rdx[xi] += (double)dy[yi] * wt[wi];
								rdw[wi] += (double)dy[yi] * x[xi];
							}
					}
	for (int64_t i = 0; i < ny; i++)
		rdb[i % cout] += dy[i];

	dt_ops_set_threads(threads);
	p = dt_plan_deconv(DT_CPU, &g, n);
	dt_op_deconv_forward(p, &tx, &tw, &tb, &ty);
	dt_op_deconv_backward(p, &tx, &tw, &tdy, &tdw, &tdb, &tdx);
	dt_plan_free(p);
	dt_ops_set_threads(1);
	snprintf(what, sizeof(what), "deconv %dx%dx%d->%d k%d s%d d%d cut %d/%d, %d threads: y", h, w, cin, cout, k, s,
		 d, lo, hi, threads);
	assert_close(y, ry, ny, what);
	strcpy(strrchr(what, ':'), ": dx");
	assert_close(dx, rdx, nx, what);
	strcpy(strrchr(what, ':'), ": dw");
	assert_close(dw, rdw, nw, what);
	strcpy(strrchr(what, ':'), ": db");
	assert_close(db, rdb, cout, what);
	free(x), free(wt), free(b), free(dy), free(y), free(dx), free(dw), free(db);
	free(ry), free(rdx), free(rdw), free(rdb);
}

static void test_deconv_geometries(void **state)
{
	(void)state;
	for (int threads = 1; threads <= 2; threads++) {
		deconv_check(4, 7, 7, 8, 16, 3, 1, 1, 0, 0, threads);  /* valid */
		deconv_check(4, 7, 6, 8, 4, 3, 2, 1, 0, 1, threads);   /* same, stride 2 */
		deconv_check(3, 5, 5, 6, 6, 4, 2, 1, 1, 1, threads);   /* 4x4, stride 2, same */
		deconv_check(3, 5, 5, 3, 4, 1, 2, 1, 0, 0, threads);   /* 1x1, stride 2 */
		deconv_check(3, 5, 5, 3, 4, 1, 2, 1, 0, -1, threads);  /* 1x1, stride 2, a trailing row of bias only */
		deconv_check(2, 4, 5, 5, 3, 3, 2, 1, 1, 0, threads);   /* same, output_padding 1 */
		deconv_check(2, 5, 4, 4, 3, 3, 3, 1, 0, -2, threads);  /* stride 3, two trailing rows */
		deconv_check(2, 5, 5, 4, 3, 3, 1, 2, 2, 2, threads);   /* dilation 2, same */
	}
}

/*
 * More batch sizes than the cache holds, in an order that evicts and makes
 * sizes again: every result still right.
 */
static void test_cache_many_sizes(void **state)
{
	static const int sizes[] = { 12, 1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 1, 10, 11, 2, 12, 5 };
	struct dt_conv_geom cg = conv_geom(&(struct conv_case){ 6, 5, 8, 8, 3, 3, 1, 1, 1, 1, 1 });
	struct dt_pool_geom pg = pool_geom(&(struct pool_case){ DT_POOL_MAX, 6, 6, 8, 2, 2, 2, 2, 0 });
	struct bn_case bk = { 12, 3, 3, 8 };
	struct dt_plan *conv = dt_plan_conv(DT_CPU, &cg, 12), *pool = dt_plan_pool(DT_CPU, &pg, 12);
	struct dt_plan *bn = dt_plan_batchnorm(DT_CPU, 8, 9, 1e-3f, 12);
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		check_conv(conv, &cg, sizes[i], 7000 + 10 * i, "cached conv", 0);
		check_pool(pool, &pg, sizes[i], 8000 + 10 * i, "cached pool");
		check_bn(bn, &bk, sizes[i], 1, 9000 + 10 * i);
	}
	dt_plan_free(conv);
	dt_plan_free(pool);
	dt_plan_free(bn);
	dt_plan_free(NULL);
}

/* A training step (forward, backward with dx) at batch n, on buffers for the plan's largest batch. */
static void conv_step(struct dt_plan *p, const struct dt_conv_geom *g, int n, float *x, float *w, float *y, float *dw,
		      float *dx)
{
	struct dt_tensor X = t4(x, n, g->in_h, g->in_w, g->in_c), Y = t4(y, n, g->out_h, g->out_w, g->out_c);
	struct dt_tensor W = t4(w, g->kh, g->kw, g->in_c, g->out_c), DW = t4(dw, g->kh, g->kw, g->in_c, g->out_c);
	struct dt_tensor DX = t4(dx, n, g->in_h, g->in_w, g->in_c);
	dt_op_conv_forward(p, &X, &W, NULL, &Y);
	dt_op_conv_backward(p, &X, &W, &Y, &DW, NULL, &DX);
}

/*
 * A batch size's primitives are made once, on its first use; the cache holds
 * eight sizes, and a ninth makes the least recently used one go.
 */
static void test_cache_makes_each_size_once(void **state)
{
	enum { MAX_BATCH = 10 };
	struct dt_conv_geom g = conv_geom(&(struct conv_case){ 6, 6, 8, 8, 3, 3, 1, 1, 1, 1, 1 });
	float *x = rnd(MAX_BATCH * 6 * 6 * 8, 1), *w = rnd(3 * 3 * 8 * 8, 2), *y = rnd(MAX_BATCH * 6 * 6 * 8, 3);
	float *dw = rnd(3 * 3 * 8 * 8, 4), *dx = rnd(MAX_BATCH * 6 * 6 * 8, 5);
	uint64_t made0 = dt_cpu_primitives_made(), made, per_size;
	struct dt_plan *p = dt_plan_conv(DT_CPU, &g, MAX_BATCH);

	assert_true(dt_cpu_primitives_made() > made0); /* the largest batch's forward, made with the plan */
	for (int n = 3; n <= MAX_BATCH; n++)
		conv_step(p, &g, n, x, w, y, dw, dx);
	made = dt_cpu_primitives_made();
	for (int rep = 0; rep < 3; rep++)
		for (int n = MAX_BATCH; n >= 3; n--)
			conv_step(p, &g, n, x, w, y, dw, dx);
	assert_int_equal(dt_cpu_primitives_made(), made);

	/* sizes 3..10 were used last in the order 10..3: a ninth size evicts 10 */
	conv_step(p, &g, 2, x, w, y, dw, dx);
	per_size = dt_cpu_primitives_made() - made;
	assert_true(per_size >= 3); /* forward, backward data, backward weights */
	for (int n = 2; n <= 9; n++)
		conv_step(p, &g, n, x, w, y, dw, dx);
	assert_int_equal(dt_cpu_primitives_made(), made + per_size);
	conv_step(p, &g, MAX_BATCH, x, w, y, dw, dx);
	assert_int_equal(dt_cpu_primitives_made(), made + 2 * per_size);
	dt_plan_free(p);
	free(x), free(w), free(y), free(dw), free(dx);
}

/* Two plans of one geometry are independent: interleaved calls, each right. */
static void test_plans_interleaved(void **state)
{
	struct dt_conv_geom g = conv_geom(&(struct conv_case){ 10, 10, 16, 16, 3, 3, 1, 1, 1, 1, 1 });
	struct dt_plan *a = dt_plan_conv(DT_CPU, &g, 4), *b = dt_plan_conv(DT_CPU, &g, 2);
	check_conv(a, &g, 4, 11, "plan a", 0);
	check_conv(b, &g, 2, 12, "plan b", 0);
	check_conv(a, &g, 2, 13, "plan a", 0);
	dt_plan_free(a);
	dt_plan_free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_conv_keras_padding),
		cmocka_unit_test(test_conv_by_hand),
		cmocka_unit_test(test_conv_geometries),
		cmocka_unit_test(test_conv_gemm_threads),
		cmocka_unit_test(test_conv_gemm_direct),
		cmocka_unit_test(test_conv_bf16),
		cmocka_unit_test(test_conv_relu),
		cmocka_unit_test(test_pool_geometries),
		cmocka_unit_test(test_pool_inference_keeps_workspace),
		cmocka_unit_test(test_batchnorm_by_hand),
		cmocka_unit_test(test_batchnorm),
		cmocka_unit_test(test_deconv_geometries),
		cmocka_unit_test(test_cache_many_sizes),
		cmocka_unit_test(test_cache_makes_each_size_once),
		cmocka_unit_test(test_plans_interleaved),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
