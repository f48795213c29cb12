/*
 * Spatial dropout over channels (see spatial_dropout.h); the layer types
 * are in spatial_dropout1d.c and spatial_dropout2d.c.
 */
#include <stdlib.h>

#include "core/error.h"
#include "core/export/onnx.h"
#include "core/rng.h"
#include "spatial_dropout.h"

enum { ONES, MASK }; /* buffers of (N, C): the ones dt_op_dropout masks, and the mask */

struct spatial_dropout {
	float rate;
	int masked; /* the last forward applied a mask */
};

int dt_spatial_dropout_init(struct dt_layer *l, const struct dt_node *args, int ndim)
{
	static const char *const keys[] = { "rate", NULL };
	double rate;
	char shape[64];
	struct spatial_dropout *d;

	if (dt_layer_check_keys(l, args, keys) < 0 || dt_cfg_require(args, "rate", l->type->name) < 0 ||
	    dt_cfg_float_range(args, "rate", 0, 0, 1, DT_OPEN_MAX, &rate) < 0)
		return -1;
	if (l->in.ndim != ndim)
		return dt_node_error(args, "layer '%s' drops whole channels of a %s input but gets %s; %s",
				     l->name, ndim == 2 ? "(steps, channels)" : "(height, width, channels)",
				     dt_shape_format(&l->in, 1, shape, sizeof(shape)),
				     ndim == 2 ? "use spatial_dropout2d for images, dropout for flat data"
					       : "use spatial_dropout1d for sequences, dropout for flat data");
	d = dt_calloc(1, sizeof(*d));
	d->rate = (float)rate;
	l->priv = d;
	l->out = l->in;
	dt_layer_buffer(l, "ones", l->in.dim[ndim - 1]);
	dt_layer_buffer(l, "mask", l->in.dim[ndim - 1]);
	return 0;
}

/* t as (n, S, C). */
static struct dt_tensor rows_of(const struct dt_layer *l, const struct dt_tensor *t)
{
	struct dt_tensor v = *t;
	int c = l->in.dim[l->in.ndim - 1];
	v.shape = dt_shape_make(3, (int[]){ t->shape.dim[0], (int)(dt_shape_count(&l->in) / c), c });
	return v;
}

static struct dt_tensor mask_of(const struct dt_layer *l, int i, int n)
{
	struct dt_tensor m = dt_layer_buf_view(l, i, n);
	m.shape = dt_shape_make(2, (int[]){ n, l->in.dim[l->in.ndim - 1] });
	return m;
}

void dt_spatial_dropout_forward(struct dt_layer *l, const struct dt_tensor *x, struct dt_tensor *y,
				const struct dt_step_ctx *ctx)
{
	struct spatial_dropout *d = l->priv;
	int n = x->shape.dim[0];
	d->masked = ctx->training && d->rate > 0;
	if (d->masked) {
		struct dt_tensor ones = mask_of(l, ONES, n), mask = mask_of(l, MASK, n);
		struct dt_tensor xv = rows_of(l, x), yv = rows_of(l, y);
		dt_op_fill(&ones, 1.0f);
		dt_op_dropout(&ones, &ones, &mask, d->rate, dt_hash64(ctx->key, (uint64_t)l->index),
			      ctx->first_row * l->in.dim[l->in.ndim - 1]);
		dt_op_mul_channels(&xv, &mask, &yv);
	} else {
		dt_op_copy(x, y);
	}
}

void dt_spatial_dropout_backward(struct dt_layer *l, const struct dt_tensor *x, const struct dt_tensor *y,
				 struct dt_tensor *dy, struct dt_tensor *dx)
{
	struct spatial_dropout *d = l->priv;
	if (!dx)
		return;
	if (d->masked) {
		struct dt_tensor mask = mask_of(l, MASK, dy->shape.dim[0]);
		struct dt_tensor dyv = rows_of(l, dy), dxv = rows_of(l, dx);
		dt_op_mul_channels(&dyv, &mask, &dxv);
	} else {
		dt_op_copy(dy, dx);
	}
}

void dt_spatial_dropout_release(struct dt_layer *l)
{
	free(l->priv);
	l->priv = NULL;
}

int64_t dt_spatial_dropout_flops(const struct dt_layer *l) { return dt_shape_count(&l->in); }

const char *dt_spatial_dropout_export(const struct dt_layer *l, struct dt_onnx *g, const char *x)
{
	return dt_onnx_node(g, "Identity", &x, 1, l->name);
}
