#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/model/metric.h"

const char *const dt_metric_kind_names[] = { "precision", "recall", "f1_score", "auc", "binary_accuracy",
					     "categorical_accuracy", "sparse_categorical_accuracy",
					     "top_k_categorical_accuracy", "sparse_top_k_categorical_accuracy",
					     "mean_squared_error", "mean_absolute_percentage_error", "r2_score", NULL };

/* Keras' short names: the logs use the name as written, as Keras does. */
static const struct { const char *alias; enum dt_metric_kind kind; } aliases[] = {
	{ "mse", DT_METRIC_MSE },
	{ "mape", DT_METRIC_MAPE },
};

static int is_count(enum dt_metric_kind kind)
{
	return kind >= DT_METRIC_BINARY_ACCURACY && kind <= DT_METRIC_SPARSE_TOP_K;
}

static int is_regression(enum dt_metric_kind kind) { return kind >= DT_METRIC_MSE; }

static const char *const average_names[] = { "macro", "micro", "weighted", NULL };
static const char *const curve_names[] = { "ROC", "PR", NULL };

static int kind_of(const char *name)
{
	for (int k = 0; dt_metric_kind_names[k]; k++)
		if (!strcmp(name, dt_metric_kind_names[k]))
			return k;
	for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
		if (!strcmp(name, aliases[i].alias))
			return (int)aliases[i].kind;
	return -1;
}

int dt_metric_read(struct dt_metric_set *s, const struct dt_node *item)
{
	static const char *const conf_keys[] = { "class_id", "average", NULL };
	static const char *const auc_keys[] = { "class_id", "curve", "num_thresholds", "multi_label", NULL };
	static const char *const binary_keys[] = { "threshold", NULL }, *const top_k_keys[] = { "k", NULL };
	static const char *const no_keys[] = { NULL };
	const char *const *keys;
	const struct dt_node *args = NULL;
	const char *name;
	struct dt_metric *m;
	int kind, same = 0, v;
	int64_t i64;

	if (item->kind == DT_NODE_MAP && item->n == 1) {
		name = item->key_nodes[0]->value;
		args = item->items[0];
	} else if (item->kind == DT_NODE_SCALAR) {
		name = item->value;
	} else {
		return 0;
	}
	kind = kind_of(name);
	if (kind < 0)
		return 0;
	if (s->n == DT_MAX_METRICS)
		return dt_node_error(item, "more than %d metrics", DT_MAX_METRICS);
	if (args && args->kind == DT_NODE_SCALAR && !args->value[0])
		args = NULL; /* "auc:" with nothing after it */
	keys = kind == DT_METRIC_AUC ? auc_keys : is_regression(kind) ? no_keys : !is_count(kind) ? conf_keys :
		kind == DT_METRIC_BINARY_ACCURACY ? binary_keys : kind >= DT_METRIC_TOP_K ? top_k_keys : no_keys;
	if (args && (dt_node_expect(args, DT_NODE_MAP, name) < 0 || dt_cfg_check_keys(args, name, keys) < 0))
		return -1;
	m = &s->m[s->n];
	memset(m, 0, sizeof(*m));
	m->kind = (enum dt_metric_kind)kind;
	m->node = item;
	if (dt_cfg_int(args, "class_id", -1, 0, 1 << 20, &i64) < 0)
		return -1;
	m->class_id = (int)i64;
	if (dt_cfg_enum(args, "average", average_names, DT_AVERAGE_MACRO, &v) < 0)
		return -1;
	m->average = (enum dt_metric_average)v;
	m->has_average = dt_node_get(args, "average") != NULL;
	if (dt_cfg_enum(args, "curve", curve_names, DT_CURVE_ROC, &v) < 0)
		return -1;
	m->curve = (enum dt_auc_curve)v;
	if (dt_cfg_int(args, "num_thresholds", 200, 2, 1 << 20, &i64) < 0)
		return -1;
	m->num_thresholds = (int)i64;
	if (dt_cfg_bool(args, "multi_label", 0, &m->multi_label) < 0)
		return -1;
	if (m->multi_label && m->class_id >= 0)
		return dt_node_error(dt_node_get(args, "multi_label"), "'%s' scores one column with class_id: "
				     "multi_label averages every column's AUC; give one of the two", name);
	{
		double th;
		if (dt_cfg_float(args, "threshold", 0.5, 0, 1, &th) < 0)
			return -1;
		m->threshold = (float)th;
	}
	if (dt_cfg_int(args, "k", 5, 1, 1 << 20, &i64) < 0)
		return -1;
	m->k = (int)i64;
	/* Keras numbers a repeated name: auc, auc_1; mse and mean_squared_error are two names. */
	for (int i = 0; i < s->n; i++)
		same += !strncmp(s->m[i].name, name, strlen(name)) &&
			(!s->m[i].name[strlen(name)] || s->m[i].name[strlen(name)] == '_') && s->m[i].kind == m->kind;
	if (same)
		snprintf(m->name, sizeof(m->name), "%s_%d", name, same);
	else
		snprintf(m->name, sizeof(m->name), "%s", name);
	if (kind != DT_METRIC_AUC && !is_count(m->kind) && !is_regression(m->kind))
		s->confusion = 1;
	if (is_regression(m->kind))
		s->regression = 1;
	s->n++;
	return 1;
}

