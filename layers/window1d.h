/*
 * What the 1-D layers (conv1d, the 1-D poolings) share: Keras' "int or
 * [int]" window arguments, conv1d's padding names (valid, same, causal) and the check that the input is a sequence (steps,
 * channels). They run on the 2-D plans at height 1.
 */
#ifndef DT_LAYERS_WINDOW1D_H
#define DT_LAYERS_WINDOW1D_H

#include "core/model/layer.h"

enum dt_padding1d { DT_PADDING1D_VALID, DT_PADDING1D_SAME, DT_PADDING1D_CAUSAL };
/* "valid", "same", "causal"; NULL-terminated, indexed by enum. */
extern const char *const dt_padding1d_names[];

/*
 * Reads `key` as one integer (kernel_size: 3) or a list of one ([3]), in
 * [min, max]. Absent: def. Returns 0 (absent), 1 (present) or -1 (error,
 * printed with the value's position).
 */
int dt_window1d_int(const struct dt_node *args, const char *key, int def, int min, int max, int *out);
/* Reads conv1d's `padding: valid | same | causal` (default valid). 0 or -1. The poolings read window.h's. */
int dt_window1d_padding(const struct dt_node *args, enum dt_padding1d *out);
/* 0 when the input is (steps, channels), else -1 with an error at args. */
int dt_window1d_check_input(const struct dt_layer *l, const struct dt_node *args);
/* Transpose(x, perm {0, 2, 1}): (N, steps, C) <-> (N, C, steps), ONNX's 1-D layout; returns its value. */
const char *dt_window1d_transpose(struct dt_onnx *g, const char *x, const char *prefix);

#endif
