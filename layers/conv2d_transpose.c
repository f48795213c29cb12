/*
 * conv2d_transpose: the transposed convolution (the gradient of a
 * convolution with respect to its input), as Keras' Conv2DTranspose,
 * channels last: each input pixel adds its values times the kernel to a
 * kernel-sized window of the output, windows `strides` apart.
 * Arguments: filters (required), kernel_size (required), strides (1),
 * padding (valid), output_padding (none), dilation_rate (1), activation
 * (linear), use_bias (true), kernel_initializer (glorot_uniform),
 * bias_initializer (zeros), kernel_regularizer (none).
 * Parameters: kernel (kh, kw, filters, in), Keras' layout; bias (filters).
 * Output size per axis, span = (k - 1) * d + 1, as Keras computes it:
 * valid: (in - 1) * s + max(span, s), or (in - 1) * s + span + output_padding;
 * same: in * s, or (in - 1) * s + span - 2 * (span / 2) + output_padding;
 * the full result, (in - 1) * s + span long, is cropped by Keras' padding
 * (its JAX backend's rule, which TensorFlow's agrees with).
 * The backend's deconvolution plan (oneDNN; cuDNN's backward data) is made
 * in alloc.
 */
#include <stdlib.h>

#include "core/error.h"
#include "core/export/onnx.h"
#include "layers.h"
#include "window.h"

enum { KERNEL, BIAS };
enum { PREACT };

struct deconv {
	struct dt_conv_geom g;
	struct dt_plan *plan;
};

/* One axis: the output size, and how much of the full result is cut before (*lo) and after (*hi, may be < 0). */
static int64_t transpose_dim(int in, int k, int s, int d, enum dt_padding pad, int op, int *lo, int *hi)
{
	int64_t span = (int64_t)(k - 1) * d + 1, full = (int64_t)(in - 1) * s + span, out, pad_len, left;
	if (pad == DT_PADDING_VALID) {
		out = op >= 0 ? full + op : (int64_t)(in - 1) * s + (span > s ? span : s);
		*lo = 0;
	} else {
		if (op >= 0) {
			out = (int64_t)(in - 1) * s + span - 2 * (span / 2) + op;
			pad_len = span + span % 2 - 2 + op;
		} else {
			out = (int64_t)in * s;
			pad_len = s + span - 2;
		}
		left = pad_len / 2 + pad_len % 2;
		*lo = (int)(span - 1 - (left < span - 1 ? left : span - 1));
	}
	*hi = (int)(full - *lo - out);
	return out;
}

