/*
 * Learning-rate schedules: every kind against its formula (written out again
 * here) at many steps, values from the examples in Keras' documentation, the
 * warmup, YAML errors, and the optimizer using the schedule by its
 * iteration count.
 */
#include <math.h>

#include "helpers.h"

#include "core/config/config.h"
#include "core/model/model.h"
#include "core/model/optimizer.h"
#include "core/model/schedule.h"
#include "layers/layers.h"

/* Reads `learning_rate: ...` YAML into s; returns dt_schedule_read's result. */
static int parse(struct dt_schedule *s, const char *yaml)
{
	struct dt_doc *d = dt_doc_parse("lr.yaml", yaml, ".");
	int rc;
	assert_non_null(d);
	rc = dt_schedule_read(s, dt_node_get(dt_doc_root(d), "learning_rate"), 0.001);
	dt_doc_free(d);
	return rc;
}

static void must_parse(struct dt_schedule *s, const char *yaml) { assert_int_equal(parse(s, yaml), 0); }

static void test_constant(void **state)
{
	struct dt_schedule s;
	must_parse(&s, "learning_rate: 0.05\n");
	assert_false(dt_schedule_varies(&s));
	assert_float_equal(dt_schedule_value(&s, 0), 0.05, 1e-12);
	assert_float_equal(dt_schedule_value(&s, 123456), 0.05, 1e-12);
	must_parse(&s, "other: 1\n");
	assert_float_equal(dt_schedule_value(&s, 7), 0.001, 1e-12);
}

static void test_exponential_decay(void **state)
{
	struct dt_schedule s;
	must_parse(&s, "learning_rate: {exponential_decay: {initial_learning_rate: 0.1, decay_steps: 10, decay_rate: 0.5}}\n");
	assert_true(dt_schedule_varies(&s));
	for (int step = 0; step < 300; step += 7)
		assert_float_equal(dt_schedule_value(&s, step), 0.1 * pow(0.5, step / 10.0), 1e-12);
	assert_float_equal(dt_schedule_value(&s, 10), 0.05, 1e-12);
	assert_float_equal(dt_schedule_value(&s, 5), 0.0707106781, 1e-9);
	must_parse(&s, "learning_rate: {exponential_decay: {initial_learning_rate: 0.1, decay_steps: 10, decay_rate: 0.5, "
		       "staircase: true}}\n");
	for (int step = 0; step < 300; step += 3)
		assert_float_equal(dt_schedule_value(&s, step), 0.1 * pow(0.5, step / 10), 1e-12);
	assert_float_equal(dt_schedule_value(&s, 19), 0.05, 1e-12);
}

static void test_piecewise_constant(void **state)
{
	struct dt_schedule s;
	/* Keras' docstring: 1.0 for the first 100001 steps, 0.5 for the next 10000, then 0.1. */
	must_parse(&s, "learning_rate: {piecewise_constant: {boundaries: [100000, 110000], values: [1.0, 0.5, 0.1]}}\n");
	assert_float_equal(dt_schedule_value(&s, 0), 1.0, 0);
	assert_float_equal(dt_schedule_value(&s, 100000), 1.0, 0);
	assert_float_equal(dt_schedule_value(&s, 100001), 0.5, 0);
	assert_float_equal(dt_schedule_value(&s, 110000), 0.5, 0);
	assert_float_equal(dt_schedule_value(&s, 110001), 0.1, 0);
	assert_float_equal(dt_schedule_value(&s, 10000000), 0.1, 0);
}

static double cosine_ref(double step, double decay, double from, double alpha)
{
	step = step < decay ? step : decay;
	return from * ((1 - alpha) * 0.5 * (1 + cos(M_PI * step / decay)) + alpha);
}

static void test_cosine_decay(void **state)
{
	struct dt_schedule s;
	must_parse(&s, "learning_rate: {cosine_decay: {initial_learning_rate: 0.1, decay_steps: 100, alpha: 0.1}}\n");
	for (int step = 0; step < 400; step += 3)
		assert_float_equal(dt_schedule_value(&s, step), cosine_ref(step, 100, 0.1, 0.1), 1e-12);
	assert_float_equal(dt_schedule_value(&s, 50), 0.055, 1e-12);
	assert_float_equal(dt_schedule_value(&s, 200), 0.01, 1e-12);

	/* Keras 3's warmup example: from 0 to 0.1 over 1000 steps, then decay over 1000. */
	must_parse(&s, "learning_rate: {cosine_decay: {initial_learning_rate: 0, decay_steps: 1000, warmup_target: 0.1, "
		       "warmup_steps: 1000}}\n");
	for (int step = 0; step < 1000; step += 11)
		assert_float_equal(dt_schedule_value(&s, step), 0.1 * step / 1000.0, 1e-12);
	for (int step = 1000; step < 4000; step += 13)
		assert_float_equal(dt_schedule_value(&s, step), cosine_ref(step - 1000, 1000, 0.1, 0), 1e-12);
	assert_float_equal(dt_schedule_value(&s, 500), 0.05, 1e-12);
	assert_float_equal(dt_schedule_value(&s, 1000), 0.1, 1e-12);
	assert_float_equal(dt_schedule_value(&s, 1500), 0.05, 1e-12);
	assert_float_equal(dt_schedule_value(&s, 3000), 0, 1e-12);
}

