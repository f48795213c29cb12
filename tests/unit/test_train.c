/*
 * The trainer's fit.accumulate_steps and fit.class_weight.
 *
 * Accumulation: with batches of 32 and accumulate_steps 2, one update is
 * made from the mean of the two batch means, which for two batches of equal
 * size is the mean over their 64 samples: the same update as one step with a
 * batch of 64 over the same samples (no shuffle), to 1e-6, for SGD without
 * momentum and for Adam, with an L2 penalty in the model.
 *
 * Replicas: a model with dropout trained on 1, 2 and 3 logical CPU replicas
 * (mirrored) ends with the same weights, to 1e-5 relative: a sample's mask
 * does not depend on which replica computes it.
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

#define MAX_REPLICAS 3

struct run {
	struct dt_doc *doc;
	struct dt_source src;
	struct dt_pipeline train;
	struct dt_strategy s;
	struct dt_model m[MAX_REPLICAS];
	struct dt_optimizer o[MAX_REPLICAS];
	struct dt_trainer t;
};

/* What a training run of these tests varies. */
struct fit_args {
	const char *layers;   /* the model's layers, YAML lines */
	const char *optimizer;
	int replicas;         /* 1: one_device; more: mirrored over cpu:0, cpu:1, ... */
	int batch;            /* the global batch */
	int shuffle;
	int epochs;
	int64_t steps;        /* per epoch, 0: all */
	int accumulate;
};

/*
 * Trains on 128 blobs of 4 features; the parameters of replica 0 into w (its
 * nparams floats), the optimizer's iterations into *iterations.
 */
static void fit_with(const struct fit_args *a, float *w, int64_t *iterations)
{
	char yaml[2048], devices[64] = "";
	struct dt_system sys = { .cpu_cores = 1, .mpi_world = 1 };
	struct dt_optimizer_config oc;
	struct run r;
	struct dt_shape in = dt_shape_make(1, (int[]){ 4 });
	struct dt_node *distribute = NULL;
	int n = a->replicas;

	assert_in_range(n, 1, MAX_REPLICAS);
	memset(&r, 0, sizeof(r));
	for (int i = 0; i < n; i++)
		snprintf(devices + strlen(devices), sizeof(devices) - strlen(devices), "%scpu:%d", i ? ", " : "", i);
	snprintf(yaml, sizeof(yaml),
		 "train: {format: synthetic, kind: blobs, samples: 128, classes: 3, features: 4, seed: 3}\n"
		 "distribute: {strategy: mirrored, devices: [%s]}\n"
		 "layers:\n%s"
		 "optimizer: %s\n", devices, a->layers, a->optimizer);
	r.doc = dt_doc_parse("m.yaml", yaml, ".");
	assert_non_null(r.doc);
	struct dt_node *root = dt_doc_root(r.doc);
	if (n > 1)
		distribute = dt_node_get(root, "distribute");
	assert_int_equal(dt_source_open(&r.src, dt_node_get(root, "train"), dt_source_types), 0);
	assert_int_equal(dt_pipeline_init(&r.train, &r.src, 0, 128, a->batch, a->shuffle, 1, 1, 0), 0);
	assert_int_equal(dt_strategy_create(&r.s, distribute, &sys), 0);
	assert_int_equal(r.s.nreplicas, n);
	assert_int_equal(dt_optimizer_config_read(&oc, root), 0);
	for (int i = 0; i < n; i++) {
		assert_int_equal(dt_model_init(&r.m[i], "t", &in, dt_node_get(root, "layers"), dt_layer_types), 0);
		assert_int_equal(dt_objective_init(&r.t.objective, DT_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY, NULL, 0, &r.m[i],
						   &r.train.label, 3, dt_node_get(root, "layers")), 0);
		dt_model_alloc(&r.m[i], r.s.devices[i], (a->batch + n - 1) / n);
		dt_model_init_params(&r.m[i], 5);
		dt_optimizer_init(&r.o[i], &oc, &r.m[i]);
	}
	r.s.type->broadcast(&r.s, r.m, r.o);
	r.t.strategy = &r.s;
	r.t.models = r.m;
	r.t.opts = r.o;
	r.t.train = &r.train;
	r.t.epochs = a->epochs > 0 ? a->epochs : 1;
	r.t.seed = 1;
	r.t.steps_per_epoch = a->steps;
	r.t.accumulate_steps = a->accumulate;
	dt_trainer_init(&r.t);
	assert_int_equal(dt_fit(&r.t), 0);
	memcpy(w, r.m[0].params, (size_t)r.m[0].nparams * sizeof(float));
	*iterations = r.o[0].iterations;
	dt_trainer_release(&r.t);
	for (int i = 0; i < n; i++) {
		dt_optimizer_release(&r.o[i], &r.m[i]);
		dt_model_release(&r.m[i]);
	}
	dt_strategy_release(&r.s);
	dt_pipeline_release(&r.train);
	dt_source_close(&r.src);
	dt_doc_free(r.doc);
}

static const char tanh_l2_layers[] = "  - dense: {units: 8, activation: tanh, kernel_regularizer: {l2: 0.01}}\n"
				     "  - dense: {units: 3, activation: softmax}\n";

