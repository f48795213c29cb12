/*
 * What zero_padding2d and cropping2d share (shift2d.c): Keras' three forms
 * of their argument, and a layer that moves the image by a fixed offset
 * through dt_op_shift2d, padding with zeros or cropping. The gradient of
 * one is the other.
 */
#ifndef DT_LAYERS_SHIFT2D_H
#define DT_LAYERS_SHIFT2D_H

#include "core/model/layer.h"

/*
 * init for `key` ("padding" with pad 1, or "cropping" with pad 0) read as Keras
 * does: an int for all four sides, [h, w] (each side of that axis) or
 * [[top, bottom], [left, right]], an entry of the list may itself be an int
 * or a pair. def: the value when the key is absent (one int for all sides).
 */
int dt_shift2d_init(struct dt_layer *l, const struct dt_node *args, const char *key, int pad, int def);
void dt_shift2d_forward(struct dt_layer *l, const struct dt_tensor *x, struct dt_tensor *y,
			const struct dt_step_ctx *ctx);
void dt_shift2d_backward(struct dt_layer *l, const struct dt_tensor *x, const struct dt_tensor *y,
			 struct dt_tensor *dy, struct dt_tensor *dx);
void dt_shift2d_release(struct dt_layer *l);
/* ONNX: Pad (constant 0) for a padding, Slice for a crop, on the NHWC value. */
const char *dt_shift2d_export(const struct dt_layer *l, struct dt_onnx *g, const char *x);

#endif
