/*
 * conv2d: y = act(conv(x, kernel) + bias), as Keras' Conv2D, channels last.
 * Arguments: filters (required), kernel_size (required, int or [kh, kw]),
 * strides (1), padding (valid), dilation_rate (1), activation (linear),
 * use_bias (true), kernel_initializer (glorot_uniform), bias_initializer
 * (zeros), kernel_regularizer (none).
 * Parameters: kernel (kh, kw, in, filters); bias (filters).
 * (H, W, C) -> (out_h, out_w, filters); the backend's conv plan is made in alloc.
 */
#include <stdlib.h>

#include "core/error.h"
#include "core/export/onnx.h"
#include "layers.h"
#include "window.h"

enum { KERNEL, BIAS };
enum { PREACT }; /* buffer: conv + bias, kept when the activation's derivative needs it */

struct conv2d {
	struct dt_conv_geom g;
	struct dt_plan *plan;
};

static int conv2d_init(struct dt_layer *l, const struct dt_node *args)
{
	static const char *const keys[] = { "filters", "kernel_size", "strides", "padding", "dilation_rate",
					    "activation", "use_bias", "kernel_initializer", "bias_initializer",
					    "kernel_regularizer", NULL };
	struct dt_conv_geom g = { 0 };
	int64_t filters;
	int k[2], s[2], d[2], use_bias, w;
	enum dt_padding pad;
	enum dt_init kinit, binit;
	float l1, l2;
	char shape[64];
	struct conv2d *c;

	if (dt_layer_check_keys(l, args, keys) < 0 || dt_cfg_require(args, "filters", "conv2d") < 0 ||
	    dt_cfg_int(args, "filters", 0, 1, 1 << 24, &filters) < 0 ||
	    dt_cfg_require(args, "kernel_size", "conv2d") < 0 ||
	    dt_window_pair(args, "kernel_size", 1, 1, 1 << 16, k) < 0 ||
	    dt_window_pair(args, "strides", 1, 1, 1 << 16, s) < 0 || dt_window_padding(args, &pad) < 0 ||
	    dt_window_pair(args, "dilation_rate", 1, 1, 1 << 16, d) < 0 ||
	    dt_layer_activation(args, &l->act) < 0 || dt_cfg_bool(args, "use_bias", 1, &use_bias) < 0 ||
	    dt_layer_initializer(args, "kernel_initializer", DT_INIT_GLOROT_UNIFORM, &kinit) < 0 ||
	    dt_layer_initializer(args, "bias_initializer", DT_INIT_ZEROS, &binit) < 0 ||
	    dt_layer_regularizer(args, "kernel_regularizer", &l1, &l2) < 0)
		return -1;
	for (int i = 0; i < 2; i++)
		if ((int64_t)(k[i] - 1) * d[i] + 1 > DT_CONV_MAX_SPAN)
			return dt_node_error(dt_node_get(args, "dilation_rate"),
					     "layer '%s': a kernel of %d dilated by %d spans %lld positions, more "
					     "than the %d a convolution takes; use a smaller dilation_rate or "
					     "kernel_size",
					     l->name, k[i], d[i], (long long)(k[i] - 1) * d[i] + 1, DT_CONV_MAX_SPAN);
	if ((s[0] > 1 || s[1] > 1) && (d[0] > 1 || d[1] > 1))
		return dt_node_error(dt_node_get(args, "dilation_rate"),
				     "layer '%s': strides > 1 cannot be combined with dilation_rate > 1 (as in Keras)",
				     l->name);
	if (l->in.ndim != 3)
		return dt_node_error(args, "layer '%s' needs an image input (height, width, channels) but gets %s; "
				     "add '- reshape: {target_shape: [H, W, C]}' before it",
				     l->name, dt_shape_format(&l->in, 1, shape, sizeof(shape)));
	g.in_h = l->in.dim[0];
	g.in_w = l->in.dim[1];
	g.in_c = l->in.dim[2];
	g.out_c = (int)filters;
	g.kh = k[0];
	g.kw = k[1];
	g.stride_h = s[0];
	g.stride_w = s[1];
	g.dil_h = d[0];
	g.dil_w = d[1];
	g.out_h = dt_window_dim(g.in_h, g.kh, g.stride_h, g.dil_h, pad, &g.pad_top, &g.pad_bottom);
	g.out_w = dt_window_dim(g.in_w, g.kw, g.stride_w, g.dil_w, pad, &g.pad_left, &g.pad_right);
	if (!g.out_h || !g.out_w)
		return dt_node_error(dt_node_get(args, "kernel_size"), "layer '%s': the %dx%d kernel%s does not fit the input %s with padding "
				     "'valid'; use a smaller kernel_size or padding: same",
				     l->name, g.kh, g.kw, d[0] > 1 || d[1] > 1 ? " (dilated)" : "",
				     dt_shape_format(&l->in, 0, shape, sizeof(shape)));
	l->out = dt_shape_make(3, (int[]){ g.out_h, g.out_w, g.out_c });

	w = dt_layer_param(l, "kernel", dt_shape_make(4, (int[]){ g.kh, g.kw, g.in_c, g.out_c }), kinit,
			   g.kh * g.kw * g.in_c, g.kh * g.kw * g.out_c);
	l->params[w].l1 = l1;
	l->params[w].l2 = l2;
	if (use_bias)
		dt_layer_param(l, "bias", dt_shape_make(1, (int[]){ g.out_c }), binit, 1, g.out_c);
	dt_layer_act_buffer(l);
	c = dt_calloc(1, sizeof(*c));
	c->g = g;
	/* relu goes to the plan's forward, which may fuse it (dt_conv_geom.act); every other activation stays here */
	c->g.act = l->act == DT_ACT_RELU ? DT_ACT_RELU : DT_ACT_LINEAR;
	l->priv = c;
	return 0;
}

