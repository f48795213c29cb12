/*
 * The metric a callback or a checkpoint watches, and which way is better:
 * `monitor` and `mode` of checkpoint.save_best, model_checkpoint,
 * early_stopping and reduce_lr_on_plateau, read and resolved here alone so
 * that the four agree.
 *
 * The names are those of fit's epoch logs (dt_logs_get): loss, accuracy,
 * mae, rmse, the metrics of compile.metrics (auc, precision, recall,
 * f1_score, auc_1, mse, r2_score, ...), their val_ forms, and
 * learning_rate. mode: auto follows Keras: higher is better when the name
 * holds "acc" or is one of those metrics but the errors mse and mape (with
 * or without val_), lower otherwise (losses, errors, the rate).
 */
#ifndef DT_MONITOR_H
#define DT_MONITOR_H

#include "core/config/config.h"

struct dt_metric_set;

enum dt_monitor_mode { DT_MONITOR_AUTO, DT_MONITOR_MIN, DT_MONITOR_MAX };

/* The metrics that may be monitored, NULL-terminated. */
extern const char *const dt_monitor_names[];

/*
 * Reads `monitor` and `mode` of args (NULL: the defaults): *name is one of
 * dt_monitor_names (def when absent; def may be NULL), *mode the mode (auto
 * when absent). 0, or -1 after an error at the key's position (an unknown
 * name, with a did-you-mean).
 */
int dt_monitor_read(const struct dt_node *args, const char *def, const char **name, enum dt_monitor_mode *mode);

/* 1 when higher values of name are better under mode (auto: Keras' rule above), else 0; name NULL: a loss. */
int dt_monitor_greater(enum dt_monitor_mode mode, const char *name);

/*
 * Checks that fit reports name: accuracy needs compile.metrics: [accuracy]
 * (accuracy), mae and rmse a regression loss or metrics: [mae] or [rmse]
 * (errors), a val_ name validation data (has_val; -1: not known yet, not
 * checked), auc, precision, ... a metric of that name in metrics
 * (compile.metrics; NULL: none). what names the monitoring item in the
 * message. 0, or -1 after an error at where.
 */
int dt_monitor_check(const struct dt_node *where, const char *what, const char *name, int accuracy, int errors,
		     int has_val, const struct dt_metric_set *metrics);

#endif