/* SGDR written out by periods: period i lasts first * t_mul^i steps and starts at m_mul^i. */
static double restarts_ref(double step, double first, double t_mul, double m_mul, double alpha)
{
	double len = first, start = 0, m = 1;
	while (step >= start + len) {
		start += len;
		len *= t_mul;
		m *= m_mul;
	}
	double frac = (step - start) / len;
	return (1 - alpha) * 0.5 * m * (1 + cos(M_PI * frac)) + alpha;
}

static void test_cosine_decay_restarts(void **state)
{
	struct dt_schedule s;
	must_parse(&s, "learning_rate: {cosine_decay_restarts: {initial_learning_rate: 1, first_decay_steps: 10, "
		       "m_mul: 0.5}}\n");
	/* Near the restarts, the log in Keras' closed form and the loop may disagree by rounding: skip them. */
	for (int step = 0; step < 1000; step++) {
		if (step == 10 || step == 30 || step == 70 || step == 150 || step == 310 || step == 630)
			continue;
		assert_float_equal(dt_schedule_value(&s, step), restarts_ref(step, 10, 2, 0.5, 0), 1e-9);
	}
	assert_float_equal(dt_schedule_value(&s, 0), 1, 1e-12);
	assert_float_equal(dt_schedule_value(&s, 5), 0.5, 1e-12);
	assert_float_equal(dt_schedule_value(&s, 20), 0.25, 1e-12);
	must_parse(&s, "learning_rate: {cosine_decay_restarts: {initial_learning_rate: 0.2, first_decay_steps: 10, "
		       "t_mul: 1, m_mul: 0.5, alpha: 0.1}}\n");
	for (int step = 0; step < 200; step++)
		assert_float_equal(dt_schedule_value(&s, step), 0.2 * restarts_ref(step, 10, 1, 0.5, 0.1), 1e-9);
	assert_float_equal(dt_schedule_value(&s, 15), 0.2 * (0.9 * 0.25 + 0.1), 1e-12);
}

static void test_polynomial_decay(void **state)
{
	struct dt_schedule s;
	/* Keras' docstring: from 0.1 to 0.01 in 10000 steps with power 0.5. */
	must_parse(&s, "learning_rate: {polynomial_decay: {initial_learning_rate: 0.1, decay_steps: 10000, "
		       "end_learning_rate: 0.01, power: 0.5}}\n");
	for (int step = 0; step < 30000; step += 97) {
		double p = (step < 10000 ? step : 10000) / 10000.0;
		assert_float_equal(dt_schedule_value(&s, step), 0.09 * sqrt(1 - p) + 0.01, 1e-12);
	}
	assert_float_equal(dt_schedule_value(&s, 20000), 0.01, 1e-12);
	must_parse(&s, "learning_rate: {polynomial_decay: {initial_learning_rate: 0.1, decay_steps: 10000, "
		       "end_learning_rate: 0.01, power: 0.5, cycle: true}}\n");
	assert_float_equal(dt_schedule_value(&s, 0), 0.1, 1e-12);
	assert_float_equal(dt_schedule_value(&s, 15000), 0.09 * sqrt(0.25) + 0.01, 1e-12);
	assert_float_equal(dt_schedule_value(&s, 20000), 0.01, 1e-12);
	assert_float_equal(dt_schedule_value(&s, 20001), 0.09 * sqrt(1 - 20001 / 30000.0) + 0.01, 1e-12);
	/* Keras' default end_learning_rate is 1e-4, power 1. */
	must_parse(&s, "learning_rate: {polynomial_decay: {initial_learning_rate: 0.1, decay_steps: 100}}\n");
	assert_float_equal(dt_schedule_value(&s, 50), (0.1 - 1e-4) * 0.5 + 1e-4, 1e-12);
}

static void test_warmup(void **state)
{
	struct dt_schedule s;
	must_parse(&s, "learning_rate:\n  exponential_decay: {initial_learning_rate: 0.1, decay_steps: 10, decay_rate: 0.5}\n"
		       "  warmup: {steps: 10}\n");
	for (int step = 0; step < 10; step++)
		assert_float_equal(dt_schedule_value(&s, step), 0.1 * step / 10.0, 1e-12);
	for (int step = 10; step < 100; step++)
		assert_float_equal(dt_schedule_value(&s, step), 0.1 * pow(0.5, (step - 10) / 10.0), 1e-12);
	must_parse(&s, "learning_rate: {warmup: {steps: 4, initial: 0.02}, constant: 0.1}\n");
	assert_true(dt_schedule_varies(&s));
	assert_float_equal(dt_schedule_value(&s, 0), 0.02, 1e-12);
	assert_float_equal(dt_schedule_value(&s, 2), 0.06, 1e-12);
	assert_float_equal(dt_schedule_value(&s, 4), 0.1, 1e-12);
	assert_float_equal(dt_schedule_value(&s, 400), 0.1, 1e-12);
}

