/*
 * compile.metrics' table (core/model/metric.c): precision, recall, F1 and
 * their averages from a confusion matrix worked by hand; Keras' AUC on
 * histograms with closed-form answers; the CPU ops that count them; names,
 * arguments and their errors.
 */
#include <math.h>

#include "helpers.h"

#include "core/config/config.h"
#include "core/model/metric.h"
#include "core/rows.h"

static struct dt_tensor mat(float *d, int r, int c) { return (struct dt_tensor){ d, { 2, { r, c } }, DT_CPU }; }

/* Rows the true class: class 0 has 5 hits of 6, class 1 3 of 6, class 2 4 of 4. */
static const double cm3[9] = { 5, 1, 0, 2, 3, 1, 0, 0, 4 };

static void test_confusion_per_class(void **state)
{
	double p, r, f, support;
	dt_confusion_class(cm3, 3, 0, &p, &r, &f, &support);
	assert_float_equal(p, 5.0 / 7, 1e-12);
	assert_float_equal(r, 5.0 / 6, 1e-12);
	assert_float_equal(f, 10.0 / 13, 1e-12); /* 2 tp / (2 tp + fp + fn) */
	assert_float_equal(support, 6, 0);
	dt_confusion_class(cm3, 3, 1, &p, &r, &f, &support);
	assert_float_equal(p, 3.0 / 4, 1e-12);
	assert_float_equal(r, 1.0 / 2, 1e-12);
	assert_float_equal(f, 0.6, 1e-12);
	dt_confusion_class(cm3, 3, 2, &p, &r, &f, &support);
	assert_float_equal(p, 4.0 / 5, 1e-12);
	assert_float_equal(r, 1, 1e-12);
	assert_float_equal(f, 8.0 / 9, 1e-12);
	assert_float_equal(support, 4, 0);
}

static void test_confusion_averages(void **state)
{
	assert_float_equal(dt_confusion_average(cm3, 3, DT_METRIC_PRECISION, DT_AVERAGE_MACRO),
			   (5.0 / 7 + 3.0 / 4 + 4.0 / 5) / 3, 1e-12);
	assert_float_equal(dt_confusion_average(cm3, 3, DT_METRIC_F1, DT_AVERAGE_MACRO), (10.0 / 13 + 0.6 + 8.0 / 9) / 3,
			   1e-12);
	/* Weighted recall is the accuracy; micro scores all are. */
	assert_float_equal(dt_confusion_average(cm3, 3, DT_METRIC_RECALL, DT_AVERAGE_WEIGHTED), 12.0 / 16, 1e-12);
	assert_float_equal(dt_confusion_average(cm3, 3, DT_METRIC_F1, DT_AVERAGE_WEIGHTED),
			   (6 * 10.0 / 13 + 6 * 0.6 + 4 * 8.0 / 9) / 16, 1e-12);
	assert_float_equal(dt_confusion_average(cm3, 3, DT_METRIC_PRECISION, DT_AVERAGE_MICRO), 12.0 / 16, 1e-12);
	/* A class never true nor predicted scores 0 (Keras' divide_no_nan), and counts in the macro mean. */
	{
		double cm[4] = { 3, 0, 0, 0 }, p, r, f, s;
		dt_confusion_class(cm, 2, 1, &p, &r, &f, &s);
		assert_true(p == 0 && r == 0 && f == 0 && s == 0);
		assert_float_equal(dt_confusion_average(cm, 2, DT_METRIC_F1, DT_AVERAGE_MACRO), 0.5, 1e-12);
	}
}

/* hist for n thresholds from predictions v with labels y (0/1), through the row formula. */
static void histogram(const float *v, const float *y, int m, int n, double *hist)
{
	memset(hist, 0, sizeof(double) * 2 * (n + 1));
	for (int i = 0; i < m; i++)
		hist[dt_auc_slot(v, y, 0, 0, n, i, 1, 0)] += 1;
}

