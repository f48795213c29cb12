/*
 * A model (and optionally its optimizer) to and from a checkpoint file.
 * Names are Keras-like: "dense_1/kernel", "dense_1/bias", and the optimizer's
 * slots "optimizer/dense_1/kernel/m"; its step count is the metadata key
 * "optimizer.iterations".
 */
#ifndef DT_SNAPSHOT_H
#define DT_SNAPSHOT_H

#include "core/checkpoint/checkpoint.h"
#include "core/model/model.h"
#include "core/model/optimizer.h"

/* Writes m's parameters (and o's state when o is not NULL) with meta, atomically. */
int dt_snapshot_save(const char *path, const struct dt_model *m, const struct dt_optimizer *o,
		     const struct dt_ckpt_meta *meta, int nmeta);
/*
 * Loads parameters into m, and optimizer state into o when o is not NULL. Every
 * model tensor must be present with the same shape; the file must hold no
 * other weights. Errors name the file, the tensor and both shapes.
 */
int dt_snapshot_load(const struct dt_ckpt *c, struct dt_model *m, struct dt_optimizer *o);
/*
 * When c holds the moving average of the weights (optimizer/LAYER/PARAM/ema,
 * written with the optimizer's use_ema), loads it into m's trainable
 * parameters in place of their trained values: the model Keras' fit ends
 * with. 1 when it did, 0 when c has no average, -1 on an error (a shape that
 * differs, a parameter without its average).
 */
int dt_snapshot_load_ema(const struct dt_ckpt *c, struct dt_model *m);

#endif
