/*
 * What spatial_dropout1d and spatial_dropout2d share (spatial_dropout.c):
 * inverted dropout of whole channels, as Keras' SpatialDropout1D/2D. In
 * training each (sample, channel) is zeroed with probability `rate` at every
 * position and kept ones are scaled by 1/(1-rate); outside training the
 * layer is the identity. The mask of (sample, channel) is dt_op_dropout's
 * draw for element (row * C + channel) of a (global batch, C) tensor under
 * the step's key and the layer: a function of (seed, epoch, step, layer,
 * the sample's row in the global batch, channel), so a sample gets the same
 * mask on whichever replica computes it and a resumed run draws it again.
 */
#ifndef DT_LAYERS_SPATIAL_DROPOUT_H
#define DT_LAYERS_SPATIAL_DROPOUT_H

#include "core/model/layer.h"

/* Reads rate (required, [0, 1)); the input must have ndim dimensions (2: (steps, C), 3: (H, W, C)). */
int dt_spatial_dropout_init(struct dt_layer *l, const struct dt_node *args, int ndim);
void dt_spatial_dropout_forward(struct dt_layer *l, const struct dt_tensor *x, struct dt_tensor *y,
				const struct dt_step_ctx *ctx);
void dt_spatial_dropout_backward(struct dt_layer *l, const struct dt_tensor *x, const struct dt_tensor *y,
				 struct dt_tensor *dy, struct dt_tensor *dx);
void dt_spatial_dropout_release(struct dt_layer *l);
/* One multiply per value (training). */
int64_t dt_spatial_dropout_flops(const struct dt_layer *l);
/* Inference: Identity. */
const char *dt_spatial_dropout_export(const struct dt_layer *l, struct dt_onnx *g, const char *x);

#endif
