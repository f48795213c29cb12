/*
 * Kernel and pool sizes, strides and padding as Keras reads and applies
 * them (see window.h).
 */
#include "window.h"

const char *const dt_padding_names[] = { "valid", "same", NULL };

int dt_window_pair(const struct dt_node *args, const char *key, int def, int min, int max, int out[2])
{
	const struct dt_node *n = dt_node_get(args, key);
	int64_t v[2];

	out[0] = out[1] = def;
	if (!n)
		return 0;
	if (n->kind == DT_NODE_SCALAR) {
		if (dt_cfg_int(args, key, def, min, max, &v[0]) < 0)
			return -1;
		out[0] = out[1] = (int)v[0];
		return 1;
	}
	if (n->kind != DT_NODE_SEQ || n->n != 2)
		return dt_node_error(n, "'%s' must be an integer or a list of two integers [height, width], got %s",
				     key, n->kind == DT_NODE_MAP ? "a mapping" : "a list of another length");
	for (int i = 0; i < 2; i++)
		if (dt_node_int(n->items[i], min, max, &v[i]) < 0)
			return -1;
	out[0] = (int)v[0];
	out[1] = (int)v[1];
	return 1;
}

int dt_window_padding(const struct dt_node *args, enum dt_padding *out)
{
	int v;
	if (dt_cfg_enum(args, "padding", dt_padding_names, DT_PADDING_VALID, &v) < 0)
		return -1;
	*out = (enum dt_padding)v;
	return 0;
}

int dt_window_dim(int in, int k, int stride, int dil, enum dt_padding pad, int *lo, int *hi)
{
	int64_t span = (int64_t)(k - 1) * dil + 1, out, total;

	*lo = *hi = 0;
	if (pad == DT_PADDING_VALID)
		return span > in ? 0 : (int)((in - span) / stride + 1);
	out = ((int64_t)in + stride - 1) / stride;
	total = (out - 1) * stride + span - in;
	if (total > 0) {
		*lo = (int)(total / 2);
		*hi = (int)(total - total / 2);
	}
	return (int)out;
}
