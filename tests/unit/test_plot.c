/*
 * core/plot: every glyph of the font is well formed, text widths, a
 * history that gains columns as epochs bring new metrics, and fit.plot's
 * state (its history) through state_save and state_load.
 */
#include <math.h>

#include "helpers.h"

#include "core/plot/font.h"
#include "core/plot/plot.h"

static void test_font(void **state)
{
	const char *const *box = dt_font_glyph(1);
	for (int c = 32; c < 127; c++) {
		const char *const *g = dt_font_glyph(c);
		for (int r = 0; r < DT_FONT_H; r++) {
			assert_int_equal(strlen(g[r]), DT_FONT_W);
			assert_int_equal(strspn(g[r], "#."), DT_FONT_W);
		}
	}
	/* What numbers and metric names need has a glyph of its own; uppercase is lowercase. */
	for (const char *s = "0123456789abcdefghijklmnopqrstuvwxyz.-_+:/(),%= "; *s; s++)
		assert_ptr_not_equal(dt_font_glyph(*s), box);
	assert_ptr_equal(dt_font_glyph('E'), dt_font_glyph('e'));
	assert_int_equal(dt_canvas_text_width("", 2), 0);
	assert_int_equal(dt_canvas_text_width("a", 1), DT_FONT_W);
	assert_int_equal(dt_canvas_text_width("loss", 2), 2 * (4 * DT_FONT_ADVANCE - 1));
}

static void test_history_columns(void **state)
{
	struct dt_history h;
	const char *first[] = { "loss" }, *second[] = { "loss", "val_loss" };
	double v1[] = { 2.0 }, v2[] = { 1.0, 1.5 };
	dt_history_init(&h, "run");
	dt_history_add(&h, 0, first, v1, 1);
	dt_history_add(&h, 1, second, v2, 2);
	assert_int_equal(h.ncols, 2);
	assert_int_equal(h.nrows, 2);
	assert_string_equal(h.cols[1], "val_loss");
	assert_float_equal(h.values[0], 2.0, 0);
	assert_true(isnan(h.values[1])); /* val_loss before it was reported */
	assert_float_equal(h.values[2], 1.0, 0);
	assert_float_equal(h.values[3], 1.5, 0);
	assert_int_equal(h.epochs[1], 1);
	dt_history_release(&h);
}

static void test_plot_state(void **state)
{
	struct dt_plot_callback a, b;
	char dir[] = "/tmp/dt-plot-XXXXXX", png[64];
	struct dt_logs l = { .has_accuracy = 1, .has_val = 1 };
	char *saved;
	assert_non_null(mkdtemp(dir));
	dt_plot_callback_init(&a, dir);
	for (int e = 0; e < 3; e++) {
		l.epoch = e;
		l.loss = 1.0 / (e + 1), l.accuracy = 0.5 + 0.1 * e;
		l.val_loss = 1.2 / (e + 1), l.val_accuracy = 0.4 + 0.1 * e;
		assert_int_equal(a.cb.on_epoch_end(&a.cb, NULL, &l), 0);
	}
	snprintf(png, sizeof(png), "%s/curves.png", dir);
	assert_int_equal(access(png, F_OK), 0);
	saved = a.cb.state_save(&a.cb, NULL);
	assert_non_null(saved);
	dt_plot_callback_init(&b, dir);
	assert_int_equal(b.cb.state_load(&b.cb, NULL, saved), 0);
	assert_string_equal(b.history.name, a.history.name);
	assert_int_equal(b.history.nrows, 3);
	assert_int_equal(b.history.ncols, a.history.ncols);
	assert_memory_equal(b.history.values, a.history.values, sizeof(double) * 3 * a.history.ncols);
	dt_error_set_quiet(1);
	assert_int_equal(b.cb.state_load(&b.cb, NULL, "{\"cols\": [\"loss\"], \"epochs\": [0], \"values\": [[\"1\", \"2\"]]}"), -1);
	assert_error_contains("the saved state of 'plot' is not valid");
	assert_int_equal(b.cb.state_load(&b.cb, NULL, "{\"cols\": [\"loss\"], \"epochs\": [0], \"values\": [[\"x\"]]}"), -1);
	assert_int_equal(b.cb.state_load(&b.cb, NULL, "{\"cols\": [\"loss\"], \"epochs\": [0], \"values\": [[null]]}"), 0);
	assert_true(isnan(b.history.values[0]));
	dt_error_set_quiet(0);
	free(saved);
	dt_plot_callback_release(&a);
	dt_plot_callback_release(&b);
	unlink(png);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_font),
		cmocka_unit_test(test_history_columns),
		cmocka_unit_test(test_plot_state),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
