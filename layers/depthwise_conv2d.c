/*
 * depthwise_conv2d: each input channel convolved with its own
 * depth_multiplier kernels, as Keras' DepthwiseConv2D, channels last:
 * y[..., c * m + j] = act(conv(x[..., c], kernel[:, :, c, j]) + bias).
 * Arguments: kernel_size (required), strides (1), padding (valid),
 * depth_multiplier (1), dilation_rate (1), activation (linear), use_bias
 * (true), depthwise_initializer (glorot_uniform), bias_initializer (zeros),
 * depthwise_regularizer (none).
 * Parameters: kernel (kh, kw, in, depth_multiplier), Keras' name and layout;
 * bias (in * depth_multiplier). A grouped convolution plan (groups = in).
 */
#include <stdlib.h>

#include "core/error.h"
#include "core/export/onnx.h"
#include "depthwise.h"
#include "layers.h"
#include "window.h"

enum { KERNEL, BIAS };
enum { PREACT };

struct depthwise {
	struct dt_conv_geom g;
	struct dt_plan *plan;
};

int dt_depthwise_geom(struct dt_layer *l, const struct dt_node *args, const char *type, struct dt_conv_geom *g)
{
	int64_t m;
	int k[2], s[2], d[2];
	enum dt_padding pad;
	char shape[64];

	if (dt_cfg_require(args, "kernel_size", type) < 0 || dt_window_pair(args, "kernel_size", 1, 1, 1 << 16, k) < 0 ||
	    dt_window_pair(args, "strides", 1, 1, 1 << 16, s) < 0 || dt_window_padding(args, &pad) < 0 ||
	    dt_cfg_int(args, "depth_multiplier", 1, 1, 1 << 16, &m) < 0 ||
	    dt_window_pair(args, "dilation_rate", 1, 1, 1 << 16, d) < 0)
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
	if ((int64_t)l->in.dim[2] * m > 1 << 24)
		return dt_node_error(dt_node_get(args, "depth_multiplier"),
				     "layer '%s': %d channels times depth_multiplier %lld is over %d channels", l->name,
				     l->in.dim[2], (long long)m, 1 << 24);
	*g = (struct dt_conv_geom){ 0 };
	g->in_h = l->in.dim[0];
	g->in_w = l->in.dim[1];
	g->in_c = l->in.dim[2];
	g->out_c = (int)(g->in_c * m);
	g->groups = g->in_c;
	g->kh = k[0];
	g->kw = k[1];
	g->stride_h = s[0];
	g->stride_w = s[1];
	g->dil_h = d[0];
	g->dil_w = d[1];
	g->out_h = dt_window_dim(g->in_h, g->kh, g->stride_h, g->dil_h, pad, &g->pad_top, &g->pad_bottom);
	g->out_w = dt_window_dim(g->in_w, g->kw, g->stride_w, g->dil_w, pad, &g->pad_left, &g->pad_right);
	if (!g->out_h || !g->out_w)
		return dt_node_error(dt_node_get(args, "kernel_size"),
				     "layer '%s': the %dx%d kernel%s does not fit the input %s with padding "
				     "'valid'; use a smaller kernel_size or padding: same",
				     l->name, g->kh, g->kw, d[0] > 1 || d[1] > 1 ? " (dilated)" : "",
				     dt_shape_format(&l->in, 0, shape, sizeof(shape)));
	return 0;
}

static int depthwise_init(struct dt_layer *l, const struct dt_node *args)
{
	static const char *const keys[] = { "kernel_size", "strides", "padding", "depth_multiplier", "dilation_rate",
					    "activation", "use_bias", "depthwise_initializer", "bias_initializer",
					    "depthwise_regularizer", NULL };
	struct dt_conv_geom g;
	int use_bias, w, m;
	enum dt_init kinit, binit;
	float l1, l2;
	struct depthwise *c;

	if (dt_layer_check_keys(l, args, keys) < 0 || dt_depthwise_geom(l, args, "depthwise_conv2d", &g) < 0 ||
	    dt_layer_activation(args, &l->act) < 0 || dt_cfg_bool(args, "use_bias", 1, &use_bias) < 0 ||
	    dt_layer_initializer(args, "depthwise_initializer", DT_INIT_GLOROT_UNIFORM, &kinit) < 0 ||
	    dt_layer_initializer(args, "bias_initializer", DT_INIT_ZEROS, &binit) < 0 ||
	    dt_layer_regularizer(args, "depthwise_regularizer", &l1, &l2) < 0)
		return -1;
	m = g.out_c / g.in_c;
	l->out = dt_shape_make(3, (int[]){ g.out_h, g.out_w, g.out_c });
	/* Keras' fans of a (kh, kw, in, m) kernel: receptive field times in, and times m. */
	w = dt_layer_param(l, "kernel", dt_shape_make(4, (int[]){ g.kh, g.kw, g.in_c, m }), kinit,
			   g.kh * g.kw * g.in_c, g.kh * g.kw * m);
	l->params[w].l1 = l1;
	l->params[w].l2 = l2;
	if (use_bias)
		dt_layer_param(l, "bias", dt_shape_make(1, (int[]){ g.out_c }), binit, 1, g.out_c);
	if (dt_act_needs_input(l->act))
		dt_layer_buffer(l, "preact", dt_shape_count(&l->out));
	c = dt_calloc(1, sizeof(*c));
	c->g = g;
	l->priv = c;
	return 0;
}

static int depthwise_alloc(struct dt_layer *l, struct dt_device dev, int max_batch)
{
	struct depthwise *c = l->priv;
	c->plan = dt_plan_conv(dev, &c->g, max_batch);
	return c->plan ? 0 : dt_error("layer '%s': the backend cannot make this depthwise convolution", l->name);
}

