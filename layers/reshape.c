/*
 * reshape: the same values in another per-sample shape, as Keras' Reshape.
 * Argument: target_shape (required): 1 to 4 sizes, one of them may be -1 and
 * is then inferred. No parameters.
 */
#include <limits.h>

#include "core/error.h"
#include "core/export/onnx.h"
#include "layers.h"

static int reshape_init(struct dt_layer *l, const struct dt_node *args)
{
	static const char *const keys[] = { "target_shape", NULL };
	const struct dt_node *n;
	struct dt_shape s = { 0 };
	int64_t known = 1, count = dt_shape_count(&l->in);
	int infer = -1;
	char a[64], b[64];

	if (dt_layer_check_keys(l, args, keys) < 0 || dt_cfg_require(args, "target_shape", "reshape") < 0)
		return -1;
	n = dt_node_get(args, "target_shape");
	if (n->kind != DT_NODE_SEQ || n->n < 1 || n->n > DT_MAX_SAMPLE_DIMS)
		return dt_node_error(n, "'target_shape' must be a list of 1 to %d sizes such as [28, 28, 1]",
				     DT_MAX_SAMPLE_DIMS);
	s.ndim = n->n;
	for (int i = 0; i < n->n; i++) {
		int64_t v;
		if (dt_node_int(n->items[i], -1, INT_MAX, &v) < 0)
			return -1;
		if (v == 0)
			return dt_node_error(n->items[i], "'target_shape' sizes must be positive (or one -1), got 0");
		if (v == -1) {
			if (infer >= 0)
				return dt_node_error(n->items[i], "'target_shape' may have only one -1");
			infer = i;
			continue;
		}
		s.dim[i] = (int)v;
		known = known > count ? known : known * v; /* saturates: no overflow */
	}
	if (infer >= 0 && known <= count && count % known == 0)
		s.dim[infer] = (int)(count / known);
	if (known > count || dt_shape_count(&s) != count) {
		if (infer >= 0)
			s.dim[infer] = -1;
		return dt_node_error(n, "layer '%s' cannot reshape %s (%lld values) to %s", l->name,
				     dt_shape_format(&l->in, 0, a, sizeof(a)), (long long)count,
				     dt_shape_format(&s, 0, b, sizeof(b)));
	}
	l->out = s;
	return 0;
}

static void reshape_forward(struct dt_layer *l, const struct dt_tensor *x, struct dt_tensor *y,
			    const struct dt_step_ctx *ctx)
{
	dt_op_copy(x, y);
}

static void reshape_backward(struct dt_layer *l, const struct dt_tensor *x, const struct dt_tensor *y,
			     struct dt_tensor *dy, struct dt_tensor *dx)
{
	if (dx)
		dt_op_copy(dy, dx);
}

/* Reshape to (batch, out...): the sample's values in their channels-last order. */
static const char *reshape_export(const struct dt_layer *l, struct dt_onnx *g, const char *x)
{
	return dt_onnx_reshape(g, x, &l->out, l->name);
}

static const struct dt_layer_example examples[] = {
	{ "16", "{target_shape: [4, 4, 1]}" },
	{ "2,3,4", "{target_shape: [-1, 4]}" },
	{ "6", "{target_shape: [2, -1]}" },
	{ "2,2,2", "{target_shape: [8]}" },
	{ NULL, NULL },
};

const struct dt_layer_type dt_reshape_layer = {
	.name = "reshape",
	.class_name = "Reshape",
	.examples = examples,
	.init = reshape_init,
	.forward = reshape_forward,
	.backward = reshape_backward,
	.export = reshape_export,
	.view = 1,
};
