/*
 * spatial_dropout2d: inverted dropout of whole channels of a (H, W, C)
 * input, as Keras' SpatialDropout2D (see spatial_dropout.h); the identity
 * outside training. Argument: rate (required, [0, 1)). No parameters.
 */
#include "layers.h"
#include "spatial_dropout.h"

static int spatial_dropout2d_init(struct dt_layer *l, const struct dt_node *args)
{
	return dt_spatial_dropout_init(l, args, 3);
}

static const struct dt_layer_example examples[] = {
	{ "3,3,4", "{rate: 0.5}" },
	{ "2,4,3", "{rate: 0.3}" },
	{ "2,2,2", "{rate: 0}" },
	{ NULL, NULL },
};

const struct dt_layer_type dt_spatial_dropout2d_layer = {
	.name = "spatial_dropout2d",
	.class_name = "SpatialDropout2D",
	.examples = examples,
	.init = spatial_dropout2d_init,
	.forward = dt_spatial_dropout_forward,
	.backward = dt_spatial_dropout_backward,
	.release = dt_spatial_dropout_release,
	.flops = dt_spatial_dropout_flops,
	.export = dt_spatial_dropout_export,
};