static void test_auc_closed_forms(void **state)
{
	enum { T = 200 };
	double hist[2 * (T + 1)];
	/* Separated: ROC and PR 1. */
	float v1[4] = { 0.9f, 0.8f, 0.2f, 0.1f }, y1[4] = { 1, 1, 0, 0 };
	histogram(v1, y1, 4, T, hist);
	assert_float_equal(dt_auc_value(hist, T, DT_CURVE_ROC), 1, 1e-12);
	assert_float_equal(dt_auc_value(hist, T, DT_CURVE_PR), 1, 1e-12);
	/* Reversed: ROC 0. */
	float y2[4] = { 0, 0, 1, 1 };
	histogram(v1, y2, 4, T, hist);
	assert_float_equal(dt_auc_value(hist, T, DT_CURVE_ROC), 0, 1e-12);
	/* One pair of four out of order: the ROC area is the share of ordered pairs, 3/4. */
	float v3[4] = { 0.9f, 0.3f, 0.6f, 0.1f }, y3[4] = { 1, 1, 0, 0 };
	histogram(v3, y3, 4, T, hist);
	assert_float_equal(dt_auc_value(hist, T, DT_CURVE_ROC), 0.75, 1e-12);
	/* Every prediction the same: the diagonal, 1/2. */
	float v4[4] = { 0.5f, 0.5f, 0.5f, 0.5f };
	histogram(v4, y3, 4, T, hist);
	assert_float_equal(dt_auc_value(hist, T, DT_CURVE_ROC), 0.5, 1e-12);
	/* No positives at all: 0, not NaN. */
	float y5[4] = { 0, 0, 0, 0 };
	histogram(v3, y5, 4, T, hist);
	assert_float_equal(dt_auc_value(hist, T, DT_CURVE_ROC), 0, 0);
	assert_float_equal(dt_auc_value(hist, T, DT_CURVE_PR), 0, 0);
}

static void test_auc_buckets(void **state)
{
	/* Thresholds of 3: -eps, 0.5, 1 + eps. A value's bucket counts those it exceeds. */
	assert_int_equal(dt_auc_bucket(-1, 3), 0);
	assert_int_equal(dt_auc_bucket(0, 3), 1);
	assert_int_equal(dt_auc_bucket(0.5f, 3), 1);
	assert_int_equal(dt_auc_bucket(0.50001f, 3), 2);
	assert_int_equal(dt_auc_bucket(1, 3), 2);
	assert_int_equal(dt_auc_bucket(2, 3), 3);
	assert_float_equal(dt_auc_threshold(1, 200), 1.0 / 199, 1e-9);
	assert_int_equal(dt_auc_bucket(1.0f / 199, 200), 1);
	assert_int_equal(dt_auc_bucket(nextafterf(1.0f / 199, 1), 200), 2);
}

static void test_ops_count(void **state)
{
	/* Sparse: rows' argmax 0, 2, 2, 1 against classes 0, 1, 2, 7 (outside: not counted). */
	float p[12] = { .7f, .2f, .1f, .1f, .3f, .6f, 0, 0, 1, .2f, .5f, .3f }, t[4] = { 0, 1, 2, 7 };
	float counts[9], bin[4], hist[2 * 4];
	struct dt_tensor P = mat(p, 4, 3), T = mat(t, 4, 1), C = mat(counts, 3, 3), B = mat(bin, 2, 2), H = mat(hist, 2, 4);
	dt_op_confusion(DT_ACC_SPARSE, &P, &T, 0.5f, &C);
	const float want[9] = { 1, 0, 0, 0, 0, 1, 0, 0, 1 };
	for (int i = 0; i < 9; i++)
		assert_float_equal(counts[i], want[i], 0);
	/* Binary over every element of 2 columns: (label > 0.5, pred > 0.4). */
	float pb[4] = { .9f, .1f, .45f, .3f }, tb[4] = { 1, 1, 0, 0 };
	struct dt_tensor PB = mat(pb, 2, 2), TB = mat(tb, 2, 2);
	dt_op_confusion(DT_ACC_BINARY, &PB, &TB, 0.4f, &B);
	assert_float_equal(bin[0], 1, 0); /* true 0, predicted 0: .3 */
	assert_float_equal(bin[1], 1, 0); /* true 0, predicted 1: .45 */
	assert_float_equal(bin[2], 1, 0); /* true 1, predicted 0: .1 */
	assert_float_equal(bin[3], 1, 0); /* true 1, predicted 1: .9 */
	/* AUC histogram of column 2 with 3 thresholds: values .1 .6 1 .3, positive where the class is 2. */
	dt_op_auc_histogram(&P, &T, 2, 1, 0, 3, &H);
	const float wanth[8] = { 0, 2, 1, 0, 0, 0, 1, 0 };
	for (int i = 0; i < 8; i++)
		assert_float_equal(hist[i], wanth[i], 0);
}

