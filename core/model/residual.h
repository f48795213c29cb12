/*
 * Residual blocks of a sequential file:
 *
 *   - residual: {layers: [...], shortcut: identity | projection, activation: relu}
 *
 * dt_model_init flattens a block into the model's layer list: its inner layers
 * in order, then (for a projection shortcut) a 1x1 convolution (images) or a
 * dense layer (flat data) that reads the block's input, then one "add" layer
 * (Keras' Add, plus the optional activation) that sums the block's output and
 * the shortcut. The model records, per layer, which activation it reads
 * (struct dt_model's from[]) and, for an add, the shortcut's (shortcut[]); the
 * backward pass sums the gradients of an activation that two layers read.
 *
 * This file is the add layer's type: not in the layer table (it only exists
 * inside a block), named "residual" in YAML and "Add" in summaries.
 */
#ifndef DT_RESIDUAL_H
#define DT_RESIDUAL_H

#include "core/model/layer.h"

/* The add layer's priv: views the model sets before each call. */
struct dt_residual_add {
	struct dt_tensor shortcut;  /* forward: the shortcut's value (n, in) */
	struct dt_tensor *dshortcut; /* backward: where its gradient goes; NULL when none is needed */
};

extern const struct dt_layer_type dt_residual_add_type;

#endif