int dt_metric_set_layout(struct dt_metric_set *s, enum dt_accuracy kind, int64_t columns, float threshold,
			 int sparse, int sigmoid)
{
	s->kind = kind;
	s->columns = columns;
	s->classes = kind == DT_ACC_BINARY ? 2 : (int)columns;
	s->threshold = threshold;
	s->sparse = sparse;
	s->sigmoid = sigmoid;
	s->multi_label = kind == DT_ACC_BINARY && columns > 1;
	s->nstats = !s->confusion ? 0 : s->multi_label ? 4 * columns : (int64_t)s->classes * s->classes;
	if (s->regression) {
		s->regression_offset = s->nstats;
		s->nstats += DT_REGRESSION_SUMS * columns + 1;
	}
	for (int i = 0; i < s->n; i++) {
		struct dt_metric *m = &s->m[i];
		/* A binary model's classes are 0 and 1; an AUC scores a column of the output, and so does a multi-label score. */
		int64_t limit = m->kind == DT_METRIC_AUC || s->multi_label ? (columns > 1 ? columns : 1) : s->classes;
		if (m->class_id >= limit)
			return dt_node_error(m->node, "'%s' has class_id %d, but the model has %lld %s (0 to %lld)",
					     dt_metric_kind_names[m->kind], m->class_id, (long long)limit,
					     s->multi_label ? "labels" : m->kind == DT_METRIC_AUC ? "outputs" : "classes",
					     (long long)limit - 1);
		if (m->kind == DT_METRIC_AUC) {
			m->offset = s->nstats;
			s->nstats += 2 * ((int64_t)m->num_thresholds + 1) * (m->multi_label ? columns : 1);
		}
		/* A multi-hot row has no one class: an argmax against it would be a wrong number, not a metric. */
		if (s->multi_label && (m->kind == DT_METRIC_CATEGORICAL_ACCURACY || m->kind == DT_METRIC_TOP_K))
			return dt_node_error(m->node, "'%s' reads one class per sample, but this is a multi-label model "
					     "(binary_crossentropy on %lld sigmoid outputs); use 'binary_accuracy' (or "
					     "'accuracy'), precision, recall, f1_score or auc", m->name, (long long)columns);
		if (is_count(m->kind)) {
			m->offset = s->nstats;
			s->nstats += 2;
		}
		/* The labels each reads: class indices for the sparse ones, rows like the output for the others. */
		if ((m->kind == DT_METRIC_SPARSE_CATEGORICAL_ACCURACY || m->kind == DT_METRIC_SPARSE_TOP_K) && !sparse)
			return dt_node_error(m->node, "'%s' needs class-index labels (a sparse_categorical_crossentropy "
					     "model); use '%s'", m->name, m->kind == DT_METRIC_SPARSE_TOP_K ?
					     "top_k_categorical_accuracy" : "categorical_accuracy");
		if ((m->kind == DT_METRIC_CATEGORICAL_ACCURACY || m->kind == DT_METRIC_TOP_K ||
		     m->kind == DT_METRIC_BINARY_ACCURACY || is_regression(m->kind)) && sparse)
			return dt_node_error(m->node, "'%s' needs labels shaped like the output, but the model's labels "
					     "are class indices; use '%s'", m->name,
					     m->kind == DT_METRIC_TOP_K ? "sparse_top_k_categorical_accuracy" :
					     is_regression(m->kind) ? "one-hot labels" : "sparse_categorical_accuracy");
	}
	return 0;
}

