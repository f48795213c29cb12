/*
 * Pooling over height and width, or over the steps of a sequence at height
 * 1, through the backend's pool plan (see pool2d.h); the layer types are in
 * max_pooling2d.c, average_pooling2d.c, global_average_pooling2d.c,
 * global_max_pooling2d.c and their 1-D files.
 */
#include <stdlib.h>

#include "core/error.h"
#include "core/export/onnx.h"
#include "pool2d.h"
#include "window.h"
#include "window1d.h"

struct pool2d {
	struct dt_pool_geom g;
	struct dt_plan *plan;
	int dims;     /* 2: (H, W, C) in; 1: (steps, C), pooled at height 1 */
	int global;   /* one window over everything: (C,) out, or ones and C with keepdims */
	int keepdims;
};

/* The input must be an image: (H, W, C). */
static int check_input(const struct dt_layer *l, const struct dt_node *args)
{
	char shape[64];
	if (l->in.ndim == 3)
		return 0;
	return dt_node_error(args, "layer '%s' needs an image input (height, width, channels) but gets %s; "
			     "add '- reshape: {target_shape: [H, W, C]}' before it",
			     l->name, dt_shape_format(&l->in, 1, shape, sizeof(shape)));
}

int dt_pool2d_init(struct dt_layer *l, const struct dt_node *args, enum dt_pool kind)
{
	static const char *const keys[] = { "pool_size", "strides", "padding", NULL };
	struct dt_pool_geom g = { 0 };
	int k[2], s[2];
	enum dt_padding pad;
	struct pool2d *p;
	char shape[64];

	if (dt_layer_check_keys(l, args, keys) < 0 || dt_window_pair(args, "pool_size", 2, 1, 1 << 16, k) < 0 ||
	    dt_window_pair(args, "strides", 0, 1, 1 << 16, s) < 0 || dt_window_padding(args, &pad) < 0 ||
	    check_input(l, args) < 0)
		return -1;
	if (kind == DT_POOL_MAX && (int64_t)k[0] * k[1] > DT_POOL_MAX_WINDOW)
		return dt_node_error(dt_node_get(args, "pool_size"),
				     "layer '%s': a %dx%d max pooling window holds %lld positions, more than the %d "
				     "max pooling takes; use a smaller pool_size, or average pooling",
				     l->name, k[0], k[1], (long long)k[0] * k[1], DT_POOL_MAX_WINDOW);
	if (!s[0]) { /* Keras: strides None means pool_size */
		s[0] = k[0];
		s[1] = k[1];
	}
	g.kind = kind;
	g.in_h = l->in.dim[0];
	g.in_w = l->in.dim[1];
	g.c = l->in.dim[2];
	g.kh = k[0];
	g.kw = k[1];
	g.stride_h = s[0];
	g.stride_w = s[1];
	g.out_h = dt_window_dim(g.in_h, g.kh, g.stride_h, 1, pad, &g.pad_top, &g.pad_bottom);
	g.out_w = dt_window_dim(g.in_w, g.kw, g.stride_w, 1, pad, &g.pad_left, &g.pad_right);
	if (!g.out_h || !g.out_w)
		return dt_node_error(dt_node_get(args, "pool_size") ? dt_node_get(args, "pool_size") : args,
				     "layer '%s': the %dx%d pool does not fit the input %s with padding 'valid'; "
				     "use a smaller pool_size or padding: same",
				     l->name, g.kh, g.kw, dt_shape_format(&l->in, 0, shape, sizeof(shape)));
	l->out = dt_shape_make(3, (int[]){ g.out_h, g.out_w, g.c });
	p = dt_calloc(1, sizeof(*p));
	p->g = g;
	p->dims = 2;
	l->priv = p;
	l->selects = p->g.kind == DT_POOL_MAX;
	return 0;
}

/* A max pooling window holds at most DT_POOL_MAX_WINDOW positions. */
static int check_window(const struct dt_layer *l, const struct dt_node *at, enum dt_pool kind, int64_t n)
{
	if (kind != DT_POOL_MAX || n <= DT_POOL_MAX_WINDOW)
		return 0;
	return dt_node_error(at, "layer '%s': a max pooling window of %lld positions is more than the %d max "
			     "pooling takes; use a smaller pool_size, or average pooling",
			     l->name, (long long)n, DT_POOL_MAX_WINDOW);
}

