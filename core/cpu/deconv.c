/*
 * The CPU backend's transposed-convolution plans (conv2d_transpose) on
 * oneDNN's deconvolution primitives: forward, backward data and backward
 * weights, channels-last activations as dtrain holds them. The kernel is
 * Keras' (kh, kw, filters, in), which is oneDNN's deconvolution weights
 * (filters, in, kh, kw) read through strides; the primitives choose their
 * own weights layout (format_tag_any) and the kernel is reordered into it
 * at each step (its gradient back), as the convolution plans do.
 *
 * A primitive is made for one batch size: each plan keeps CACHE_SIZE of
 * them, least recently used out, made on a size's first use (the backward
 * ones on its first backward). Every buffer they need belongs to the plan
 * and is sized when a primitive is made, never during a step.
 *
 * A negative end padding (Keras' output_padding past the kernel's span)
 * adds rows and columns that no tap reaches, the bias alone. oneDNN 2.6's
 * backward-weights primitive gave wrong, thread-dependent weight gradients
 * with such a padding (a 1x1 kernel at stride 2, one trailing row), and
 * crashed when given a strided view of dy instead, so the primitives never
 * see one: they run with the end padding at 0 on a dense copy of y and dy
 * without those rows (the plan's crop buffer, copy_corner); the forward
 * writes the bias alone into them, and the bias gradient is summed over the
 * whole of dy.
 *
 * The plan's head points at deconv_backend, the CPU backend's table with
 * this file's plan_free and deconvolution ops, so that dt_plan_free and
 * dt_op_deconv_* reach this file without a case in dnnl.c.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu/ops_cpu.h"

#define CACHE_SIZE 8

static dnnl_engine_t engine;
static dnnl_stream_t stream;
static dnnl_primitive_attr_t attr; /* user scratchpad: a plan may run on another thread than made it */
static pthread_once_t engine_once = PTHREAD_ONCE_INIT;

/* dnnl.c's engine, stream and user-scratchpad attribute, shared by every CPU plan. */
static void engine_init(void) { dt_dnnl_shared(&engine, &stream, &attr); }

/* A primitive, the memory object of its scratchpad (or NULL) and the plan buffer behind it. */
struct prim {
	dnnl_primitive_t p;
	dnnl_memory_t scratch;
};

struct entry {
	int n;          /* batch size; 0: free */
	uint64_t used;
	dnnl_primitive_desc_t fwd_pd;
	struct prim fwd, bwd_data, bwd_weights, w_to_fwd, w_to_bwd, dw_from_bwd;
	dnnl_memory_t x, y, dx, dy;   /* NHWC at this n */
	dnnl_memory_t w_fwd, w_bwd, dw_bwd; /* the primitives' weight layouts, or NULL: the user's */
};

struct deconv_plan {
	struct dt_plan head;
	struct dt_conv_geom g;
	int max_batch;
	uint64_t clock;
	dnnl_memory_desc_t w_md, b_md;
	dnnl_memory_t w, dw, b, db;
	float *scratch, *w_fwd, *w_bwd, *dw_bwd, *zero_bias, *db_unused;
	float *crop; /* y or dy without the trailing rows and columns (a negative end padding), else NULL */
	int crop_h, crop_w;
	size_t scratch_bytes, w_fwd_bytes, w_bwd_bytes, dw_bwd_bytes;
	struct entry cache[CACHE_SIZE];
};

static void grow(float **p, size_t *have, size_t bytes)
{
	if (bytes <= *have)
		return;
	dt_device_free(DT_CPU, *p);
	*p = dt_device_alloc(DT_CPU, (int64_t)((bytes + sizeof(float) - 1) / sizeof(float)));
	*have = bytes;
}

static void prim_make(struct deconv_plan *p, struct prim *pr, const_dnnl_primitive_desc_t pd)
{
	const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
	size_t bytes = md ? dnnl_memory_desc_get_size(md) : 0;
	DT_DNNL_CHECK(dnnl_primitive_create(&pr->p, pd));
	pr->scratch = NULL;
	if (bytes > 0) {
		grow(&p->scratch, &p->scratch_bytes, bytes);
		pr->scratch = dt_dnnl_mem_new(md);
	}
}

static void prim_free(struct prim *pr)
{
	if (pr->p)
		DT_DNNL_CHECK(dnnl_primitive_destroy(pr->p));
	dt_dnnl_mem_free(&pr->scratch);
	pr->p = NULL;
}

