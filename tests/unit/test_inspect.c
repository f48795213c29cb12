/*
 * core/fit/inspect.c: the statistics of a tensor (finite values only for
 * mean, std, min and max; zeros; non-finite count; the norm over all) and
 * the warnings dt_inspect_warn reads from the numbers.
 */
#include <math.h>

#include "helpers.h"
#include "core/fit/inspect.h"
#include "layers/layers.h"

static void test_stats_finite(void **state)
{
	const float x[] = { 0, 1, 2, 3, 0, -2 };
	struct dt_stats s;
	dt_stats_compute(x, 6, &s);
	assert_int_equal(s.count, 6);
	assert_int_equal(s.zeros, 2);
	assert_int_equal(s.nonfinite, 0);
	assert_float_equal(s.mean, 4.0 / 6, 1e-12);
	assert_float_equal(s.min, -2, 0);
	assert_float_equal(s.max, 3, 0);
	assert_float_equal(s.norm, sqrt(18.0), 1e-12);
	assert_float_equal(s.std, sqrt((18.0 / 6) - (4.0 / 6) * (4.0 / 6)), 1e-12);
}

static void test_stats_nonfinite(void **state)
{
	const float x[] = { NAN, 1, INFINITY, 3 };
	struct dt_stats s;
	dt_stats_compute(x, 4, &s);
	assert_int_equal(s.nonfinite, 2);
	assert_float_equal(s.mean, 2, 0);
	assert_float_equal(s.min, 1, 0);
	assert_float_equal(s.max, 3, 0);
	assert_true(isnan(s.norm));
	/* Nothing finite: zeros, and the count says why. */
	dt_stats_compute(x, 1, &s);
	assert_int_equal(s.nonfinite, 1);
	assert_float_equal(s.mean, 0, 0);
	dt_stats_compute(x, 0, &s);
	assert_int_equal(s.count, 0);
}

/* A model dense(4, relu) -> dense(3) on 2 features, and an inspect record of one replica for it. */
struct fixture {
	struct dt_doc *doc;
	struct dt_model m;
	struct dt_inspect o;
	struct dt_stats layers[2];
	struct dt_inspect_param params[4];
	struct dt_inspect_replica rep;
};

static void fixture_init(struct fixture *f)
{
	struct dt_shape in = dt_shape_make(1, (int[]){ 2 });
	memset(f, 0, sizeof(*f));
	f->doc = dt_doc_parse("t.yaml", "layers: [{dense: {units: 4, activation: relu}}, {dense: {units: 3}}]", ".");
	assert_non_null(f->doc);
	assert_int_equal(dt_model_init(&f->m, "t", &in, dt_node_get(dt_doc_root(f->doc), "layers"), dt_layer_types), 0);
	for (int p = 0; p < 4; p++) {
		f->params[p] = (struct dt_inspect_param){ .layer = p / 2, .index = p % 2, .update_norm = NAN };
		f->params[p].value = (struct dt_stats){ .count = 4, .norm = 1 };
		f->params[p].grad = (struct dt_stats){ .count = 4, .norm = 0.1 };
	}
	for (int i = 0; i < 2; i++)
		f->layers[i] = (struct dt_stats){ .count = 8, .zeros = 2, .mean = 0.3, .std = 0.5, .max = 1 };
	f->rep = (struct dt_inspect_replica){ .end = 2, .input = { .count = 4, .std = 1, .max = 1 },
					      .layers = f->layers, .params = f->params };
	f->o = (struct dt_inspect){ .nlayers = 2, .nparams = 4, .nreplicas = 1, .rows = 2, .loss = 1.0,
				    .classes = 3, .uniform_loss = log(3.0), .replicas = &f->rep };
}

static void fixture_release(struct fixture *f)
{
	dt_model_release(&f->m);
	dt_doc_free(f->doc);
}

/* 1 when some warning of o holds `text`. */
static int warned(const struct dt_inspect *o, const char *text)
{
	for (int i = 0; i < o->nwarnings; i++)
		if (strstr(o->warnings[i], text))
			return 1;
	return 0;
}

static void test_warn_none_on_sound_numbers(void **state)
{
	struct fixture f;
	fixture_init(&f);
	dt_inspect_warn(&f.o, &f.m);
	for (int i = 0; i < f.o.nwarnings; i++)
		print_message("%s\n", f.o.warnings[i]);
	assert_int_equal(f.o.nwarnings, 0);
	fixture_release(&f);
}

static void test_warn_each_kind(void **state)
{
	struct fixture f;
	fixture_init(&f);
	f.rep.input.mean = 120;
	f.layers[0].zeros = 8;     /* all zero: dead ReLUs */
	f.layers[1].nonfinite = 3; /* first non-finite values */
	f.params[0].grad.norm = 1e-6;
	f.params[1].grad.norm = 0; /* layer 'dense': 1e-6 against dense_1's 0.14: vanishing */
	f.o.loss = 3.0;            /* > 2 ln 3 */
	dt_inspect_warn(&f.o, &f.m);
	assert_true(warned(&f.o, "the input is not normalized: mean 120"));
	assert_true(warned(&f.o, "every output of layer 'dense' (dense) is zero for this batch: its ReLUs are dead"));
	assert_true(warned(&f.o, "layer 'dense_1' (dense) produced the first non-finite values: 3 of its 8"));
	assert_true(warned(&f.o, "vanishing gradients: the gradient norm falls from 0.141 at layer 'dense_1' to 1e-06 at 'dense'"));
	assert_true(warned(&f.o, "the loss 3 is over 2 times 1.099"));
	fixture_release(&f);

	fixture_init(&f);
	f.params[0].grad.norm = 1e3; /* exploding toward the input */
	f.o.stepped = 1;
	f.params[2].update_norm = 0.5; /* ratio 0.5 > 0.1 */
	f.params[3].update_norm = 1e-9;
	f.params[0].update_norm = f.params[1].update_norm = 1e-3;
	f.o.differing = 1;
	f.o.nreplicas = 1;
	dt_inspect_warn(&f.o, &f.m);
	assert_true(warned(&f.o, "exploding gradients: the gradient norm grows from 0.141 at layer 'dense_1' to 1e+03 at 'dense'"));
	assert_true(warned(&f.o, "the step changed 'dense_1/kernel' by 0.5 of its norm"));
	assert_true(warned(&f.o, "the step changed 'dense_1/bias' by 1e-09 of its norm"));
	assert_false(warned(&f.o, "'dense/kernel' by"));
	assert_true(warned(&f.o, "after the step 1 of the 1 replicas hold weights other than the chief's"));
	fixture_release(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stats_finite),
		cmocka_unit_test(test_stats_nonfinite),
		cmocka_unit_test(test_warn_none_on_sound_numbers),
		cmocka_unit_test(test_warn_each_kind),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
