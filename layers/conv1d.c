/*
 * conv1d: y = act(conv(x, kernel) + bias) along the steps of a sequence, as
 * Keras' Conv1D, channels last. Arguments: filters (required), kernel_size
 * (required, int or [k]), strides (1), padding (valid | same | causal),
 * dilation_rate (1), activation (linear), use_bias (true),
 * kernel_initializer (glorot_uniform), bias_initializer (zeros),
 * kernel_regularizer (none).
 * Parameters: kernel (k, in, filters); bias (filters).
 * (steps, C) -> (out_steps, filters), run on the backend's 2-D convolution
 * plan at height 1: the kernel (k, in, filters) is (1, k, in, filters) there,
 * and causal padding is (k - 1) * dilation zeros before the sequence only.
 */
#include <stdlib.h>

#include "core/error.h"
#include "core/export/onnx.h"
#include "layers.h"
#include "window.h"
#include "window1d.h"

enum { KERNEL, BIAS };
enum { PREACT }; /* buffer: conv + bias, kept when the activation's derivative needs it */

struct conv1d {
	struct dt_conv_geom g;
	struct dt_plan *plan;
};

static int conv1d_init(struct dt_layer *l, const struct dt_node *args)
{
	static const char *const keys[] = { "filters", "kernel_size", "strides", "padding", "dilation_rate",
					    "activation", "use_bias", "kernel_initializer", "bias_initializer",
					    "kernel_regularizer", NULL };
	struct dt_conv_geom g = { 0 };
	int64_t filters;
	int k, s, d, use_bias, w;
	enum dt_padding1d pad;
	enum dt_init kinit, binit;
	float l1, l2;
	char shape[64];
	struct conv1d *c;

	if (dt_layer_check_keys(l, args, keys) < 0 || dt_cfg_require(args, "filters", "conv1d") < 0 ||
	    dt_cfg_int(args, "filters", 0, 1, 1 << 24, &filters) < 0 ||
	    dt_cfg_require(args, "kernel_size", "conv1d") < 0 ||
	    dt_window1d_int(args, "kernel_size", 1, 1, 1 << 16, &k) < 0 ||
	    dt_window1d_int(args, "strides", 1, 1, 1 << 16, &s) < 0 || dt_window1d_padding(args, &pad) < 0 ||
	    dt_window1d_int(args, "dilation_rate", 1, 1, 1 << 16, &d) < 0 ||
	    dt_layer_activation(args, &l->act) < 0 || dt_cfg_bool(args, "use_bias", 1, &use_bias) < 0 ||
	    dt_layer_initializer(args, "kernel_initializer", DT_INIT_GLOROT_UNIFORM, &kinit) < 0 ||
	    dt_layer_initializer(args, "bias_initializer", DT_INIT_ZEROS, &binit) < 0 ||
	    dt_layer_regularizer(args, "kernel_regularizer", &l1, &l2) < 0 || dt_window1d_check_input(l, args) < 0)
		return -1;
	if ((int64_t)(k - 1) * d + 1 > DT_CONV_MAX_SPAN)
		return dt_node_error(dt_node_get(args, "dilation_rate"),
				     "layer '%s': a kernel of %d dilated by %d spans %lld steps, more than the %d a "
				     "convolution takes; use a smaller dilation_rate or kernel_size",
				     l->name, k, d, (long long)(k - 1) * d + 1, DT_CONV_MAX_SPAN);
	if (s > 1 && d > 1)
		return dt_node_error(dt_node_get(args, "dilation_rate"),
				     "layer '%s': strides > 1 cannot be combined with dilation_rate > 1 (as in Keras)",
				     l->name);
	g.in_h = 1;
	g.in_w = l->in.dim[0];
	g.in_c = l->in.dim[1];
	g.out_c = (int)filters;
	g.kh = g.stride_h = g.dil_h = g.out_h = 1;
	g.kw = k;
	g.stride_w = s;
	g.dil_w = d;
	if (pad == DT_PADDING1D_CAUSAL) { /* Keras: pad (k - 1) * d before, then valid */
		g.pad_left = (k - 1) * d;
		g.out_w = dt_window_dim(g.in_w + g.pad_left, k, s, d, DT_PADDING_VALID, &w, &w);
	} else {
		g.out_w = dt_window_dim(g.in_w, k, s, d, pad == DT_PADDING1D_SAME ? DT_PADDING_SAME : DT_PADDING_VALID,
					&g.pad_left, &g.pad_right);
	}
	if (!g.out_w)
		return dt_node_error(dt_node_get(args, "kernel_size"),
				     "layer '%s': the kernel of %d%s does not fit the input %s with padding 'valid'; use "
				     "a smaller kernel_size or padding: same or causal",
				     l->name, k, d > 1 ? " (dilated)" : "", dt_shape_format(&l->in, 0, shape, sizeof(shape)));
	l->out = dt_shape_make(2, (int[]){ g.out_w, g.out_c });

	w = dt_layer_param(l, "kernel", dt_shape_make(3, (int[]){ k, g.in_c, g.out_c }), kinit, k * g.in_c,
			   k * g.out_c);
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

static int conv1d_alloc(struct dt_layer *l, struct dt_device dev, int max_batch)
{
	struct conv1d *c = l->priv;
	c->plan = dt_plan_conv(dev, &c->g, max_batch);
	return c->plan ? 0 : dt_error("layer '%s': the backend cannot make this convolution", l->name);
}

static void conv1d_forward(struct dt_layer *l, const struct dt_tensor *x, struct dt_tensor *y,
			   const struct dt_step_ctx *ctx)
{
	struct conv1d *c = l->priv;
	dt_op_conv_forward(c->plan, x, &l->params[KERNEL].value, l->nparams > BIAS ? &l->params[BIAS].value : NULL,
			   y);
	if (c->g.act == DT_ACT_LINEAR)
		dt_layer_act_forward(l, PREACT, y);
}

static void conv1d_backward(struct dt_layer *l, const struct dt_tensor *x, const struct dt_tensor *y,
			    struct dt_tensor *dy, struct dt_tensor *dx)
{
	struct conv1d *c = l->priv;
	dt_layer_act_backward(l, PREACT, y, dy);
	dt_op_conv_backward(c->plan, x, &l->params[KERNEL].value, dy, &l->params[KERNEL].grad,
			    l->nparams > BIAS ? &l->params[BIAS].grad : NULL, dx);
}

static void conv1d_release(struct dt_layer *l)
{
	struct conv1d *c = l->priv;
	if (c)
		dt_plan_free(c->plan);
	free(c);
	l->priv = NULL;
}

static int64_t conv1d_flops(const struct dt_layer *l)
{
	const struct dt_conv_geom *g = &((const struct conv1d *)l->priv)->g;
	return 2 * (int64_t)g->kw * g->in_c * g->out_c * g->out_w;
}

/*
 * ONNX's 1-D Conv is (N, C, steps) with an (out, in, k) weight: the input is
 * transposed, the kernel from Keras' (k, in, out), and the output back to
 * channels last before the activation.
 */
static const char *conv1d_export(const struct dt_layer *l, struct dt_onnx *g, const char *x)
{
	const struct dt_conv_geom *c = &((const struct conv1d *)l->priv)->g;
	int64_t dims[3] = { c->out_c, c->in_c, c->kw };
	float *k = dt_onnx_param_alloc(&l->params[KERNEL]);
	float *w = dt_malloc((size_t)dt_shape_count(&l->params[KERNEL].shape) * sizeof(float));
	const char *in[3], *y;

	for (int j = 0; j < c->kw; j++)
		for (int ci = 0; ci < c->in_c; ci++)
			for (int co = 0; co < c->out_c; co++)
				w[((int64_t)co * c->in_c + ci) * c->kw + j] = k[((int64_t)j * c->in_c + ci) * c->out_c + co];
	in[0] = dt_window1d_transpose(g, x, l->name);
	in[1] = dt_onnx_floats(g, l->name, 3, dims, w);
	in[2] = l->nparams > BIAS ? dt_onnx_param(g, l->name, &l->params[BIAS]) : NULL;
	free(k);
	free(w);
	y = dt_onnx_node(g, "Conv", in, l->nparams > BIAS ? 3 : 2, l->name);
	dt_onnx_attr_ints(g, "kernel_shape", 1, (int64_t[]){ c->kw });
	dt_onnx_attr_ints(g, "strides", 1, (int64_t[]){ c->stride_w });
	dt_onnx_attr_ints(g, "dilations", 1, (int64_t[]){ c->dil_w });
	dt_onnx_attr_ints(g, "pads", 2, (int64_t[]){ c->pad_left, c->pad_right });
	return dt_onnx_activation(g, l->act, dt_window1d_transpose(g, y, l->name), l->name);
}

static const struct dt_layer_example examples[] = {
	{ "6,2", "{filters: 3, kernel_size: 3}" },
	{ "7,2", "{filters: 2, kernel_size: 3, padding: same, activation: elu}" },
	{ "8,1", "{filters: 2, kernel_size: 3, strides: 2, activation: relu}" },
	{ "7,2", "{filters: 2, kernel_size: [2], strides: 2, padding: same, activation: tanh}" },
	{ "9,1", "{filters: 2, kernel_size: 3, dilation_rate: 2}" },
	{ "6,2", "{filters: 2, kernel_size: 3, padding: causal}" },
	{ "7,2", "{filters: 2, kernel_size: 2, dilation_rate: 2, padding: causal, use_bias: false}" },
	{ "7,1", "{filters: 2, kernel_size: 3, strides: 2, padding: causal, activation: swish}" },
	{ "4,3", "{filters: 2, kernel_size: 1, activation: gelu, kernel_regularizer: {l2: 0.1}}" },
	{ NULL, NULL },
};

const struct dt_layer_type dt_conv1d_layer = {
	.name = "conv1d",
	.class_name = "Conv1D",
	.examples = examples,
	.init = conv1d_init,
	.forward = conv1d_forward,
	.backward = conv1d_backward,
	.release = conv1d_release,
	.alloc = conv1d_alloc,
	.flops = conv1d_flops,
	.export = conv1d_export,
};
