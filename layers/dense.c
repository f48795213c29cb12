/*
 * dense: y = act(x @ kernel + bias), as Keras' Dense.
 * Arguments: units (required), activation (linear), use_bias (true),
 * kernel_initializer (glorot_uniform), bias_initializer (zeros),
 * kernel_regularizer (none).
 * Parameters: kernel (in, units); bias (units).
 */
#include "core/error.h"
#include "core/export/onnx.h"
#include "layers.h"

enum { KERNEL, BIAS };
enum { PREACT }; /* buffer: x @ kernel + bias, kept when the activation's derivative needs it */

static int dense_init(struct dt_layer *l, const struct dt_node *args)
{
	static const char *const keys[] = { "units", "activation", "use_bias", "kernel_initializer",
					    "bias_initializer", "kernel_regularizer", NULL };
	int64_t units;
	int use_bias, k;
	enum dt_init kinit, binit;
	float l1, l2;
	char shape[64];

	if (dt_layer_check_keys(l, args, keys) < 0 || dt_cfg_require(args, "units", "dense") < 0 ||
	    dt_cfg_int(args, "units", 0, 1, 1 << 24, &units) < 0 ||
	    dt_layer_activation(args, &l->act) < 0 || dt_cfg_bool(args, "use_bias", 1, &use_bias) < 0 ||
	    dt_layer_initializer(args, "kernel_initializer", DT_INIT_GLOROT_UNIFORM, &kinit) < 0 ||
	    dt_layer_initializer(args, "bias_initializer", DT_INIT_ZEROS, &binit) < 0 ||
	    dt_layer_regularizer(args, "kernel_regularizer", &l1, &l2) < 0)
		return -1;
	if (l->in.ndim != 1)
		return dt_node_error(args, "layer '%s' needs a flat input but gets %s; add '- flatten' before it",
				     l->name, dt_shape_format(&l->in, 1, shape, sizeof(shape)));
	l->out = dt_shape_make(1, (int[]){ (int)units });
	k = dt_layer_param(l, "kernel", dt_shape_make(2, (int[]){ l->in.dim[0], (int)units }), kinit,
			   l->in.dim[0], (int)units);
	l->params[k].l1 = l1;
	l->params[k].l2 = l2;
	if (use_bias)
		dt_layer_param(l, "bias", dt_shape_make(1, (int[]){ (int)units }), binit, 1, (int)units);
	dt_layer_act_buffer(l);
	return 0;
}

static void dense_forward(struct dt_layer *l, const struct dt_tensor *x, struct dt_tensor *y,
			  const struct dt_step_ctx *ctx)
{
	dt_op_gemm(0, 0, 1, x, &l->params[KERNEL].value, 0, y);
	if (l->nparams > BIAS)
		dt_op_bias_add(y, &l->params[BIAS].value);
	dt_layer_act_forward(l, PREACT, y);
}

static void dense_backward(struct dt_layer *l, const struct dt_tensor *x, const struct dt_tensor *y,
			   struct dt_tensor *dy, struct dt_tensor *dx)
{
	dt_layer_act_backward(l, PREACT, y, dy);
	dt_op_gemm(1, 0, 1, x, dy, 0, &l->params[KERNEL].grad);
	if (l->nparams > BIAS)
		dt_op_bias_grad(dy, 0, &l->params[BIAS].grad);
	if (dx)
		dt_op_gemm(0, 1, 1, dy, &l->params[KERNEL].value, 0, dx);
}

static int64_t dense_flops(const struct dt_layer *l)
{
	return 2 * (int64_t)l->in.dim[0] * l->out.dim[0];
}

/* MatMul with the (in, units) kernel, Add of the bias, the activation. */
static const char *dense_export(const struct dt_layer *l, struct dt_onnx *g, const char *x)
{
	const char *in[2] = { x, dt_onnx_param(g, l->name, &l->params[KERNEL]) };
	const char *y = dt_onnx_node(g, "MatMul", in, 2, l->name);
	if (l->nparams > BIAS) {
		in[0] = y;
		in[1] = dt_onnx_param(g, l->name, &l->params[BIAS]);
		y = dt_onnx_node(g, "Add", in, 2, l->name);
	}
	return dt_onnx_activation(g, l->act, y, l->name);
}

static const struct dt_layer_example examples[] = {
	{ "5", "{units: 3}" },
	{ "4", "{units: 3, activation: gelu}" },
	{ "4", "{units: 3, activation: swish, kernel_regularizer: {l1: 0.1, l2: 0.2}}" },
	{ "4", "{units: 2, activation: elu, kernel_initializer: he_normal, bias_initializer: ones}" },
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
	.flops = dense_flops,
	.export = dense_export,
};
