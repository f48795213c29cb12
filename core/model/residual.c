/*
 * The add layer that ends a residual block: y = act(x + shortcut), where x is
 * the block's output and shortcut its input or the projection of it
 * (core/model/residual.h). The model fills priv's views before each call.
 */
#include <stdlib.h>

#include "core/error.h"
#include "core/model/residual.h"

enum { PREACT }; /* buffer: the sum, kept when the activation's derivative needs it */

/* args: the block's mapping; the model has read layers/shortcut, this reads activation. */
static int add_init(struct dt_layer *l, const struct dt_node *args)
{
	if (dt_layer_activation(args, &l->act) < 0)
		return -1;
	l->out = l->in;
	dt_layer_act_buffer(l);
	l->priv = dt_calloc(1, sizeof(struct dt_residual_add));
	return 0;
}

static void add_forward(struct dt_layer *l, const struct dt_tensor *x, struct dt_tensor *y,
			const struct dt_step_ctx *ctx)
{
	struct dt_residual_add *r = l->priv;
	(void)ctx;
	dt_op_copy(x, y);
	dt_op_axpy(1, &r->shortcut, y);
	dt_layer_act_forward(l, PREACT, y);
}

static void add_backward(struct dt_layer *l, const struct dt_tensor *x, const struct dt_tensor *y,
			 struct dt_tensor *dy, struct dt_tensor *dx)
{
	struct dt_residual_add *r = l->priv;
	(void)x;
	dt_layer_act_backward(l, PREACT, y, dy);
	if (dx)
		dt_op_copy(dy, dx);
	if (r->dshortcut)
		dt_op_copy(dy, r->dshortcut);
}

static void add_release(struct dt_layer *l)
{
	free(l->priv);
	l->priv = NULL;
}

/* One add per value: the sum's flops as dtrain time counts them. */
static int64_t add_flops(const struct dt_layer *l) { return dt_shape_count(&l->out); }

/* The model's gradient check covers blocks (tests/unit/test_gradcheck.c); a lone add has none. */
static const struct dt_layer_example no_examples[] = { { NULL, NULL } };

const struct dt_layer_type dt_residual_add_type = {
	.name = "residual",
	.class_name = "Add",
	.examples = no_examples,
	.init = add_init,
	.forward = add_forward,
	.backward = add_backward,
	.release = add_release,
	.flops = add_flops,
	/* no export member: the exporter writes the Add of both inputs itself (core/export/onnx.c) */
};