static void test_top_k(void **state)
{
	/* Row 0: class 2 ranks second; row 1: class 0 ties the highest (ties count in); row 2: class 1 ranks third. */
	float p[9] = { .5f, .1f, .4f, .4f, .4f, .2f, .5f, .1f, .4f }, t[3] = { 2, 0, 1 };
	float oh[9] = { 0, 0, 1, 1, 0, 0, 0, 1, 0 };
	struct dt_tensor P = mat(p, 3, 3), T = mat(t, 3, 1), OH = mat(oh, 3, 3);
	assert_int_equal(dt_op_count_top_k(&P, &T, 1, 1), 1);
	assert_int_equal(dt_op_count_top_k(&P, &T, 1, 2), 2);
	assert_int_equal(dt_op_count_top_k(&P, &T, 1, 3), 3);
	assert_int_equal(dt_op_count_top_k(&P, &OH, 0, 2), 2);
	/* The hits and count of the accuracies, summed over batches. */
	struct dt_metric_set s = { .n = 1 };
	double stats[2] = { 0 };
	s.m[0] = (struct dt_metric){ .kind = DT_METRIC_SPARSE_TOP_K, .k = 2, .class_id = -1 };
	assert_int_equal(dt_metric_set_layout(&s, DT_ACC_SPARSE, 3, 0.5f, 1, 0), 0);
	assert_int_equal(s.nstats, 2);
	dt_metric_accumulate(&s, &P, &T, NULL, NULL, stats);
	dt_metric_accumulate(&s, &P, &T, NULL, NULL, stats);
	assert_float_equal(stats[0], 4, 0);
	assert_float_equal(stats[1], 6, 0);
	assert_float_equal(dt_metric_value(&s, 0, stats), 2.0 / 3, 1e-12);
}

