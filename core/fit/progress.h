/*
 * What fit prints as it trains, two callbacks:
 *   progress    Keras-style bar updated in place on a terminal, one plain line
 *               per epoch otherwise (stderr)
 *   json        one JSON object per epoch on stdout (--json)
 * Only the chief process installs them.
 */
#ifndef DT_PROGRESS_H
#define DT_PROGRESS_H

#include <stdio.h>

#include "core/fit/train.h"

enum dt_progress_mode { DT_PROGRESS_OFF, DT_PROGRESS_BAR, DT_PROGRESS_LINES };

struct dt_progress {
	struct dt_callback cb;
	enum dt_progress_mode mode;
	FILE *out;
	int epochs;
	double last_draw;
};
void dt_progress_init(struct dt_progress *p, enum dt_progress_mode mode, FILE *out, int epochs);
/*
 * " - loss: 0.3012" written at buf + k (size bytes in all): Keras' number
 * format, 4 decimals, 4 significant digits below 1e-3, "nan" for NaN.
 * Returns the new k (>= size when the text was cut).
 */
size_t dt_format_metric(char *buf, size_t size, size_t k, const char *name, double v);
/* " - accuracy: 0.8912 - loss: 0.3012 ..." for logs, each as dt_format_metric writes it. */
void dt_format_metrics(const struct dt_logs *logs, int with_val, char *buf, size_t size);

/* One metric of the logs by name, as printed. */
struct dt_metric_pair {
	char name[DT_METRIC_NAME + 4];
	double value;
};
#define DT_MAX_PAIRS (2 * (6 + DT_MAX_METRICS))
/*
 * The logs' metrics in Keras' order: alphabetical, then (with_val and
 * validation) the val_ ones, alphabetical. out holds DT_MAX_PAIRS; returns
 * the count.
 */
int dt_logs_pairs(const struct dt_logs *logs, int with_val, struct dt_metric_pair *out);

struct dt_json_log {
	struct dt_callback cb;
	FILE *out;
	int epochs;
};
void dt_json_log_init(struct dt_json_log *j, FILE *out, int epochs);

#endif
