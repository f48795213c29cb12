#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/fit/progress.h"

static const char *metric_fmt(double v) { return fabs(v) > 1e-3 || v == 0 ? "%.4f" : "%.4e"; }

size_t dt_format_metric(char *buf, size_t size, size_t k, const char *name, double v)
{
	if (k >= size)
		return k;
	k += snprintf(buf + k, size - k, " - %s: ", name);
	/* NaN as Keras prints it: "nan", never glibc's "-nan". */
	if (k < size)
		k += isnan(v) ? snprintf(buf + k, size - k, "nan") : snprintf(buf + k, size - k, metric_fmt(v), v);
	return k;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct dt_metric_pair *)a)->name, ((const struct dt_metric_pair *)b)->name);
}

/* The pairs of one side (val: the val_ ones), sorted; returns the count. */
static int side_pairs(const struct dt_logs *logs, int val, struct dt_metric_pair *out)
{
	const char *prefix = val ? "val_" : "";
	int n = 0;
	if (logs->has_accuracy)
		out[n++] = (struct dt_metric_pair){ "accuracy", val ? logs->val_accuracy : logs->accuracy };
	if (!val && logs->has_learning_rate)
		out[n++] = (struct dt_metric_pair){ "learning_rate", logs->learning_rate };
	out[n++] = (struct dt_metric_pair){ "loss", val ? logs->val_loss : logs->loss };
	if (logs->has_errors) {
		out[n++] = (struct dt_metric_pair){ "mae", val ? logs->val_mae : logs->mae };
		out[n++] = (struct dt_metric_pair){ "rmse", val ? logs->val_rmse : logs->rmse };
	}
	for (int i = 0; logs->metrics && i < logs->metrics->n; i++) {
		snprintf(out[n].name, sizeof(out[n].name), "%s", logs->metrics->m[i].name);
		out[n++].value = val ? logs->val_metric[i] : logs->metric[i];
	}
	qsort(out, (size_t)n, sizeof(*out), by_name);
	for (int i = 0; val && i < n; i++) {
		char base[DT_METRIC_NAME];
		snprintf(base, sizeof(base), "%s", out[i].name);
		snprintf(out[i].name, sizeof(out[i].name), "%s%s", prefix, base);
	}
	return n;
}

int dt_logs_pairs(const struct dt_logs *logs, int with_val, struct dt_metric_pair *out)
{
	int n = side_pairs(logs, 0, out);
	if (with_val && logs->has_val)
		n += side_pairs(logs, 1, out + n);
	return n;
}

void dt_format_metrics(const struct dt_logs *logs, int with_val, char *buf, size_t size)
{
	struct dt_metric_pair pairs[DT_MAX_PAIRS];
	int n = dt_logs_pairs(logs, with_val, pairs);
	size_t k = 0;
	buf[0] = '\0';
	/* Keras 3 lists metrics in alphabetical order. */
	for (int i = 0; i < n; i++)
		k = dt_format_metric(buf, size, k, pairs[i].name, pairs[i].value);
}

static void format_eta(double s, char *buf, size_t size)
{
	int t = (int)s;
	if (t >= 3600)
		snprintf(buf, size, "%d:%02d:%02d", t / 3600, t % 3600 / 60, t % 60);
	else if (t >= 60)
		snprintf(buf, size, "%d:%02d", t / 60, t % 60);
	else
		snprintf(buf, size, "%ds", t);
}

static void format_per_step(double s, char *buf, size_t size)
{
	if (s >= 1)
		snprintf(buf, size, "%.0fs/step", s);
	else if (s >= 1e-3)
		snprintf(buf, size, "%.0fms/step", s * 1e3);
	else
		snprintf(buf, size, "%.0fus/step", s * 1e6);
}

static int digits(int64_t n)
{
	int d = 1;
	while (n >= 10) {
		n /= 10;
		d++;
	}
	return d;
}

static void draw_bar(struct dt_progress *p, const struct dt_logs *logs, int final)
{
	char metrics[1024], when[32], per[32];
	int done = logs->steps ? (int)(20 * logs->step / logs->steps) : 20;
	double per_step = logs->step ? logs->seconds / logs->step : 0;

	dt_format_metrics(logs, final, metrics, sizeof(metrics));
	if (final)
		snprintf(when, sizeof(when), "%ds", (int)logs->seconds);
	else
		format_eta(per_step * (logs->steps - logs->step), when, sizeof(when));
	format_per_step(per_step, per, sizeof(per));
	fprintf(p->out, "\r\x1b[1m%*lld/%lld\x1b[0m \x1b[32m", digits(logs->steps), (long long)logs->step,
		(long long)logs->steps);
	for (int i = 0; i < 20; i++)
		fputs(i == done ? "\x1b[37m━" : "━", p->out);
	fprintf(p->out, "\x1b[0m %s %s%s\x1b[K%s", when, per, metrics, final ? "\n" : "");
	fflush(p->out);
}