static void prim_run(const struct deconv_plan *p, const struct prim *pr, int nargs, dnnl_exec_arg_t *args)
{
	if (pr->scratch)
		args[nargs++] = (dnnl_exec_arg_t){ DNNL_ARG_SCRATCHPAD, dt_dnnl_bind(pr->scratch, p->scratch) };
	DT_DNNL_CHECK(dnnl_primitive_execute(pr->p, stream, nargs, args));
}

static void reorder_run(const struct deconv_plan *p, const struct prim *pr, dnnl_memory_t from, dnnl_memory_t to)
{
	dnnl_exec_arg_t args[3] = { { DNNL_ARG_FROM, from }, { DNNL_ARG_TO, to } };
	prim_run(p, pr, 2, args);
}

/*
 * The primitive's weights layout `want` against the user's: NULL when they
 * agree, else a memory object in `want` over the plan buffer *buf (grown)
 * and in r the reorder from the user's layout (to_prim) or back.
 */
static dnnl_memory_t weights_for(struct deconv_plan *p, const dnnl_memory_desc_t *want, struct prim *r, float **buf,
				 size_t *have, int to_prim)
{
	dnnl_primitive_desc_t pd;
	if (dnnl_memory_desc_equal(want, &p->w_md))
		return NULL;
	grow(buf, have, dnnl_memory_desc_get_size(want));
	if (to_prim)
		DT_DNNL_CHECK(dnnl_reorder_primitive_desc_create(&pd, &p->w_md, engine, want, engine, attr));
	else
		DT_DNNL_CHECK(dnnl_reorder_primitive_desc_create(&pd, want, engine, &p->w_md, engine, attr));
	prim_make(p, r, pd);
	DT_DNNL_CHECK(dnnl_primitive_desc_destroy(pd));
	return dt_dnnl_mem_new(want);
}

static dnnl_memory_desc_t md_nhwc(int64_t n, int64_t c, int64_t h, int64_t w)
{
	dnnl_memory_desc_t md;
	dnnl_dims_t dims = { n, c, h, w };
	DT_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&md, 4, dims, dnnl_f32, dnnl_nhwc));
	return md;
}

static dnnl_memory_desc_t weights_any(const struct dt_conv_geom *g)
{
	dnnl_memory_desc_t md;
	dnnl_dims_t dims = { g->out_c, g->in_c, g->kh, g->kw };
	DT_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&md, 4, dims, dnnl_f32, dnnl_format_tag_any));
	return md;
}

struct dims {
	dnnl_dims_t strides, dilates, pad_l, pad_r;
};

static int end_pad(int pad) { return pad > 0 ? pad : 0; }

static struct dims dims_of(const struct dt_conv_geom *g)
{
	return (struct dims){ { g->stride_h, g->stride_w }, { g->dil_h - 1, g->dil_w - 1 },
			      { g->pad_top, g->pad_left }, { end_pad(g->pad_bottom), end_pad(g->pad_right) } };
}

/*
 * The top-left (min(sh, dh), min(sw, dw)) corner of each of n NHWC images
 * of c channels, from src (sh, sw) to dst (dh, dw); the rest of dst is left
 * as it is.
 */
static void copy_corner(const float *src, int sh, int sw, float *dst, int dh, int dw, int64_t n, int c)
{
	int h = sh < dh ? sh : dh;
	size_t row = (size_t)(sw < dw ? sw : dw) * c * sizeof(float);
	for (int64_t i = 0; i < n; i++)
		for (int r = 0; r < h; r++)
			memcpy(dst + ((i * dh + r) * dw) * c, src + ((i * sh + r) * sw) * c, row);
}

static void entry_clear(struct entry *e)
{
	prim_free(&e->fwd);
	prim_free(&e->bwd_data);
	prim_free(&e->bwd_weights);
	prim_free(&e->w_to_fwd);
	prim_free(&e->w_to_bwd);
	prim_free(&e->dw_from_bwd);
	if (e->fwd_pd)
		DT_DNNL_CHECK(dnnl_primitive_desc_destroy(e->fwd_pd));
	e->fwd_pd = NULL;
	dt_dnnl_mem_free(&e->x);
	dt_dnnl_mem_free(&e->y);
	dt_dnnl_mem_free(&e->dx);
	dt_dnnl_mem_free(&e->dy);
	dt_dnnl_mem_free(&e->w_fwd);
	dt_dnnl_mem_free(&e->w_bwd);
	dt_dnnl_mem_free(&e->dw_bwd);
	e->n = 0;
}

