/*
 * flatten: (N, d1, d2, ...) -> (N, d1*d2*...), as Keras' Flatten. No arguments.
 */
#include "core/export/onnx.h"
#include "layers.h"

static int flatten_init(struct dt_layer *l, const struct dt_node *args)
{
	static const char *const keys[] = { NULL };
	if (dt_layer_check_keys(l, args, keys) < 0)
		return -1;
	l->out = dt_shape_make(1, (int[]){ (int)dt_shape_count(&l->in) });
	return 0;
}

static void flatten_forward(struct dt_layer *l, const struct dt_tensor *x, struct dt_tensor *y,
			    const struct dt_step_ctx *ctx)
{
	dt_op_copy(x, y);
}

static void flatten_backward(struct dt_layer *l, const struct dt_tensor *x, const struct dt_tensor *y,
			     struct dt_tensor *dy, struct dt_tensor *dx)
{
	if (dx)
		dt_op_copy(dy, dx);
}

/* Reshape to (batch, out...): the sample's values in their channels-last order. */
static const char *flatten_export(const struct dt_layer *l, struct dt_onnx *g, const char *x)
{
	return dt_onnx_reshape(g, x, &l->out, l->name);
}

static const struct dt_layer_example examples[] = {
	{ "2,3,2", NULL },
	{ "5", NULL },
	{ NULL, NULL },
};

const struct dt_layer_type dt_flatten_layer = {
	.name = "flatten",
	.class_name = "Flatten",
	.examples = examples,
	.init = flatten_init,
	.forward = flatten_forward,
	.backward = flatten_backward,
	.export = flatten_export,
	.view = 1,
};
