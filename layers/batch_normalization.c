/*
 * batch_normalization: y = gamma * (x - mean) / sqrt(var + epsilon) + beta
 * per channel (the last axis), as Keras' BatchNormalization. Training uses
 * the batch's mean and (biased) variance and updates the moving ones,
 * moving = momentum * moving + (1 - momentum) * batch; inference uses the
 * moving statistics.
 * Arguments: axis (-1 only), momentum (0.99), epsilon (0.001), center (true:
 * beta), scale (true: gamma).
 * Parameters: gamma (C) ones, beta (C) zeros; state moving_mean (C) zeros,
 * moving_variance (C) ones. Any input shape (..., C); output shape = input.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/export/onnx.h"
#include "layers.h"

struct batchnorm {
	float momentum, epsilon;
	int gamma, beta, mean, var; /* indices in l->params; -1 when absent */
	struct dt_plan *plan;
};

static int batchnorm_init(struct dt_layer *l, const struct dt_node *args)
{
	static const char *const keys[] = { "axis", "momentum", "epsilon", "center", "scale", NULL };
	int64_t axis;
	double momentum, epsilon;
	int center, scale, c = l->in.dim[l->in.ndim - 1];
	struct dt_shape ch = dt_shape_make(1, &c);
	struct batchnorm *b;

	if (dt_layer_check_keys(l, args, keys) < 0 || dt_cfg_int(args, "axis", -1, INT32_MIN, INT32_MAX, &axis) < 0 ||
	    dt_cfg_float(args, "momentum", 0.99, 0, 1, &momentum) < 0 ||
	    dt_cfg_float_range(args, "epsilon", 0.001, 0, 1, DT_OPEN_MIN, &epsilon) < 0 ||
	    dt_cfg_bool(args, "center", 1, &center) < 0 || dt_cfg_bool(args, "scale", 1, &scale) < 0)
		return -1;
	/* Keras counts the batch axis: the last axis of a (H, W, C) sample is -1 or 3. */
	if (axis != -1 && axis != l->in.ndim)
		return dt_node_error(dt_node_get(args, "axis"),
				     "layer '%s': only the last axis (axis: -1, the channels) is supported, got %lld",
				     l->name, (long long)axis);
	b = dt_calloc(1, sizeof(*b));
	b->momentum = (float)momentum;
	b->epsilon = (float)epsilon;
	b->gamma = scale ? dt_layer_param(l, "gamma", ch, DT_INIT_ONES, c, c) : -1;
	b->beta = center ? dt_layer_param(l, "beta", ch, DT_INIT_ZEROS, c, c) : -1;
	b->mean = dt_layer_state(l, "moving_mean", ch, DT_INIT_ZEROS);
	b->var = dt_layer_state(l, "moving_variance", ch, DT_INIT_ONES);
	l->priv = b;
	l->out = l->in;
	return 0;
}

static int batchnorm_alloc(struct dt_layer *l, struct dt_device dev, int max_batch)
{
	struct batchnorm *b = l->priv;
	int c = l->in.dim[l->in.ndim - 1];
	b->plan = dt_plan_batchnorm(dev, c, dt_shape_count(&l->in) / c, b->epsilon, max_batch);
	return b->plan ? 0 : dt_error("layer '%s': the backend cannot make this batch normalization", l->name);
}

static struct dt_tensor *value(struct dt_layer *l, int i) { return i < 0 ? NULL : &l->params[i].value; }
static struct dt_tensor *grad(struct dt_layer *l, int i) { return i < 0 ? NULL : &l->params[i].grad; }

static void batchnorm_forward(struct dt_layer *l, const struct dt_tensor *x, struct dt_tensor *y,
			      const struct dt_step_ctx *ctx)
{
	struct batchnorm *b = l->priv;
	dt_op_batchnorm_forward(b->plan, ctx->training, b->momentum, x, value(l, b->gamma), value(l, b->beta),
				value(l, b->mean), value(l, b->var), y);
}

static void batchnorm_backward(struct dt_layer *l, const struct dt_tensor *x, const struct dt_tensor *y,
			       struct dt_tensor *dy, struct dt_tensor *dx)
{
	struct batchnorm *b = l->priv;
	/* The first layer gets no dx; the gradient may then overwrite dy. */
	dt_op_batchnorm_backward(b->plan, x, dy, value(l, b->gamma), grad(l, b->gamma), grad(l, b->beta),
				 dx ? dx : dy);
}

static void batchnorm_release(struct dt_layer *l)
{
	struct batchnorm *b = l->priv;
	if (b)
		dt_plan_free(b->plan);
	free(b);
	l->priv = NULL;
}

/*
 * Inference form over the last axis: x * s + t with s = gamma / sqrt(var +
 * epsilon), t = beta - mean * s, from the moving statistics (ONNX's
 * BatchNormalization would want the channels on axis 1).
 */
static const char *batchnorm_export(const struct dt_layer *l, struct dt_onnx *g, const char *x)
{
	const struct batchnorm *b = l->priv;
	int64_t c = l->in.dim[l->in.ndim - 1];
	float *mean = dt_onnx_param_alloc(&l->params[b->mean]), *var = dt_onnx_param_alloc(&l->params[b->var]);
	float *gamma = b->gamma >= 0 ? dt_onnx_param_alloc(&l->params[b->gamma]) : NULL;
	float *beta = b->beta >= 0 ? dt_onnx_param_alloc(&l->params[b->beta]) : NULL;
	float *s = dt_malloc((size_t)c * sizeof(float)), *t = dt_malloc((size_t)c * sizeof(float));
	char name[160];
	const char *in[2];

	for (int64_t i = 0; i < c; i++) {
		double si = (gamma ? gamma[i] : 1.0) / sqrt((double)var[i] + b->epsilon);
		s[i] = (float)si;
		t[i] = (float)((beta ? beta[i] : 0.0) - mean[i] * si);
	}
	snprintf(name, sizeof(name), "%s/scale", l->name);
	in[0] = x;
	in[1] = dt_onnx_floats(g, name, 1, &c, s);
	x = dt_onnx_node(g, "Mul", in, 2, l->name);
	snprintf(name, sizeof(name), "%s/shift", l->name);
	in[0] = x;
	in[1] = dt_onnx_floats(g, name, 1, &c, t);
	x = dt_onnx_node(g, "Add", in, 2, l->name);
	free(mean);
	free(var);
	free(gamma);
	free(beta);
	free(s);
	free(t);
	return x;
}

static const struct dt_layer_example examples[] = {
	{ "3,3,2", NULL },
	{ "5", "{momentum: 0.9}" },
	{ "2,3", "{epsilon: 0.01}" },
	{ "2,2,3", "{center: false}" },
	{ "3,2,2", "{scale: false, axis: 3}" },
	{ "4", "{center: false, scale: false, axis: -1}" },
	{ NULL, NULL },
};

const struct dt_layer_type dt_batch_normalization_layer = {
	.name = "batch_normalization",
	.class_name = "BatchNormalization",
	.examples = examples,
	.init = batchnorm_init,
	.forward = batchnorm_forward,
	.backward = batchnorm_backward,
	.release = batchnorm_release,
	.alloc = batchnorm_alloc,
	.export = batchnorm_export,
};
