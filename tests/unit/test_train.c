/*
 * The trainer's fit.accumulate_steps and fit.class_weight.
 *
 * Accumulation: with batches of 32 and accumulate_steps 2, one update is
 * made from the mean of the two batch means, which for two batches of equal
 * size is the mean over their 64 samples: the same update as one step with a
 * batch of 64 over the same samples (no shuffle), to 1e-6, for SGD without
 * momentum and for Adam, with an L2 penalty in the model.
 *
 * Class weights: the loss op against sums written out by hand (weighted
 * per-sample losses summed, not divided by the weights, as Keras 3's
 * sum_over_batch_size), and their gradients.
 */
#include <math.h>

#include "helpers.h"

#include "core/model/loss.h"
#include "core/model/optimizer.h"
#include "core/fit/train.h"
#include "data/sources.h"
#include "layers/layers.h"
#include "strategies/strategies.h"

struct run {
	struct dt_doc *doc;
	struct dt_source src;
	struct dt_pipeline train;
	struct dt_strategy s;
	struct dt_model m;
	struct dt_optimizer o;
	struct dt_trainer t;
};

/* One epoch of `steps` batches of `batch` on 128 blobs, in order; params of the result in w. */
static void fit(const char *optimizer, int batch, int64_t steps, int accumulate, float *w, int64_t *iterations)
{
	char yaml[1024];
	struct dt_system sys = { .cpu_cores = 1, .mpi_world = 1 };
	struct dt_optimizer_config oc;
	struct run r;
	struct dt_shape in = dt_shape_make(1, (int[]){ 4 });

	memset(&r, 0, sizeof(r));
	snprintf(yaml, sizeof(yaml),
		 "train: {format: synthetic, kind: blobs, samples: 128, classes: 3, features: 4, seed: 3}\n"
		 "layers:\n"
		 "  - dense: {units: 8, activation: tanh, kernel_regularizer: {l2: 0.01}}\n"
		 "  - dense: {units: 3, activation: softmax}\n"
		 "optimizer: %s\n", optimizer);
	r.doc = dt_doc_parse("m.yaml", yaml, ".");
	assert_non_null(r.doc);
	struct dt_node *root = dt_doc_root(r.doc);
	assert_int_equal(dt_source_open(&r.src, dt_node_get(root, "train"), dt_source_types), 0);
	assert_int_equal(dt_pipeline_init(&r.train, &r.src, 0, 128, batch, 0, 1, 1, 0), 0);
	assert_int_equal(dt_strategy_create(&r.s, NULL, &sys), 0);
	assert_int_equal(dt_model_init(&r.m, "t", &in, dt_node_get(root, "layers"), dt_layer_types), 0);
	assert_int_equal(dt_objective_init(&r.t.objective, DT_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY, 0, &r.m,
					   &r.train.label, 3, dt_node_get(root, "layers")), 0);
	dt_model_alloc(&r.m, r.s.devices[0], batch);
	dt_model_init_params(&r.m, 5);
	assert_int_equal(dt_optimizer_config_read(&oc, root), 0);
	dt_optimizer_init(&r.o, &oc, &r.m);
	r.t.strategy = &r.s;
	r.t.models = &r.m;
	r.t.opts = &r.o;
	r.t.train = &r.train;
	r.t.epochs = 1;
	r.t.seed = 1;
	r.t.steps_per_epoch = steps;
	r.t.accumulate_steps = accumulate;
	dt_trainer_init(&r.t);
	assert_int_equal(dt_fit(&r.t), 0);
	memcpy(w, r.m.params, (size_t)r.m.nparams * sizeof(float));
	*iterations = r.o.iterations;
	dt_trainer_release(&r.t);
	dt_optimizer_release(&r.o, &r.m);
	dt_model_release(&r.m);
	dt_strategy_release(&r.s);
	dt_pipeline_release(&r.train);
	dt_source_close(&r.src);
	dt_doc_free(r.doc);
}

#define NPARAMS (4 * 8 + 8 + 8 * 3 + 3)

static void assert_same(const float *a, const float *b, double tol)
{
	for (int i = 0; i < NPARAMS; i++)
		if (fabs(a[i] - b[i]) > tol)
			fail_msg("parameter %d: %.9g vs %.9g", i, a[i], b[i]);
}

static void test_accumulate_equals_big_batch(void **state)
{
	static const char *const optimizers[] = { "{sgd: {learning_rate: 0.5}}", "{adam: {learning_rate: 0.01}}" };
	float a[NPARAMS], b[NPARAMS], c[NPARAMS], none[NPARAMS];
	int64_t ia, ib, ic, in;
	for (int k = 0; k < 2; k++) {
		fit(optimizers[k], 32, 2, 2, a, &ia); /* batches 0..31 and 32..63, one update */
		fit(optimizers[k], 64, 1, 1, b, &ib); /* samples 0..63, one update */
		assert_int_equal(ia, 1);
		assert_int_equal(ib, 1);
		assert_same(a, b, 1e-6);
		/* Two updates without accumulation differ: the test can fail. */
		fit(optimizers[k], 32, 2, 1, none, &in);
		assert_int_equal(in, 2);
		double diff = 0;
		for (int i = 0; i < NPARAMS; i++)
			diff = fmax(diff, fabs(none[i] - b[i]));
		assert_true(diff > 1e-4);
		/* An epoch shorter than k: its group is the 2 batches it has, the mean of their 2 means. */
		fit(optimizers[k], 32, 2, 4, c, &ic);
		assert_int_equal(ic, 1);
		assert_same(c, b, 1e-6);
	}
	/* 4 batches with k 3: a group of 3 and a group of 1, two updates. */
	fit(optimizers[0], 16, 4, 3, a, &ia);
	assert_int_equal(ia, 2);
}

