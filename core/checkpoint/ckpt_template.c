#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/checkpoint/ckpt_template.h"
#include "core/model/metric.h"

static const char *const int_names[] = { "epoch", "step", "batch", NULL };
static const char *const float_names[] = { "loss", "accuracy", "val_loss", "val_accuracy", NULL };

static int find(const char *const *names, const char *s, size_t n)
{
	for (int i = 0; names[i]; i++)
		if (strlen(names[i]) == n && !strncmp(names[i], s, n))
			return i;
	return -1;
}

/*
 * Parses the field starting after '{' at *p; sets name, its length, spec and its
 * length (0 when absent) and moves *p after '}'. 0, or -1 with msg.
 */
static int parse_field(const char **p, const char **name, size_t *nlen, const char **spec, size_t *slen,
		       char *msg, size_t size)
{
	const char *s = *p, *close = strchr(s, '}'), *colon;
	if (!close) {
		snprintf(msg, size, "'{' without its '}' (write '{{' for a brace)");
		return -1;
	}
	colon = memchr(s, ':', (size_t)(close - s));
	*name = s;
	*nlen = (size_t)((colon ? colon : close) - s);
	*spec = colon ? colon + 1 : close;
	*slen = colon ? (size_t)(close - colon - 1) : 0;
	*p = close + 1;
	if (memchr(s, '{', (size_t)(close - s))) {
		snprintf(msg, size, "'{' inside a field");
		return -1;
	}
	return 0;
}

/* SPEC = [0][WIDTH][.PREC]TYPE; *type is set. */
static int check_spec(const char *spec, size_t n, char *type)
{
	size_t i = 0;
	int digits = 0;
	if (n == 0) {
		*type = 0;
		return 0;
	}
	while (i < n && spec[i] >= '0' && spec[i] <= '9' && digits < 3)
		i++, digits++;
	if (i < n && spec[i] == '.') {
		int prec = 0;
		i++;
		while (i < n && spec[i] >= '0' && spec[i] <= '9' && prec < 2)
			i++, prec++;
		if (!prec)
			return -1;
	}
	if (i + 1 != n || !strchr("dfeg", spec[i]))
		return -1;
	*type = spec[i];
	return 0;
}

/*
 * 1 when the field name (n bytes) is a metric of compile.metrics, with or
 * without val_; 0 when it is not even a name of the metric table; -1 when it
 * is one that metrics lacks (msg says so).
 */
static int metric_field(const struct dt_metric_set *metrics, const char *s, size_t n, char *msg, size_t size)
{
	char name[DT_METRIC_NAME + 8];
	const char *base = name;
	if (n >= sizeof(name))
		return 0;
	memcpy(name, s, n);
	name[n] = '\0';
	if (!strncmp(name, "val_", 4))
		base += 4;
	if (!dt_metric_is_table_name(base))
		return 0;
	if (dt_metric_find(metrics, base, NULL))
		return 1;
	snprintf(msg, size, "'{%s}' needs a metric named '%s' in compile.metrics", name, base);
	return -1;
}

