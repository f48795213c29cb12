/*
 * global_average_pooling1d: the mean over the steps of each channel, as Keras' GlobalAveragePooling1D.
 * (steps, C) -> (C,), or (1, C) with keepdims: true; no parameters.
 * Under a mask (mask_zero, issue 14) the mean is over each sample's unmasked
 * steps, as Keras: x is weighted by w = steps * mask / (unmasked steps)
 * before the plain mean (a sample with no unmasked step gives zeros, where
 * Keras divides 0 by 0), and the output carries no mask.
 */
#include "layers.h"
#include "pool2d.h"

enum { WEIGHT, WEIGHTED }; /* buffers under a mask: w (steps) and w * x (steps, C) */

static const struct dt_layer_example examples[] = {
	{ "5,3", NULL },
	{ "1,2", NULL },
	{ "7,1", NULL },
	{ "4,2", "{keepdims: true}" },
	{ NULL, NULL },
};

static int global_average_pooling1d_init(struct dt_layer *l, const struct dt_node *args)
{
	if (dt_pool_init_global(l, args, DT_POOL_AVG, 1) < 0)
		return -1;
	if (l->mask_in) {
		dt_layer_buffer(l, "mask_weight", l->in.dim[0]);
		dt_layer_buffer(l, "masked_x", dt_shape_count(&l->in));
	}
	return 0;
}

/* The views mul_channels scales x's rows with: (n * steps, C, 1) by (n * steps, 1). */
static struct dt_tensor step_rows(float *data, struct dt_device dev, int64_t rows, int c)
{
	return dt_tensor_batch(data, dev, (int)rows, &(struct dt_shape){ 2, { c, 1 } });
}

static void gap1d_forward(struct dt_layer *l, const struct dt_tensor *x, struct dt_tensor *y,
			  const struct dt_step_ctx *ctx)
{
	const struct dt_mask *m = l->mask_in;
	int n = x->shape.dim[0], T = l->in.dim[0], c = l->in.dim[1];
	struct dt_tensor w, wt, xw, xr, xwr;

	if (!m) {
		dt_pool2d_forward(l, x, y, ctx);
		return;
	}
	DT_ASSERT(m->n == n && m->steps == T);
	for (int s = 0; s < n; s++) {
		const unsigned char *valid = m->valid + (int64_t)s * T;
		int count = 0;
		for (int t = 0; t < T; t++)
			count += valid[t];
		for (int t = 0; t < T; t++)
			m->scratch[(int64_t)s * T + t] = valid[t] ? (float)T / (float)count : 0.0f;
	}
	w = dt_layer_buf_view(l, WEIGHT, n);
	dt_op_from_host(&w, m->scratch);
	wt = dt_tensor_batch(w.data, w.dev, n * T, &(struct dt_shape){ 1, { 1 } });
	xw = dt_layer_buf_view(l, WEIGHTED, n);
	xr = step_rows(x->data, x->dev, (int64_t)n * T, c);
	xwr = step_rows(xw.data, xw.dev, (int64_t)n * T, c);
	dt_op_mul_channels(&xr, &wt, &xwr);
	xw = dt_tensor_batch(xw.data, xw.dev, n, &l->in);
	dt_pool2d_forward(l, &xw, y, ctx);
}

static void gap1d_backward(struct dt_layer *l, const struct dt_tensor *x, const struct dt_tensor *y,
			   struct dt_tensor *dy, struct dt_tensor *dx)
{
	int n = x->shape.dim[0], T = l->in.dim[0], c = l->in.dim[1];
	struct dt_tensor w, wt, dr;

	dt_pool2d_backward(l, x, y, dy, dx);
	if (!l->mask_in || !dx)
		return;
	w = dt_layer_buf_view(l, WEIGHT, n);
	wt = dt_tensor_batch(w.data, w.dev, n * T, &(struct dt_shape){ 1, { 1 } });
	dr = step_rows(dx->data, dx->dev, (int64_t)n * T, c);
	dt_op_mul_channels(&dr, &wt, &dr);
}

const struct dt_layer_type dt_global_average_pooling1d_layer = {
	.name = "global_average_pooling1d",
	.class_name = "GlobalAveragePooling1D",
	.examples = examples,
	.init = global_average_pooling1d_init,
	.forward = gap1d_forward,
	.backward = gap1d_backward,
	.release = dt_pool2d_release,
	.alloc = dt_pool2d_alloc,
	.export = dt_pool2d_export,
	.mask = DT_MASK_OWN,
};
