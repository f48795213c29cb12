/*
 * layer_normalization: y = gamma * (x - mean) / sqrt(var + epsilon) + beta
 * over the last axis of each position of each sample, as Keras 3's
 * LayerNormalization: the mean and the (biased) variance are each row's own,
 * in training and inference alike (no moving statistics).
 * Arguments: axis (-1 only, or the last axis counted with the batch as
 * Keras does), epsilon (0.001), center (true: beta), scale (true: gamma),
 * beta_initializer (zeros), gamma_initializer (ones), beta_regularizer,
 * gamma_regularizer (none).
 * Parameters: gamma (C), beta (C), in Keras' order. Any input (..., C);
 * output shape = input. The backend's plan (oneDNN's layer normalization on
 * the CPU) is made in alloc.
 */
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/export/onnx.h"
#include "layers.h"

struct layernorm {
	float epsilon;
	int gamma, beta; /* indices in l->params; -1 when absent */
	struct dt_plan *plan;
};

static int layernorm_init(struct dt_layer *l, const struct dt_node *args)
{
	static const char *const keys[] = { "axis", "epsilon", "center", "scale", "beta_initializer",
					    "gamma_initializer", "beta_regularizer", "gamma_regularizer", NULL };
	int64_t axis;
	double epsilon;
	int center, scale, c = l->in.dim[l->in.ndim - 1];
	struct dt_shape ch = dt_shape_make(1, &c);
	enum dt_init binit, ginit;
	float bl1, bl2, gl1, gl2;
	struct layernorm *n;

	if (dt_layer_check_keys(l, args, keys) < 0 || dt_cfg_int(args, "axis", -1, INT32_MIN, INT32_MAX, &axis) < 0 ||
	    dt_cfg_float_range(args, "epsilon", 0.001, 0, 1, DT_OPEN_MIN, &epsilon) < 0 ||
	    dt_cfg_bool(args, "center", 1, &center) < 0 || dt_cfg_bool(args, "scale", 1, &scale) < 0 ||
	    dt_layer_initializer(args, "beta_initializer", DT_INIT_ZEROS, &binit) < 0 ||
	    dt_layer_initializer(args, "gamma_initializer", DT_INIT_ONES, &ginit) < 0 ||
	    dt_layer_regularizer(args, "beta_regularizer", &bl1, &bl2) < 0 ||
	    dt_layer_regularizer(args, "gamma_regularizer", &gl1, &gl2) < 0)
		return -1;
	/* Keras counts the batch axis: the last axis of a (T, C) sample is -1 or 2. */
	if (axis != -1 && axis != l->in.ndim)
		return dt_node_error(dt_node_get(args, "axis"),
				     "layer '%s': only the last axis (axis: -1) is supported, got %lld", l->name,
				     (long long)axis);
	n = dt_calloc(1, sizeof(*n));
	n->epsilon = (float)epsilon;
	n->gamma = scale ? dt_layer_param(l, "gamma", ch, ginit, c, c) : -1;
	n->beta = center ? dt_layer_param(l, "beta", ch, binit, c, c) : -1;
	if (n->gamma >= 0) {
		l->params[n->gamma].l1 = gl1;
		l->params[n->gamma].l2 = gl2;
	}
	if (n->beta >= 0) {
		l->params[n->beta].l1 = bl1;
		l->params[n->beta].l2 = bl2;
	}
	l->priv = n;
	l->out = l->in;
	return 0;
}

static int layernorm_alloc(struct dt_layer *l, struct dt_device dev, int max_batch)
{
	struct layernorm *n = l->priv;
	int c = l->in.dim[l->in.ndim - 1];
	n->plan = dt_plan_layernorm(dev, c, dt_shape_count(&l->in) / c, n->epsilon, max_batch);
	return n->plan ? 0 : dt_error("layer '%s': the backend cannot make this layer normalization", l->name);
}

static struct dt_tensor *value(struct dt_layer *l, int i) { return i < 0 ? NULL : &l->params[i].value; }
static struct dt_tensor *grad(struct dt_layer *l, int i) { return i < 0 ? NULL : &l->params[i].grad; }

