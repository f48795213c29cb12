/*
 * Checkpoint file-name templates (core/checkpoint/ckpt_template.c): Keras' format specs
 * give Python's results, and every malformed template is refused with a reason.
 */
#include "helpers.h"

#include <math.h>

#include "core/checkpoint/ckpt_template.h"
#include "core/model/metric.h"

static void test_format(void **state)
{
	static const struct {
		const char *tpl, *want;
	} cases[] = {
		{ "ckpt-{epoch:03d}-{batch:05d}", "ckpt-007-00042" },
		{ "{epoch:02d}-{val_loss:.4f}", "07-0.1235" },
		{ "{epoch}-{step}", "7-1234" },
		{ "{loss:.2e}", "1.23e+00" },
		{ "{accuracy:.3f}-{val_accuracy:.1f}", "0.875-0.9" },
		{ "{{literal}}-{epoch:4d}", "{literal}-   7" },
		{ "{loss}", "1.23457" },
		{ "{epoch:.1f}", "7.0" },
		{ "plain", "plain" },
	};
	struct dt_ckpt_vars v = { 7, 1234, 42, 1.234567, 0.875, 0.123456, 0.9, 1, 1, NULL, NULL };
	char out[256], msg[256];
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (dt_ckpt_template_check(cases[i].tpl, 0, 1, NULL, msg, sizeof(msg)) < 0)
			fail_msg("'%s' refused: %s", cases[i].tpl, msg);
		assert_int_equal(dt_ckpt_template_format(cases[i].tpl, &v, out, sizeof(out)), 0);
		assert_string_equal(out, cases[i].want);
	}
	/* too small a buffer is an error, not a truncation */
	assert_int_equal(dt_ckpt_template_format("ckpt-{epoch:03d}", &v, out, 6), -1);
}

static void test_refused(void **state)
{
	static const struct {
		const char *tpl;
		int per_step, accuracy;
		const char *why;
	} cases[] = {
		{ "", 0, 1, "empty" },
		{ "a/{epoch}", 0, 1, "'/'" },
		{ "{epoch", 0, 1, "without its '}'" },
		{ "epoch}", 0, 1, "without its '{'" },
		{ "{lr}", 0, 1, "unknown field '{lr}'" },
		{ "{epoch:03x}", 0, 1, "bad format '03x'" },
		{ "{epoch:.f}", 0, 1, "bad format" },
		{ "{loss:d}", 0, 1, "use f, e or g" },
		{ "{val_loss:.4f}", 1, 1, "only at the end of an epoch" },
		{ "{val_accuracy:.4f}", 1, 1, "only at the end of an epoch" },
		{ "{accuracy:.2f}", 0, 0, "needs compile.metrics" },
		{ "{a{b}", 0, 1, "'{' inside a field" },
	};
	char msg[256];
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		msg[0] = '\0';
		if (dt_ckpt_template_check(cases[i].tpl, cases[i].per_step, cases[i].accuracy, NULL, msg, sizeof(msg)) == 0)
			fail_msg("'%s' accepted", cases[i].tpl);
		if (!strstr(msg, cases[i].why))
			fail_msg("'%s': \"%s\" lacks \"%s\"", cases[i].tpl, msg, cases[i].why);
	}
	/* the per-epoch metrics are fine at epoch ends, loss at steps too */
	assert_int_equal(dt_ckpt_template_check("{val_loss:.4f}", 0, 1, NULL, msg, sizeof(msg)), 0);
	assert_int_equal(dt_ckpt_template_check("{loss:.4f}-{step}", 1, 0, NULL, msg, sizeof(msg)), 0);
}

/* A metric's value by its log name, as fit's logs give them. */
static double metric_values(const void *ctx, const char *name)
{
	(void)ctx;
	return !strcmp(name, "val_auc") ? 0.98765 : !strcmp(name, "precision_1") ? 0.5 : NAN;
}

static void test_metric_fields(void **state)
{
	struct dt_metric_set s = { 0 };
	struct dt_node names[2] = { { .kind = DT_NODE_SCALAR, .value = "auc" },
				    { .kind = DT_NODE_SCALAR, .value = "precision" } };
	struct dt_node second = { .kind = DT_NODE_SCALAR, .value = "precision" };
	struct dt_ckpt_vars v = { 3, 30, 10, 0.5, 0, 0.4, 0, 0, 1, metric_values, NULL };
	char out[256], msg[256];
	assert_int_equal(dt_metric_read(&s, &names[0]), 1);
	assert_int_equal(dt_metric_read(&s, &names[1]), 1);
	assert_int_equal(dt_metric_read(&s, &second), 1); /* precision_1 */
	if (dt_ckpt_template_check("{epoch:02d}-{val_auc:.3f}-{precision_1:.2f}-{auc}", 0, 0, &s, msg, sizeof(msg)) < 0)
		fail_msg("refused: %s", msg);
	assert_int_equal(dt_ckpt_template_format("{epoch:02d}-{val_auc:.3f}-{precision_1:.2f}", &v, out, sizeof(out)),
			 0);
	assert_string_equal(out, "03-0.988-0.50");
	/* a name of the table that compile.metrics lacks, a metric mid-epoch, an integer spec */
	assert_int_equal(dt_ckpt_template_check("{val_recall:.3f}", 0, 0, &s, msg, sizeof(msg)), -1);
	assert_non_null(strstr(msg, "needs a metric named 'recall' in compile.metrics"));
	assert_int_equal(dt_ckpt_template_check("{auc:.3f}", 1, 0, &s, msg, sizeof(msg)), -1);
	assert_non_null(strstr(msg, "only at the end of an epoch"));
	assert_int_equal(dt_ckpt_template_check("{auc:d}", 0, 0, &s, msg, sizeof(msg)), -1);
	assert_non_null(strstr(msg, "use f, e or g"));
	assert_int_equal(dt_ckpt_template_check("{auc}", 0, 0, NULL, msg, sizeof(msg)), -1);
	assert_int_equal(dt_ckpt_template_check("{aucc}", 0, 0, &s, msg, sizeof(msg)), -1);
	assert_non_null(strstr(msg, "unknown field"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_format),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_metric_fields),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
