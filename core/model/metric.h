/*
 * The metrics of compile.metrics beyond accuracy, MAE and RMSE: precision,
 * recall, F1 and AUC (Keras 3's Precision, Recall, F1Score, AUC) and the
 * named accuracies (binary, categorical, sparse categorical, top-k and its
 * sparse form), each computed over a whole epoch from sufficient
 * statistics, never as a mean of per-batch values.
 *
 * The statistics are one vector of whole-number counts per pass: the
 * confusion matrix (classes x classes, row the true class, column the
 * prediction; 2 x 2 for a binary model) when any metric or the evaluation
 * report needs it, then for each AUC the histogram of its predictions over
 * Keras' thresholds (dt_op_auc_histogram), for each accuracy its hits
 * and the predictions counted, and for mean_squared_error,
 * mean_absolute_percentage_error and r2_score the per-output sums of the
 * labels, their squares, the squared and the relative absolute errors
 * (dt_op_regression_sums, summed in double per batch; these are not whole
 * numbers, so sums over replicas agree to rounding). The vector is summed over steps,
 * replicas and MPI ranks like the loss sums, and stored in checkpoints, so
 * a metric is exact whatever the batch, replica count or resume point.
 * Sums of counts stay exact in double up to 2^53.
 *
 * A multi-label model (binary_crossentropy on several sigmoid outputs, the
 * labels multi-hot) keeps a 2 x 2 confusion matrix per label instead: there
 * precision, recall and f1_score score every label's element together
 * (micro, Keras' Precision and Recall) unless class_id picks one label or
 * average asks for the mean over the labels (macro, or weighted by their
 * positives); auc with multi_label: true is the mean of the labels' AUCs
 * (Keras' AUC(multi_label=True)), one histogram each; categorical and top-k
 * accuracies, which read one class per row, are refused.
 *
 * A metric is named in the logs (and monitored) by its Keras name: auc,
 * precision, recall, f1_score; a second one of the same kind gets "_1", a
 * third "_2" (Keras' rule), and val_ in front for validation.
 */
#ifndef DT_METRIC_H
#define DT_METRIC_H

#include "core/config/config.h"
#include "core/ops.h"

#define DT_MAX_METRICS 16
#define DT_METRIC_NAME 48

enum dt_metric_kind {
	DT_METRIC_PRECISION, DT_METRIC_RECALL, DT_METRIC_F1, DT_METRIC_AUC,
	/* hits over a count: */
	DT_METRIC_BINARY_ACCURACY, DT_METRIC_CATEGORICAL_ACCURACY, DT_METRIC_SPARSE_CATEGORICAL_ACCURACY,
	DT_METRIC_TOP_K, DT_METRIC_SPARSE_TOP_K,
	/* from per-output sums of the labels, their squares and the errors: */
	DT_METRIC_MSE, DT_METRIC_MAPE, DT_METRIC_R2
};
enum dt_metric_average { DT_AVERAGE_MACRO, DT_AVERAGE_MICRO, DT_AVERAGE_WEIGHTED };
enum dt_auc_curve { DT_CURVE_ROC, DT_CURVE_PR };

/* Keras' names of the kinds (enum dt_metric_kind order), NULL-terminated; mse and mape also name theirs. */
extern const char *const dt_metric_kind_names[];

struct dt_metric {
	enum dt_metric_kind kind;
	char name[DT_METRIC_NAME];   /* in the logs: "auc", "auc_1", ... */
	int class_id;                /* -1: none (binary: the positive class; else averaged) */
	enum dt_metric_average average;
	int has_average;             /* average was given (a binary model's default is the positive class) */
	enum dt_auc_curve curve;     /* auc */
	int num_thresholds;          /* auc: Keras' default 200 */
	int multi_label;             /* auc: one histogram per column, their AUCs averaged */
	float threshold;             /* binary_accuracy: 0.5 */
	int k;                       /* top_k: 5 */
	int64_t offset;              /* auc: its histogram's first slot in the statistics; accuracies: hits, count */
	const struct dt_node *node;  /* its place in the config, for errors */
};