static void layernorm_forward(struct dt_layer *l, const struct dt_tensor *x, struct dt_tensor *y,
			      const struct dt_step_ctx *ctx)
{
	struct layernorm *n = l->priv;
	(void)ctx;
	dt_op_layernorm_forward(n->plan, x, value(l, n->gamma), value(l, n->beta), y);
}

static void layernorm_backward(struct dt_layer *l, const struct dt_tensor *x, const struct dt_tensor *y,
			       struct dt_tensor *dy, struct dt_tensor *dx)
{
	struct layernorm *n = l->priv;
	(void)y;
	dt_op_layernorm_backward(n->plan, x, dy, value(l, n->gamma), grad(l, n->gamma), grad(l, n->beta), dx);
}

static void layernorm_release(struct dt_layer *l)
{
	struct layernorm *n = l->priv;
	if (n)
		dt_plan_free(n->plan);
	free(n);
	l->priv = NULL;
}

/* Per value: the mean, the squared deviation, the normalization, the scale and the shift. */
static int64_t layernorm_flops(const struct dt_layer *l) { return 8 * dt_shape_count(&l->in); }

/*
 * The exporter writes opset 13, before ONNX's LayerNormalization (opset 17):
 * the decomposed form, mean = ReduceMean(x), d = x - mean, var =
 * ReduceMean(d * d), y = d / Sqrt(var + epsilon) * gamma + beta, over the
 * last axis.
 */
static const char *layernorm_export(const struct dt_layer *l, struct dt_onnx *g, const char *x)
{
	const struct layernorm *n = l->priv;
	static const int64_t last[1] = { -1 };
	const char *in[2], *d, *v;
	char name[160];

	in[0] = x;
	v = dt_onnx_node(g, "ReduceMean", in, 1, l->name);
	dt_onnx_attr_ints(g, "axes", 1, last);
	dt_onnx_attr_int(g, "keepdims", 1);
	in[1] = v;
	d = dt_onnx_node(g, "Sub", in, 2, l->name);
	in[0] = d;
	in[1] = d;
	v = dt_onnx_node(g, "Mul", in, 2, l->name);
	in[0] = v;
	v = dt_onnx_node(g, "ReduceMean", in, 1, l->name);
	dt_onnx_attr_ints(g, "axes", 1, last);
	dt_onnx_attr_int(g, "keepdims", 1);
	snprintf(name, sizeof(name), "%s/epsilon", l->name);
	in[0] = v;
	in[1] = dt_onnx_floats(g, name, 0, NULL, &n->epsilon);
	v = dt_onnx_node(g, "Add", in, 2, l->name);
	in[0] = v;
	v = dt_onnx_node(g, "Sqrt", in, 1, l->name);
	in[0] = d;
	in[1] = v;
	x = dt_onnx_node(g, "Div", in, 2, l->name);
	if (n->gamma >= 0) {
		in[0] = x;
		in[1] = dt_onnx_param(g, l->name, &l->params[n->gamma]);
		x = dt_onnx_node(g, "Mul", in, 2, l->name);
	}
	if (n->beta >= 0) {
		in[0] = x;
		in[1] = dt_onnx_param(g, l->name, &l->params[n->beta]);
		x = dt_onnx_node(g, "Add", in, 2, l->name);
	}
	return x;
}

static const struct dt_layer_example examples[] = {
	{ "5", NULL },
	{ "3,4", "{epsilon: 0.01}" },
	{ "2,3,4", "{center: false}" },
	{ "3,2,3", "{scale: false, axis: 3}" },
	{ "4", "{center: false, scale: false, axis: -1}" },
	{ "2,6", "{gamma_regularizer: {l2: 0.1}, beta_initializer: ones}" },
	{ NULL, NULL },
};

const struct dt_layer_type dt_layer_normalization_layer = {
	.name = "layer_normalization",
	.class_name = "LayerNormalization",
	.examples = examples,
	.init = layernorm_init,
	.forward = layernorm_forward,
	.backward = layernorm_backward,
	.release = layernorm_release,
	.alloc = layernorm_alloc,
	.flops = layernorm_flops,
	.export = layernorm_export,
	.mask = DT_MASK_PASS,
};
