/*
 * Keras' ModelCheckpoint as a `fit.callbacks` item, run by the same writer as
 * the `checkpoint:` section (struct dt_checkpointer):
 *
 *   - model_checkpoint: {filepath: "best-{epoch:02d}-{val_accuracy:.3f}",
 *       monitor: val_accuracy, mode: max, save_best_only: true,
 *       save_weights_only: false, save_freq: epoch}
 *
 * filepath is a file-name template (core/checkpoint/ckpt_template.h), with a directory
 * part relative to the working directory (none: checkpoint.dir) and an
 * optional .safetensors extension.
 */
#ifndef DT_MODEL_CHECKPOINT_H
#define DT_MODEL_CHECKPOINT_H

#include <stdint.h>

#include "core/config/config.h"

struct dt_metric_set;

#define DT_MAX_MODEL_CHECKPOINTS 4

struct dt_model_checkpoint_cfg {
	char dir[1024];          /* "" : checkpoint.dir */
	char filename[512];      /* the template, without extension */
	const char *monitor;     /* default val_loss; one of dt_monitor_names */
	int mode;                /* +1 max, -1 min (mode: auto resolved by dt_monitor_greater) */
	int save_best_only;
	int save_weights_only;
	int64_t save_freq;       /* 0: epoch; N: every N steps */
};

/*
 * Reads the model_checkpoint items of the fit.callbacks list (NULL: none);
 * other items are left alone. accuracy: compile asks for the metric;
 * errors: fit reports MAE and RMSE; metrics: compile.metrics' others (NULL:
 * none) (dt_monitor_check). 0, or -1 after a positioned error.
 */
int dt_model_checkpoints_read(const struct dt_node *callbacks, int accuracy, int errors,
			      const struct dt_metric_set *metrics, struct dt_model_checkpoint_cfg *out, int *n);

#endif
