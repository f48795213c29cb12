/*
 * The values of the Keras 3 losses dtrain added for issue 15 (and
 * label_smoothing of the crossentropies) against Keras' formulas computed
 * with NumPy in float64 by tests/ref/make_loss_values.py, which prints the
 * table below. The gradients are checked by test_gradcheck; here the loss
 * itself, on both inputs (probabilities or logits) where it takes both.
 */
#include <math.h>

#include "helpers.h"

#include "core/ops.h"

#define ROWS 2
#define COLS 3

static float P[] = { 0.2f, 0.7f, 0.1f, 0.5f, 0.3f, 0.2f };      /* probabilities */
static float Z[] = { 1.5f, -0.3f, 0.2f, -2.0f, 0.5f, 1.0f };    /* logits */
static float V[] = { 0.3f, -1.2f, 2.5f, 1.0f, 0.0f, -0.4f };    /* values */
static float C[] = { 0.6f, 2.1f, 0.3f, 1.5f, 0.9f, 0.6f };      /* positive rates */
static float T_ONEHOT[] = { 0, 1, 0, 1, 0, 0 };
static float T_BIN[] = { 1, 0, 1, 0, 0, 1 };
static float T_PM[] = { 1, -1, 1, -1, -1, 1 };
static float T_VAL[] = { 0.5f, -1.0f, 0.4f, 1.2f, 0.3f, -0.4f };
static float T_DIST[] = { 0.1f, 0.6f, 0.3f, 0.3f, 0.3f, 0.4f };
static float T_COUNT[] = { 1, 2, 0, 0, 1, 3 };

struct value_case {
	enum dt_loss loss;
	float *pred, *target;
	double expect;                    /* sum over the rows */
	float delta, gamma, alpha, ls;    /* 0: Keras' default (ls: no smoothing) */
	int acb, logits;
};

static const struct value_case cases[] = {
	{ .loss = DT_LOSS_MEAN_ABSOLUTE_ERROR, .pred = V, .target = T_VAL,
	  .expect = 1.0 },
	{ .loss = DT_LOSS_HUBER, .pred = V, .target = T_VAL,
	  .expect = 0.5683333333333334 },
	{ .loss = DT_LOSS_HUBER, .pred = V, .target = T_VAL,
	  .expect = 0.3433333333333334, .delta = 0.5f },
	{ .loss = DT_LOSS_LOG_COSH, .pred = V, .target = T_VAL,
	  .expect = 0.5085606865193117 },
	{ .loss = DT_LOSS_KL_DIVERGENCE, .pred = P, .target = T_DIST,
	  .expect = 0.29178974574226424 },
	{ .loss = DT_LOSS_POISSON, .pred = C, .target = T_COUNT,
	  .expect = 2.221595816082409 },
	{ .loss = DT_LOSS_COSINE_SIMILARITY, .pred = V, .target = T_VAL,
	  .expect = -1.6808557765432124 },
	{ .loss = DT_LOSS_HINGE, .pred = V, .target = T_BIN,
	  .expect = 1.7000000000000002 },
	{ .loss = DT_LOSS_HINGE, .pred = V, .target = T_PM,
	  .expect = 1.7000000000000002 },
	{ .loss = DT_LOSS_SQUARED_HINGE, .pred = V, .target = T_BIN,
	  .expect = 2.483333333333333 },
	{ .loss = DT_LOSS_CATEGORICAL_HINGE, .pred = V, .target = T_ONEHOT,
	  .expect = 4.7 },
	{ .loss = DT_LOSS_BINARY_FOCAL_CROSSENTROPY, .pred = P, .target = T_BIN,
	  .expect = 1.573502889151669 },
	{ .loss = DT_LOSS_BINARY_FOCAL_CROSSENTROPY, .pred = P, .target = T_BIN,
	  .expect = 0.7139370783496806, .gamma = 1.5f, .alpha = 0.4f, .acb = 1, .ls = 0.1f },
	{ .loss = DT_LOSS_BINARY_FOCAL_CROSSENTROPY, .pred = Z, .target = T_BIN,
	  .expect = 0.21006061484825228, .logits = 1 },
	{ .loss = DT_LOSS_BINARY_FOCAL_CROSSENTROPY, .pred = Z, .target = T_BIN,
	  .expect = 0.347640986829105, .gamma = 0.5f, .acb = 1, .logits = 1 },
	{ .loss = DT_LOSS_CATEGORICAL_FOCAL_CROSSENTROPY, .pred = P, .target = T_ONEHOT,
	  .expect = 0.051346885023618054 },
	{ .loss = DT_LOSS_CATEGORICAL_FOCAL_CROSSENTROPY, .pred = P, .target = T_ONEHOT,
	  .expect = 0.22461941133220023, .gamma = 1.5f, .alpha = 0.5f, .ls = 0.1f },
	{ .loss = DT_LOSS_CATEGORICAL_FOCAL_CROSSENTROPY, .pred = Z, .target = T_ONEHOT,
	  .expect = 1.2478585465706862, .logits = 1 },
	{ .loss = DT_LOSS_CATEGORICAL_CROSSENTROPY, .pred = P, .target = T_ONEHOT,
	  .expect = 1.2040151069383718, .ls = 0.1f },
	{ .loss = DT_LOSS_CATEGORICAL_CROSSENTROPY, .pred = Z, .target = T_ONEHOT,
	  .expect = 5.407732408711038, .ls = 0.1f, .logits = 1 },
	{ .loss = DT_LOSS_BINARY_CROSSENTROPY, .pred = P, .target = T_BIN,
	  .expect = 2.4260915055764194, .ls = 0.2f },
	{ .loss = DT_LOSS_BINARY_CROSSENTROPY, .pred = Z, .target = T_BIN,
	  .expect = 1.0727246915247244, .ls = 0.2f, .logits = 1 },
};

