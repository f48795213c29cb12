/*
 * Checkpoint file names from a template, as Keras' ModelCheckpoint formats its
 * filepath: "{epoch:03d}-{val_loss:.4f}". A field is {NAME} or {NAME:SPEC}
 * with SPEC = [0][WIDTH][.PRECISION]TYPE, TYPE one of d (integers only), f, e,
 * g; "{{" and "}}" are literal braces. Names: epoch (1-based, the epoch the
 * position is in), step (training batches since the start of the run), batch
 * (batches done in the epoch), loss, accuracy, val_loss, val_accuracy, and
 * every metric of compile.metrics by its log name with or without val_
 * ({auc}, {val_precision}, {f1_score_1}, {val_r2_score}, ...).
 */
#ifndef DT_CKPT_TEMPLATE_H
#define DT_CKPT_TEMPLATE_H

#include <stddef.h>
#include <stdint.h>

struct dt_metric_set;

struct dt_ckpt_vars {
	int64_t epoch, step, batch;
	double loss, accuracy, val_loss, val_accuracy;
	int has_accuracy, has_val;
	/* The other names (auc, val_precision, ...): get(ctx, name), NaN when absent; get NULL: all NaN. */
	double (*get)(const void *ctx, const char *name);
	const void *ctx;
};

/*
 * Checks a template: fields, specs, names; with per_step, the validation
 * metrics and those of compile.metrics are refused (they exist only at the
 * end of an epoch); with !accuracy, accuracy and val_accuracy too; a
 * metric's name must be one of metrics (NULL: none). 0, or -1 with the
 * reason in msg.
 */
int dt_ckpt_template_check(const char *tpl, int per_step, int accuracy, const struct dt_metric_set *metrics,
			   char *msg, size_t size);
/* Formats a checked template into out (no extension added). 0, or -1 when out is too small. */
int dt_ckpt_template_format(const char *tpl, const struct dt_ckpt_vars *v, char *out, size_t size);

#endif
