/*
 * What conv2d and the pooling layers share: Keras' "int or [h, w]"
 * arguments, the padding names and the output size and padding of one
 * spatial dimension under Keras' rules.
 */
#ifndef DT_LAYERS_WINDOW_H
#define DT_LAYERS_WINDOW_H

#include "core/config/config.h"

enum dt_padding { DT_PADDING_VALID, DT_PADDING_SAME };
/* "valid", "same"; NULL-terminated, indexed by enum. */
extern const char *const dt_padding_names[];

/*
 * Reads `key` as one integer for both dimensions (kernel_size: 3) or a list
 * of two ([3, 5]: height, width), each in [min, max]. Absent: def, def.
 * Returns the getters' 0 (absent), 1 (present) or -1 (error, printed with
 * the value's position).
 */
int dt_window_pair(const struct dt_node *args, const char *key, int def, int min, int max, int out[2]);
/* Reads `padding: valid | same` (default valid). 0 or -1. */
int dt_window_padding(const struct dt_node *args, enum dt_padding *out);

/*
 * One spatial dimension of a window of k taps dilated by dil, moved by stride
 * over `in` values. valid: floor((in - (k-1)*dil - 1) / stride) + 1 and no
 * padding; same: ceil(in / stride), padded by total = max((out-1)*stride +
 * (k-1)*dil + 1 - in, 0), lo = total/2 before and the rest after (Keras). Returns
 * the output size, 0 when the window does not fit (valid padding only).
 */
int dt_window_dim(int in, int k, int stride, int dil, enum dt_padding pad, int *lo, int *hi);

#endif