static void test_values(void **state)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct value_case *k = &cases[i];
		struct dt_loss_args a = dt_loss_args_default();
		struct dt_tensor p = { k->pred, { 2, { ROWS, COLS } }, DT_CPU };
		struct dt_tensor t = { k->target, { 2, { ROWS, COLS } }, DT_CPU };
		float g[ROWS * COLS];
		struct dt_tensor gt = { g, { 2, { ROWS, COLS } }, DT_CPU };
		double got, with_grad;
		a.delta = k->delta ? k->delta : a.delta;
		a.gamma = k->gamma ? k->gamma : a.gamma;
		a.alpha = k->alpha ? k->alpha : a.alpha;
		a.label_smoothing = k->ls;
		a.apply_class_balancing = k->acb;
		got = dt_op_loss_args(k->loss, &a, k->logits ? DT_LOSS_LOGITS : DT_LOSS_PROBS, &p, &t, NULL, NULL, 1);
		with_grad = dt_op_loss_args(k->loss, &a, k->logits ? DT_LOSS_LOGITS : DT_LOSS_PROBS, &p, &t, NULL, &gt, 1);
		if (fabs(got - k->expect) > 1e-5 * fmax(1, fabs(k->expect)) || got != with_grad)
			fail_msg("case %zu (%s): got %.9g (%.9g with the gradient), Keras' formula %.9g", i,
				 dt_loss_names[k->loss], got, with_grad, k->expect);
	}
}

/* Closed forms, by hand: huber's two branches and the hinge's 0/1 labels becoming -1/1. */
static void test_closed_forms(void **state)
{
	float p[] = { 3.0f, 0.2f }, t[] = { 1.0f, 0.0f }, h[] = { 0.5f, -2.0f }, ht[] = { 0, 1 };
	struct dt_tensor pt = { p, { 2, { 1, 2 } }, DT_CPU }, tt = { t, { 2, { 1, 2 } }, DT_CPU };
	struct dt_tensor hp = { h, { 2, { 1, 2 } }, DT_CPU }, htt = { ht, { 2, { 1, 2 } }, DT_CPU };
	struct dt_loss_args a = dt_loss_args_default();
	/* |3 - 1| = 2 > delta 1: 1 * 2 - 0.5; |0.2| <= 1: 0.5 * 0.04; the mean */
	assert_float_equal(dt_op_loss_args(DT_LOSS_HUBER, &a, DT_LOSS_PROBS, &pt, &tt, NULL, NULL, 1),
			   (1.5 + 0.02) / 2, 1e-6);
	/* labels 0, 1 become -1, 1: max(1 - (-1)(0.5), 0) = 1.5 and max(1 - (1)(-2), 0) = 3; the mean */
	assert_float_equal(dt_op_loss_args(DT_LOSS_HINGE, &a, DT_LOSS_PROBS, &hp, &htt, NULL, NULL, 1),
			   (1.5 + 3.0) / 2, 1e-6);
	/* mean_absolute_error: (2 + 0.2) / 2 */
	assert_float_equal(dt_op_loss_args(DT_LOSS_MEAN_ABSOLUTE_ERROR, &a, DT_LOSS_PROBS, &pt, &tt, NULL, NULL, 1),
			   1.1, 1e-6);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_values),
		cmocka_unit_test(test_closed_forms),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
