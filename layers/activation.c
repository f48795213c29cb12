/*
 * activation: y = act(x), as Keras' Activation. Argument: activation (required).
 */
#include "core/export/onnx.h"
#include "layers.h"

static int activation_init(struct dt_layer *l, const struct dt_node *args)
{
	static const char *const keys[] = { "activation", NULL };
	if (dt_layer_check_keys(l, args, keys) < 0 || dt_cfg_require(args, "activation", "activation") < 0 ||
	    dt_layer_activation(args, &l->act) < 0)
		return -1;
	l->out = l->in;
	return 0;
}

static void activation_forward(struct dt_layer *l, const struct dt_tensor *x, struct dt_tensor *y,
			       const struct dt_step_ctx *ctx)
{
	dt_op_act_forward(l->act, x, y);
}

static void activation_backward(struct dt_layer *l, const struct dt_tensor *x, const struct dt_tensor *y,
				struct dt_tensor *dy, struct dt_tensor *dx)
{
	if (!dx)
		return;
	if (l->fused_act)
		dt_op_copy(dy, dx);
	else
		dt_op_act_backward(l->act, x, y, dy, dx);
}

static const char *activation_export(const struct dt_layer *l, struct dt_onnx *g, const char *x)
{
	return dt_onnx_activation(g, l->act, x, l->name);
}

static const struct dt_layer_example examples[] = {
	{ "7", "{activation: relu}" },
	{ "2,3", "{activation: sigmoid}" },
	{ "6", "{activation: tanh}" },
	{ "5", "{activation: softmax}" },
	{ "4", "{activation: linear}" },
	{ "6", "{activation: leaky_relu}" },
	{ "6", "{activation: elu}" },
	{ "6", "{activation: gelu}" },
	{ "6", "{activation: swish}" },
	{ "6", "{activation: softplus}" },
	{ NULL, NULL },
};

const struct dt_layer_type dt_activation_layer = {
	.name = "activation",
	.class_name = "Activation",
	.examples = examples,
	.init = activation_init,
	.forward = activation_forward,
	.backward = activation_backward,
	.export = activation_export,
	.mask = DT_MASK_PASS,
};