static unsigned conv2d_layouts(const struct dt_layer *l, struct dt_device dev, int block, int with_dx)
{
	const struct conv2d *c = l->priv;
	unsigned pairs = 0;
	for (int x = 0; x < 2; x++)
		for (int y = 0; y < 2; y++) {
			struct dt_conv_geom g = c->g;
			g.x_layout = x ? DT_LAYOUT_BLOCKED : DT_LAYOUT_NHWC;
			g.y_layout = y ? DT_LAYOUT_BLOCKED : DT_LAYOUT_NHWC;
			g.block = block;
			if ((x || y) && dt_plan_conv_runs(dev, &g, with_dx))
				pairs |= DT_LAYOUT_PAIR(x, y);
		}
	return pairs;
}

static int conv2d_alloc(struct dt_layer *l, struct dt_device dev, int max_batch)
{
	struct conv2d *c = l->priv;
	c->g.x_layout = l->x_layout;
	c->g.y_layout = l->y_layout;
	c->g.block = l->block;
	c->plan = dt_plan_conv(dev, &c->g, max_batch);
	return c->plan ? 0 : dt_error("layer '%s': the backend cannot make this convolution", l->name);
}

static void conv2d_forward(struct dt_layer *l, const struct dt_tensor *x, struct dt_tensor *y,
			   const struct dt_step_ctx *ctx)
{
	struct conv2d *c = l->priv;
	dt_op_conv_forward(c->plan, x, &l->params[KERNEL].value, l->nparams > BIAS ? &l->params[BIAS].value : NULL,
			   y);
	if (c->g.act == DT_ACT_LINEAR)
		dt_layer_act_forward(l, PREACT, y);
}

static void conv2d_backward(struct dt_layer *l, const struct dt_tensor *x, const struct dt_tensor *y,
			    struct dt_tensor *dy, struct dt_tensor *dx)
{
	struct conv2d *c = l->priv;
	dt_layer_act_backward(l, PREACT, y, dy);
	dt_op_conv_backward(c->plan, x, &l->params[KERNEL].value, dy, &l->params[KERNEL].grad,
			    l->nparams > BIAS ? &l->params[BIAS].grad : NULL, dx);
}

static void conv2d_release(struct dt_layer *l)
{
	struct conv2d *c = l->priv;
	if (c)
		dt_plan_free(c->plan);
	free(c);
	l->priv = NULL;
}

