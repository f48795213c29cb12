/*
 * Zero padding and cropping over height and width (see shift2d.h); the
 * layer types are in zero_padding2d.c and cropping2d.c.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/export/onnx.h"
#include "layers.h"
#include "shift2d.h"

struct shift2d {
	int pad;            /* 1: zero padding, 0: cropping */
	int top, bottom, left, right;
};

#define MAX_SIDE (1 << 20)

/* One size of `key`, in [0, MAX_SIDE]; the message names the key. */
static int read_size(const struct dt_node *n, const char *key, int64_t *v)
{
	if (dt_node_int(n, INT64_MIN, INT64_MAX, v) < 0)
		return -1;
	if (*v < 0 || *v > MAX_SIDE)
		return dt_node_error(n, "'%s' sizes must be in [0, %d], got %lld", key, MAX_SIDE, (long long)*v);
	return 0;
}

/* One axis' entry: an int n for (n, n), or [before, after]. */
static int read_side(const struct dt_node *n, const char *key, int which, int out[2])
{
	int64_t v[2];
	if (n->kind == DT_NODE_SCALAR) {
		if (read_size(n, key, &v[0]) < 0)
			return -1;
		out[0] = out[1] = (int)v[0];
		return 0;
	}
	if (n->kind != DT_NODE_SEQ || n->n != 2)
		return dt_node_error(n, "'%s': the %s entry must be an integer or a list of two integers [%s], got %s",
				     key, which ? "second (width)" : "first (height)",
				     which ? "left, right" : "top, bottom",
				     n->kind == DT_NODE_MAP ? "a mapping" : "a list of another length");
	for (int i = 0; i < 2; i++)
		if (read_size(n->items[i], key, &v[i]) < 0)
			return -1;
	out[0] = (int)v[0];
	out[1] = (int)v[1];
	return 0;
}

int dt_shift2d_init(struct dt_layer *l, const struct dt_node *args, const char *key, int pad, int def)
{
	static const char *const padding_keys[] = { "padding", NULL };
	static const char *const cropping_keys[] = { "cropping", NULL };
	const struct dt_node *n = dt_node_get(args, key);
	int hs[2] = { def, def }, ws[2] = { def, def };
	int64_t v;
	char shape[64];
	struct shift2d *s;

	if (dt_layer_check_keys(l, args, pad ? padding_keys : cropping_keys) < 0)
		return -1;
	if (n && n->kind == DT_NODE_SCALAR) {
		if (read_size(n, key, &v) < 0)
			return -1;
		hs[0] = hs[1] = ws[0] = ws[1] = (int)v;
	} else if (n) {
		if (n->kind != DT_NODE_SEQ || n->n != 2)
			return dt_node_error(n, "'%s' must be an integer, [height, width] or [[top, bottom], [left, right]], "
					     "got %s",
					     key, n->kind == DT_NODE_MAP ? "a mapping" : "a list of another length");
		if (read_side(n->items[0], key, 0, hs) < 0 || read_side(n->items[1], key, 1, ws) < 0)
			return -1;
	}
	if (l->in.ndim != 3)
		return dt_node_error(args, "layer '%s' needs an image input (height, width, channels) but gets %s; "
				     "add '- reshape: {target_shape: [H, W, C]}' before it",
				     l->name, dt_shape_format(&l->in, 1, shape, sizeof(shape)));
	if (!pad && ((int64_t)hs[0] + hs[1] >= l->in.dim[0] || (int64_t)ws[0] + ws[1] >= l->in.dim[1]))
		return dt_node_error(n ? n : args,
				     "layer '%s': cropping %d+%d rows and %d+%d columns leaves nothing of the input %s; "
				     "each axis' cropping must be smaller than its size (as Keras)",
				     l->name, hs[0], hs[1], ws[0], ws[1], dt_shape_format(&l->in, 0, shape, sizeof(shape)));
	if (pad && ((int64_t)l->in.dim[0] + hs[0] + hs[1] > 1 << 24 || (int64_t)l->in.dim[1] + ws[0] + ws[1] > 1 << 24))
		return dt_node_error(n, "layer '%s': the padded image would be over %d rows or columns", l->name, 1 << 24);
	s = dt_calloc(1, sizeof(*s));
	s->pad = pad;
	s->top = hs[0];
	s->bottom = hs[1];
	s->left = ws[0];
	s->right = ws[1];
	l->priv = s;
	if (pad)
		l->out = dt_shape_make(3, (int[]){ l->in.dim[0] + hs[0] + hs[1], l->in.dim[1] + ws[0] + ws[1], l->in.dim[2] });
	else
		l->out = dt_shape_make(3, (int[]){ l->in.dim[0] - hs[0] - hs[1], l->in.dim[1] - ws[0] - ws[1], l->in.dim[2] });
	return 0;
}

/* t as (N, H, W, C) of per-sample shape s. */
static struct dt_tensor image(const struct dt_tensor *t, const struct dt_shape *s)
{
	struct dt_tensor v = *t;
	v.shape = dt_shape_make(4, (int[]){ t->shape.dim[0], s->dim[0], s->dim[1], s->dim[2] });
	return v;
}

void dt_shift2d_forward(struct dt_layer *l, const struct dt_tensor *x, struct dt_tensor *y,
			const struct dt_step_ctx *ctx)
{
	const struct shift2d *s = l->priv;
	struct dt_tensor xv = image(x, &l->in), yv = image(y, &l->out);
	if (s->pad)
		dt_op_shift2d(&xv, &yv, -s->top, -s->left);
	else
		dt_op_shift2d(&xv, &yv, s->top, s->left);
}

void dt_shift2d_backward(struct dt_layer *l, const struct dt_tensor *x, const struct dt_tensor *y,
			 struct dt_tensor *dy, struct dt_tensor *dx)
{
	const struct shift2d *s = l->priv;
	struct dt_tensor dyv, dxv;
	if (!dx)
		return;
	dyv = image(dy, &l->out);
	dxv = image(dx, &l->in);
	if (s->pad)
		dt_op_shift2d(&dyv, &dxv, s->top, s->left);
	else
		dt_op_shift2d(&dyv, &dxv, -s->top, -s->left);
}

void dt_shift2d_release(struct dt_layer *l)
{
	free(l->priv);
	l->priv = NULL;
}

const char *dt_shift2d_export(const struct dt_layer *l, struct dt_onnx *g, const char *x)
{
	const struct shift2d *s = l->priv;
	const char *in[4];
	char name[160];
	in[0] = x;
	if (s->pad) {
		int64_t pads[8] = { 0, s->top, s->left, 0, 0, s->bottom, s->right, 0 };
		snprintf(name, sizeof(name), "%s/pads", l->name);
		in[1] = dt_onnx_int64s(g, name, 8, pads);
		return dt_onnx_node(g, "Pad", in, 2, l->name); /* mode constant, value 0: the defaults */
	}
	snprintf(name, sizeof(name), "%s/starts", l->name);
	in[1] = dt_onnx_int64s(g, name, 2, (int64_t[]){ s->top, s->left });
	snprintf(name, sizeof(name), "%s/ends", l->name);
	in[2] = dt_onnx_int64s(g, name, 2, (int64_t[]){ l->in.dim[0] - s->bottom, l->in.dim[1] - s->right });
	snprintf(name, sizeof(name), "%s/axes", l->name);
	in[3] = dt_onnx_int64s(g, name, 2, (int64_t[]){ 1, 2 });
	return dt_onnx_node(g, "Slice", in, 4, l->name);
}