static void depthwise_forward(struct dt_layer *l, const struct dt_tensor *x, struct dt_tensor *y,
			      const struct dt_step_ctx *ctx)
{
	struct depthwise *c = l->priv;
	dt_op_conv_forward(c->plan, x, &l->params[KERNEL].value, l->nparams > BIAS ? &l->params[BIAS].value : NULL,
			   y);
	if (l->nbufs > PREACT) {
		struct dt_tensor z = dt_layer_buf_view(l, PREACT, y->shape.dim[0]);
		dt_op_copy(y, &z);
	}
	if (l->act != DT_ACT_LINEAR)
		dt_op_act_forward(l->act, y, y);
}

static void depthwise_backward(struct dt_layer *l, const struct dt_tensor *x, const struct dt_tensor *y,
			       struct dt_tensor *dy, struct dt_tensor *dx)
{
	struct depthwise *c = l->priv;
	if (l->act != DT_ACT_LINEAR && !l->fused_act) {
		struct dt_tensor z;
		if (l->nbufs > PREACT)
			z = dt_layer_buf_view(l, PREACT, y->shape.dim[0]);
		dt_op_act_backward(l->act, l->nbufs > PREACT ? &z : NULL, y, dy, dy);
	}
	dt_op_conv_backward(c->plan, x, &l->params[KERNEL].value, dy, &l->params[KERNEL].grad,
			    l->nparams > BIAS ? &l->params[BIAS].grad : NULL, dx);
}

static void depthwise_release(struct dt_layer *l)
{
	struct depthwise *c = l->priv;
	if (c)
		dt_plan_free(c->plan);
	free(c);
	l->priv = NULL;
}

/* kh * kw multiply-adds per output value. */
static int64_t depthwise_flops(const struct dt_layer *l)
{
	const struct dt_conv_geom *g = &((const struct depthwise *)l->priv)->g;
	return 2 * (int64_t)g->kh * g->kw * g->out_c * g->out_h * g->out_w;
}

const char *dt_conv_export_nodes(struct dt_onnx *o, const char *name, const char *x, const struct dt_conv_geom *c,
				 const float *k, const struct dt_param *bias)
{
	static const int64_t to_nchw[4] = { 0, 3, 1, 2 }, to_nhwc[4] = { 0, 2, 3, 1 };
	const int groups = dt_conv_groups(c), ig = c->in_c / groups;
	int64_t dims[4] = { c->out_c, ig, c->kh, c->kw };
	float *w = dt_malloc((size_t)dt_conv_kernel_count(c) * sizeof(float));
	const char *in[3], *y;

	/* ONNX's (out, in/groups, kh, kw) from Keras' (kh, kw, in/groups, out). */
	for (int i = 0; i < c->kh; i++)
		for (int j = 0; j < c->kw; j++)
			for (int ci = 0; ci < ig; ci++)
				for (int co = 0; co < c->out_c; co++)
					w[(((int64_t)co * ig + ci) * c->kh + i) * c->kw + j] =
						k[(((int64_t)i * c->kw + j) * ig + ci) * c->out_c + co];
	in[0] = dt_onnx_transpose(o, x, to_nchw, name);
	in[1] = dt_onnx_floats(o, name, 4, dims, w);
	in[2] = bias ? dt_onnx_param(o, name, bias) : NULL;
	free(w);
	y = dt_onnx_node(o, "Conv", in, bias ? 3 : 2, name);
	dt_onnx_attr_ints(o, "kernel_shape", 2, (int64_t[]){ c->kh, c->kw });
	dt_onnx_attr_ints(o, "strides", 2, (int64_t[]){ c->stride_h, c->stride_w });
	dt_onnx_attr_ints(o, "dilations", 2, (int64_t[]){ c->dil_h, c->dil_w });
	dt_onnx_attr_ints(o, "pads", 4, (int64_t[]){ c->pad_top, c->pad_left, c->pad_bottom, c->pad_right });
	if (groups > 1)
		dt_onnx_attr_int(o, "group", groups);
	return dt_onnx_transpose(o, y, to_nhwc, name);
}

static const char *depthwise_export(const struct dt_layer *l, struct dt_onnx *o, const char *x)
{
	const struct dt_conv_geom *c = &((const struct depthwise *)l->priv)->g;
	float *k = dt_onnx_param_alloc(&l->params[KERNEL]);
	const char *y = dt_conv_export_nodes(o, l->name, x, c, k, l->nparams > BIAS ? &l->params[BIAS] : NULL);
	free(k);
	return dt_onnx_activation(o, l->act, y, l->name);
}

static const struct dt_layer_example examples[] = {
	{ "5,5,2", "{kernel_size: 3}" },
	{ "5,6,3", "{kernel_size: 3, depth_multiplier: 2, padding: same, activation: elu}" },
	{ "7,6,2", "{kernel_size: [3, 2], strides: 2, activation: tanh}" },
	{ "7,7,2", "{kernel_size: 3, dilation_rate: 2, depth_multiplier: 3, use_bias: false}" },
	{ "4,5,2", "{kernel_size: 2, strides: [2, 1], padding: same, activation: swish, depthwise_regularizer: {l2: 0.1}}" },
	{ NULL, NULL },
};

const struct dt_layer_type dt_depthwise_conv2d_layer = {
	.name = "depthwise_conv2d",
	.class_name = "DepthwiseConv2D",
	.examples = examples,
	.init = depthwise_init,
	.forward = depthwise_forward,
	.backward = depthwise_backward,
	.release = depthwise_release,
	.alloc = depthwise_alloc,
	.flops = depthwise_flops,
	.export = depthwise_export,
};