/* The entry for batch n, its forward primitive made on first use. */
static struct entry *entry_for(struct deconv_plan *p, int n)
{
	const struct dt_conv_geom *g = &p->g;
	struct entry *e = NULL;
	dnnl_memory_desc_t x_md, y_md, w_any;
	dnnl_deconvolution_desc_t op;
	struct dims d = dims_of(g);

	DT_ASSERT(n > 0 && n <= p->max_batch);
	for (int i = 0; i < CACHE_SIZE; i++) {
		struct entry *f = &p->cache[i];
		if (f->n == n) {
			f->used = ++p->clock;
			return f;
		}
		if (!e || (e->n && (!f->n || f->used < e->used)))
			e = f;
	}
	entry_clear(e);
	e->n = n;
	e->used = ++p->clock;
	x_md = md_nhwc(n, g->in_c, g->in_h, g->in_w);
	y_md = md_nhwc(n, g->out_c, p->crop_h, p->crop_w);
	w_any = weights_any(g);
	DT_DNNL_CHECK(dnnl_dilated_deconvolution_forward_desc_init(&op, dnnl_forward_training,
								   dnnl_deconvolution_direct, &x_md, &w_any, &p->b_md,
								   &y_md, d.strides, d.dilates, d.pad_l, d.pad_r));
	DT_DNNL_CHECK(dnnl_primitive_desc_create(&e->fwd_pd, &op, attr, engine, NULL));
	prim_make(p, &e->fwd, e->fwd_pd);
	e->w_fwd = weights_for(p, dnnl_primitive_desc_query_md(e->fwd_pd, dnnl_query_weights_md, 0), &e->w_to_fwd,
			       &p->w_fwd, &p->w_fwd_bytes, 1);
	e->x = dt_dnnl_mem_new(&x_md);
	e->y = dt_dnnl_mem_new(&y_md);
	e->dx = dt_dnnl_mem_new(&x_md);
	e->dy = dt_dnnl_mem_new(&y_md);
	return e;
}

static void make_backward(struct deconv_plan *p, struct entry *e, int data)
{
	const struct dt_conv_geom *g = &p->g;
	dnnl_memory_desc_t x_md = md_nhwc(e->n, g->in_c, g->in_h, g->in_w);
	dnnl_memory_desc_t y_md = md_nhwc(e->n, g->out_c, p->crop_h, p->crop_w), w_any = weights_any(g);
	dnnl_deconvolution_desc_t op;
	dnnl_primitive_desc_t pd;
	struct dims d = dims_of(g);

	if (data) {
		DT_DNNL_CHECK(dnnl_dilated_deconvolution_backward_data_desc_init(
			&op, dnnl_deconvolution_direct, &x_md, &w_any, &y_md, d.strides, d.dilates, d.pad_l, d.pad_r));
		DT_DNNL_CHECK(dnnl_primitive_desc_create(&pd, &op, attr, engine, e->fwd_pd));
		prim_make(p, &e->bwd_data, pd);
		e->w_bwd = weights_for(p, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), &e->w_to_bwd,
				       &p->w_bwd, &p->w_bwd_bytes, 1);
	} else {
		DT_DNNL_CHECK(dnnl_dilated_deconvolution_backward_weights_desc_init(&op, dnnl_deconvolution_direct, &x_md,
										    &w_any, &p->b_md, &y_md, d.strides,
										    d.dilates, d.pad_l, d.pad_r));
		DT_DNNL_CHECK(dnnl_primitive_desc_create(&pd, &op, attr, engine, e->fwd_pd));
		prim_make(p, &e->bwd_weights, pd);
		e->dw_bwd = weights_for(p, dnnl_primitive_desc_query_md(pd, dnnl_query_diff_weights_md, 0),
					&e->dw_from_bwd, &p->dw_bwd, &p->dw_bwd_bytes, 0);
	}
	DT_DNNL_CHECK(dnnl_primitive_desc_destroy(pd));
}

static void deconv_plan_free(struct dt_plan *pl)
{
	struct deconv_plan *p = (struct deconv_plan *)pl;
	if (!p)
		return;
	for (int i = 0; i < CACHE_SIZE; i++)
		entry_clear(&p->cache[i]);
	dt_dnnl_mem_free(&p->w);
	dt_dnnl_mem_free(&p->dw);
	dt_dnnl_mem_free(&p->b);
	dt_dnnl_mem_free(&p->db);
	dt_device_free(DT_CPU, p->scratch);
	dt_device_free(DT_CPU, p->w_fwd);
	dt_device_free(DT_CPU, p->w_bwd);
	dt_device_free(DT_CPU, p->dw_bwd);
	dt_device_free(DT_CPU, p->zero_bias);
	dt_device_free(DT_CPU, p->db_unused);
	dt_device_free(DT_CPU, p->crop);
	free(p);
}