int dt_metric_stat_is_count(const struct dt_metric_set *s, int64_t i)
{
	return !s->regression || i < s->regression_offset || i >= s->regression_offset + DT_REGRESSION_SUMS * s->columns;
}

int64_t dt_metric_scratch(const struct dt_metric_set *s)
{
	int64_t n = !s->confusion ? 1 : s->multi_label ? 4 * s->columns : (int64_t)s->classes * s->classes;
	if (s->regression && DT_REGRESSION_SUMS * s->columns > n)
		n = DT_REGRESSION_SUMS * s->columns;
	for (int i = 0; i < s->n; i++)
		if (s->m[i].kind == DT_METRIC_AUC && 2 * ((int64_t)s->m[i].num_thresholds + 1) > n)
			n = 2 * ((int64_t)s->m[i].num_thresholds + 1);
	return n;
}

/* Adds the first n floats of scratch (device) to stats (host), through host. */
static void add_scratch(const struct dt_tensor *scratch, int64_t n, double *stats, float *host)
{
	struct dt_tensor part = dt_tensor_flat(scratch->data, scratch->dev, n);
	dt_op_to_host(&part, host);
	for (int64_t i = 0; i < n; i++)
		stats[i] += host[i];
}

/* Adds an accuracy's hits and predictions counted in the batch to hits[0], hits[1]. */
static void count_hits(const struct dt_metric *m, const struct dt_tensor *pred, const struct dt_tensor *target,
		       double *hits)
{
	int64_t rows = dt_tensor_rows(pred);
	switch (m->kind) {
	case DT_METRIC_BINARY_ACCURACY:
		hits[0] += (double)dt_op_count_correct(DT_ACC_BINARY, pred, target, m->threshold);
		hits[1] += (double)dt_tensor_count(pred);
		return;
	case DT_METRIC_CATEGORICAL_ACCURACY:
		hits[0] += (double)dt_op_count_correct(DT_ACC_CATEGORICAL, pred, target, 0.5f);
		break;
	case DT_METRIC_SPARSE_CATEGORICAL_ACCURACY:
		hits[0] += (double)dt_op_count_correct(DT_ACC_SPARSE, pred, target, 0.5f);
		break;
	case DT_METRIC_TOP_K:
	case DT_METRIC_SPARSE_TOP_K:
		hits[0] += (double)dt_op_count_top_k(pred, target, m->kind == DT_METRIC_SPARSE_TOP_K, m->k);
		break;
	default:
		DT_BUG("metric kind %d counts no hits", (int)m->kind);
	}
	hits[1] += (double)rows;
}

void dt_metric_accumulate(const struct dt_metric_set *s, const struct dt_tensor *pred,
			  const struct dt_tensor *target, struct dt_tensor *scratch, float *host, double *stats)
{
	if (s->nstats == 0 || dt_tensor_rows(pred) == 0)
		return;
	if (s->confusion) {
		int64_t n = s->multi_label ? 4 * s->columns : (int64_t)s->classes * s->classes;
		struct dt_tensor cm = dt_tensor_flat(scratch->data, scratch->dev, n);
		dt_op_confusion(s->multi_label ? DT_ACC_MULTI_LABEL : s->kind, pred, target, s->threshold, &cm);
		add_scratch(scratch, n, stats, host);
	}
	if (s->regression) {
		int64_t n = DT_REGRESSION_SUMS * s->columns;
		struct dt_tensor sums = dt_tensor_flat(scratch->data, scratch->dev, n);
		dt_op_regression_sums(pred, target, &sums);
		add_scratch(scratch, n, stats + s->regression_offset, host);
		stats[s->regression_offset + n] += (double)dt_tensor_rows(pred);
	}
	for (int i = 0; i < s->n; i++) {
		const struct dt_metric *m = &s->m[i];
		int64_t n = 2 * ((int64_t)m->num_thresholds + 1);
		int64_t column = m->class_id >= 0 ? m->class_id : s->columns == 1 ? 0 : -1;
		struct dt_tensor hist;
		if (is_count(m->kind)) {
			count_hits(m, pred, target, stats + m->offset);
			continue;
		}
		if (m->kind != DT_METRIC_AUC)
			continue;
		hist = dt_tensor_flat(scratch->data, scratch->dev, n);
		if (!m->multi_label) {
			dt_op_auc_histogram(pred, target, column, s->sparse, s->sigmoid, m->num_thresholds, &hist);
			add_scratch(scratch, n, stats + m->offset, host);
			continue;
		}
		for (int64_t j = 0; j < s->columns; j++) {
			dt_op_auc_histogram(pred, target, j, s->sparse, s->sigmoid, m->num_thresholds, &hist);
			add_scratch(scratch, n, stats + m->offset + j * n, host);
		}
	}
}

