/*
 * average_pooling2d: the mean of each pool_size window, as Keras' AveragePooling2D.
 * Arguments: pool_size (2 or [ph, pw]), strides (pool_size), padding (valid).
 * (H, W, C) -> (out_h, out_w, C); no parameters.
 */
#include "layers.h"
#include "pool2d.h"

static int average_pooling2d_init(struct dt_layer *l, const struct dt_node *args)
{
	return dt_pool2d_init(l, args, DT_POOL_AVG);
}

const struct dt_layer_type dt_average_pooling2d_layer = {
	.name = "average_pooling2d",
	.class_name = "AveragePooling2D",
	.examples = dt_pool2d_examples,
	.init = average_pooling2d_init,
	.forward = dt_pool2d_forward,
	.backward = dt_pool2d_backward,
	.release = dt_pool2d_release,
	.alloc = dt_pool2d_alloc,
	.layouts = dt_pool2d_layouts,
	.export = dt_pool2d_export,
};
