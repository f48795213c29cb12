/*
 * dropout: inverted dropout as Keras' Dropout. In training each element is
 * zeroed with probability `rate` and the rest scaled by 1/(1-rate); outside
 * training it is the identity. The mask of an element is a function of the
 * step's key, the layer and the element's place in the global batch, so a
 * resumed run draws the same masks and a sample gets the same mask on
 * whichever replica computes it; the backward draws it again rather than
 * keeping it (an activation's size of memory written and read back:
 * fashion_cnn's dropout after its pooling, 1 thread, Zen 4, went from
 * 0.69-0.74 to 0.44-0.49 ms forward and from 0.73-0.75 to 0.43-0.47 ms
 * backward). Argument: rate (required, [0, 1)).
 */
#include <stdlib.h>

#include "core/error.h"
#include "core/export/onnx.h"
#include "core/rng.h"
#include "layers.h"

struct dropout {
	float rate;
	int masked;           /* the last forward applied a mask */
	uint64_t key;         /* and its key and first element (dt_op_dropout) */
	int64_t first;
};

static int dropout_init(struct dt_layer *l, const struct dt_node *args)
{
	static const char *const keys[] = { "rate", NULL };
	double rate;
	struct dropout *d;
	if (dt_layer_check_keys(l, args, keys) < 0 || dt_cfg_require(args, "rate", "dropout") < 0 ||
	    dt_cfg_float_range(args, "rate", 0, 0, 1, DT_OPEN_MAX, &rate) < 0)
		return -1;
	d = dt_calloc(1, sizeof(*d));
	d->rate = (float)rate;
	l->priv = d;
	l->out = l->in;
	return 0;
}

static void dropout_forward(struct dt_layer *l, const struct dt_tensor *x, struct dt_tensor *y,
			    const struct dt_step_ctx *ctx)
{
	struct dropout *d = l->priv;
	d->masked = ctx->training && d->rate > 0;
	if (d->masked) {
		d->key = dt_hash64(ctx->key, (uint64_t)l->index);
		d->first = ctx->first_row * dt_shape_count(&l->in);
		dt_op_dropout(x, y, NULL, d->rate, d->key, d->first);
	} else {
		dt_op_copy(x, y);
	}
}

static void dropout_backward(struct dt_layer *l, const struct dt_tensor *x, const struct dt_tensor *y,
			     struct dt_tensor *dy, struct dt_tensor *dx)
{
	struct dropout *d = l->priv;
	if (!dx)
		return;
	if (d->masked)
		dt_op_dropout(dy, dx, NULL, d->rate, d->key, d->first);
	else
		dt_op_copy(dy, dx);
}

static void dropout_release(struct dt_layer *l)
{
	free(l->priv);
	l->priv = NULL;
}

/* Inference: the identity. */
static const char *dropout_export(const struct dt_layer *l, struct dt_onnx *g, const char *x)
{
	return dt_onnx_node(g, "Identity", &x, 1, l->name);
}

static const struct dt_layer_example examples[] = {
	{ "20", "{rate: 0.5}" },
	{ "3,4", "{rate: 0.1}" },
	{ "6", "{rate: 0}" },
	{ NULL, NULL },
};

const struct dt_layer_type dt_dropout_layer = {
	.name = "dropout",
	.class_name = "Dropout",
	.examples = examples,
	.init = dropout_init,
	.forward = dropout_forward,
	.backward = dropout_backward,
	.export = dropout_export,
	.release = dropout_release,
	.mask = DT_MASK_PASS,
};