static double div0(double a, double b) { return b != 0 ? a / b : 0; }

void dt_confusion_class(const double *cm, int c, int k, double *precision, double *recall, double *f1,
			double *support)
{
	double tp = cm[(int64_t)k * c + k], row = 0, col = 0;
	for (int j = 0; j < c; j++) {
		row += cm[(int64_t)k * c + j];
		col += cm[(int64_t)j * c + k];
	}
	*precision = div0(tp, col);
	*recall = div0(tp, row);
	*f1 = div0(2 * *precision * *recall, *precision + *recall);
	*support = row;
}

static double pick(enum dt_metric_kind kind, double p, double r, double f)
{
	return kind == DT_METRIC_PRECISION ? p : kind == DT_METRIC_RECALL ? r : f;
}

double dt_confusion_average(const double *cm, int c, enum dt_metric_kind kind, enum dt_metric_average average)
{
	double sum = 0, total = 0, tp = 0;
	for (int k = 0; k < c; k++) {
		double p, r, f, support;
		dt_confusion_class(cm, c, k, &p, &r, &f, &support);
		tp += cm[(int64_t)k * c + k];
		total += support;
		sum += average == DT_AVERAGE_WEIGHTED ? support * pick(kind, p, r, f) : pick(kind, p, r, f);
	}
	if (average == DT_AVERAGE_MICRO) /* every prediction is one class: micro P = R = F1 = the hits' share */
		return div0(tp, total);
	return average == DT_AVERAGE_WEIGHTED ? div0(sum, total) : sum / c;
}

double dt_auc_value(const double *hist, int n, enum dt_auc_curve curve)
{
	const double *neg = hist, *pos = hist + n + 1;
	double P = 0, N = 0, auc = 0, tp1, fp1;

	for (int k = 0; k <= n; k++) {
		P += pos[k];
		N += neg[k];
	}
	/*
	 * At threshold i the predicted positives are the buckets above i:
	 * walking down from the last threshold, (tp0, fp0) are threshold i's
	 * counts and (tp1, fp1) those of i + 1.
	 */
	tp1 = pos[n];
	fp1 = neg[n];
	for (int i = n - 2; i >= 0; i--) {
		double tp0 = tp1 + pos[i + 1], fp0 = fp1 + neg[i + 1];
		if (curve == DT_CURVE_ROC) {
			auc += (div0(fp0, N) - div0(fp1, N)) * (div0(tp0, P) + div0(tp1, P)) / 2;
		} else {
			double dtp = tp0 - tp1, p0 = tp0 + fp0, p1 = tp1 + fp1;
			double dp = p0 - p1, slope = div0(dtp, dp > 0 ? dp : 0), intercept = tp1 - slope * p1;
			double ratio = p0 > 0 && p1 > 0 ? div0(p0, p1) : 1;
			auc += div0(slope * (dtp + intercept * log(ratio)), P); /* tp + fn is every positive */
		}
		tp1 = tp0;
		fp1 = fp0;
	}
	return auc;
}

/*
 * From the sums r (DT_REGRESSION_SUMS per output, then the rows n): the mean squared error
 * and 100 x the mean relative error over every output, and R^2, the mean
 * over the outputs of 1 - SS_res / SS_tot (Keras' R2Score with
 * class_aggregation uniform_average; an output whose labels do not vary
 * scores 0).
 */
static double regression_value(const struct dt_metric_set *s, enum dt_metric_kind kind, const double *r)
{
	double n = r[DT_REGRESSION_SUMS * s->columns], sum = 0;
	for (int64_t j = 0; j < s->columns; j++) {
		const double *c = r + DT_REGRESSION_SUMS * j;
		double t = c[0] + c[1], t2 = c[2] + c[3], ss_tot = t2 - div0(t * t, n), ss_res = c[4], ape = c[5];
		if (kind == DT_METRIC_MSE)
			sum += ss_res;
		else if (kind == DT_METRIC_MAPE)
			sum += ape;
		else
			sum += ss_tot > 0 ? 1 - ss_res / ss_tot : 0;
	}
	if (kind == DT_METRIC_R2)
		return sum / (double)s->columns;
	return div0(kind == DT_METRIC_MAPE ? 100 * sum : sum, n * (double)s->columns);
}