static int deconv_init(struct dt_layer *l, const struct dt_node *args)
{
	static const char *const keys[] = { "filters", "kernel_size", "strides", "padding", "output_padding",
					    "dilation_rate", "activation", "use_bias", "kernel_initializer",
					    "bias_initializer", "kernel_regularizer", NULL };
	struct dt_conv_geom g = { 0 };
	int64_t filters, oh, ow;
	int k[2], s[2], d[2], op[2] = { -1, -1 }, use_bias, w, has_op;
	enum dt_padding pad;
	enum dt_init kinit, binit;
	float l1, l2;
	char shape[64];
	struct deconv *c;

	if (dt_layer_check_keys(l, args, keys) < 0 || dt_cfg_require(args, "filters", "conv2d_transpose") < 0 ||
	    dt_cfg_int(args, "filters", 0, 1, 1 << 24, &filters) < 0 ||
	    dt_cfg_require(args, "kernel_size", "conv2d_transpose") < 0 ||
	    dt_window_pair(args, "kernel_size", 1, 1, 1 << 16, k) < 0 ||
	    dt_window_pair(args, "strides", 1, 1, 1 << 16, s) < 0 || dt_window_padding(args, &pad) < 0 ||
	    (has_op = dt_window_pair(args, "output_padding", -1, 0, 1 << 16, op)) < 0 ||
	    dt_window_pair(args, "dilation_rate", 1, 1, 1 << 16, d) < 0 ||
	    dt_layer_activation(args, &l->act) < 0 || dt_cfg_bool(args, "use_bias", 1, &use_bias) < 0 ||
	    dt_layer_initializer(args, "kernel_initializer", DT_INIT_GLOROT_UNIFORM, &kinit) < 0 ||
	    dt_layer_initializer(args, "bias_initializer", DT_INIT_ZEROS, &binit) < 0 ||
	    dt_layer_regularizer(args, "kernel_regularizer", &l1, &l2) < 0)
		return -1;
	for (int i = 0; i < 2; i++) {
		if ((int64_t)(k[i] - 1) * d[i] + 1 > DT_CONV_MAX_SPAN)
			return dt_node_error(dt_node_get(args, "dilation_rate"),
					     "layer '%s': a kernel of %d dilated by %d spans %lld positions, more "
					     "than the %d a convolution takes; use a smaller dilation_rate or "
					     "kernel_size",
					     l->name, k[i], d[i], (long long)(k[i] - 1) * d[i] + 1, DT_CONV_MAX_SPAN);
		if (has_op && op[i] >= s[i])
			return dt_node_error(dt_node_get(args, "output_padding"),
					     "layer '%s': output_padding must be less than strides (as Keras); "
					     "the %s has output_padding %d and stride %d",
					     l->name, i ? "width" : "height", op[i], s[i]);
	}
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
	oh = transpose_dim(g.in_h, g.kh, g.stride_h, g.dil_h, pad, op[0], &g.pad_top, &g.pad_bottom);
	ow = transpose_dim(g.in_w, g.kw, g.stride_w, g.dil_w, pad, op[1], &g.pad_left, &g.pad_right);
	if (oh < 1 || ow < 1 || oh > 1 << 24 || ow > 1 << 24)
		return dt_node_error(dt_node_get(args, has_op ? "output_padding" : "kernel_size"),
				     "layer '%s': the output would be %lldx%lld from the input %s; Keras' rule "
				     "gives no image here",
				     l->name, (long long)oh, (long long)ow, dt_shape_format(&l->in, 0, shape, sizeof(shape)));
	g.out_h = (int)oh;
	g.out_w = (int)ow;
	l->out = dt_shape_make(3, (int[]){ g.out_h, g.out_w, g.out_c });

	/* Keras' fans of the (kh, kw, filters, in) kernel: receptive field times filters, and times in. */
	w = dt_layer_param(l, "kernel", dt_shape_make(4, (int[]){ g.kh, g.kw, g.out_c, g.in_c }), kinit,
			   g.kh * g.kw * g.out_c, g.kh * g.kw * g.in_c);
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

static int deconv_alloc(struct dt_layer *l, struct dt_device dev, int max_batch)
{
	struct deconv *c = l->priv;
	c->plan = dt_plan_deconv(dev, &c->g, max_batch);
	return c->plan ? 0 : dt_error("layer '%s': the backend cannot make this transposed convolution", l->name);
}

static void deconv_forward(struct dt_layer *l, const struct dt_tensor *x, struct dt_tensor *y,
			   const struct dt_step_ctx *ctx)
{
	struct deconv *c = l->priv;
	dt_op_deconv_forward(c->plan, x, &l->params[KERNEL].value, l->nparams > BIAS ? &l->params[BIAS].value : NULL,
			     y);
	if (l->nbufs > PREACT) {
		struct dt_tensor z = dt_layer_buf_view(l, PREACT, y->shape.dim[0]);
		dt_op_copy(y, &z);
	}
	if (l->act != DT_ACT_LINEAR)
		dt_op_act_forward(l->act, y, y);
}

static void deconv_backward(struct dt_layer *l, const struct dt_tensor *x, const struct dt_tensor *y,
			    struct dt_tensor *dy, struct dt_tensor *dx)
{
	struct deconv *c = l->priv;
	if (l->act != DT_ACT_LINEAR && !l->fused_act) {
		struct dt_tensor z;
		if (l->nbufs > PREACT)
			z = dt_layer_buf_view(l, PREACT, y->shape.dim[0]);
		dt_op_act_backward(l->act, l->nbufs > PREACT ? &z : NULL, y, dy, dy);
	}
	dt_op_deconv_backward(c->plan, x, &l->params[KERNEL].value, dy, &l->params[KERNEL].grad,
			      l->nparams > BIAS ? &l->params[BIAS].grad : NULL, dx);
}

static void deconv_release(struct dt_layer *l)
{
	struct deconv *c = l->priv;
	if (c)
		dt_plan_free(c->plan);
	free(c);
	l->priv = NULL;
}

/* Every input value meets every tap of its window: in pixels * kh * kw * in * filters multiply-adds. */
static int64_t deconv_flops(const struct dt_layer *l)
{
	const struct dt_conv_geom *g = &((const struct deconv *)l->priv)->g;
	return 2 * (int64_t)g->kh * g->kw * g->in_c * g->out_c * g->in_h * g->in_w;
}

/*
 * ONNX's ConvTranspose on NCHW, weight (in, filters, kh, kw) from Keras'
 * (kh, kw, filters, in); a negative trailing crop becomes output_padding.
 */
static const char *deconv_export(const struct dt_layer *l, struct dt_onnx *o, const char *x)
{
	static const int64_t to_nchw[4] = { 0, 3, 1, 2 }, to_nhwc[4] = { 0, 2, 3, 1 };
	const struct dt_conv_geom *c = &((const struct deconv *)l->priv)->g;
	int64_t dims[4] = { c->in_c, c->out_c, c->kh, c->kw };
	float *k = dt_onnx_param_alloc(&l->params[KERNEL]);
	float *w = dt_malloc((size_t)dt_shape_count(&l->params[KERNEL].shape) * sizeof(float));
	const char *in[3], *y;

	for (int i = 0; i < c->kh; i++)
		for (int j = 0; j < c->kw; j++)
			for (int f = 0; f < c->out_c; f++)
				for (int ci = 0; ci < c->in_c; ci++)
					w[(((int64_t)ci * c->out_c + f) * c->kh + i) * c->kw + j] =
						k[(((int64_t)i * c->kw + j) * c->out_c + f) * c->in_c + ci];
	in[0] = dt_onnx_transpose(o, x, to_nchw, l->name);
	in[1] = dt_onnx_floats(o, l->name, 4, dims, w);
	in[2] = l->nparams > BIAS ? dt_onnx_param(o, l->name, &l->params[BIAS]) : NULL;
	free(k);
	free(w);
	y = dt_onnx_node(o, "ConvTranspose", in, l->nparams > BIAS ? 3 : 2, l->name);
	dt_onnx_attr_ints(o, "kernel_shape", 2, (int64_t[]){ c->kh, c->kw });
	dt_onnx_attr_ints(o, "strides", 2, (int64_t[]){ c->stride_h, c->stride_w });
	dt_onnx_attr_ints(o, "dilations", 2, (int64_t[]){ c->dil_h, c->dil_w });
	dt_onnx_attr_ints(o, "pads", 4,
			  (int64_t[]){ c->pad_top, c->pad_left, c->pad_bottom > 0 ? c->pad_bottom : 0,
				       c->pad_right > 0 ? c->pad_right : 0 });
	dt_onnx_attr_ints(o, "output_padding", 2,
			  (int64_t[]){ c->pad_bottom < 0 ? -c->pad_bottom : 0, c->pad_right < 0 ? -c->pad_right : 0 });
	return dt_onnx_activation(o, l->act, dt_onnx_transpose(o, y, to_nhwc, l->name), l->name);
}

static const struct dt_layer_example examples[] = {
	{ "3,3,2", "{filters: 2, kernel_size: 3}" },
	{ "3,4,2", "{filters: 3, kernel_size: 3, strides: 2, padding: same, activation: elu}" },
	{ "3,3,1", "{filters: 2, kernel_size: 3, strides: 2, output_padding: 1, activation: tanh}" },
	{ "2,3,2", "{filters: 2, kernel_size: [2, 3], strides: [2, 1], padding: same, output_padding: [1, 0]}" },
	{ "3,3,2", "{filters: 2, kernel_size: 1, strides: 2, use_bias: false}" },
	{ "4,4,1", "{filters: 2, kernel_size: 3, dilation_rate: 2, padding: same, activation: gelu}" },
	{ "3,3,2", "{filters: 2, kernel_size: 4, strides: 2, padding: same, kernel_regularizer: {l2: 0.1}}" },
	{ NULL, NULL },
};

const struct dt_layer_type dt_conv2d_transpose_layer = {
	.name = "conv2d_transpose",
	.class_name = "Conv2DTranspose",
	.examples = examples,
	.init = deconv_init,
	.forward = deconv_forward,
	.backward = deconv_backward,
	.release = deconv_release,
	.alloc = deconv_alloc,
	.flops = deconv_flops,
	.export = deconv_export,
};