int dt_ckpt_template_check(const char *tpl, int per_step, int accuracy, const struct dt_metric_set *metrics,
			   char *msg, size_t size)
{
	const char *p = tpl;
	if (!*tpl) {
		snprintf(msg, size, "the template is empty");
		return -1;
	}
	if (strchr(tpl, '/')) {
		snprintf(msg, size, "a file name cannot hold '/' (set checkpoint.dir for the directory)");
		return -1;
	}
	while (*p) {
		const char *name, *spec;
		size_t nlen, slen;
		char type;
		int fi;
		if (*p == '}') {
			if (p[1] != '}') {
				snprintf(msg, size, "'}' without its '{' (write '}}' for a brace)");
				return -1;
			}
			p += 2;
			continue;
		}
		if (*p != '{') {
			p++;
			continue;
		}
		if (p[1] == '{') {
			p += 2;
			continue;
		}
		p++;
		if (parse_field(&p, &name, &nlen, &spec, &slen, msg, size) < 0)
			return -1;
		fi = find(float_names, name, nlen);
		if (find(int_names, name, nlen) < 0 && fi < 0) {
			int mf = metric_field(metrics, name, nlen, msg, size);
			if (mf < 0)
				return -1;
			if (mf == 0) {
				snprintf(msg, size, "unknown field '{%.*s}' (expected: epoch, step, batch, loss, accuracy, "
					 "val_loss, val_accuracy, or a metric of compile.metrics such as auc or "
					 "val_precision)", (int)nlen, name);
				return -1;
			}
			fi = 4; /* a real number that exists only at the end of an epoch */
		}
		if (check_spec(spec, slen, &type) < 0) {
			snprintf(msg, size, "bad format '%.*s' in '{%.*s}' (expected e.g. 03d, .4f, .3e)", (int)slen, spec,
				 (int)nlen, name);
			return -1;
		}
		if (type == 'd' && fi >= 0) {
			snprintf(msg, size, "'{%.*s}' is a real number: use f, e or g, not d", (int)nlen, name);
			return -1;
		}
		if (per_step && fi >= 2) {
			snprintf(msg, size, "'{%.*s}' exists only at the end of an epoch, but checkpoints are saved "
				 "within epochs", (int)nlen, name);
			return -1;
		}
		if (!accuracy && (fi == 1 || fi == 3)) {
			snprintf(msg, size, "'{%.*s}' needs compile.metrics: [accuracy]", (int)nlen, name);
			return -1;
		}
	}
	return 0;
}

int dt_ckpt_template_format(const char *tpl, const struct dt_ckpt_vars *v, char *out, size_t size)
{
	const char *p = tpl;
	size_t k = 0;
	char msg[8];
	while (*p && k < size) {
		const char *name, *spec;
		size_t nlen, slen;
		char fmt[16], type;
		int fi, ii, n;
		if ((*p == '{' && p[1] == '{') || (*p == '}' && p[1] == '}')) {
			out[k++] = *p;
			p += 2;
			continue;
		}
		if (*p != '{') {
			out[k++] = *p++;
			continue;
		}
		p++;
		if (parse_field(&p, &name, &nlen, &spec, &slen, msg, sizeof(msg)) < 0 ||
		    check_spec(spec, slen, &type) < 0)
			return -1;
		fi = find(float_names, name, nlen);
		ii = find(int_names, name, nlen);
		if (ii >= 0) {
			int64_t x = ii == 0 ? v->epoch : ii == 1 ? v->step : v->batch;
			snprintf(fmt, sizeof(fmt), "%%%.*s%s", slen ? (int)slen - 1 : 0, spec,
				 type == 'd' || !type ? "lld" : "");
			if (type && type != 'd') { /* {epoch:.2f}: Python formats the int as a float */
				snprintf(fmt, sizeof(fmt), "%%%.*s", (int)slen, spec);
				n = snprintf(out + k, size - k, fmt, (double)x);
			} else {
				n = snprintf(out + k, size - k, fmt, (long long)x);
			}
		} else {
			double x = fi == 0 ? v->loss : fi == 1 ? v->accuracy : fi == 2 ? v->val_loss : v->val_accuracy;
			if (fi < 0) {
				char metric[DT_METRIC_NAME + 8];
				snprintf(metric, sizeof(metric), "%.*s", (int)nlen, name);
				x = v->get ? v->get(v->ctx, metric) : NAN;
			}
			snprintf(fmt, sizeof(fmt), "%%%.*s", slen ? (int)slen : 1, slen ? spec : "g");
			n = snprintf(out + k, size - k, fmt, x);
		}
		if (n < 0)
			return -1;
		k += (size_t)n;
	}
	if (k >= size)
		return -1;
	out[k] = '\0';
	return 0;
}
