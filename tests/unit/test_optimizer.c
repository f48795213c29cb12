/*
 * What the optimizer fixtures of test_ref (one parameter tensor) cannot
 * show: global_clipnorm scales all the parameters by their joint norm (not
 * each by its own, as clipnorm), and use_ema's moving average of the
 * weights, its first step and ema_overwrite_frequency, checked against the
 * arithmetic done here.
 */
#include <math.h>

#include "helpers.h"

#include "core/config/config.h"
#include "core/model/model.h"
#include "core/model/optimizer.h"
#include "layers/layers.h"

/* A dense layer of 2 units on 1 input with a bias: 4 weights in two tensors, optimizer `opt`. */
struct rig {
	struct dt_doc *doc;
	struct dt_model m;
	struct dt_optimizer o;
};

static void rig_init(struct rig *r, const char *opt)
{
	char yaml[512];
	struct dt_optimizer_config cfg;
	struct dt_shape in = dt_shape_make(1, (int[]){ 1 });
	snprintf(yaml, sizeof(yaml), "optimizer: %s\nlayers:\n  - dense: {units: 2}\n", opt);
	r->doc = dt_doc_parse("opt", yaml, ".");
	assert_non_null(r->doc);
	assert_int_equal(dt_optimizer_config_read(&cfg, dt_doc_root(r->doc)), 0);
	assert_int_equal(dt_model_init(&r->m, "t", &in, dt_node_get(dt_doc_root(r->doc), "layers"), dt_layer_types), 0);
	assert_int_equal(dt_model_alloc(&r->m, DT_CPU, 1), 0);
	assert_int_equal(r->m.ntrainable, 4);
	dt_optimizer_init(&r->o, &cfg, &r->m);
}

static void rig_free(struct rig *r)
{
	dt_optimizer_release(&r->o, &r->m);
	dt_model_release(&r->m);
	dt_doc_free(r->doc);
}

/* One step from weights w and gradients g (4 each); the weights after it into w. */
static void step(struct rig *r, float *w, const float *g)
{
	struct dt_tensor wt = dt_model_params(&r->m), gt = dt_model_grads(&r->m);
	dt_op_from_host(&wt, w);
	dt_op_from_host(&gt, g);
	dt_optimizer_apply(&r->o, &r->m);
	dt_op_to_host(&wt, w);
}

static void test_global_clipnorm(void **state)
{
	/* kernel gradient (3, 0), bias (0, 4): joint norm 5; each tensor's own norm 3 and 4 */
	const float g[4] = { 3, 0, 0, 4 };
	float w[4] = { 0 }, v[4] = { 0 };
	struct rig a, b;
	rig_init(&a, "{sgd: {learning_rate: 1.0, global_clipnorm: 2.5}}");
	step(&a, w, g);
	for (int i = 0; i < 4; i++)
		assert_float_equal(w[i], -g[i] * 0.5f, 1e-7);
	rig_free(&a);
	/* clipnorm 2.5 clips each tensor to 2.5 instead: (2.5, 0) and (0, 2.5) */
	rig_init(&b, "{sgd: {learning_rate: 1.0, clipnorm: 2.5}}");
	step(&b, v, g);
	assert_float_equal(v[0], -2.5, 1e-6);
	assert_float_equal(v[3], -2.5, 1e-6);
	rig_free(&b);
	/* below the norm nothing changes */
	rig_init(&a, "{sgd: {learning_rate: 1.0, global_clipnorm: 6}}");
	memset(w, 0, sizeof(w));
	step(&a, w, g);
	assert_float_equal(w[3], -4, 0);
	rig_free(&a);
}

static void test_clipvalue(void **state)
{
	const float g[4] = { 3, -0.25f, -7, 0.5f };
	float w[4] = { 0 };
	struct rig a;
	rig_init(&a, "{sgd: {learning_rate: 1.0, clipvalue: 0.5}}");
	step(&a, w, g);
	assert_float_equal(w[0], -0.5, 0);
	assert_float_equal(w[1], 0.25, 0);
	assert_float_equal(w[2], 0.5, 0);
	assert_float_equal(w[3], -0.5, 0);
	rig_free(&a);
}

/* The ema slot of weight i. */
static float ema_of(const struct rig *r, int i)
{
	float e[4];
	struct dt_tensor t = dt_tensor_flat(r->o.slots[DT_OPT_EMA_SLOT], r->m.dev, 4);
	dt_op_to_host(&t, e);
	return e[i];
}

static void test_ema(void **state)
{
	const float g[4] = { 1, 2, -1, 0.5f };
	float w[4] = { 0.5f, -0.5f, 0.25f, 1 }, want[4], avg[4];
	struct rig r;
	rig_init(&r, "{sgd: {learning_rate: 0.1, use_ema: true, ema_momentum: 0.8, ema_overwrite_frequency: 3}}");
	assert_true(dt_optimizer_has_ema(&r.o));
	assert_string_equal(r.o.slot_names[DT_OPT_EMA_SLOT], "ema");
	for (int i = 0; i < 4; i++)
		want[i] = w[i];
	for (int t = 1; t <= 4; t++) {
		step(&r, w, g);
		for (int i = 0; i < 4; i++) {
			want[i] -= 0.1f * g[i];
			/* the first step's average is the weights themselves */
			avg[i] = t == 1 ? want[i] : 0.8f * avg[i] + (float)(1 - 0.8) * want[i];
			assert_float_equal(ema_of(&r, i), avg[i], 1e-6);
			/* every 3 updates the weights take the average */
			if (t == 3)
				want[i] = avg[i];
			assert_float_equal(w[i], want[i], 1e-6);
		}
	}
	/* the average into the weights, as at the end of fit */
	dt_optimizer_use_ema(&r.o, &r.m);
	{
		struct dt_tensor wt = dt_model_params(&r.m);
		dt_op_to_host(&wt, w);
		for (int i = 0; i < 4; i++)
			assert_float_equal(w[i], avg[i], 0);
	}
	rig_free(&r);
}

static void test_ema_needs_use_ema(void **state)
{
	struct dt_optimizer_config cfg;
	struct dt_doc *d = dt_doc_parse("opt", "optimizer: {adam: {ema_momentum: 0.9}}\n", ".");
	dt_error_set_quiet(1);
	assert_int_equal(dt_optimizer_config_read(&cfg, dt_doc_root(d)), -1);
	assert_string_equal(dt_error_last(), "'ema_momentum' needs 'use_ema: true'");
	dt_error_set_quiet(0);
	dt_doc_free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_global_clipnorm),
		cmocka_unit_test(test_clipvalue),
		cmocka_unit_test(test_ema),
		cmocka_unit_test(test_ema_needs_use_ema),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
