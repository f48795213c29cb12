/*
 * separable_conv2d: a depthwise convolution (each channel with its own
 * depth_multiplier kernels) then a pointwise 1x1 convolution to `filters`
 * channels, as Keras' SeparableConv2D, channels last:
 * y = act(pointwise(depthwise(x)) + bias).
 * Arguments: filters (required), kernel_size (required), strides (1),
 * padding (valid), depth_multiplier (1), dilation_rate (1), activation
 * (linear), use_bias (true), depthwise_initializer and
 * pointwise_initializer (glorot_uniform), bias_initializer (zeros),
 * depthwise_regularizer and pointwise_regularizer (none).
 * Parameters, Keras' names and layouts: depthwise_kernel (kh, kw, in, m),
 * pointwise_kernel (1, 1, in * m, filters), bias (filters). Two convolution
 * plans (a grouped one, then a 1x1) and the depthwise output between them.
 */
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/export/onnx.h"
#include "depthwise.h"
#include "layers.h"

enum { DEPTHWISE, POINTWISE, BIAS };
enum { MID, DMID, PREACT }; /* the depthwise output and its gradient; conv + bias for gelu/swish */

struct separable {
	struct dt_conv_geom dw, pw;
	struct dt_plan *dw_plan, *pw_plan;
};

static int separable_init(struct dt_layer *l, const struct dt_node *args)
{
	static const char *const keys[] = { "filters", "kernel_size", "strides", "padding", "depth_multiplier",
					    "dilation_rate", "activation", "use_bias", "depthwise_initializer",
					    "pointwise_initializer", "bias_initializer", "depthwise_regularizer",
					    "pointwise_regularizer", NULL };
	struct dt_conv_geom dw, pw = { 0 };
	int64_t filters;
	int use_bias, w, m;
	enum dt_init dinit, pinit, binit;
	float dl1, dl2, pl1, pl2;
	struct separable *c;

	if (dt_layer_check_keys(l, args, keys) < 0 || dt_cfg_require(args, "filters", "separable_conv2d") < 0 ||
	    dt_cfg_int(args, "filters", 0, 1, 1 << 24, &filters) < 0 ||
	    dt_depthwise_geom(l, args, "separable_conv2d", &dw) < 0 || dt_layer_activation(args, &l->act) < 0 ||
	    dt_cfg_bool(args, "use_bias", 1, &use_bias) < 0 ||
	    dt_layer_initializer(args, "depthwise_initializer", DT_INIT_GLOROT_UNIFORM, &dinit) < 0 ||
	    dt_layer_initializer(args, "pointwise_initializer", DT_INIT_GLOROT_UNIFORM, &pinit) < 0 ||
	    dt_layer_initializer(args, "bias_initializer", DT_INIT_ZEROS, &binit) < 0 ||
	    dt_layer_regularizer(args, "depthwise_regularizer", &dl1, &dl2) < 0 ||
	    dt_layer_regularizer(args, "pointwise_regularizer", &pl1, &pl2) < 0)
		return -1;
	m = dw.out_c / dw.in_c;
	pw.in_h = pw.out_h = dw.out_h;
	pw.in_w = pw.out_w = dw.out_w;
	pw.in_c = dw.out_c;
	pw.out_c = (int)filters;
	pw.kh = pw.kw = pw.stride_h = pw.stride_w = pw.dil_h = pw.dil_w = 1;
	l->out = dt_shape_make(3, (int[]){ pw.out_h, pw.out_w, pw.out_c });

	/* Keras' fans: receptive field times the kernel's last two dimensions. */
	w = dt_layer_param(l, "depthwise_kernel", dt_shape_make(4, (int[]){ dw.kh, dw.kw, dw.in_c, m }), dinit,
			   dw.kh * dw.kw * dw.in_c, dw.kh * dw.kw * m);
	l->params[w].l1 = dl1;
	l->params[w].l2 = dl2;
	w = dt_layer_param(l, "pointwise_kernel", dt_shape_make(4, (int[]){ 1, 1, pw.in_c, pw.out_c }), pinit, pw.in_c,
			   pw.out_c);
	l->params[w].l1 = pl1;
	l->params[w].l2 = pl2;
	if (use_bias)
		dt_layer_param(l, "bias", dt_shape_make(1, (int[]){ pw.out_c }), binit, 1, pw.out_c);
	dt_layer_buffer(l, "depthwise", (int64_t)dw.out_h * dw.out_w * dw.out_c);
	dt_layer_buffer(l, "depthwise_grad", (int64_t)dw.out_h * dw.out_w * dw.out_c);
	if (dt_act_needs_input(l->act))
		dt_layer_buffer(l, "preact", dt_shape_count(&l->out));
	c = dt_calloc(1, sizeof(*c));
	c->dw = dw;
	c->pw = pw;
	l->priv = c;
	return 0;
}

static int separable_alloc(struct dt_layer *l, struct dt_device dev, int max_batch)
{
	struct separable *c = l->priv;
	c->dw_plan = dt_plan_conv(dev, &c->dw, max_batch);
	c->pw_plan = c->dw_plan ? dt_plan_conv(dev, &c->pw, max_batch) : NULL;
	return c->pw_plan ? 0 : dt_error("layer '%s': the backend cannot make this separable convolution", l->name);
}

