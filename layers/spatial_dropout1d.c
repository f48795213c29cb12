/*
 * spatial_dropout1d: inverted dropout of whole channels of a (steps, C)
 * input, as Keras' SpatialDropout1D (see spatial_dropout.h); the identity
 * outside training. Argument: rate (required, [0, 1)). No parameters.
 */
#include "layers.h"
#include "spatial_dropout.h"

static int spatial_dropout1d_init(struct dt_layer *l, const struct dt_node *args)
{
	return dt_spatial_dropout_init(l, args, 2);
}

static const struct dt_layer_example examples[] = {
	{ "5,3", "{rate: 0.5}" },
	{ "4,6", "{rate: 0.2}" },
	{ "3,2", "{rate: 0}" },
	{ NULL, NULL },
};

const struct dt_layer_type dt_spatial_dropout1d_layer = {
	.name = "spatial_dropout1d",
	.class_name = "SpatialDropout1D",
	.examples = examples,
	.init = spatial_dropout1d_init,
	.forward = dt_spatial_dropout_forward,
	.backward = dt_spatial_dropout_backward,
	.release = dt_spatial_dropout_release,
	.flops = dt_spatial_dropout_flops,
	.export = dt_spatial_dropout_export,
	.mask = DT_MASK_PASS,
};
