#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/fit/report.h"
#include "core/model/metric.h"

/* Class k's name: names[k], or its index in buf. */
static const char *class_name(const char *const *names, int k, char *buf, size_t size)
{
	if (names)
		return names[k];
	snprintf(buf, size, "%d", k);
	return buf;
}

static double total_of(const double *cm, int c)
{
	double n = 0;
	for (int64_t i = 0; i < (int64_t)c * c; i++)
		n += cm[i];
	return n;
}

static double hits_of(const double *cm, int c)
{
	double n = 0;
	for (int k = 0; k < c; k++)
		n += cm[(int64_t)k * c + k];
	return n;
}

static void print_average(FILE *f, int w, const char *label, const double *cm, int c, enum dt_metric_average avg,
			  double support)
{
	fprintf(f, "%*s %10.4f %10.4f %10.4f %10.0f\n", w, label, dt_confusion_average(cm, c, DT_METRIC_PRECISION, avg),
		dt_confusion_average(cm, c, DT_METRIC_RECALL, avg), dt_confusion_average(cm, c, DT_METRIC_F1, avg),
		support);
}

/*
 * The classes the report lists, as scikit-learn's classification_report and
 * confusion_matrix do by default: those with a test record or a prediction.
 * A training class with neither would score 0 and pull the macro averages
 * down (a perfect model's macro F1 of 3 classes, one of them absent, would
 * read 0.6667).
 */
struct listed {
	int n;
	double *cm;   /* n x n: cm's rows and columns of the listed classes */
	char **names; /* n */
};

static int is_listed(const double *cm, int c, int k)
{
	for (int j = 0; j < c; j++)
		if (cm[(int64_t)k * c + j] > 0 || cm[(int64_t)j * c + k] > 0)
			return 1;
	return 0;
}

static void listed_make(struct listed *l, const double *cm, int c, const char *const *names)
{
	int *keep = dt_malloc((size_t)c * sizeof(int));
	char buf[32];
	l->n = 0;
	for (int k = 0; k < c; k++)
		if (is_listed(cm, c, k))
			keep[l->n++] = k;
	l->cm = dt_malloc((size_t)l->n * (size_t)l->n * sizeof(double) + 1);
	l->names = dt_malloc((size_t)l->n * sizeof(char *) + 1);
	for (int i = 0; i < l->n; i++) {
		l->names[i] = dt_strdup(class_name(names, keep[i], buf, sizeof(buf)));
		for (int j = 0; j < l->n; j++)
			l->cm[(int64_t)i * l->n + j] = cm[(int64_t)keep[i] * c + keep[j]];
	}
	free(keep);
}

static void listed_free(struct listed *l)
{
	for (int i = 0; i < l->n; i++)
		free(l->names[i]);
	free(l->names);
	free(l->cm);
}

void dt_report_note_left_out(const double *cm, int c, const char *const *names)
{
	char list[1024], buf[32];
	size_t len = 0;
	int n = 0;
	list[0] = '\0';
	for (int k = 0; k < c; k++)
		if (!is_listed(cm, c, k) && len < sizeof(list))
			len += (size_t)snprintf(list + len, sizeof(list) - len, "%s'%s'", n++ ? ", " : "",
						class_name(names, k, buf, sizeof(buf)));
	if (n)
		dt_note("the report leaves out the training class%s %s: no test record and no prediction, as "
			"scikit-learn's classification_report does (a macro-averaged f1_score metric counts %s as 0)",
			n == 1 ? "" : "es", list, n == 1 ? "it" : "them");
}