static void test_errors(void **state)
{
	struct dt_schedule s;
	dt_error_set_quiet(1);
	assert_int_equal(parse(&s, "learning_rate: {cosine_decai: {initial_learning_rate: 1, decay_steps: 2}}\n"), -1);
	assert_error_contains("did you mean 'cosine_decay'");
	assert_string_equal(dt_cfg_last_where(), "lr.yaml:1:17");
	assert_int_equal(parse(&s, "learning_rate: {piecewise_constant: {boundaries: [1, 2], values: [1, 2]}}\n"), -1);
	assert_error_contains("one more entry");
	assert_int_equal(parse(&s, "learning_rate: {piecewise_constant: {boundaries: [5, 2], values: [1, 2, 3]}}\n"), -1);
	assert_error_contains("increase");
	assert_int_equal(parse(&s, "learning_rate: {exponential_decay: {initial_learning_rate: 1, decay_steps: 0, "
				   "decay_rate: 0.5}}\n"), -1);
	assert_int_equal(parse(&s, "learning_rate: {exponential_decay: {initial_learning_rate: 1, decay_steps: 5}}\n"), -1);
	assert_error_contains("decay_rate");
	assert_int_equal(parse(&s, "learning_rate: {cosine_decay: {initial_learning_rate: 1, decay_steps: 5}, "
				   "polynomial_decay: {initial_learning_rate: 1, decay_steps: 5}}\n"), -1);
	assert_error_contains("second one");
	assert_int_equal(parse(&s, "learning_rate: {warmup: {steps: 5}}\n"), -1);
	assert_error_contains("needs a schedule");
	assert_int_equal(parse(&s, "learning_rate: {warmup: {stpes: 5}, constant: 1}\n"), -1);
	assert_error_contains("did you mean 'steps'");
	assert_int_equal(parse(&s, "learning_rate: {cosine_decay: {initial_learning_rate: 1, decay_steps: 5, alpah: 1}}\n"), -1);
	assert_error_contains("alpha");
	dt_error_set_quiet(0);
}

/* The optimizer takes the rate of update i from the schedule at i, and reports the next one. */
static void test_optimizer_uses_iterations(void **state)
{
	struct dt_doc *d = dt_doc_parse("m.yaml",
					"layers: [{dense: {units: 2}}]\n"
					"optimizer: {sgd: {learning_rate: {exponential_decay: {initial_learning_rate: 0.1, "
					"decay_steps: 1, decay_rate: 0.5}}}}\n", ".");
	struct dt_shape in = dt_shape_make(1, (int[]){ 3 });
	struct dt_optimizer_config c;
	struct dt_optimizer o;
	struct dt_model m;
	assert_non_null(d);
	assert_int_equal(dt_optimizer_config_read(&c, dt_doc_root(d)), 0);
	assert_float_equal(c.learning_rate, 0.1, 1e-12);
	assert_int_equal(dt_model_init(&m, "t", &in, dt_node_get(dt_doc_root(d), "layers"), dt_layer_types), 0);
	dt_model_alloc(&m, DT_CPU, 2);
	dt_model_init_params(&m, 1);
	dt_optimizer_init(&o, &c, &m);
	struct dt_tensor g = dt_model_grads(&m), w = dt_model_params(&m);
	float before[8], after[8];
	dt_op_fill(&g, 1);
	for (int i = 0; i < 4; i++) {
		assert_float_equal(dt_optimizer_lr(&o), 0.1 * pow(0.5, i), 1e-7);
		dt_op_to_host(&w, before);
		dt_optimizer_apply(&o, &m);
		dt_op_to_host(&w, after);
		/* w -= lr * 1 with the rate of step i. */
		assert_float_equal(before[0] - after[0], 0.1 * pow(0.5, i), 1e-6);
		assert_float_equal(o.learning_rate, 0.1 * pow(0.5, i), 1e-7);
	}
	/* Resuming means restoring `iterations`: the rate follows. */
	o.iterations = 10;
	assert_float_equal(dt_optimizer_lr(&o), 0.1 * pow(0.5, 10), 1e-9);
	dt_optimizer_release(&o, &m);
	dt_model_release(&m);
	dt_doc_free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_constant),
		cmocka_unit_test(test_exponential_decay),
		cmocka_unit_test(test_piecewise_constant),
		cmocka_unit_test(test_cosine_decay),
		cmocka_unit_test(test_cosine_decay_restarts),
		cmocka_unit_test(test_polynomial_decay),
		cmocka_unit_test(test_warmup),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_optimizer_uses_iterations),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