/* One epoch of `steps` batches of `batch` on 128 blobs, in order, one replica; params of the result in w. */
static void fit(const char *optimizer, int batch, int64_t steps, int accumulate, float *w, int64_t *iterations)
{
	struct fit_args a = { .layers = tanh_l2_layers, .optimizer = optimizer, .replicas = 1, .batch = batch,
			      .steps = steps, .accumulate = accumulate };
	fit_with(&a, w, iterations);
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

/* Dropout before and after a hidden layer; (4*16 + 16) + (16*3 + 3) parameters. */
static const char dropout_layers[] = "  - dropout: {rate: 0.25}\n"
				     "  - dense: {units: 16, activation: relu}\n"
				     "  - dropout: {rate: 0.5}\n"
				     "  - dense: {units: 3, activation: softmax}\n";
#define DROPOUT_NPARAMS (4 * 16 + 16 + 16 * 3 + 3)

/* The largest |a - b| / max(|a|, |b|, 1e-3) over n parameters. */
static double max_rel_diff(const float *a, const float *b, int n)
{
	double worst = 0;
	for (int i = 0; i < n; i++) {
		double d = fabs((double)a[i] - b[i]), s = fmax(fmax(fabs(a[i]), fabs(b[i])), 1e-3);
		worst = fmax(worst, d / s);
	}
	return worst;
}

/* Two shuffled epochs with dropout on 1, 2 and 3 replicas (batch 30: slices of 15 and of 10): the same weights. */
static void test_dropout_same_for_any_replica_count(void **state)
{
	float one[DROPOUT_NPARAMS], many[DROPOUT_NPARAMS], no_dropout[DROPOUT_NPARAMS];
	int64_t it1, itn;
	struct fit_args a = { .layers = dropout_layers, .optimizer = "{sgd: {learning_rate: 0.5, momentum: 0.5}}",
			      .replicas = 1, .batch = 30, .shuffle = 1, .epochs = 2 };
	fit_with(&a, one, &it1);
	assert_int_equal(it1, 10); /* 128 / 30: 5 steps per epoch, the last one of 8 */
	for (a.replicas = 2; a.replicas <= 3; a.replicas++) {
		fit_with(&a, many, &itn);
		assert_int_equal(itn, it1);
		double d = max_rel_diff(one, many, DROPOUT_NPARAMS);
		if (d > 1e-5)
			fail_msg("%d replicas: relative difference %.3g from one replica", a.replicas, d);
	}
	/* The masks matter: without dropout the weights are elsewhere (the comparison can fail). */
	a.replicas = 1;
	a.layers = "  - dense: {units: 16, activation: relu}\n  - dense: {units: 3, activation: softmax}\n";
	fit_with(&a, no_dropout, &it1);
	assert_true(max_rel_diff(one, no_dropout, DROPOUT_NPARAMS) > 1e-2);
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

static void test_sample_weight_loss(void **state)
{
	/* 3 samples, 2 classes: per-row weights times the class weights, as Keras multiplies them. */
	float p[6] = { 0.8f, 0.2f, 0.3f, 0.7f, 0.4f, 0.6f }, t[3] = { 0, 1, 0 };
	float cw[2] = { 1.0f, 4.0f }, sw[3] = { 2.0f, 0.5f, 0.0f }, g[6], gs[6];
	struct dt_shape s2 = dt_shape_make(2, (int[]){ 3, 2 }), s1 = dt_shape_make(2, (int[]){ 3, 1 });
	struct dt_shape sk = dt_shape_make(1, (int[]){ 2 }), sn = dt_shape_make(1, (int[]){ 3 });
	struct dt_tensor P = { p, s2, DT_CPU }, T = { t, s1, DT_CPU }, CW = { cw, sk, DT_CPU }, SW = { sw, sn, DT_CPU };
	struct dt_tensor G = { g, s2, DT_CPU }, GS = { gs, s2, DT_CPU };
	struct dt_objective o = { .loss = DT_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY, .input = DT_LOSS_PROBS,
				  .args = dt_loss_args_default() };
	double l;

	/* The sum of w_i * l_i (the trainer divides by the batch size: Keras' sum_over_batch_size). */
	l = dt_objective_loss_weighted(&o, &P, &T, NULL, &SW, &GS, 0.5f);
	assert_float_equal(l, -(2.0 * log(0.8) + 0.5 * log(0.7)), 1e-5);
	dt_objective_loss(&o, &P, &T, &G, 0.5f);
	for (int r = 0; r < 3; r++)
		for (int j = 0; j < 2; j++)
			assert_float_equal(gs[r * 2 + j], g[r * 2 + j] * sw[r], 1e-6);
	/* With class weights: the product (row 1 is class 1, weight 4 * 0.5). */
	l = dt_objective_loss_weighted(&o, &P, &T, &CW, &SW, &GS, 1);
	assert_float_equal(l, -(2.0 * log(0.8) + 2.0 * log(0.7)), 1e-5);
	assert_float_equal(gs[3], -2.0 / 0.7, 1e-5);
	assert_float_equal(gs[4], 0, 0);
	/* Weights of 1 give the plain loss, bit for bit. */
	float ones[3] = { 1, 1, 1 };
	struct dt_tensor ONE = { ones, sn, DT_CPU };
	assert_true(dt_objective_loss_weighted(&o, &P, &T, NULL, &ONE, NULL, 1) == dt_objective_loss(&o, &P, &T, NULL, 1));
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
		cmocka_unit_test(test_dropout_same_for_any_replica_count),
		cmocka_unit_test(test_class_weight_loss),
		cmocka_unit_test(test_sample_weight_loss),
		cmocka_unit_test(test_class_weight_read),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
