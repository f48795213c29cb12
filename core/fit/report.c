#include <stdio.h>
#include <string.h>

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

void dt_report_print(FILE *f, const double *cm, int c, const char *const *names)
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

cJSON *dt_report_json(const double *cm, int c, const char *const *names)
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
