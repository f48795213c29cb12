/*
 * cropping2d: drops rows and columns at the image's edges, as Keras'
 * Cropping2D, channels last. Argument: cropping (0): an int for every side,
 * [h, w] (h rows at the top and the bottom, w columns at the left and the
 * right) or [[top, bottom], [left, right]]; each axis keeps at least one.
 * No parameters. (H, W, C) -> (H - top - bottom, W - left - right, C).
 */
#include "layers.h"
#include "shift2d.h"

static int cropping2d_init(struct dt_layer *l, const struct dt_node *args)
{
	return dt_shift2d_init(l, args, "cropping", 0, 0);
}

/* Copies: no arithmetic. */
static int64_t cropping2d_flops(const struct dt_layer *l) { return 0; }

static const struct dt_layer_example examples[] = {
	{ "4,5,2", "{cropping: 1}" },
	{ "5,4,1", "{cropping: [2, 1]}" },
	{ "5,6,2", "{cropping: [[1, 2], [0, 3]]}" },
	{ "3,3,1", NULL },
	{ NULL, NULL },
};

const struct dt_layer_type dt_cropping2d_layer = {
	.name = "cropping2d",
	.class_name = "Cropping2D",
	.examples = examples,
	.init = cropping2d_init,
	.forward = dt_shift2d_forward,
	.backward = dt_shift2d_backward,
	.release = dt_shift2d_release,
	.flops = cropping2d_flops,
	.export = dt_shift2d_export,
};
