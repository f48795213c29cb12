#include "layers.h"

const struct dt_layer_type *const dt_layer_types[] = {
	&dt_dense_layer,
	&dt_activation_layer,
	&dt_dropout_layer,
	&dt_flatten_layer,
	NULL,
};
