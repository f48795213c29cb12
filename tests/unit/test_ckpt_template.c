/*
 * Checkpoint file-name templates (core/checkpoint/ckpt_template.c): Keras' format specs
 * give Python's results, and every malformed template is refused with a reason.
 */
#include "helpers.h"

#include "core/checkpoint/ckpt_template.h"

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
	struct dt_ckpt_vars v = { 7, 1234, 42, 1.234567, 0.875, 0.123456, 0.9, 1, 1 };
	char out[256], msg[256];
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (dt_ckpt_template_check(cases[i].tpl, 0, 1, msg, sizeof(msg)) < 0)
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
		if (dt_ckpt_template_check(cases[i].tpl, cases[i].per_step, cases[i].accuracy, msg, sizeof(msg)) == 0)
			fail_msg("'%s' accepted", cases[i].tpl);
		if (!strstr(msg, cases[i].why))
			fail_msg("'%s': \"%s\" lacks \"%s\"", cases[i].tpl, msg, cases[i].why);
	}
	/* the per-epoch metrics are fine at epoch ends, loss at steps too */
	assert_int_equal(dt_ckpt_template_check("{val_loss:.4f}", 0, 1, msg, sizeof(msg)), 0);
	assert_int_equal(dt_ckpt_template_check("{loss:.4f}-{step}", 1, 0, msg, sizeof(msg)), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_format),
		cmocka_unit_test(test_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