static void test_regression(void **state)
{
	/* Two outputs: the first predicted with errors 1, -1, 0, 2 on labels 2, 4, 6, 8; the second exactly. */
	float t[8] = { 2, 10, 4, 20, 6, 30, 8, 40 }, p[8] = { 1, 10, 5, 20, 6, 30, 6, 40 }, sums[12];
	struct dt_tensor P = mat(p, 4, 2), T = mat(t, 4, 2), S = mat(sums, 6, 2);
	dt_op_regression_sums(&P, &T, &S);
	assert_float_equal(sums[0], 20, 0);
	assert_float_equal(sums[1], 0, 0); /* what the float of the sum left out */
	assert_float_equal(sums[2], 4 + 16 + 36 + 64, 0);
	assert_float_equal(sums[3], 0, 0);
	assert_float_equal(sums[4], 1 + 1 + 0 + 4, 0);
	assert_float_equal(sums[5], 0.5 + 0.25 + 0 + 0.25, 1e-6);
	assert_float_equal(sums[DT_REGRESSION_SUMS + 4], 0, 0);
	struct dt_metric_set s = { .n = 3 };
	s.m[0] = (struct dt_metric){ .kind = DT_METRIC_MSE, .class_id = -1 };
	s.m[1] = (struct dt_metric){ .kind = DT_METRIC_MAPE, .class_id = -1 };
	s.m[2] = (struct dt_metric){ .kind = DT_METRIC_R2, .class_id = -1 };
	s.regression = 1;
	assert_int_equal(dt_metric_set_layout(&s, DT_ACC_CATEGORICAL, 2, 0.5f, 0, 0), 0);
	assert_int_equal(s.nstats, 13);
	double stats[13] = { 0 };
	float host[12], dev[12];
	struct dt_tensor scratch = { dev, { 1, { 12 } }, DT_CPU };
	dt_metric_accumulate(&s, &P, &T, &scratch, host, stats);
	assert_float_equal(stats[12], 4, 0);
	assert_float_equal(dt_metric_value(&s, 0, stats), 6.0 / 8, 1e-12);
	assert_float_equal(dt_metric_value(&s, 1, stats), 100 * 1.0 / 8, 1e-6);
	/* Output 0: SS_res 6, SS_tot 120 - 400/4 = 20: 0.7; output 1: 1. */
	assert_float_equal(dt_metric_value(&s, 2, stats), (0.7 + 1) / 2, 1e-12);
	assert_false(dt_metric_name_greater("mse_1"));
	assert_false(dt_metric_name_greater("mean_absolute_percentage_error"));
	assert_true(dt_metric_name_greater("r2_score"));
	assert_true(dt_metric_name_greater("auc"));
}

/* Labels 10000 +- 0.3: float sums of t and t^2 per batch would lose SS_tot (5) in t^2's rounding (256). */
static void test_r2_large_mean(void **state)
{
	enum { N = 64 };
	float t[N], p[N];
	double mean = 0, ss_tot = 0, ss_res = 0;
	for (int i = 0; i < N; i++) {
		t[i] = 10000.0f + 0.3f * sinf((float)i);
		p[i] = t[i] + 0.2f * cosf(3.0f * (float)i);
		mean += t[i];
	}
	mean /= N;
	for (int i = 0; i < N; i++) {
		ss_tot += ((double)t[i] - mean) * ((double)t[i] - mean);
		ss_res += ((double)t[i] - p[i]) * ((double)t[i] - p[i]);
	}
	struct dt_tensor P = mat(p, N, 1), T = mat(t, N, 1);
	struct dt_metric_set s = { .n = 1 };
	s.m[0] = (struct dt_metric){ .kind = DT_METRIC_R2, .class_id = -1 };
	s.regression = 1;
	assert_int_equal(dt_metric_set_layout(&s, DT_ACC_CATEGORICAL, 1, 0.5f, 0, 0), 0);
	double stats[DT_REGRESSION_SUMS + 1] = { 0 };
	float host[DT_REGRESSION_SUMS], dev[DT_REGRESSION_SUMS];
	struct dt_tensor scratch = { dev, { 1, { DT_REGRESSION_SUMS } }, DT_CPU };
	/* in batches of 16, as an epoch sums them */
	for (int b = 0; b < N; b += 16) {
		struct dt_tensor Pb = mat(p + b, 16, 1), Tb = mat(t + b, 16, 1);
		dt_metric_accumulate(&s, &Pb, &Tb, &scratch, host, stats);
	}
	(void)P;
	(void)T;
	assert_true(ss_tot > 2 && ss_res > 0.5); /* the case is what it says */
	assert_float_equal(dt_metric_value(&s, 0, stats), 1 - ss_res / ss_tot, 1e-5);
}

static struct dt_doc *doc;