static int64_t conv2d_flops(const struct dt_layer *l)
{
	const struct dt_conv_geom *g = &((const struct conv2d *)l->priv)->g;
	return 2 * (int64_t)g->kh * g->kw * g->in_c * g->out_c * g->out_h * g->out_w;
}

/*
 * ONNX's Conv is NCHW with an (out, in, kh, kw) weight: the input is
 * transposed to NCHW, the kernel from Keras' (kh, kw, in, out), and the
 * output back to channels last before the activation.
 */
static const char *conv2d_export(const struct dt_layer *l, struct dt_onnx *g, const char *x)
{
	static const int64_t to_nchw[4] = { 0, 3, 1, 2 }, to_nhwc[4] = { 0, 2, 3, 1 };
	const struct dt_conv_geom *c = &((const struct conv2d *)l->priv)->g;
	int64_t dims[4] = { c->out_c, c->in_c, c->kh, c->kw };
	float *k = dt_onnx_param_alloc(&l->params[KERNEL]);
	float *w = dt_malloc((size_t)dt_shape_count(&l->params[KERNEL].shape) * sizeof(float));
	const char *in[3], *y;

	for (int i = 0; i < c->kh; i++)
		for (int j = 0; j < c->kw; j++)
			for (int ci = 0; ci < c->in_c; ci++)
				for (int co = 0; co < c->out_c; co++)
					w[(((int64_t)co * c->in_c + ci) * c->kh + i) * c->kw + j] =
						k[(((int64_t)i * c->kw + j) * c->in_c + ci) * c->out_c + co];
	in[0] = dt_onnx_transpose(g, x, to_nchw, l->name);
	in[1] = dt_onnx_floats(g, l->name, 4, dims, w);
	in[2] = l->nparams > BIAS ? dt_onnx_param(g, l->name, &l->params[BIAS]) : NULL;
	free(k);
	free(w);
	y = dt_onnx_node(g, "Conv", in, l->nparams > BIAS ? 3 : 2, l->name);
	dt_onnx_attr_ints(g, "kernel_shape", 2, (int64_t[]){ c->kh, c->kw });
	dt_onnx_attr_ints(g, "strides", 2, (int64_t[]){ c->stride_h, c->stride_w });
	dt_onnx_attr_ints(g, "dilations", 2, (int64_t[]){ c->dil_h, c->dil_w });
	dt_onnx_attr_ints(g, "pads", 4, (int64_t[]){ c->pad_top, c->pad_left, c->pad_bottom, c->pad_right });
	return dt_onnx_activation(g, l->act, dt_onnx_transpose(g, y, to_nhwc, l->name), l->name);
}

static const struct dt_layer_example examples[] = {
	{ "5,5,2", "{filters: 3, kernel_size: 3}" },
	{ "5,6,2", "{filters: 2, kernel_size: 3, padding: same, activation: elu}" },
	{ "7,6,1", "{filters: 2, kernel_size: 3, strides: 2, activation: relu}" },
	{ "6,7,2", "{filters: 2, kernel_size: [2, 3], strides: [2, 1], padding: same, activation: tanh}" },
	{ "7,7,1", "{filters: 2, kernel_size: 3, dilation_rate: 2}" },
	{ "6,5,2", "{filters: 2, kernel_size: [3, 2], dilation_rate: [2, 1], padding: same, use_bias: false}" },
	{ "4,4,3", "{filters: 2, kernel_size: 1, activation: gelu, kernel_regularizer: {l2: 0.1}}" },
	{ "5,5,1", "{filters: 2, kernel_size: 4, strides: 3, padding: same, activation: swish}" },
	{ NULL, NULL },
};

const struct dt_layer_type dt_conv2d_layer = {
	.name = "conv2d",
	.class_name = "Conv2D",
	.examples = examples,
	.init = conv2d_init,
	.forward = conv2d_forward,
	.backward = conv2d_backward,
	.release = conv2d_release,
	.alloc = conv2d_alloc,
	.layouts = conv2d_layouts,
	.flops = conv2d_flops,
	.export = conv2d_export,
};