static const struct dt_backend deconv_backend;

struct dt_plan *dt_cpu_plan_deconv(struct dt_device dev, const struct dt_conv_geom *g, int max_batch)
{
	struct deconv_plan *p;
	dnnl_dims_t wdims = { g->out_c, g->in_c, g->kh, g->kw };
	/* Keras' (kh, kw, filters, in): filters strided by in, in by 1. */
	dnnl_dims_t wstrides = { g->in_c, 1, (int64_t)g->kw * g->out_c * g->in_c, (int64_t)g->out_c * g->in_c };
	dnnl_dims_t bdims = { g->out_c };

	DT_ASSERT(dev.kind == DT_DEVICE_CPU && max_batch > 0 && dt_conv_groups(g) == 1);
	DT_ASSERT(g->in_c > 0 && g->out_c > 0 && g->kh > 0 && g->kw > 0 && g->in_h > 0 && g->in_w > 0);
	DT_ASSERT(g->stride_h > 0 && g->stride_w > 0 && g->dil_h > 0 && g->dil_w > 0);
	DT_ASSERT(g->out_h == (int64_t)(g->in_h - 1) * g->stride_h + (int64_t)(g->kh - 1) * g->dil_h + 1 - g->pad_top -
				      g->pad_bottom);
	DT_ASSERT(g->out_w == (int64_t)(g->in_w - 1) * g->stride_w + (int64_t)(g->kw - 1) * g->dil_w + 1 - g->pad_left -
				      g->pad_right);
	pthread_once(&engine_once, engine_init);
	p = dt_calloc(1, sizeof(*p));
	p->head.backend = &deconv_backend;
	p->g = *g;
	p->max_batch = max_batch;
	DT_DNNL_CHECK(dnnl_memory_desc_init_by_strides(&p->w_md, 4, wdims, dnnl_f32, wstrides));
	DT_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&p->b_md, 1, bdims, dnnl_f32, dnnl_a));
	p->w = dt_dnnl_mem_new(&p->w_md);
	p->dw = dt_dnnl_mem_new(&p->w_md);
	p->b = dt_dnnl_mem_new(&p->b_md);
	p->db = dt_dnnl_mem_new(&p->b_md);
	p->zero_bias = dt_device_alloc(DT_CPU, g->out_c);
	p->db_unused = dt_device_alloc(DT_CPU, g->out_c);
	p->crop_h = g->out_h - (g->pad_bottom < 0 ? -g->pad_bottom : 0);
	p->crop_w = g->out_w - (g->pad_right < 0 ? -g->pad_right : 0);
	if (p->crop_h != g->out_h || p->crop_w != g->out_w)
		p->crop = dt_device_alloc(DT_CPU, (int64_t)max_batch * p->crop_h * p->crop_w * g->out_c);
	entry_for(p, max_batch);
	return &p->head;
}

static int batch_of(const struct deconv_plan *p, const struct dt_tensor *x, const struct dt_tensor *y)
{
	const struct dt_conv_geom *g = &p->g;
	int n = x->shape.dim[0];
	DT_ASSERT(x->shape.ndim >= 1 && y->shape.ndim >= 1 && y->shape.dim[0] == n);
	DT_ASSERT(dt_tensor_count(x) == (int64_t)n * g->in_h * g->in_w * g->in_c);
	DT_ASSERT(dt_tensor_count(y) == (int64_t)n * g->out_h * g->out_w * g->out_c);
	return n;
}

