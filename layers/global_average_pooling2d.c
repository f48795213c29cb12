/*
 * global_average_pooling2d: the mean over height and width of each channel,
 * as Keras' GlobalAveragePooling2D. (H, W, C) -> (C,), or (1, 1, C) with
 * keepdims: true; no parameters.
 */
#include "layers.h"
#include "pool2d.h"

static const struct dt_layer_example examples[] = {
	{ "3,4,2", NULL },
	{ "1,1,3", NULL },
	{ "5,2,1", NULL },
	{ "3,2,2", "{keepdims: true}" },
	{ NULL, NULL },
};

static int global_average_pooling2d_init(struct dt_layer *l, const struct dt_node *args)
{
	return dt_pool_init_global(l, args, DT_POOL_AVG, 2);
}

const struct dt_layer_type dt_global_average_pooling2d_layer = {
	.name = "global_average_pooling2d",
	.class_name = "GlobalAveragePooling2D",
	.examples = examples,
	.init = global_average_pooling2d_init,
	.forward = dt_pool2d_forward,
	.backward = dt_pool2d_backward,
	.release = dt_pool2d_release,
	.alloc = dt_pool2d_alloc,
	.export = dt_pool2d_export,
};
