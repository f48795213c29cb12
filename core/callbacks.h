/*
 * The built-in callbacks of fit:
 *   progress    Keras-style bar updated in place on a terminal, one plain line
 *               per epoch otherwise (stderr)
 *   json        one JSON object per epoch on stdout (--json)
 *   checkpoint  latest.safetensors after every epoch and best.safetensors when
 *               the monitored value improves, in the run directory
 * Only the chief process installs them.
 */
#ifndef DT_CALLBACKS_H
#define DT_CALLBACKS_H

#include <stdio.h>

#include "checkpoint.h"
#include "train.h"

enum dt_progress_mode { DT_PROGRESS_OFF, DT_PROGRESS_BAR, DT_PROGRESS_LINES };

struct dt_progress {
	struct dt_callback cb;
	enum dt_progress_mode mode;
	FILE *out;
	int epochs;
	double last_draw;
};
void dt_progress_init(struct dt_progress *p, enum dt_progress_mode mode, FILE *out, int epochs);
/* " - accuracy: 0.8912 - loss: 0.3012 ..." for logs, Keras' number format. */
void dt_format_metrics(const struct dt_logs *logs, int with_val, char *buf, size_t size);

struct dt_json_log {
	struct dt_callback cb;
	FILE *out;
	int epochs;
};
void dt_json_log_init(struct dt_json_log *j, FILE *out, int epochs);

#define DT_MAX_EXTRA_META 8

struct dt_checkpointer {
	struct dt_callback cb;
	const char *dir;
	const char *config_json; /* the resolved config, stored in the metadata */
	/*
	 * More metadata for every file, set by the caller after init (not owned):
	 * "class_names" (a JSON array of strings, for predict), "preprocessing"
	 * (a JSON object with the normalization computed on the training set).
	 */
	const struct dt_ckpt_meta *extra_meta;
	int nextra_meta;
	double best;             /* monitored value of best.safetensors */
	int has_best;
};
/* Creates dir (and parents). 0 or -1. */
int dt_checkpointer_init(struct dt_checkpointer *c, const char *dir, const char *config_json);

/* Creates a directory and its parents, like mkdir -p. 0 or -1 with an error. */
int dt_mkdir_p(const char *path);

#endif
