/*
 * global_average_pooling1d: the mean over the steps of each channel, as Keras' GlobalAveragePooling1D.
 * (steps, C) -> (C,), or (1, C) with keepdims: true; no parameters.
 */
#include "layers.h"
#include "pool2d.h"

static const struct dt_layer_example examples[] = {
	{ "5,3", NULL },
	{ "1,2", NULL },
	{ "7,1", NULL },
	{ "4,2", "{keepdims: true}" },
	{ NULL, NULL },
};

static int global_average_pooling1d_init(struct dt_layer *l, const struct dt_node *args)
{
	return dt_pool_init_global(l, args, DT_POOL_AVG, 1);
}

const struct dt_layer_type dt_global_average_pooling1d_layer = {
	.name = "global_average_pooling1d",
	.class_name = "GlobalAveragePooling1D",
	.examples = examples,
	.init = global_average_pooling1d_init,
	.forward = dt_pool2d_forward,
	.backward = dt_pool2d_backward,
	.release = dt_pool2d_release,
	.alloc = dt_pool2d_alloc,
	.export = dt_pool2d_export,
};
