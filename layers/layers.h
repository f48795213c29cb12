/*
 * The table of layer types: every type dtrain knows, by YAML name. The model
 * builder and the gradient-check test walk this table, so a layer added here
 * is buildable and tested without another change.
 */
#ifndef DT_LAYERS_H
#define DT_LAYERS_H

#include "core/model/layer.h"

extern const struct dt_layer_type dt_dense_layer;
extern const struct dt_layer_type dt_activation_layer;
extern const struct dt_layer_type dt_dropout_layer;
extern const struct dt_layer_type dt_flatten_layer;
extern const struct dt_layer_type dt_conv2d_layer;
extern const struct dt_layer_type dt_max_pooling2d_layer;
extern const struct dt_layer_type dt_average_pooling2d_layer;
extern const struct dt_layer_type dt_global_average_pooling2d_layer;
extern const struct dt_layer_type dt_batch_normalization_layer;
extern const struct dt_layer_type dt_reshape_layer;
/* cnnparts */
extern const struct dt_layer_type dt_zero_padding2d_layer;
extern const struct dt_layer_type dt_cropping2d_layer;
extern const struct dt_layer_type dt_up_sampling2d_layer;
extern const struct dt_layer_type dt_depthwise_conv2d_layer;
extern const struct dt_layer_type dt_separable_conv2d_layer;
extern const struct dt_layer_type dt_spatial_dropout1d_layer;
extern const struct dt_layer_type dt_spatial_dropout2d_layer;
extern const struct dt_layer_type dt_conv2d_transpose_layer;
/* Sequences (issue 14): 1-D convolution and pooling, global max pooling. */
extern const struct dt_layer_type dt_conv1d_layer;
extern const struct dt_layer_type dt_max_pooling1d_layer;
extern const struct dt_layer_type dt_average_pooling1d_layer;
extern const struct dt_layer_type dt_global_average_pooling1d_layer;
extern const struct dt_layer_type dt_global_max_pooling1d_layer;
extern const struct dt_layer_type dt_global_max_pooling2d_layer;
extern const struct dt_layer_type dt_embedding_layer;
extern const struct dt_layer_type dt_layer_normalization_layer;
extern const struct dt_layer_type dt_lstm_layer;
extern const struct dt_layer_type dt_gru_layer;
extern const struct dt_layer_type dt_simple_rnn_layer;
extern const struct dt_layer_type dt_bidirectional_layer;

/* NULL-terminated. */
extern const struct dt_layer_type *const dt_layer_types[];

#endif