struct dt_metric_set {
	int n;
	struct dt_metric m[DT_MAX_METRICS];
	int confusion;               /* keep the confusion matrix (a metric or the report needs it) */
	int regression;              /* keep the regression sums (4 per output, then the rows) */
	int64_t regression_offset;   /* their first slot */
	enum dt_accuracy kind;       /* how a prediction becomes a class (dt_metric_set_layout) */
	int classes;                 /* of the confusion matrix: 2 for binary */
	int64_t columns;             /* of the model's output */
	float threshold;             /* binary: positive above it */
	int sparse, sigmoid;         /* labels are class indices; the output is logits */
	int multi_label;             /* binary over several columns: the confusion is (columns, 2, 2) */
	int64_t nstats;              /* the statistics' length; 0 without metrics */
};

/*
 * Reads one item of compile.metrics into s when it names a metric of this
 * table: a name ("auc") or a one-key mapping of a name to its arguments
 * ({auc: {curve: PR, num_thresholds: 500}}). 1 when read, 0 when the item is
 * not one of this table's (the caller knows accuracy, mae, rmse), -1 after
 * an error at the item's position (bad arguments, too many metrics).
 */
int dt_metric_read(struct dt_metric_set *s, const struct dt_node *item);

/*
 * Fixes the layout for a model of `columns` outputs whose predictions are
 * read as kind (threshold for binary), sparse labels or not, logits or not:
 * the classes, each AUC's offset and nstats. Checks class_id against the
 * classes (an error at the metric's position). 0 or -1.
 */
int dt_metric_set_layout(struct dt_metric_set *s, enum dt_accuracy kind, int64_t columns, float threshold,
			 int sparse, int sigmoid);

/*
 * Adds the statistics of one batch, pred (N, C) against target, to stats
 * (s->nstats doubles on the host), through scratch, a float vector on
 * pred's device, and host, one in host memory, each of dt_metric_scratch(s)
 * entries. Allocates nothing.
 */
void dt_metric_accumulate(const struct dt_metric_set *s, const struct dt_tensor *pred,
			  const struct dt_tensor *target, struct dt_tensor *scratch, float *host, double *stats);
int64_t dt_metric_scratch(const struct dt_metric_set *s);
/*
 * 1 when statistic i is a count (a whole number >= 0), 0 for the
 * regression sums (any finite number: a sum of labels may be negative).
 */
int dt_metric_stat_is_count(const struct dt_metric_set *s, int64_t i);

/* The value of metric i from the epoch's summed statistics. */
double dt_metric_value(const struct dt_metric_set *s, int i, const double *stats);

/*
 * From a confusion matrix cm (c x c, row the true class): class k's
 * precision, recall and F1 (0 where undefined, as Keras' divide_no_nan) and
 * support; and the averages over the classes.
 */
void dt_confusion_class(const double *cm, int c, int k, double *precision, double *recall, double *f1,
			double *support);
double dt_confusion_average(const double *cm, int c, enum dt_metric_kind kind, enum dt_metric_average average);

/*
 * Keras' AUC of a histogram (n thresholds: negatives by bucket, then
 * positives, as dt_op_auc_histogram): ROC by the trapezoid rule, PR by
 * Davis and Goadrich's interpolation (Keras' summation_method
 * 'interpolation').
 */
double dt_auc_value(const double *hist, int n, enum dt_auc_curve curve);

/* 1 when name (without val_) is a metric of s; its index in *index when index is not NULL. */
int dt_metric_find(const struct dt_metric_set *s, const char *name, int *index);
/* 1 when name (without val_) looks like a name of this table: a kind, or a kind and "_N". */
int dt_metric_is_table_name(const char *name);
/* 1 when higher values of such a name are better (all but mean_squared_error and the percentage error). */
int dt_metric_name_greater(const char *name);

#endif
