/*
 * Checkpoints as safetensors: an 8-byte little-endian header length, a JSON
 * header (made with cJSON) mapping each tensor name to its dtype ("F32"),
 * shape and data_offsets, a "__metadata__" map of strings, then the raw
 * little-endian data. Python, PyTorch and JAX read them without dtrain.
 *
 * Saving is atomic: a temporary file in the same directory, fsync, rename,
 * then fsync of the directory; a crash leaves the old file or the new one.
 */
#ifndef DT_CHECKPOINT_H
#define DT_CHECKPOINT_H

#include <stdint.h>

#include "core/tensor.h"

struct dt_ckpt_tensor {
	const char *name;    /* "dense_1/kernel", "optimizer/dense_1/kernel/m" */
	struct dt_shape shape;
	const float *data;   /* host memory, dt_shape_count(&shape) floats */
};

struct dt_ckpt_meta {
	const char *key;
	const char *value;
};

/* The metadata beside a run's own that every checkpoint file of it carries (class names, preprocessing, ...). */
#define DT_MAX_EXTRA_META 8

/* Writes the tensors and metadata to path atomically. 0, or -1 with an error naming path. */
int dt_checkpoint_save(const char *path, const struct dt_ckpt_tensor *t, int nt,
		       const struct dt_ckpt_meta *meta, int nmeta);

struct dt_ckpt; /* a loaded file */

/*
 * Reads and validates a whole file: header length within the file, valid
 * JSON, every tensor F32 with offsets inside the data and consistent with its
 * shape, no overlap. NULL with an error naming the file (and tensor) otherwise.
 */
struct dt_ckpt *dt_checkpoint_load(const char *path);
void dt_checkpoint_free(struct dt_ckpt *c);
const char *dt_checkpoint_path(const struct dt_ckpt *c);
int dt_checkpoint_count(const struct dt_ckpt *c);
/* The i-th tensor in file order (name, shape and host data owned by c). */
struct dt_ckpt_tensor dt_checkpoint_at(const struct dt_ckpt *c, int i);
/* The tensor called name, or NULL. */
const struct dt_ckpt_tensor *dt_checkpoint_find(const struct dt_ckpt *c, const char *name);
/* A metadata value, or NULL. */
const char *dt_checkpoint_meta(const struct dt_ckpt *c, const char *key);

#endif