int dt_pool1d_init(struct dt_layer *l, const struct dt_node *args, enum dt_pool kind)
{
	static const char *const keys[] = { "pool_size", "strides", "padding", NULL };
	struct dt_pool_geom g = { 0 };
	int k, s;
	enum dt_padding pad;
	struct pool2d *p;
	char shape[64];

	if (dt_layer_check_keys(l, args, keys) < 0 || dt_window1d_int(args, "pool_size", 2, 1, 1 << 16, &k) < 0 ||
	    dt_window1d_int(args, "strides", 0, 1, 1 << 16, &s) < 0 || dt_window_padding(args, &pad) < 0 ||
	    dt_window1d_check_input(l, args) < 0 ||
	    check_window(l, dt_node_get(args, "pool_size"), kind, k) < 0)
		return -1;
	g.kind = kind;
	g.in_h = g.out_h = g.kh = g.stride_h = 1;
	g.in_w = l->in.dim[0];
	g.c = l->in.dim[1];
	g.kw = k;
	g.stride_w = s ? s : k; /* Keras: strides None means pool_size */
	g.out_w = dt_window_dim(g.in_w, g.kw, g.stride_w, 1, pad, &g.pad_left, &g.pad_right);
	if (!g.out_w)
		return dt_node_error(dt_node_get(args, "pool_size") ? dt_node_get(args, "pool_size") : args,
				     "layer '%s': the pool of %d does not fit the input %s with padding 'valid'; "
				     "use a smaller pool_size or padding: same",
				     l->name, g.kw, dt_shape_format(&l->in, 0, shape, sizeof(shape)));
	l->out = dt_shape_make(2, (int[]){ g.out_w, g.c });
	p = dt_calloc(1, sizeof(*p));
	p->g = g;
	p->dims = 1;
	l->priv = p;
	l->selects = p->g.kind == DT_POOL_MAX;
	return 0;
}

int dt_pool_init_global(struct dt_layer *l, const struct dt_node *args, enum dt_pool kind, int dims)
{
	static const char *const keys[] = { "keepdims", NULL };
	struct dt_pool_geom g = { .kind = kind, .in_h = 1, .out_h = 1, .out_w = 1 };
	int keepdims;
	struct pool2d *p;

	if (dt_layer_check_keys(l, args, keys) < 0 || dt_cfg_bool(args, "keepdims", 0, &keepdims) < 0 ||
	    (dims == 2 ? check_input(l, args) : dt_window1d_check_input(l, args)) < 0)
		return -1;
	if (dims == 2)
		g.in_h = l->in.dim[0];
	g.in_w = l->in.dim[dims - 1];
	g.c = l->in.dim[dims];
	g.kh = g.stride_h = g.in_h;
	g.kw = g.stride_w = g.in_w;
	if (check_window(l, args, kind, (int64_t)g.kh * g.kw) < 0)
		return -1;
	p = dt_calloc(1, sizeof(*p));
	p->g = g;
	p->dims = dims;
	p->global = 1;
	p->keepdims = keepdims;
	l->priv = p;
	l->selects = p->g.kind == DT_POOL_MAX;
	if (!keepdims)
		l->out = dt_shape_make(1, (int[]){ g.c });
	else if (dims == 2)
		l->out = dt_shape_make(3, (int[]){ 1, 1, g.c });
	else
		l->out = dt_shape_make(2, (int[]){ 1, g.c });
	return 0;
}

unsigned dt_pool2d_layouts(const struct dt_layer *l, struct dt_device dev, int block, int with_dx)
{
	const struct pool2d *p = l->priv;
	(void)dev;
	(void)with_dx;
	if (p->g.c % block)
		return 0;
	return DT_LAYOUT_PAIR(0, 1) | DT_LAYOUT_PAIR(1, 0) | DT_LAYOUT_PAIR(1, 1);
}

int dt_pool2d_alloc(struct dt_layer *l, struct dt_device dev, int max_batch)
{
	struct pool2d *p = l->priv;
	p->g.x_layout = l->x_layout;
	p->g.y_layout = l->y_layout;
	p->g.block = l->block;
	p->g.after_relu = p->g.kind == DT_POOL_MAX && l->act_before == DT_ACT_RELU &&
			  (int64_t)p->g.kh * p->g.kw < DT_POOL_MAX_WINDOW;
	p->plan = dt_plan_pool(dev, &p->g, max_batch);
	return p->plan ? 0 : dt_error("layer '%s': the backend cannot make this pooling", l->name);
}

/* t as (N, out_h, out_w, C): global pooling's (N, C) output seen as (N, 1, 1, C). */
static struct dt_tensor out_view(const struct pool2d *p, const struct dt_tensor *t)
{
	struct dt_tensor v = *t;
	v.shape = dt_shape_make(4, (int[]){ t->shape.dim[0], p->g.out_h, p->g.out_w, p->g.c });
	return v;
}

