#include "layers.h"

const struct dt_layer_type *const dt_layer_types[] = {
	&dt_dense_layer,
	&dt_activation_layer,
	&dt_dropout_layer,
	&dt_flatten_layer,
	&dt_conv2d_layer,
	&dt_max_pooling2d_layer,
	&dt_average_pooling2d_layer,
	&dt_global_average_pooling2d_layer,
	&dt_batch_normalization_layer,
	&dt_reshape_layer,
	&dt_zero_padding2d_layer,
	&dt_cropping2d_layer,
	&dt_up_sampling2d_layer,
	&dt_depthwise_conv2d_layer,
	&dt_separable_conv2d_layer,
	/* sequences */
	&dt_conv1d_layer,
	&dt_max_pooling1d_layer,
	&dt_average_pooling1d_layer,
	&dt_global_average_pooling1d_layer,
	&dt_global_max_pooling1d_layer,
	&dt_global_max_pooling2d_layer,
	/* recurrent */
	&dt_lstm_layer,
	&dt_gru_layer,
	&dt_simple_rnn_layer,
	&dt_bidirectional_layer,
	NULL,
};