static void test_ends_update(void **state)
{
	struct dt_trainer t = { .accumulate_steps = 3 };
	int ends[7];
	for (int i = 0; i < 7; i++)
		ends[i] = dt_trainer_ends_update(&t, i, 7);
	assert_memory_equal(ends, ((int[]){ 0, 0, 1, 0, 0, 1, 1 }), sizeof(ends));
	t.accumulate_steps = 1;
	for (int i = 0; i < 7; i++)
		assert_true(dt_trainer_ends_update(&t, i, 7));
}

static void test_class_weight_loss(void **state)
{
	/* 4 samples, 3 classes, probabilities; weights for classes 0..2. */
	float p[12] = { 0.7f, 0.2f, 0.1f, 0.1f, 0.6f, 0.3f, 0.2f, 0.2f, 0.6f, 0.5f, 0.25f, 0.25f };
	float sparse[4] = { 0, 1, 2, 1 };
	float onehot[12] = { 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 0 };
	float cw[3] = { 1.0f, 2.5f, 0.5f };
	float g[12], gw[12];
	struct dt_shape s3 = dt_shape_make(2, (int[]){ 4, 3 }), s1 = dt_shape_make(2, (int[]){ 4, 1 });
	struct dt_shape sk = dt_shape_make(1, (int[]){ 3 });
	struct dt_tensor P = { p, s3, DT_CPU }, T = { sparse, s1, DT_CPU }, H = { onehot, s3, DT_CPU };
	struct dt_tensor W = { cw, sk, DT_CPU }, G = { g, s3, DT_CPU }, GW = { gw, s3, DT_CPU };
	double want = -(1.0 * log(0.7) + 2.5 * log(0.6) + 0.5 * log(0.6) + 2.5 * log(0.25));
	double l;

	l = dt_op_loss_weighted(DT_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY, DT_LOSS_PROBS, &P, &T, &W, &GW, 0.25f);
	assert_float_equal(l, want, 1e-5);
	dt_op_loss(DT_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY, DT_LOSS_PROBS, &P, &T, &G, 0.25f);
	for (int r = 0; r < 4; r++)
		for (int j = 0; j < 3; j++)
			assert_float_equal(gw[r * 3 + j], g[r * 3 + j] * cw[(int)sparse[r]], 1e-6);
	/* By hand: d/dp of -w log p at the target is -w/p, times 1/batch. */
	assert_float_equal(gw[4], -0.25 * 2.5 / 0.6, 1e-6);
	assert_float_equal(gw[11], 0, 0);
	/* One-hot targets take the argmax's weight. */
	l = dt_op_loss_weighted(DT_LOSS_CATEGORICAL_CROSSENTROPY, DT_LOSS_FUSED, &P, &H, &W, &GW, 1);
	assert_float_equal(l, want, 1e-5);
	assert_float_equal(gw[3 * 3 + 1], 2.5 * (0.25 - 1), 1e-6);
	/* NULL weights: the plain loss. */
	l = dt_op_loss_weighted(DT_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY, DT_LOSS_PROBS, &P, &T, NULL, NULL, 1);
	assert_float_equal(l, -(log(0.7) + log(0.6) + log(0.6) + log(0.25)), 1e-5);

	/* A single output: the class is the rounded target; binary crossentropy with weights 0.2 and 3. */
	float bp[3] = { 0.9f, 0.2f, 0.4f }, bt[3] = { 1, 0, 1 }, bw[2] = { 0.2f, 3 }, bg[3];
	struct dt_shape b1 = dt_shape_make(2, (int[]){ 3, 1 }), b2 = dt_shape_make(1, (int[]){ 2 });
	struct dt_tensor BP = { bp, b1, DT_CPU }, BT = { bt, b1, DT_CPU }, BW = { bw, b2, DT_CPU }, BG = { bg, b1, DT_CPU };
	l = dt_op_loss_weighted(DT_LOSS_BINARY_CROSSENTROPY, DT_LOSS_FUSED, &BP, &BT, &BW, &BG, 1);
	assert_float_equal(l, -(3 * log(0.9) + 0.2 * log(0.8) + 3 * log(0.4)), 1e-5);
	assert_float_equal(bg[1], 0.2 * 0.2, 1e-6);
	assert_float_equal(bg[2], 3 * (0.4 - 1), 1e-6);
}

static void test_class_weight_read(void **state)
{
	struct dt_doc *d = dt_doc_parse("m.yaml", "a: {0: 1.5, 3: 2.5}\nb: {4: 1}\nc: {1: -1}\nd: {x: 1}\n", ".");
	float w[4];
	assert_non_null(d);
	struct dt_node *root = dt_doc_root(d);
	assert_int_equal(dt_class_weight_read(dt_node_get(root, "a"), 4, w), 0);
	assert_float_equal(w[0], 1.5, 0);
	assert_float_equal(w[1], 1, 0);
	assert_float_equal(w[2], 1, 0);
	assert_float_equal(w[3], 2.5, 0);
	dt_error_set_quiet(1);
	assert_int_equal(dt_class_weight_read(dt_node_get(root, "b"), 4, w), -1);
	assert_error_contains("class 4 is not one of the model's 4 classes");
	assert_string_equal(dt_cfg_last_where(), "m.yaml:2:5");
	assert_int_equal(dt_class_weight_read(dt_node_get(root, "c"), 4, w), -1);
	assert_int_equal(dt_class_weight_read(dt_node_get(root, "d"), 4, w), -1);
	dt_error_set_quiet(0);
	dt_doc_free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_accumulate_equals_big_batch),
		cmocka_unit_test(test_ends_update),
		cmocka_unit_test(test_class_weight_loss),
		cmocka_unit_test(test_class_weight_read),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
