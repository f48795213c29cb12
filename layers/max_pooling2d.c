/*
 * max_pooling2d: the maximum of each pool_size window, as Keras' MaxPooling2D.
 * Arguments: pool_size (2 or [ph, pw]), strides (pool_size), padding (valid).
 * (H, W, C) -> (out_h, out_w, C); no parameters.
 */
#include "layers.h"
#include "pool2d.h"

static int max_pooling2d_init(struct dt_layer *l, const struct dt_node *args)
{
	return dt_pool2d_init(l, args, DT_POOL_MAX);
}

static const struct dt_layer_example examples[] = {
	{ "4,4,2", NULL },
	{ "5,5,2", "{pool_size: 2}" },
	{ "5,6,1", "{pool_size: 3, strides: 2}" },
	{ "5,7,2", "{pool_size: [2, 3], strides: [1, 2], padding: same}" },
	{ "5,5,1", "{pool_size: 2, padding: same}" },
	{ "6,4,1", "{pool_size: [3, 1], strides: 1}" },
	{ NULL, NULL },
};

const struct dt_layer_type dt_max_pooling2d_layer = {
	.name = "max_pooling2d",
	.class_name = "MaxPooling2D",
	.examples = examples,
	.init = max_pooling2d_init,
	.forward = dt_pool2d_forward,
	.backward = dt_pool2d_backward,
	.release = dt_pool2d_release,
	.alloc = dt_pool2d_alloc,
};