static void deconv_forward(struct dt_plan *pl, const struct dt_tensor *x, const struct dt_tensor *w,
			   const struct dt_tensor *b, struct dt_tensor *y)
{
	struct deconv_plan *p = (struct deconv_plan *)pl;
	int n = batch_of(p, x, y);
	struct entry *e;
	dnnl_memory_t wm;
	dnnl_exec_arg_t args[5];

	DT_ASSERT(dt_tensor_count(w) == (int64_t)p->g.kh * p->g.kw * p->g.in_c * p->g.out_c);
	DT_ASSERT(!b || dt_tensor_count(b) == p->g.out_c);
	if (n == 0)
		return;
	e = entry_for(p, n);
	wm = dt_dnnl_bind(p->w, w->data);
	if (e->w_fwd) {
		reorder_run(p, &e->w_to_fwd, wm, dt_dnnl_bind(e->w_fwd, p->w_fwd));
		wm = e->w_fwd;
	}
	args[0] = (dnnl_exec_arg_t){ DNNL_ARG_SRC, dt_dnnl_bind(e->x, x->data) };
	args[1] = (dnnl_exec_arg_t){ DNNL_ARG_WEIGHTS, wm };
	args[2] = (dnnl_exec_arg_t){ DNNL_ARG_BIAS, dt_dnnl_bind(p->b, b ? b->data : p->zero_bias) };
	args[3] = (dnnl_exec_arg_t){ DNNL_ARG_DST, dt_dnnl_bind(e->y, p->crop ? p->crop : y->data) };
	prim_run(p, &e->fwd, 4, args);
	if (p->crop) { /* the trailing rows and columns: the bias alone */
		memset(y->data, 0, (size_t)dt_tensor_count(y) * sizeof(float));
		if (b)
			dt_cpu_backend.bias_add(y, b);
		copy_corner(p->crop, p->crop_h, p->crop_w, y->data, p->g.out_h, p->g.out_w, n, p->g.out_c);
	}
}

static void deconv_backward(struct dt_plan *pl, const struct dt_tensor *x, const struct dt_tensor *w,
			    const struct dt_tensor *dy, struct dt_tensor *dw, struct dt_tensor *db, struct dt_tensor *dx)
{
	struct deconv_plan *p = (struct deconv_plan *)pl;
	int n = batch_of(p, x, dy);
	struct entry *e;
	dnnl_memory_t dwm;
	dnnl_exec_arg_t args[5];

	DT_ASSERT(dt_tensor_count(dw) == dt_tensor_count(w));
	DT_ASSERT(!db || dt_tensor_count(db) == p->g.out_c);
	DT_ASSERT(!dx || dt_tensor_count(dx) == dt_tensor_count(x));
	if (n == 0) {
		memset(dw->data, 0, (size_t)dt_tensor_count(dw) * sizeof(float));
		if (db)
			memset(db->data, 0, (size_t)p->g.out_c * sizeof(float));
		return;
	}
	e = entry_for(p, n);
	if (!e->bwd_weights.p)
		make_backward(p, e, 0);
	if (dx && !e->bwd_data.p)
		make_backward(p, e, 1);
	if (p->crop)
		copy_corner(dy->data, p->g.out_h, p->g.out_w, p->crop, p->crop_h, p->crop_w, n, p->g.out_c);
	dwm = e->dw_bwd ? dt_dnnl_bind(e->dw_bwd, p->dw_bwd) : dt_dnnl_bind(p->dw, dw->data);
	args[0] = (dnnl_exec_arg_t){ DNNL_ARG_SRC, dt_dnnl_bind(e->x, x->data) };
	args[1] = (dnnl_exec_arg_t){ DNNL_ARG_DIFF_DST, dt_dnnl_bind(e->dy, p->crop ? p->crop : dy->data) };
	args[2] = (dnnl_exec_arg_t){ DNNL_ARG_DIFF_WEIGHTS, dwm };
	args[3] = (dnnl_exec_arg_t){ DNNL_ARG_DIFF_BIAS,
				     dt_dnnl_bind(p->db, db && !p->crop ? db->data : p->db_unused) };
	prim_run(p, &e->bwd_weights, 4, args);
	if (db && p->crop)
		dt_cpu_backend.bias_grad(dy, 0, db);
	if (e->dw_bwd)
		reorder_run(p, &e->dw_from_bwd, dwm, dt_dnnl_bind(p->dw, dw->data));
	if (dx) {
		dnnl_memory_t wm = dt_dnnl_bind(p->w, w->data);
		if (e->w_bwd) {
			reorder_run(p, &e->w_to_bwd, wm, dt_dnnl_bind(e->w_bwd, p->w_bwd));
			wm = e->w_bwd;
		}
		args[0] = (dnnl_exec_arg_t){ DNNL_ARG_DIFF_DST, e->dy };
		args[1] = (dnnl_exec_arg_t){ DNNL_ARG_WEIGHTS, wm };
		args[2] = (dnnl_exec_arg_t){ DNNL_ARG_DIFF_SRC, dt_dnnl_bind(e->dx, dx->data) };
		prim_run(p, &e->bwd_data, 3, args);
	}
}

/* The CPU backend's table but for this file's plans (see the top). */
static const struct dt_backend deconv_backend = {
	.name = "cpu",
	.plan_free = deconv_plan_free,
	.deconv_forward = deconv_forward,
	.deconv_backward = deconv_backward,
};
