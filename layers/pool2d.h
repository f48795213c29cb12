/*
 * What the pooling layers (max and average, 2-D and 1-D, and the global
 * ones) share: the window arguments, the backend's pool plan (made in alloc)
 * and the forward and backward passes through it. Channels last: (H, W, C)
 * in, or (steps, C) for the 1-D layers, pooled as (1, steps, C).
 */
#ifndef DT_LAYERS_POOL2D_H
#define DT_LAYERS_POOL2D_H

#include "core/model/layer.h"

/*
 * Reads pool_size (2 or [ph, pw]), strides (default: pool_size) and padding
 * (valid) as Keras' MaxPooling2D and AveragePooling2D; sets l->out to
 * (out_h, out_w, C). 0 or -1.
 */
int dt_pool2d_init(struct dt_layer *l, const struct dt_node *args, enum dt_pool kind);
/*
 * Reads pool_size (2 or [p]), strides (default: pool_size) and padding
 * (valid) as Keras' MaxPooling1D and AveragePooling1D; sets l->out to
 * (out_steps, C). 0 or -1.
 */
int dt_pool1d_init(struct dt_layer *l, const struct dt_node *args, enum dt_pool kind);
/*
 * The mean or maximum over the whole H x W (dims 2) or all steps (dims 1):
 * (H, W, C) or (steps, C) -> (C,), or with Keras' `keepdims: true` (1, 1, C)
 * or (1, C). 0 or -1.
 */
int dt_pool_init_global(struct dt_layer *l, const struct dt_node *args, enum dt_pool kind, int dims);

/* Max and average pooling 2-D take either layout in and out (core/ops.h's dt_op_channel_block). */
unsigned dt_pool2d_layouts(const struct dt_layer *l, struct dt_device dev, int block, int with_dx);
int dt_pool2d_alloc(struct dt_layer *l, struct dt_device dev, int max_batch);
void dt_pool2d_forward(struct dt_layer *l, const struct dt_tensor *x, struct dt_tensor *y,
		       const struct dt_step_ctx *ctx);
void dt_pool2d_backward(struct dt_layer *l, const struct dt_tensor *x, const struct dt_tensor *y,
			struct dt_tensor *dy, struct dt_tensor *dx);
void dt_pool2d_release(struct dt_layer *l);
/*
 * MaxPool or AveragePool between Transposes to NCHW (N, C, steps) and back;
 * global: ReduceMean or ReduceMax over H, W (the steps).
 */
const char *dt_pool2d_export(const struct dt_layer *l, struct dt_onnx *g, const char *x);

/* Pooling geometries for the gradient check, shared by max and average pooling. */
extern const struct dt_layer_example dt_pool2d_examples[];
/* The same for the 1-D poolings. */
extern const struct dt_layer_example dt_pool1d_examples[];

#endif