/* Reads the metrics of `yaml` (a sequence) into s; the rc of the first failing read, else 0. */
static int read_list(const char *yaml, struct dt_metric_set *s)
{
	const struct dt_node *list;
	memset(s, 0, sizeof(*s));
	dt_doc_free(doc);
	/* "metrics: " puts the list at column 10. */
	char text[512];
	snprintf(text, sizeof(text), "metrics: %s", yaml);
	doc = dt_doc_parse("m.yaml", text, ".");
	assert_non_null(doc);
	list = dt_node_get(dt_doc_root(doc), "metrics");
	for (int i = 0; i < list->n; i++) {
		int rc = dt_metric_read(s, list->items[i]);
		if (rc <= 0)
			return rc < 0 ? -1 : 1;
	}
	return 0;
}

static void test_names_and_args(void **state)
{
	struct dt_metric_set s;
	assert_int_equal(read_list("[auc, {auc: {curve: PR, num_thresholds: 50}}, precision, {f1_score: {average: weighted}}]", &s), 0);
	assert_int_equal(s.n, 4);
	assert_string_equal(s.m[0].name, "auc");
	assert_string_equal(s.m[1].name, "auc_1");
	assert_int_equal(s.m[1].curve, DT_CURVE_PR);
	assert_int_equal(s.m[1].num_thresholds, 50);
	assert_int_equal(s.m[0].num_thresholds, 200);
	assert_int_equal(s.m[3].average, DT_AVERAGE_WEIGHTED);
	assert_true(s.confusion);
	assert_int_equal(dt_metric_set_layout(&s, DT_ACC_SPARSE, 3, 0.5f, 1, 0), 0);
	assert_int_equal(s.m[0].offset, 9);
	assert_int_equal(s.m[1].offset, 9 + 2 * 201);
	assert_int_equal(s.nstats, 9 + 2 * 201 + 2 * 51);
	assert_true(dt_metric_find(&s, "auc_1", NULL));
	assert_false(dt_metric_find(&s, "auc_2", NULL));
	assert_true(dt_metric_is_table_name("f1_score_12"));
	assert_false(dt_metric_is_table_name("f1_score_"));
	assert_false(dt_metric_is_table_name("aucx"));
	/* Not of this table: left to the caller. */
	assert_int_equal(read_list("[accuracy]", &s), 1);
	/* Errors at the value's position. */
	assert_int_equal(read_list("[{auc: {num_thresholds: 1}}]", &s), -1);
	assert_string_equal(dt_cfg_last_where(), "m.yaml:1:34");
	assert_int_equal(read_list("[{recall: {curve: PR}}]", &s), -1);
	assert_error_contains("curve");
	assert_int_equal(read_list("[{precision: {class_id: 3}}]", &s), 0);
	assert_int_equal(dt_metric_set_layout(&s, DT_ACC_SPARSE, 3, 0.5f, 1, 0), -1);
	assert_error_contains("class_id 3");
	assert_string_equal(dt_cfg_last_where(), "m.yaml:1:11");
	/* A binary model's precision is the positive class's, unless averaged. */
	assert_int_equal(read_list("[precision, {precision: {average: macro}}]", &s), 0);
	assert_int_equal(dt_metric_set_layout(&s, DT_ACC_BINARY, 1, 0.5f, 0, 0), 0);
	{
		double cm[4] = { 6, 2, 1, 3 }; /* class 1: tp 3, fp 2 */
		assert_float_equal(dt_metric_value(&s, 0, cm), 3.0 / 5, 1e-12);
		assert_float_equal(dt_metric_value(&s, 1, cm), (6.0 / 7 + 3.0 / 5) / 2, 1e-12);
	}
	dt_doc_free(doc);
	doc = NULL;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_confusion_per_class),
		cmocka_unit_test(test_confusion_averages),
		cmocka_unit_test(test_auc_closed_forms),
		cmocka_unit_test(test_auc_buckets),
		cmocka_unit_test(test_ops_count),
		cmocka_unit_test(test_top_k),
		cmocka_unit_test(test_regression),
		cmocka_unit_test(test_r2_large_mean),
		cmocka_unit_test(test_names_and_args),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