static void print_table(FILE *f, const double *cm, int c, const char *const *names)
{
	char buf[32];
	int w = (int)strlen("weighted avg"), cw = 6;
	double total = total_of(cm, c);

	for (int k = 0; k < c; k++) {
		int len = (int)strlen(class_name(names, k, buf, sizeof(buf)));
		w = len > w ? len : w;
		cw = len + 1 > cw ? len + 1 : cw;
	}
	for (int64_t i = 0; i < (int64_t)c * c; i++) {
		int len = snprintf(buf, sizeof(buf), "%.0f", cm[i]) + 1;
		cw = len > cw ? len : cw;
	}
	fprintf(f, "%*s %10s %10s %10s %10s\n\n", w, "", "precision", "recall", "f1-score", "support");
	for (int k = 0; k < c; k++) {
		double p, r, f1, support;
		dt_confusion_class(cm, c, k, &p, &r, &f1, &support);
		fprintf(f, "%*s %10.4f %10.4f %10.4f %10.0f\n", w, class_name(names, k, buf, sizeof(buf)), p, r, f1,
			support);
	}
	fprintf(f, "\n%*s %10s %10s %10.4f %10.0f\n", w, "accuracy", "", "", total > 0 ? hits_of(cm, c) / total : 0,
		total);
	print_average(f, w, "macro avg", cm, c, DT_AVERAGE_MACRO, total);
	print_average(f, w, "weighted avg", cm, c, DT_AVERAGE_WEIGHTED, total);
	fprintf(f, "\nconfusion matrix (rows: true class, columns: predicted class)\n%*s", w, "");
	for (int k = 0; k < c; k++)
		fprintf(f, "%*s", cw, class_name(names, k, buf, sizeof(buf)));
	fputc('\n', f);
	for (int t = 0; t < c; t++) {
		fprintf(f, "%*s", w, class_name(names, t, buf, sizeof(buf)));
		for (int k = 0; k < c; k++)
			fprintf(f, "%*.0f", cw, cm[(int64_t)t * c + k]);
		fputc('\n', f);
	}
}

static cJSON *scores(double p, double r, double f1, double support)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "precision", p);
	cJSON_AddNumberToObject(o, "recall", r);
	cJSON_AddNumberToObject(o, "f1_score", f1);
	cJSON_AddNumberToObject(o, "support", support);
	return o;
}

static cJSON *average(const double *cm, int c, enum dt_metric_average avg, double support)
{
	return scores(dt_confusion_average(cm, c, DT_METRIC_PRECISION, avg),
		      dt_confusion_average(cm, c, DT_METRIC_RECALL, avg), dt_confusion_average(cm, c, DT_METRIC_F1, avg),
		      support);
}

static cJSON *json_table(const double *cm, int c, const char *const *names)
{
	cJSON *o = cJSON_CreateObject(), *classes = cJSON_CreateArray(), *matrix = cJSON_CreateArray();
	double total = total_of(cm, c);
	char buf[32];

	for (int k = 0; k < c; k++) {
		double p, r, f1, support;
		cJSON *row = cJSON_CreateArray(), *s;
		dt_confusion_class(cm, c, k, &p, &r, &f1, &support);
		s = scores(p, r, f1, support);
		cJSON_AddStringToObject(s, "class", class_name(names, k, buf, sizeof(buf)));
		cJSON_AddItemToArray(classes, s);
		for (int j = 0; j < c; j++)
			cJSON_AddItemToArray(row, cJSON_CreateNumber(cm[(int64_t)k * c + j]));
		cJSON_AddItemToArray(matrix, row);
	}
	cJSON_AddItemToObject(o, "classes", classes);
	cJSON_AddNumberToObject(o, "accuracy", total > 0 ? hits_of(cm, c) / total : 0);
	cJSON_AddItemToObject(o, "macro_avg", average(cm, c, DT_AVERAGE_MACRO, total));
	cJSON_AddItemToObject(o, "weighted_avg", average(cm, c, DT_AVERAGE_WEIGHTED, total));
	cJSON_AddItemToObject(o, "confusion_matrix", matrix);
	return o;
}

void dt_report_print(FILE *f, const double *cm, int c, const char *const *names)
{
	struct listed l;
	listed_make(&l, cm, c, names);
	print_table(f, l.cm, l.n, (const char *const *)l.names);
	listed_free(&l);
}

cJSON *dt_report_json(const double *cm, int c, const char *const *names)
{
	struct listed l;
	cJSON *o, *left_out = cJSON_CreateArray();
	char buf[32];
	listed_make(&l, cm, c, names);
	o = json_table(l.cm, l.n, (const char *const *)l.names);
	listed_free(&l);
	for (int k = 0; k < c; k++)
		if (!is_listed(cm, c, k))
			cJSON_AddItemToArray(left_out, cJSON_CreateString(class_name(names, k, buf, sizeof(buf))));
	cJSON_AddItemToObject(o, "left_out", left_out);
	return o;
}