/* A buffer as (n, H, W, C) of the depthwise output. */
static struct dt_tensor mid_view(const struct dt_layer *l, int i, int n)
{
	const struct separable *c = l->priv;
	struct dt_tensor t = dt_layer_buf_view(l, i, n);
	t.shape = dt_shape_make(4, (int[]){ n, c->dw.out_h, c->dw.out_w, c->dw.out_c });
	return t;
}

static void separable_forward(struct dt_layer *l, const struct dt_tensor *x, struct dt_tensor *y,
			      const struct dt_step_ctx *ctx)
{
	struct separable *c = l->priv;
	int n = x->shape.dim[0];
	struct dt_tensor mid = mid_view(l, MID, n);
	dt_op_conv_forward(c->dw_plan, x, &l->params[DEPTHWISE].value, NULL, &mid);
	dt_op_conv_forward(c->pw_plan, &mid, &l->params[POINTWISE].value,
			   l->nparams > BIAS ? &l->params[BIAS].value : NULL, y);
	if (l->nbufs > PREACT) {
		struct dt_tensor z = dt_layer_buf_view(l, PREACT, n);
		dt_op_copy(y, &z);
	}
	if (l->act != DT_ACT_LINEAR)
		dt_op_act_forward(l->act, y, y);
}

static void separable_backward(struct dt_layer *l, const struct dt_tensor *x, const struct dt_tensor *y,
			       struct dt_tensor *dy, struct dt_tensor *dx)
{
	struct separable *c = l->priv;
	int n = x->shape.dim[0];
	struct dt_tensor mid = mid_view(l, MID, n), dmid = mid_view(l, DMID, n);
	if (l->act != DT_ACT_LINEAR && !l->fused_act) {
		struct dt_tensor z;
		if (l->nbufs > PREACT)
			z = dt_layer_buf_view(l, PREACT, n);
		dt_op_act_backward(l->act, l->nbufs > PREACT ? &z : NULL, y, dy, dy);
	}
	dt_op_conv_backward(c->pw_plan, &mid, &l->params[POINTWISE].value, dy, &l->params[POINTWISE].grad,
			    l->nparams > BIAS ? &l->params[BIAS].grad : NULL, &dmid);
	dt_op_conv_backward(c->dw_plan, x, &l->params[DEPTHWISE].value, &dmid, &l->params[DEPTHWISE].grad, NULL, dx);
}

static void separable_release(struct dt_layer *l)
{
	struct separable *c = l->priv;
	if (c) {
		dt_plan_free(c->dw_plan);
		dt_plan_free(c->pw_plan);
	}
	free(c);
	l->priv = NULL;
}

static int64_t separable_flops(const struct dt_layer *l)
{
	const struct separable *c = l->priv;
	int64_t pixels = (int64_t)c->dw.out_h * c->dw.out_w;
	return 2 * pixels * c->dw.out_c * ((int64_t)c->dw.kh * c->dw.kw + c->pw.out_c);
}

/* Two ONNX Convs: the depthwise one (group = in) without bias, then the 1x1 with it. */
static const char *separable_export(const struct dt_layer *l, struct dt_onnx *o, const char *x)
{
	const struct separable *c = l->priv;
	float *dk = dt_onnx_param_alloc(&l->params[DEPTHWISE]), *pk = dt_onnx_param_alloc(&l->params[POINTWISE]);
	char name[160];
	const char *y;
	snprintf(name, sizeof(name), "%s/depthwise", l->name);
	y = dt_conv_export_nodes(o, name, x, &c->dw, dk, NULL);
	y = dt_conv_export_nodes(o, l->name, y, &c->pw, pk, l->nparams > BIAS ? &l->params[BIAS] : NULL);
	free(dk);
	free(pk);
	return dt_onnx_activation(o, l->act, y, l->name);
}

static const struct dt_layer_example examples[] = {
	{ "5,5,2", "{filters: 3, kernel_size: 3}" },
	{ "5,6,2", "{filters: 2, kernel_size: 3, depth_multiplier: 2, padding: same, activation: elu}" },
	{ "7,6,3", "{filters: 2, kernel_size: [2, 3], strides: 2, activation: tanh, use_bias: false}" },
	{ "7,7,1", "{filters: 2, kernel_size: 3, dilation_rate: 2, activation: gelu}" },
	{ "4,4,2", "{filters: 3, kernel_size: 2, padding: same, pointwise_regularizer: {l2: 0.1}}" },
	{ NULL, NULL },
};

const struct dt_layer_type dt_separable_conv2d_layer = {
	.name = "separable_conv2d",
	.class_name = "SeparableConv2D",
	.examples = examples,
	.init = separable_init,
	.forward = separable_forward,
	.backward = separable_backward,
	.release = separable_release,
	.alloc = separable_alloc,
	.flops = separable_flops,
	.export = separable_export,
};
