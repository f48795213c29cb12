/*
 * zero_padding2d: zeros around the image, as Keras' ZeroPadding2D, channels
 * last. Argument: padding (1): an int for every side, [h, w] (h rows above
 * and below, w columns left and right) or [[top, bottom], [left, right]].
 * No parameters. (H, W, C) -> (H + top + bottom, W + left + right, C).
 */
#include "layers.h"
#include "shift2d.h"

static int zero_padding2d_init(struct dt_layer *l, const struct dt_node *args)
{
	return dt_shift2d_init(l, args, "padding", 1, 1);
}

/* Copies: no arithmetic. */
static int64_t zero_padding2d_flops(const struct dt_layer *l) { return 0; }

static const struct dt_layer_example examples[] = {
	{ "3,4,2", NULL },
	{ "3,3,1", "{padding: [2, 1]}" },
	{ "2,3,2", "{padding: [[1, 0], [2, 3]]}" },
	{ "2,2,1", "{padding: [[0, 2], 1]}" },
	{ NULL, NULL },
};

const struct dt_layer_type dt_zero_padding2d_layer = {
	.name = "zero_padding2d",
	.class_name = "ZeroPadding2D",
	.examples = examples,
	.init = zero_padding2d_init,
	.forward = dt_shift2d_forward,
	.backward = dt_shift2d_backward,
	.release = dt_shift2d_release,
	.flops = zero_padding2d_flops,
	.export = dt_shift2d_export,
};
