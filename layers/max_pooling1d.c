/*
 * max_pooling1d: the maximum of each pool_size window of steps, as Keras' MaxPooling1D.
 * Arguments: pool_size (2 or [p]), strides (pool_size), padding (valid).
 * (steps, C) -> (out_steps, C); no parameters. Runs on the pool plan at
 * height 1 (pool2d.c).
 */
#include "layers.h"
#include "pool2d.h"

static int max_pooling1d_init(struct dt_layer *l, const struct dt_node *args)
{
	return dt_pool1d_init(l, args, DT_POOL_MAX);
}

const struct dt_layer_type dt_max_pooling1d_layer = {
	.name = "max_pooling1d",
	.class_name = "MaxPooling1D",
	.examples = dt_pool1d_examples,
	.init = max_pooling1d_init,
	.forward = dt_pool2d_forward,
	.backward = dt_pool2d_backward,
	.release = dt_pool2d_release,
	.alloc = dt_pool2d_alloc,
	.export = dt_pool2d_export,
};