/*
 * A multi-label model's precision, recall or F1 from its per-label 2 x 2
 * matrices cm (columns of 4): label class_id's, the mean over the labels
 * (macro, weighted by positives), or of every element together (micro, the
 * default).
 */
static double multi_label_value(const struct dt_metric_set *s, const struct dt_metric *m, const double *cm)
{
	double total[4] = { 0 }, sum = 0, weight = 0, p, r, f, support;
	if (m->class_id >= 0) {
		dt_confusion_class(cm + 4 * m->class_id, 2, 1, &p, &r, &f, &support);
		return pick(m->kind, p, r, f);
	}
	for (int64_t j = 0; j < s->columns; j++) {
		dt_confusion_class(cm + 4 * j, 2, 1, &p, &r, &f, &support);
		sum += (m->average == DT_AVERAGE_WEIGHTED ? support : 1) * pick(m->kind, p, r, f);
		weight += m->average == DT_AVERAGE_WEIGHTED ? support : 1;
		for (int k = 0; k < 4; k++)
			total[k] += cm[4 * j + k];
	}
	if (!m->has_average || m->average == DT_AVERAGE_MICRO) {
		dt_confusion_class(total, 2, 1, &p, &r, &f, &support);
		return pick(m->kind, p, r, f);
	}
	return div0(sum, weight);
}

double dt_metric_value(const struct dt_metric_set *s, int i, const double *stats)
{
	const struct dt_metric *m = &s->m[i];
	double p, r, f, support;
	if (m->kind == DT_METRIC_AUC && m->multi_label) {
		double sum = 0;
		int64_t n = 2 * ((int64_t)m->num_thresholds + 1);
		for (int64_t j = 0; j < s->columns; j++)
			sum += dt_auc_value(stats + m->offset + j * n, m->num_thresholds, m->curve);
		return sum / (double)s->columns;
	}
	if (m->kind == DT_METRIC_AUC)
		return dt_auc_value(stats + m->offset, m->num_thresholds, m->curve);
	if (is_count(m->kind))
		return div0(stats[m->offset], stats[m->offset + 1]);
	if (is_regression(m->kind))
		return regression_value(s, m->kind, stats + s->regression_offset);
	if (s->multi_label)
		return multi_label_value(s, m, stats);
	/* A binary model's are the positive class's (Keras' Precision, Recall, F1Score), unless averaged. */
	if (m->class_id >= 0 || (s->kind == DT_ACC_BINARY && !m->has_average)) {
		dt_confusion_class(stats, s->classes, m->class_id >= 0 ? m->class_id : 1, &p, &r, &f, &support);
		return pick(m->kind, p, r, f);
	}
	return dt_confusion_average(stats, s->classes, m->kind, m->average);
}

int dt_metric_find(const struct dt_metric_set *s, const char *name, int *index)
{
	if (!s)
		return 0;
	for (int i = 0; i < s->n; i++)
		if (!strcmp(s->m[i].name, name)) {
			if (index)
				*index = i;
			return 1;
		}
	return 0;
}

/* 1 when name is base, or base and "_N". */
static int names_base(const char *name, const char *base)
{
	size_t len = strlen(base);
	const char *rest = name + len;
	if (strncmp(name, base, len))
		return 0;
	if (!*rest)
		return 1;
	if (*rest != '_' || !isdigit((unsigned char)rest[1]))
		return 0;
	while (isdigit((unsigned char)*++rest))
		;
	return !*rest;
}

/* The kind a log name (without val_) names, or -1. */
static int kind_of_log_name(const char *name)
{
	for (int k = 0; dt_metric_kind_names[k]; k++)
		if (names_base(name, dt_metric_kind_names[k]))
			return k;
	for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
		if (names_base(name, aliases[i].alias))
			return (int)aliases[i].kind;
	return -1;
}

int dt_metric_is_table_name(const char *name) { return kind_of_log_name(name) >= 0; }

int dt_metric_name_greater(const char *name)
{
	int kind = kind_of_log_name(name);
	return kind >= 0 && kind != DT_METRIC_MSE && kind != DT_METRIC_MAPE;
}