static void progress_epoch_begin(struct dt_callback *cb, struct dt_trainer *t, int epoch)
{
	struct dt_progress *p = cb->priv;
	p->last_draw = 0;
	if (p->mode == DT_PROGRESS_BAR && p->epochs > 1)
		fprintf(p->out, "Epoch %d/%d\n", epoch + 1, p->epochs);
}

static void progress_batch_end(struct dt_callback *cb, struct dt_trainer *t, const struct dt_logs *logs)
{
	struct dt_progress *p = cb->priv;
	double now = dt_now();
	if (p->mode != DT_PROGRESS_BAR || logs->step == logs->steps || now - p->last_draw < 0.05)
		return;
	p->last_draw = now;
	draw_bar(p, logs, 0);
}

static int progress_epoch_end(struct dt_callback *cb, struct dt_trainer *t, const struct dt_logs *logs)
{
	struct dt_progress *p = cb->priv;
	char metrics[1024], per[32];
	if (p->mode == DT_PROGRESS_BAR) {
		draw_bar(p, logs, 1);
	} else if (p->mode == DT_PROGRESS_LINES) {
		dt_format_metrics(logs, 1, metrics, sizeof(metrics));
		format_per_step(logs->steps ? logs->seconds / logs->steps : 0, per, sizeof(per));
		fprintf(p->out, "Epoch %d/%d: %lld/%lld - %ds - %s%s\n", logs->epoch + 1, p->epochs,
			(long long)logs->step, (long long)logs->steps, (int)logs->seconds, per, metrics);
		fflush(p->out);
	}
	return 0;
}

void dt_progress_init(struct dt_progress *p, enum dt_progress_mode mode, FILE *out, int epochs)
{
	memset(p, 0, sizeof(*p));
	p->mode = mode;
	p->out = out;
	p->epochs = epochs;
	p->cb.priv = p;
	p->cb.on_epoch_begin = progress_epoch_begin;
	p->cb.on_batch_end = progress_batch_end;
	p->cb.on_epoch_end = progress_epoch_end;
}

static int json_epoch_end(struct dt_callback *cb, struct dt_trainer *t, const struct dt_logs *logs)
{
	struct dt_json_log *j = cb->priv;
	cJSON *o = cJSON_CreateObject();
	char *text, lr[32];
	cJSON_AddStringToObject(o, "event", "epoch");
	cJSON_AddNumberToObject(o, "epoch", logs->epoch + 1);
	cJSON_AddNumberToObject(o, "epochs", j->epochs);
	cJSON_AddNumberToObject(o, "steps", (double)logs->steps);
	cJSON_AddNumberToObject(o, "loss", logs->loss);
	if (logs->has_accuracy)
		cJSON_AddNumberToObject(o, "accuracy", logs->accuracy);
	if (logs->has_errors) {
		cJSON_AddNumberToObject(o, "mae", logs->mae);
		cJSON_AddNumberToObject(o, "rmse", logs->rmse);
	}
	for (int i = 0; logs->metrics && i < logs->metrics->n; i++)
		cJSON_AddNumberToObject(o, logs->metrics->m[i].name, logs->metric[i]);
	if (logs->has_val) {
		cJSON_AddNumberToObject(o, "val_loss", logs->val_loss);
		if (logs->has_accuracy)
			cJSON_AddNumberToObject(o, "val_accuracy", logs->val_accuracy);
		if (logs->has_errors) {
			cJSON_AddNumberToObject(o, "val_mae", logs->val_mae);
			cJSON_AddNumberToObject(o, "val_rmse", logs->val_rmse);
		}
		for (int i = 0; logs->metrics && i < logs->metrics->n; i++) {
			char name[DT_METRIC_NAME + 4];
			snprintf(name, sizeof(name), "val_%s", logs->metrics->m[i].name);
			cJSON_AddNumberToObject(o, name, logs->val_metric[i]);
		}
	}
	cJSON_AddNumberToObject(o, "seconds", logs->seconds);
	cJSON_AddNumberToObject(o, "samples_per_sec", logs->samples_per_sec);
	if (logs->skipped)
		cJSON_AddNumberToObject(o, "skipped", (double)logs->skipped);
	/* The float's shortest decimal form: 0.001, not 0.0010000000474974513. */
	snprintf(lr, sizeof(lr), "%.7g", (float)logs->learning_rate);
	cJSON_AddNumberToObject(o, "learning_rate", strtod(lr, NULL));
	text = cJSON_PrintUnformatted(o);
	fprintf(j->out, "%s\n", text);
	fflush(j->out);
	free(text);
	cJSON_Delete(o);
	return 0;
}

void dt_json_log_init(struct dt_json_log *j, FILE *out, int epochs)
{
	memset(j, 0, sizeof(*j));
	j->out = out;
	j->epochs = epochs;
	j->cb.priv = j;
	j->cb.on_epoch_end = json_epoch_end;
}
