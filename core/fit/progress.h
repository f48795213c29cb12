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
/* " - accuracy: 0.8912 - loss: 0.3012 ..." for logs, Keras' number format. */
void dt_format_metrics(const struct dt_logs *logs, int with_val, char *buf, size_t size);

struct dt_json_log {
	struct dt_callback cb;
	FILE *out;
	int epochs;
};
void dt_json_log_init(struct dt_json_log *j, FILE *out, int epochs);

#endif