void dt_pool2d_forward(struct dt_layer *l, const struct dt_tensor *x, struct dt_tensor *y,
		       const struct dt_step_ctx *ctx)
{
	struct pool2d *p = l->priv;
	struct dt_tensor yv = out_view(p, y);
	dt_op_pool_forward(p->plan, x, &yv, ctx->training);
}

void dt_pool2d_backward(struct dt_layer *l, const struct dt_tensor *x, const struct dt_tensor *y,
			struct dt_tensor *dy, struct dt_tensor *dx)
{
	struct pool2d *p = l->priv;
	struct dt_tensor dyv;
	if (!dx)
		return;
	dyv = out_view(p, dy);
	if (l->act_before != DT_ACT_LINEAR && !p->g.after_relu) {
		struct dt_tensor yv = out_view(p, y);
		dt_op_act_backward(l->act_before, NULL, &yv, &dyv, &dyv);
	}
	dt_op_pool_backward(p->plan, &dyv, dx);
}

void dt_pool2d_release(struct dt_layer *l)
{
	struct pool2d *p = l->priv;
	if (p)
		dt_plan_free(p->plan);
	free(p);
	l->priv = NULL;
}

const char *dt_pool2d_export(const struct dt_layer *l, struct dt_onnx *g, const char *x)
{
	static const int64_t to_nchw[4] = { 0, 3, 1, 2 }, to_nhwc[4] = { 0, 2, 3, 1 };
	const struct pool2d *pp = l->priv;
	const struct dt_pool_geom *p = &pp->g;
	const char *y;

	if (pp->global) { /* (N, H, W, C) or (N, steps, C) -> (N, C), or keeping ones */
		y = dt_onnx_node(g, p->kind == DT_POOL_MAX ? "ReduceMax" : "ReduceMean", &x, 1, l->name);
		dt_onnx_attr_ints(g, "axes", pp->dims, (int64_t[]){ 1, 2 });
		dt_onnx_attr_int(g, "keepdims", pp->keepdims);
		return y;
	}
	x = pp->dims == 2 ? dt_onnx_transpose(g, x, to_nchw, l->name) : dt_window1d_transpose(g, x, l->name);
	/* AveragePool's count_include_pad defaults to 0: padding stays out of the mean, as here. */
	y = dt_onnx_node(g, p->kind == DT_POOL_MAX ? "MaxPool" : "AveragePool", &x, 1, l->name);
	if (pp->dims == 1) {
		dt_onnx_attr_ints(g, "kernel_shape", 1, (int64_t[]){ p->kw });
		dt_onnx_attr_ints(g, "strides", 1, (int64_t[]){ p->stride_w });
		dt_onnx_attr_ints(g, "pads", 2, (int64_t[]){ p->pad_left, p->pad_right });
		return dt_window1d_transpose(g, y, l->name);
	}
	dt_onnx_attr_ints(g, "kernel_shape", 2, (int64_t[]){ p->kh, p->kw });
	dt_onnx_attr_ints(g, "strides", 2, (int64_t[]){ p->stride_h, p->stride_w });
	dt_onnx_attr_ints(g, "pads", 4, (int64_t[]){ p->pad_top, p->pad_left, p->pad_bottom, p->pad_right });
	return dt_onnx_transpose(g, y, to_nhwc, l->name);
}

/* The geometries both pooling layers are checked with. */
const struct dt_layer_example dt_pool2d_examples[] = {
	{ "4,4,2", NULL },
	{ "5,5,2", "{pool_size: 2}" },
	{ "5,6,1", "{pool_size: 3, strides: 2}" },
	{ "5,7,2", "{pool_size: [2, 3], strides: [1, 2], padding: same}" },
	{ "5,5,1", "{pool_size: 2, padding: same}" },
	{ "6,4,1", "{pool_size: [3, 1], strides: 1}" },
	{ NULL, NULL },
};

const struct dt_layer_example dt_pool1d_examples[] = {
	{ "6,2", NULL },
	{ "7,2", "{pool_size: 2}" },
	{ "8,1", "{pool_size: 3, strides: 2}" },
	{ "7,2", "{pool_size: [3], strides: [1], padding: same}" },
	{ "5,1", "{pool_size: 2, padding: same}" },
	{ "9,2", "{pool_size: 4, strides: 3, padding: same}" },
	{ NULL, NULL },
};
