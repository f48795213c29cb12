/*
 * dense: y = act(x @ kernel + bias), as Keras' Dense.
 * Arguments: units (required), activation (linear), use_bias (true).
 * Parameters: kernel (in, units) glorot_uniform; bias (units) zeros.
 */
#include "core/error.h"
#include "layers.h"

enum { KERNEL, BIAS };

static int dense_init(struct dt_layer *l, const struct dt_node *args)
{
	static const char *const keys[] = { "units", "activation", "use_bias", NULL };
	int64_t units;
	int use_bias;
	char shape[64];

	if (dt_layer_check_keys(l, args, keys) < 0 || dt_cfg_require(args, "units", "dense") < 0 ||
	    dt_cfg_int(args, "units", 0, 1, 1 << 24, &units) < 0 ||
	    dt_layer_activation(args, &l->act) < 0 || dt_cfg_bool(args, "use_bias", 1, &use_bias) < 0)
		return -1;
	if (l->in.ndim != 1)
		return dt_node_error(args, "layer '%s' needs a flat input but gets %s; add '- flatten' before it",
				     l->name, dt_shape_format(&l->in, 1, shape, sizeof(shape)));
	l->out = dt_shape_make(1, (int[]){ (int)units });
	dt_layer_param(l, "kernel", dt_shape_make(2, (int[]){ l->in.dim[0], (int)units }),
		       DT_INIT_GLOROT_UNIFORM, l->in.dim[0], (int)units);
	if (use_bias)
		dt_layer_param(l, "bias", dt_shape_make(1, (int[]){ (int)units }), DT_INIT_ZEROS, 0, 0);
	return 0;
}

static void dense_forward(struct dt_layer *l, const struct dt_tensor *x, struct dt_tensor *y,
			  const struct dt_step_ctx *ctx)
{
	dt_op_gemm(0, 0, 1, x, &l->params[KERNEL].value, 0, y);
	if (l->nparams > BIAS)
		dt_op_bias_add(y, &l->params[BIAS].value);
	if (l->act != DT_ACT_LINEAR)
		dt_op_act_forward(l->act, y, y);
}

static void dense_backward(struct dt_layer *l, const struct dt_tensor *x, const struct dt_tensor *y,
			   struct dt_tensor *dy, struct dt_tensor *dx)
{
	if (l->act != DT_ACT_LINEAR && !l->fused_act)
		dt_op_act_backward(l->act, y, dy, dy);
	dt_op_gemm(1, 0, 1, x, dy, 0, &l->params[KERNEL].grad);
	if (l->nparams > BIAS)
		dt_op_bias_grad(dy, 0, &l->params[BIAS].grad);
	if (dx)
		dt_op_gemm(0, 1, 1, dy, &l->params[KERNEL].value, 0, dx);
}

static const struct dt_layer_example examples[] = {
	{ "5", "{units: 3}" },
	{ "4", "{units: 6, activation: tanh, use_bias: false}" },
	{ "6", "{units: 4, activation: sigmoid}" },
	{ "3", "{units: 5, activation: relu}" },
	{ "4", "{units: 3, activation: softmax}" },
	{ NULL, NULL },
};

const struct dt_layer_type dt_dense_layer = {
	.name = "dense",
	.class_name = "Dense",
	.examples = examples,
	.init = dense_init,
	.forward = dense_forward,
	.backward = dense_backward,
};
