/*
 * Window arguments of the 1-D layers as Keras reads them (see window1d.h).
 */
#include "core/export/onnx.h"
#include "window1d.h"

const char *const dt_padding1d_names[] = { "valid", "same", "causal", NULL };

int dt_window1d_int(const struct dt_node *args, const char *key, int def, int min, int max, int *out)
{
	const struct dt_node *n = dt_node_get(args, key);
	int64_t v;

	*out = def;
	if (!n)
		return 0;
	if (n->kind == DT_NODE_SEQ) {
		if (n->n != 1)
			return dt_node_error(n, "'%s' must be an integer or a list of one integer, got a list of %d",
					     key, n->n);
		n = n->items[0];
	} else if (n->kind != DT_NODE_SCALAR) {
		return dt_node_error(n, "'%s' must be an integer or a list of one integer, got a mapping", key);
	}
	if (dt_node_int(n, min, max, &v) < 0)
		return -1;
	*out = (int)v;
	return 1;
}

int dt_window1d_padding(const struct dt_node *args, enum dt_padding1d *out)
{
	int v;

	if (dt_cfg_enum(args, "padding", dt_padding1d_names, DT_PADDING1D_VALID, &v) < 0)
		return -1;
	*out = (enum dt_padding1d)v;
	return 0;
}

int dt_window1d_check_input(const struct dt_layer *l, const struct dt_node *args)
{
	char shape[64];

	if (l->in.ndim == 2)
		return 0;
	return dt_node_error(args, "layer '%s' needs a sequence input (steps, channels) but gets %s; "
			     "add '- reshape: {target_shape: [steps, channels]}' before it",
			     l->name, dt_shape_format(&l->in, 1, shape, sizeof(shape)));
}

const char *dt_window1d_transpose(struct dt_onnx *g, const char *x, const char *prefix)
{
	const char *y = dt_onnx_node(g, "Transpose", &x, 1, prefix);
	dt_onnx_attr_ints(g, "perm", 3, (int64_t[]){ 0, 2, 1 });
	return y;
}
