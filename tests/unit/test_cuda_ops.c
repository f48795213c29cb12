/*
 * The CUDA backend against the CPU backend: every op of core/backend.h on
 * the same random inputs on both devices, compared within float32 tolerance
 * (bf16 looser). Where there is no GPU (or no CUDA build), each GPU test
 * prints why and is skipped; the loader tests run everywhere.
 */
#include <math.h>

#include "helpers.h"

#include "core/cuda/cuda.h"
#include "core/ops.h"
#include "core/rng.h"

#define TOL 2e-4

static const struct dt_device GPU = { DT_DEVICE_CUDA, 0 };

/* Skips the calling test, with the reason on a TAP comment line, where no GPU can be used. */
static void need_gpu(void)
{
	char why[512];
	if (dt_cuda_check_device(0, why, sizeof(why)) < 0) {
		printf("# skip: no GPU to test the CUDA backend on: %s\n", why);
		fflush(stdout);
		skip();
	}
}

static float *rnd(int64_t n, uint64_t seed, float lo, float hi)
{
	struct dt_rng r;
	float *x = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
	dt_rng_seed(&r, seed, 11);
	for (int64_t i = 0; i < n; i++)
		x[i] = (float)(lo + (hi - lo) * dt_rng_uniform(&r));
	return x;
}

/* A tensor pair: the same values on the CPU (c) and the GPU (g). */
struct pair {
	struct dt_tensor c, g;
	float *host; /* the GPU's values after pull() */
};

static struct pair pair_new(struct dt_shape s, const float *init)
{
	struct pair p;
	int64_t n = dt_shape_count(&s);
	p.c = (struct dt_tensor){ dt_device_alloc(DT_CPU, n), s, DT_CPU };
	p.g = (struct dt_tensor){ dt_device_alloc(GPU, n), s, GPU };
	p.host = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
	if (init) {
		memcpy(p.c.data, init, (size_t)n * sizeof(float));
		dt_op_from_host(&p.g, init);
	}
	return p;
}

static struct pair pair_rnd(struct dt_shape s, uint64_t seed, float lo, float hi)
{
	float *x = rnd(dt_shape_count(&s), seed, lo, hi);
	struct pair p = pair_new(s, x);
	free(x);
	return p;
}

static void pair_free(struct pair *p)
{
	dt_device_free(DT_CPU, p->c.data);
	dt_device_free(GPU, p->g.data);
	free(p->host);
}

static struct dt_shape sh(int ndim, int d0, int d1, int d2, int d3)
{
	int d[4] = { d0, d1, d2, d3 };
	return dt_shape_make(ndim, d);
}

/*
 * The GPU's values ~ the CPU's: |g - c| <= tol * (|c| + mean |c|), relative
 * where values are large, against the tensor's scale where a sum cancels.
 */
static void expect_close(const char *what, struct pair *p, double tol)
{
	int64_t n = dt_tensor_count(&p->c);
	double scale = 0;
	dt_op_to_host(&p->g, p->host);
	for (int64_t i = 0; i < n; i++)
		scale += fabs(p->c.data[i]);
	scale = n ? scale / n : 0;
	for (int64_t i = 0; i < n; i++) {
		double c = p->c.data[i], g = p->host[i];
		if (!(fabs(g - c) <= tol * (fabs(c) + scale) + 1e-30) && !(c == g))
			fail_msg("%s: element %lld: gpu %.9g, cpu %.9g", what, (long long)i, g, c);
	}
}

static void expect_equal(const char *what, struct pair *p)
{
	int64_t n = dt_tensor_count(&p->c);
	dt_op_to_host(&p->g, p->host);
	for (int64_t i = 0; i < n; i++)
		if (p->host[i] != p->c.data[i])
			fail_msg("%s: element %lld: gpu %.9g, cpu %.9g", what, (long long)i, p->host[i], p->c.data[i]);
}

static void expect_scalar(const char *what, double g, double c, double tol)
{
	if (!(fabs(g - c) <= tol * (fabs(c) + 1e-6)))
		fail_msg("%s: gpu %.12g, cpu %.12g", what, g, c);
}

/* ---- the loader: runs everywhere ---- */

static void test_loader_reports_consistently(void **state)
{
	char why[512];
	int n = dt_cuda_device_count();
	assert_true(n >= 0);
	if (!dt_cuda_built())
		assert_int_equal(n, 0);
	if (n == 0) {
		/* gpu:0 is refused with a reason, never a crash. */
		assert_int_equal(dt_cuda_check_device(0, why, sizeof(why)), -1);
		assert_true(strlen(why) > 10);
	} else {
		assert_int_equal(dt_cuda_check_device(0, why, sizeof(why)), 0);
		assert_int_equal(dt_cuda_check_device(n, why, sizeof(why)), -1);
		assert_non_null(strstr(why, "there is no gpu:"));
	}
	assert_int_equal(dt_cuda_check_device(-1, why, sizeof(why)), -1);
}

static void test_precision_needs_gpu(void **state)
{
	char why[512] = "";
	assert_int_equal(dt_set_precision(DT_PRECISION_FP32, why, sizeof(why)), 0);
	if (dt_cuda_device_count() == 0) {
		assert_int_equal(dt_set_precision(DT_PRECISION_TF32, why, sizeof(why)), -1);
		assert_non_null(strstr(why, "precision 'tf32' needs a GPU"));
	}
}

static void test_host_buffers(void **state)
{
	float *p = dt_host_alloc_pinned(1000), *q = dt_host_alloc_pinned(0);
	assert_true(((uintptr_t)p & 63) == 0);
	for (int i = 0; i < 1000; i++)
		assert_float_equal(p[i], 0, 0);
	p[999] = 1;
	dt_host_free_pinned(p);
	dt_host_free_pinned(q);
	dt_host_free_pinned(NULL);
}

/* ---- elementwise ---- */

static void test_elementwise(void **state)
{
	need_gpu();
	struct dt_shape s = sh(2, 37, 101, 0, 0);
	struct pair a = pair_rnd(s, 1, -2, 2), b = pair_rnd(s, 2, -2, 2), c = pair_new(s, NULL);
	dt_op_mul(&a.c, &b.c, &c.c);
	dt_op_mul(&a.g, &b.g, &c.g);
	expect_equal("mul", &c);
	dt_op_mul(&c.c, &b.c, &c.c); /* aliasing */
	dt_op_mul(&c.g, &b.g, &c.g);
	expect_equal("mul in place", &c);
	dt_op_axpy(-0.75f, &a.c, &b.c);
	dt_op_axpy(-0.75f, &a.g, &b.g);
	expect_close("axpy", &b, 1e-6);
	dt_op_scale(&b.c, 3.5f);
	dt_op_scale(&b.g, 3.5f);
	expect_close("scale", &b, 1e-6);
	expect_scalar("sum_squares", dt_op_sum_squares(&b.g), dt_op_sum_squares(&b.c), 1e-9);
	dt_op_copy(&a.c, &c.c);
	dt_op_copy(&a.g, &c.g);
	expect_equal("copy", &c);
	dt_op_fill(&c.c, 0.25f);
	dt_op_fill(&c.g, 0.25f);
	expect_equal("fill", &c);
	pair_free(&a);
	pair_free(&b);
	pair_free(&c);
}

/* ---- gemm ---- */

static void gemm_case(int M, int K, int N, double tol)
{
	for (int ta = 0; ta < 2; ta++)
		for (int tb = 0; tb < 2; tb++) {
			struct pair a = pair_rnd(ta ? sh(2, K, M, 0, 0) : sh(2, M, K, 0, 0), 10 + ta, -1, 1);
			struct pair b = pair_rnd(tb ? sh(2, N, K, 0, 0) : sh(2, K, N, 0, 0), 20 + tb, -1, 1);
			struct pair c = pair_rnd(sh(2, M, N, 0, 0), 30, -1, 1);
			char what[64];
			dt_op_gemm(ta, tb, 1.5f, &a.c, &b.c, 0.5f, &c.c);
			dt_op_gemm(ta, tb, 1.5f, &a.g, &b.g, 0.5f, &c.g);
			snprintf(what, sizeof(what), "gemm %dx%dx%d ta=%d tb=%d", M, K, N, ta, tb);
			expect_close(what, &c, tol);
			pair_free(&a);
			pair_free(&b);
			pair_free(&c);
		}
}

static void test_gemm(void **state)
{
	need_gpu();
	gemm_case(7, 5, 3, TOL);
	gemm_case(128, 784, 512, TOL);
	gemm_case(33, 1, 65, TOL);
}

static void test_gemm_reduced_precision(void **state)
{
	char why[256];
	need_gpu();
	assert_int_equal(dt_set_precision(DT_PRECISION_TF32, why, sizeof(why)), 0);
	gemm_case(64, 300, 48, 3e-3);
	if (dt_set_precision(DT_PRECISION_BF16, why, sizeof(why)) == 0)
		gemm_case(64, 300, 48, 3e-2);
	else
		printf("# bf16 not tested: %s\n", why);
	assert_int_equal(dt_set_precision(DT_PRECISION_FP32, why, sizeof(why)), 0);
}

static void test_bias(void **state)
{
	need_gpu();
	/* Many rows: the column reduction's chunks. */
	struct pair y = pair_rnd(sh(2, 5000, 37, 0, 0), 3, -1, 1), b = pair_rnd(sh(1, 37, 0, 0, 0), 4, -1, 1);
	dt_op_bias_add(&y.c, &b.c);
	dt_op_bias_add(&y.g, &b.g);
	expect_close("bias_add", &y, 1e-6);
	dt_op_bias_grad(&y.c, 0, &b.c);
	dt_op_bias_grad(&y.g, 0, &b.g);
	expect_close("bias_grad", &b, TOL);
	dt_op_bias_grad(&y.c, 0.5f, &b.c);
	dt_op_bias_grad(&y.g, 0.5f, &b.g);
	expect_close("bias_grad beta 0.5", &b, TOL);
	pair_free(&y);
	pair_free(&b);
}

/* ---- activations ---- */

static void test_activations(void **state)
{
	need_gpu();
	for (int act = 0; act < DT_ACT_COUNT; act++) {
		struct dt_shape s = sh(2, 64, act == DT_ACT_SOFTMAX ? 70 : 33, 0, 0);
		struct pair x = pair_rnd(s, 40 + act, -4, 4), y = pair_new(s, NULL), dy = pair_rnd(s, 60, -1, 1);
		struct pair dx = pair_new(s, NULL);
		char what[64];
		dt_op_act_forward((enum dt_activation)act, &x.c, &y.c);
		dt_op_act_forward((enum dt_activation)act, &x.g, &y.g);
		snprintf(what, sizeof(what), "%s forward", dt_activation_names[act]);
		expect_close(what, &y, 1e-5);
		/* Backward from the CPU's y on both sides: only the backward is compared. */
		dt_op_from_host(&y.g, y.c.data);
		dt_op_act_backward((enum dt_activation)act, &x.c, &y.c, &dy.c, &dx.c);
		dt_op_act_backward((enum dt_activation)act, &x.g, &y.g, &dy.g, &dx.g);
		snprintf(what, sizeof(what), "%s backward", dt_activation_names[act]);
		expect_close(what, &dx, 1e-5);
		pair_free(&x);
		pair_free(&y);
		pair_free(&dy);
		pair_free(&dx);
	}
}

static void test_dropout_same_mask(void **state)
{
	need_gpu();
	struct dt_shape s = sh(2, 100, 333, 0, 0);
	struct pair x = pair_rnd(s, 5, -1, 1), y = pair_new(s, NULL), m = pair_new(s, NULL);
	dt_op_dropout(&x.c, &y.c, &m.c, 0.3f, 0x1234567890abcdefull, 777);
	dt_op_dropout(&x.g, &y.g, &m.g, 0.3f, 0x1234567890abcdefull, 777);
	expect_equal("dropout mask", &m);
	expect_equal("dropout output", &y);
	/* without the mask kept (the layer's backward draws it again): the same y */
	dt_op_dropout(&x.g, &y.g, NULL, 0.3f, 0x1234567890abcdefull, 777);
	expect_equal("dropout output, no mask kept", &y);
	pair_free(&x);
	pair_free(&y);
	pair_free(&m);
}

/* ---- losses and metrics ---- */

static void test_losses(void **state)
{
	enum { N = 300, C = 12 };
	need_gpu();
	for (int loss = 0; loss < DT_LOSS_COUNT; loss++)
		for (int input = 0; input < 3; input++) {
			int sparse = loss == DT_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY;
			struct dt_shape ps = sh(2, N, C, 0, 0), ts = sh(2, N, sparse ? 1 : C, 0, 0);
			struct pair pred = pair_rnd(ps, 70 + input, input == DT_LOSS_LOGITS ? -5.0f : 0.0f, 1),
				    target = pair_new(ts, NULL), dpred = pair_new(ps, NULL);
			float *t = malloc(sizeof(float) * N * C);
			struct dt_rng r;
			char what[96];
			double lc, lg;
			/* logits for the crossentropies only; fused for the three that fuse */
			int xent = loss <= DT_LOSS_BINARY_CROSSENTROPY || loss == DT_LOSS_BINARY_FOCAL_CROSSENTROPY ||
				   loss == DT_LOSS_CATEGORICAL_FOCAL_CROSSENTROPY;
			if ((!xent && input != DT_LOSS_PROBS) ||
			    (input == DT_LOSS_FUSED && loss > DT_LOSS_BINARY_CROSSENTROPY)) {
				free(t);
				pair_free(&pred);
				pair_free(&target);
				pair_free(&dpred);
				continue;
			}
			dt_rng_seed(&r, 80 + loss, 0);
			for (int i = 0; i < N; i++)
				for (int j = 0; j < (sparse ? 1 : C); j++)
					t[i * (sparse ? 1 : C) + j] =
						sparse ? (float)dt_rng_below(&r, C)
						       : loss == DT_LOSS_CATEGORICAL_CROSSENTROPY ? (float)(j == i % C)
						       : (float)dt_rng_uniform(&r);
			memcpy(target.c.data, t, sizeof(float) * dt_shape_count(&ts));
			dt_op_from_host(&target.g, t);
			lc = dt_op_loss((enum dt_loss)loss, (enum dt_loss_input)input, &pred.c, &target.c, &dpred.c, 0.01f);
			lg = dt_op_loss((enum dt_loss)loss, (enum dt_loss_input)input, &pred.g, &target.g, &dpred.g, 0.01f);
			snprintf(what, sizeof(what), "%s input %d", dt_loss_names[loss], input);
			expect_scalar(what, lg, lc, 1e-5);
			expect_close(what, &dpred, 1e-5);
			/* Without a gradient: the same sum. */
			expect_scalar(what, dt_op_loss((enum dt_loss)loss, (enum dt_loss_input)input, &pred.g, &target.g,
						      NULL, 1), lc, 1e-5);
			/* With class weights (C - 2 of them: the last classes weigh 1). */
			{
				struct pair cw = pair_rnd(sh(1, C - 2, 0, 0, 0), 95, 0.5f, 2);
				lc = dt_op_loss_weighted((enum dt_loss)loss, (enum dt_loss_input)input, &pred.c, &target.c,
							 &cw.c, &dpred.c, 0.01f);
				lg = dt_op_loss_weighted((enum dt_loss)loss, (enum dt_loss_input)input, &pred.g, &target.g,
							 &cw.g, &dpred.g, 0.01f);
				snprintf(what, sizeof(what), "%s input %d, class weights", dt_loss_names[loss], input);
				expect_scalar(what, lg, lc, 1e-5);
				expect_close(what, &dpred, 1e-5);
				pair_free(&cw);
			}
			free(t);
			pair_free(&pred);
			pair_free(&target);
			pair_free(&dpred);
		}
}

/* The losses' arguments reach the kernels: non-default ones give the CPU's values on the GPU. */
static void test_loss_args(void **state)
{
	enum { N = 200, C = 5 };
	static const struct {
		enum dt_loss loss;
		enum dt_loss_input input;
		struct dt_loss_args a;
	} cases[] = {
		{ DT_LOSS_HUBER, DT_LOSS_PROBS, { .delta = 0.3f, .gamma = 2, .alpha = 0.25f } },
		{ DT_LOSS_CATEGORICAL_CROSSENTROPY, DT_LOSS_LOGITS,
		  { .delta = 1, .gamma = 2, .alpha = 0.25f, .label_smoothing = 0.2f } },
		{ DT_LOSS_BINARY_CROSSENTROPY, DT_LOSS_FUSED,
		  { .delta = 1, .gamma = 2, .alpha = 0.25f, .label_smoothing = 0.1f } },
		{ DT_LOSS_BINARY_FOCAL_CROSSENTROPY, DT_LOSS_LOGITS,
		  { .delta = 1, .gamma = 1.5f, .alpha = 0.4f, .apply_class_balancing = 1, .label_smoothing = 0.1f } },
		{ DT_LOSS_CATEGORICAL_FOCAL_CROSSENTROPY, DT_LOSS_PROBS,
		  { .delta = 1, .gamma = 3, .alpha = 0.5f, .label_smoothing = 0.05f } },
	};
	need_gpu();
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		struct dt_shape s = sh(2, N, C, 0, 0);
		struct pair pred = pair_rnd(s, 110 + k, 0.05f, 0.95f), target = pair_rnd(s, 120 + k, 0, 1);
		struct pair dpred = pair_new(s, NULL);
		enum dt_loss l = cases[k].loss;
		double lc = dt_op_loss_args(l, &cases[k].a, cases[k].input, &pred.c, &target.c, NULL, &dpred.c, 0.01f);
		double lg = dt_op_loss_args(l, &cases[k].a, cases[k].input, &pred.g, &target.g, NULL, &dpred.g, 0.01f);
		expect_scalar(dt_loss_names[cases[k].loss], lg, lc, 1e-5);
		expect_close(dt_loss_names[cases[k].loss], &dpred, 1e-5);
		pair_free(&pred);
		pair_free(&target);
		pair_free(&dpred);
	}
}

static void test_count_correct(void **state)
{
	enum { N = 1000, C = 7 };
	need_gpu();
	struct pair pred = pair_rnd(sh(2, N, C, 0, 0), 90, 0, 1), onehot = pair_rnd(sh(2, N, C, 0, 0), 91, 0, 1);
	float *cls = malloc(sizeof(float) * N);
	for (int i = 0; i < N; i++)
		cls[i] = (float)(i % C);
	struct pair sparse = pair_new(sh(2, N, 1, 0, 0), cls);
	assert_int_equal(dt_op_count_correct(DT_ACC_SPARSE, &pred.g, &sparse.g, 0.5f),
			 dt_op_count_correct(DT_ACC_SPARSE, &pred.c, &sparse.c, 0.5f));
	assert_int_equal(dt_op_count_correct(DT_ACC_CATEGORICAL, &pred.g, &onehot.g, 0.5f),
			 dt_op_count_correct(DT_ACC_CATEGORICAL, &pred.c, &onehot.c, 0.5f));
	assert_int_equal(dt_op_count_correct(DT_ACC_BINARY, &pred.g, &onehot.g, 0.4f),
			 dt_op_count_correct(DT_ACC_BINARY, &pred.c, &onehot.c, 0.4f));
	/* Not trivially equal: some right, some wrong. */
	assert_true(dt_op_count_correct(DT_ACC_SPARSE, &pred.c, &sparse.c, 0.5f) > 0);
	assert_true(dt_op_count_correct(DT_ACC_SPARSE, &pred.c, &sparse.c, 0.5f) < N);
	free(cls);
	pair_free(&pred);
	pair_free(&onehot);
	pair_free(&sparse);
}

static void test_error_sums(void **state)
{
	enum { N = 1000, C = 3 };
	need_gpu();
	struct pair pred = pair_rnd(sh(2, N, C, 0, 0), 92, -3, 3), target = pair_rnd(sh(2, N, C, 0, 0), 93, -3, 3);
	double g[2], c[2];
	dt_op_error_sums(&pred.g, &target.g, g);
	dt_op_error_sums(&pred.c, &target.c, c);
	assert_float_equal(g[0], c[0], 1e-9 * c[0]);
	assert_float_equal(g[1], c[1], 1e-9 * c[1]);
	assert_true(c[0] > 0 && c[1] > 0);
	pair_free(&pred);
	pair_free(&target);
}

static void test_metric_counts(void **state)
{
	enum { N = 1000, C = 7, T = 200 };
	need_gpu();
	struct pair pred = pair_rnd(sh(2, N, C, 0, 0), 94, 0, 1), onehot = pair_rnd(sh(2, N, C, 0, 0), 95, 0, 1);
	struct pair logits = pair_rnd(sh(2, N, C, 0, 0), 96, -6, 6);
	float *cls = malloc(sizeof(float) * N);
	for (int i = 0; i < N; i++)
		cls[i] = (float)(i * 5 % C);
	struct pair sparse = pair_new(sh(2, N, 1, 0, 0), cls);
	struct pair cm = pair_new(sh(1, C * C, 0, 0, 0), NULL), cm2 = pair_new(sh(1, 4, 0, 0, 0), NULL);
	struct pair hist = pair_new(sh(1, 2 * (T + 1), 0, 0, 0), NULL);
	/* Whole-number counts: equal, not close. */
	dt_op_confusion(DT_ACC_SPARSE, &pred.c, &sparse.c, 0.5f, &cm.c);
	dt_op_confusion(DT_ACC_SPARSE, &pred.g, &sparse.g, 0.5f, &cm.g);
	expect_equal("confusion sparse", &cm);
	dt_op_confusion(DT_ACC_CATEGORICAL, &pred.c, &onehot.c, 0.5f, &cm.c);
	dt_op_confusion(DT_ACC_CATEGORICAL, &pred.g, &onehot.g, 0.5f, &cm.g);
	expect_equal("confusion categorical", &cm);
	dt_op_confusion(DT_ACC_BINARY, &pred.c, &onehot.c, 0.4f, &cm2.c);
	dt_op_confusion(DT_ACC_BINARY, &pred.g, &onehot.g, 0.4f, &cm2.g);
	expect_equal("confusion binary", &cm2);
	{
		struct pair sums = pair_new(sh(1, DT_REGRESSION_SUMS * C, 0, 0, 0), NULL);
		dt_op_regression_sums(&logits.c, &pred.c, &sums.c);
		dt_op_regression_sums(&logits.g, &pred.g, &sums.g);
		expect_close("regression sums", &sums, 1e-6);
		pair_free(&sums);
	}
	for (int k = 1; k <= C; k += 3) {
		assert_int_equal(dt_op_count_top_k(&pred.g, &sparse.g, 1, k), dt_op_count_top_k(&pred.c, &sparse.c, 1, k));
		assert_int_equal(dt_op_count_top_k(&pred.g, &onehot.g, 0, k), dt_op_count_top_k(&pred.c, &onehot.c, 0, k));
	}
	dt_op_auc_histogram(&pred.c, &sparse.c, -1, 1, 0, T, &hist.c);
	dt_op_auc_histogram(&pred.g, &sparse.g, -1, 1, 0, T, &hist.g);
	expect_equal("auc histogram sparse, every column", &hist);
	dt_op_auc_histogram(&logits.c, &onehot.c, 3, 0, 1, T, &hist.c);
	dt_op_auc_histogram(&logits.g, &onehot.g, 3, 0, 1, T, &hist.g);
	expect_close("auc histogram of logits, column 3", &hist, 0.02); /* expf may differ by an ulp at a bucket's edge */
	free(cls);
	pair_free(&pred);
	pair_free(&onehot);
	pair_free(&logits);
	pair_free(&sparse);
	pair_free(&cm);
	pair_free(&cm2);
	pair_free(&hist);
}

/* ---- optimizers ---- */

static void test_optimizers(void **state)
{
	enum { N = 10007 };
	static const struct {
		enum dt_opt_kind kind;
		float momentum;
		int nesterov;
		float weight_decay;
		int slots;
		int amsgrad;
		float clipvalue;
	} cases[] = {
		{ DT_OPT_SGD, 0, 0, 0, 0, 0, 0 },	  { DT_OPT_SGD, 0.9f, 0, 0, 1, 0, 0 },
		{ DT_OPT_SGD, 0.9f, 1, 0.01f, 1, 0, 0 }, { DT_OPT_ADAM, 0, 0, 0, 2, 0, 0 },
		{ DT_OPT_ADAMW, 0, 0, 0.004f, 2, 0, 0 }, { DT_OPT_RMSPROP, 0, 0, 0, 2, 0, 0 },
		{ DT_OPT_RMSPROP, 0.5f, 0, 0, 2, 0, 0 }, { DT_OPT_ADAM, 0, 0, 0, 3, 1, 0.3f },
		{ DT_OPT_ADAGRAD, 0, 0, 0, 1, 0, 0 },	  { DT_OPT_ADADELTA, 0, 0, 0, 2, 0, 0 },
		{ DT_OPT_ADAMAX, 0, 0, 0.01f, 2, 0, 0 }, { DT_OPT_NADAM, 0, 0, 0, 2, 0, 0.5f },
		{ DT_OPT_LION, 0, 0, 0, 1, 0, 0 },
	};
	need_gpu();
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		struct dt_shape s = sh(1, N, 0, 0, 0);
		struct pair w = pair_rnd(s, 100, -1, 1), g = pair_rnd(s, 101, -1, 1);
		struct pair s1 = pair_new(s, NULL), s2 = pair_new(s, NULL), s3 = pair_new(s, NULL);
		int rms_momentum = cases[k].kind == DT_OPT_RMSPROP && cases[k].momentum > 0;
		double product = 1;
		for (int t = 1; t <= 3; t++) {
			struct dt_opt_step st = { .kind = cases[k].kind, .lr = 0.01f, .momentum = cases[k].momentum,
						  .rho = 0.9, .nesterov = cases[k].nesterov, .beta_1 = 0.9,
						  .beta_2 = 0.999, .epsilon = 1e-7f, .t = t,
						  .weight_decay = cases[k].weight_decay, .grad_scale = 0.8f,
						  .clipvalue = cases[k].clipvalue, .amsgrad = cases[k].amsgrad };
			int has1 = cases[k].slots >= 1 && (cases[k].kind != DT_OPT_RMSPROP || rms_momentum);
			product *= 0.9 * (1 - 0.5 * pow(0.96, 0.004 * t));
			st.nadam_product = product;
			/* rmsprop: v in s2, momentum (optional) in s1 */
			dt_op_optimizer_update(&st, &w.c, &g.c, has1 ? &s1.c : NULL, cases[k].slots >= 2 ? &s2.c : NULL,
					       cases[k].slots == 3 ? &s3.c : NULL);
			dt_op_optimizer_update(&st, &w.g, &g.g, has1 ? &s1.g : NULL, cases[k].slots >= 2 ? &s2.g : NULL,
					       cases[k].slots == 3 ? &s3.g : NULL);
		}
		expect_close(dt_optimizer_names[cases[k].kind], &w, 1e-5);
		pair_free(&w);
		pair_free(&g);
		pair_free(&s1);
		pair_free(&s2);
		pair_free(&s3);
	}
}

static void test_regularize(void **state)
{
	need_gpu();
	struct dt_shape s = sh(1, 4099, 0, 0, 0);
	struct pair w = pair_rnd(s, 110, -1, 1), g = pair_rnd(s, 111, -1, 1);
	double pc = dt_op_regularize(&w.c, &g.c, 0.01f, 0.02f, 0.5f);
	double pg = dt_op_regularize(&w.g, &g.g, 0.01f, 0.02f, 0.5f);
	expect_scalar("regularize penalty", pg, pc, 1e-6);
	expect_close("regularize gradient", &g, 1e-6);
	pair_free(&w);
	pair_free(&g);
}

/* ---- plans ---- */

/* The tolerance of conv_case: float32's, or TF32's under precision tf32. */
static double conv_tol = TOL;

/* Keras' padding: "same" (out = ceil(in / stride), the odd row and column at the end) or "valid". */
static void pad1(int in, int k, int stride, int dil, int same, int *out, int *lo, int *hi)
{
	int span = dil * (k - 1) + 1, total;
	if (!same) {
		*out = (in - span) / stride + 1;
		*lo = *hi = 0;
		return;
	}
	*out = (in + stride - 1) / stride;
	total = (*out - 1) * stride + span - in;
	total = total < 0 ? 0 : total;
	*lo = total / 2;
	*hi = total - *lo;
}

static void conv_case(int n_max, int n, int h, int w, int cin, int cout, int k, int stride, int dil, int same,
		      int bias, int want_dx, int relu)
{
	struct dt_conv_geom g = { .act = relu ? DT_ACT_RELU : DT_ACT_LINEAR };
	struct dt_plan *pc, *pg;
	g.in_h = h;
	g.in_w = w;
	g.in_c = cin;
	g.out_c = cout;
	g.kh = g.kw = k;
	g.stride_h = g.stride_w = stride;
	g.dil_h = g.dil_w = dil;
	pad1(h, k, stride, dil, same, &g.out_h, &g.pad_top, &g.pad_bottom);
	pad1(w, k, stride, dil, same, &g.out_w, &g.pad_left, &g.pad_right);
	pc = dt_plan_conv(DT_CPU, &g, n_max);
	pg = dt_plan_conv(GPU, &g, n_max);
	{
		struct pair x = pair_rnd(sh(4, n, h, w, cin), 120, -1, 1);
		struct pair wt = pair_rnd(sh(4, k, k, cin, cout), 121, -0.5f, 0.5f), b = pair_rnd(sh(1, cout, 0, 0, 0), 122, -1, 1);
		struct pair y = pair_new(sh(4, n, g.out_h, g.out_w, cout), NULL);
		struct pair dy = pair_rnd(sh(4, n, g.out_h, g.out_w, cout), 123, -1, 1);
		struct pair dw = pair_new(wt.c.shape, NULL), db = pair_new(b.c.shape, NULL), dx = pair_new(x.c.shape, NULL);
		char what[128];
		snprintf(what, sizeof(what), "conv n=%d %dx%dx%d->%d k%d s%d d%d %s%s", n, h, w, cin, cout, k, stride,
			 dil, same ? "same" : "valid", relu ? " relu" : "");
		dt_op_conv_forward(pc, &x.c, &wt.c, bias ? &b.c : NULL, &y.c);
		dt_op_conv_forward(pg, &x.g, &wt.g, bias ? &b.g : NULL, &y.g);
		expect_close(what, &y, conv_tol);
		dt_op_conv_backward(pc, &x.c, &wt.c, &dy.c, &dw.c, bias ? &db.c : NULL, want_dx ? &dx.c : NULL);
		dt_op_conv_backward(pg, &x.g, &wt.g, &dy.g, &dw.g, bias ? &db.g : NULL, want_dx ? &dx.g : NULL);
		expect_close(what, &dw, conv_tol);
		if (bias)
			expect_close(what, &db, conv_tol);
		if (want_dx)
			expect_close(what, &dx, conv_tol);
		pair_free(&x);
		pair_free(&wt);
		pair_free(&b);
		pair_free(&y);
		pair_free(&dy);
		pair_free(&dw);
		pair_free(&db);
		pair_free(&dx);
	}
	dt_plan_free(pc);
	dt_plan_free(pg);
}

static void test_conv(void **state)
{
	need_gpu();
	conv_case(8, 8, 28, 28, 1, 32, 3, 1, 1, 0, 1, 0, 0);  /* Keras' MNIST CNN first layer */
	conv_case(8, 8, 26, 26, 32, 64, 3, 1, 1, 0, 1, 1, 0);
	conv_case(6, 6, 16, 16, 8, 16, 3, 1, 1, 1, 1, 1, 0);  /* same, symmetric padding */
	conv_case(6, 6, 15, 15, 8, 8, 2, 1, 1, 1, 0, 1, 0);   /* same, even kernel: padding at the end */
	conv_case(6, 6, 16, 16, 8, 12, 3, 2, 1, 1, 1, 1, 0);  /* same, stride 2: asymmetric */
	conv_case(4, 4, 17, 13, 5, 7, 3, 1, 2, 0, 1, 1, 0);   /* dilation */
	conv_case(16, 5, 12, 12, 3, 4, 5, 1, 1, 1, 1, 1, 0);  /* a batch below the plan's largest */
	conv_case(8, 8, 28, 28, 1, 32, 3, 1, 1, 0, 1, 0, 1);  /* with relu: the CPU fuses it, the GPU applies it */
	conv_case(8, 8, 26, 26, 32, 64, 3, 1, 1, 0, 1, 1, 1);
}

/* cuDNN's heuristic algorithms (no timing), TF32 tensor cores under tf32, bfloat16 under bf16. */
static void test_conv_heuristics_and_tf32(void **state)
{
	char why[256];
	need_gpu();
	setenv("DTRAIN_CUDNN_FIND", "0", 1);
	conv_case(8, 8, 26, 26, 32, 64, 3, 1, 1, 0, 1, 1, 0);
	conv_case(6, 6, 16, 16, 8, 12, 3, 2, 1, 1, 1, 1, 0);
	unsetenv("DTRAIN_CUDNN_FIND");
	assert_int_equal(dt_set_precision(DT_PRECISION_TF32, why, sizeof(why)), 0);
	conv_tol = 5e-3;
	conv_case(8, 8, 26, 26, 32, 64, 3, 1, 1, 0, 1, 1, 0);
	if (dt_set_precision(DT_PRECISION_BF16, why, sizeof(why)) == 0) {
		conv_tol = 5e-2;
		conv_case(8, 8, 26, 26, 32, 64, 3, 1, 1, 0, 1, 1, 0);
		conv_case(6, 6, 16, 16, 8, 12, 3, 2, 1, 1, 1, 1, 0); /* asymmetric padding: the padded copy in bf16 */
	} else {
		printf("# bf16 not tested: %s\n", why);
	}
	conv_tol = TOL;
	assert_int_equal(dt_set_precision(DT_PRECISION_FP32, why, sizeof(why)), 0);
}

/* relu: max pooling of relu's output (dt_pool_geom.after_relu), on inputs that are mostly 0. */
static void pool_case(enum dt_pool kind, int n, int h, int w, int c, int k, int stride, int same, int ties, int relu)
{
	struct dt_pool_geom g = { 0 };
	struct dt_plan *pc, *pg;
	g.kind = kind;
	g.after_relu = relu;
	g.in_h = h;
	g.in_w = w;
	g.c = c;
	g.kh = g.kw = k;
	g.stride_h = g.stride_w = stride;
	pad1(h, k, stride, 1, same, &g.out_h, &g.pad_top, &g.pad_bottom);
	pad1(w, k, stride, 1, same, &g.out_w, &g.pad_left, &g.pad_right);
	pc = dt_plan_pool(DT_CPU, &g, n);
	pg = dt_plan_pool(GPU, &g, n);
	{
		struct pair x = pair_rnd(sh(4, n, h, w, c), 130, -1, 1);
		struct pair y = pair_new(sh(4, n, g.out_h, g.out_w, c), NULL);
		struct pair dy = pair_rnd(y.c.shape, 131, -1, 1), dx = pair_new(x.c.shape, NULL);
		if (ties) { /* few distinct values: windows with equal maxima */
			for (int64_t i = 0; i < dt_tensor_count(&x.c); i++)
				x.c.data[i] = (float)((i * 7) % 3);
			dt_op_from_host(&x.g, x.c.data);
		}
		if (relu) {
			for (int64_t i = 0; i < dt_tensor_count(&x.c); i++)
				x.c.data[i] = x.c.data[i] > 0.5f ? x.c.data[i] : 0;
			dt_op_from_host(&x.g, x.c.data);
		}
		dt_op_pool_forward(pc, &x.c, &y.c, 1);
		dt_op_pool_forward(pg, &x.g, &y.g, 1);
		expect_close("pool forward", &y, 1e-6);
		dt_op_pool_backward(pc, &dy.c, &dx.c);
		dt_op_pool_backward(pg, &dy.g, &dx.g);
		expect_close("pool backward", &dx, 1e-6);
		pair_free(&x);
		pair_free(&y);
		pair_free(&dy);
		pair_free(&dx);
	}
	dt_plan_free(pc);
	dt_plan_free(pg);
}

static void test_pool(void **state)
{
	need_gpu();
	pool_case(DT_POOL_MAX, 4, 24, 24, 16, 2, 2, 0, 0, 0);
	pool_case(DT_POOL_MAX, 4, 24, 24, 16, 2, 2, 0, 0, 1);
	pool_case(DT_POOL_MAX, 3, 7, 9, 5, 3, 2, 1, 0, 0);
	pool_case(DT_POOL_MAX, 3, 8, 8, 4, 2, 2, 0, 1, 0);
	pool_case(DT_POOL_AVG, 3, 7, 9, 5, 3, 2, 1, 0, 0);
	pool_case(DT_POOL_AVG, 2, 10, 10, 3, 2, 1, 1, 0, 0);
}

static void bn_case(int n, int spatial, int c, int use_gamma)
{
	struct dt_plan *pc = dt_plan_batchnorm(DT_CPU, c, spatial, 1e-3f, n);
	struct dt_plan *pg = dt_plan_batchnorm(GPU, c, spatial, 1e-3f, n);
	struct dt_shape xs = sh(3, n, spatial, c, 0), cs = sh(1, c, 0, 0, 0);
	struct pair x = pair_rnd(xs, 140, -2, 3), y = pair_new(xs, NULL), dy = pair_rnd(xs, 141, -1, 1);
	struct pair dx = pair_new(xs, NULL), gamma = pair_rnd(cs, 142, 0.5f, 1.5f), beta = pair_rnd(cs, 143, -1, 1);
	struct pair mm = pair_rnd(cs, 144, -1, 1), mv = pair_rnd(cs, 145, 0.5f, 2), dg = pair_new(cs, NULL);
	struct pair dbeta = pair_new(cs, NULL);
	const struct dt_tensor *gc = use_gamma ? &gamma.c : NULL, *gg = use_gamma ? &gamma.g : NULL;

	dt_op_batchnorm_forward(pc, 1, 0.99f, &x.c, gc, use_gamma ? &beta.c : NULL, &mm.c, &mv.c, &y.c);
	dt_op_batchnorm_forward(pg, 1, 0.99f, &x.g, gg, use_gamma ? &beta.g : NULL, &mm.g, &mv.g, &y.g);
	expect_close("batchnorm training forward", &y, TOL);
	expect_close("batchnorm moving mean", &mm, 1e-5);
	expect_close("batchnorm moving variance", &mv, 1e-5);
	dt_op_batchnorm_backward(pc, &x.c, &dy.c, gc, use_gamma ? &dg.c : NULL, use_gamma ? &dbeta.c : NULL, &dx.c);
	dt_op_batchnorm_backward(pg, &x.g, &dy.g, gg, use_gamma ? &dg.g : NULL, use_gamma ? &dbeta.g : NULL, &dx.g);
	expect_close("batchnorm dx", &dx, 1e-3);
	if (use_gamma) {
		expect_close("batchnorm dgamma", &dg, TOL);
		expect_close("batchnorm dbeta", &dbeta, TOL);
	}
	dt_op_batchnorm_forward(pc, 0, 0.99f, &x.c, gc, use_gamma ? &beta.c : NULL, &mm.c, &mv.c, &y.c);
	dt_op_batchnorm_forward(pg, 0, 0.99f, &x.g, gg, use_gamma ? &beta.g : NULL, &mm.g, &mv.g, &y.g);
	expect_close("batchnorm inference", &y, TOL);
	pair_free(&x);
	pair_free(&y);
	pair_free(&dy);
	pair_free(&dx);
	pair_free(&gamma);
	pair_free(&beta);
	pair_free(&mm);
	pair_free(&mv);
	pair_free(&dg);
	pair_free(&dbeta);
	dt_plan_free(pc);
	dt_plan_free(pg);
}

static void test_batchnorm(void **state)
{
	need_gpu();
	bn_case(16, 49, 32, 1);
	bn_case(7, 1, 10, 0);
	bn_case(64, 100, 3, 1);
}

/* ---- cnnparts: grouped (depthwise) convolution plans against the CPU's ---- */

static void group_conv_case(int n, int h, int w, int cin, int cout, int groups, int k, int stride, int same)
{
	struct dt_conv_geom g = { 0 };
	struct dt_plan *pc, *pg;
	char what[128];
	g.in_h = h;
	g.in_w = w;
	g.in_c = cin;
	g.out_c = cout;
	g.groups = groups;
	g.kh = g.kw = k;
	g.stride_h = g.stride_w = stride;
	g.dil_h = g.dil_w = 1;
	pad1(h, k, stride, 1, same, &g.out_h, &g.pad_top, &g.pad_bottom);
	pad1(w, k, stride, 1, same, &g.out_w, &g.pad_left, &g.pad_right);
	pc = dt_plan_conv(DT_CPU, &g, n);
	pg = dt_plan_conv(GPU, &g, n);
	{
		struct pair x = pair_rnd(sh(4, n, h, w, cin), 130, -1, 1);
		struct pair wt = pair_rnd(sh(4, k, k, cin / groups, cout), 131, -0.5f, 0.5f);
		struct pair b = pair_rnd(sh(1, cout, 0, 0, 0), 132, -1, 1);
		struct pair y = pair_new(sh(4, n, g.out_h, g.out_w, cout), NULL);
		struct pair dy = pair_rnd(y.c.shape, 133, -1, 1);
		struct pair dw = pair_new(wt.c.shape, NULL), db = pair_new(b.c.shape, NULL), dx = pair_new(x.c.shape, NULL);
		snprintf(what, sizeof(what), "grouped conv %dx%dx%d->%d groups %d k%d s%d %s", h, w, cin, cout, groups, k,
			 stride, same ? "same" : "valid");
		dt_op_conv_forward(pc, &x.c, &wt.c, &b.c, &y.c);
		dt_op_conv_forward(pg, &x.g, &wt.g, &b.g, &y.g);
		expect_close(what, &y, TOL);
		dt_op_conv_backward(pc, &x.c, &wt.c, &dy.c, &dw.c, &db.c, &dx.c);
		dt_op_conv_backward(pg, &x.g, &wt.g, &dy.g, &dw.g, &db.g, &dx.g);
		expect_close(what, &dw, TOL);
		expect_close(what, &db, TOL);
		expect_close(what, &dx, TOL);
		pair_free(&x);
		pair_free(&wt);
		pair_free(&b);
		pair_free(&y);
		pair_free(&dy);
		pair_free(&dw);
		pair_free(&db);
		pair_free(&dx);
	}
	dt_plan_free(pc);
	dt_plan_free(pg);
}

static void test_grouped_conv(void **state)
{
	need_gpu();
	group_conv_case(4, 12, 12, 8, 8, 8, 3, 1, 1);   /* depthwise, same */
	group_conv_case(4, 13, 11, 6, 12, 6, 3, 2, 1);  /* depthwise, multiplier 2, stride 2: asymmetric padding */
	group_conv_case(3, 9, 9, 8, 12, 4, 3, 1, 0);    /* 4 groups of 2 -> 3 */
}

/* ---- cnnparts: transposed convolution plans against the CPU's ---- */

/* One axis of conv2d_transpose with padding cut lo before and hi after the full result. */
static void deconv_case(int n, int h, int w, int cin, int cout, int k, int stride, int lo, int hi)
{
	struct dt_conv_geom g = { 0 };
	struct dt_plan *pc, *pg;
	char base[96], what[128];
	g.in_h = h;
	g.in_w = w;
	g.in_c = cin;
	g.out_c = cout;
	g.kh = g.kw = k;
	g.stride_h = g.stride_w = stride;
	g.dil_h = g.dil_w = 1;
	g.pad_top = g.pad_left = lo;
	g.pad_bottom = g.pad_right = hi;
	g.out_h = (h - 1) * stride + k - lo - hi;
	g.out_w = (w - 1) * stride + k - lo - hi;
	pc = dt_plan_deconv(DT_CPU, &g, n);
	pg = dt_plan_deconv(GPU, &g, n);
	{
		struct pair x = pair_rnd(sh(4, n, h, w, cin), 150, -1, 1);
		struct pair wt = pair_rnd(sh(4, k, k, cout, cin), 151, -0.5f, 0.5f);
		struct pair b = pair_rnd(sh(1, cout, 0, 0, 0), 152, -1, 1);
		struct pair y = pair_new(sh(4, n, g.out_h, g.out_w, cout), NULL);
		struct pair dy = pair_rnd(y.c.shape, 153, -1, 1);
		struct pair dw = pair_new(wt.c.shape, NULL), db = pair_new(b.c.shape, NULL), dx = pair_new(x.c.shape, NULL);
		snprintf(base, sizeof(base), "deconv %dx%dx%d->%d k%d s%d cut %d/%d", h, w, cin, cout, k, stride, lo, hi);
		dt_op_deconv_forward(pc, &x.c, &wt.c, &b.c, &y.c);
		dt_op_deconv_forward(pg, &x.g, &wt.g, &b.g, &y.g);
		snprintf(what, sizeof(what), "%s: y", base);
		expect_close(what, &y, TOL);
		dt_op_deconv_backward(pc, &x.c, &wt.c, &dy.c, &dw.c, &db.c, &dx.c);
		dt_op_deconv_backward(pg, &x.g, &wt.g, &dy.g, &dw.g, &db.g, &dx.g);
		snprintf(what, sizeof(what), "%s: dw", base);
		expect_close(what, &dw, TOL);
		snprintf(what, sizeof(what), "%s: db", base);
		expect_close(what, &db, TOL);
		snprintf(what, sizeof(what), "%s: dx", base);
		expect_close(what, &dx, TOL);
		pair_free(&x);
		pair_free(&wt);
		pair_free(&b);
		pair_free(&y);
		pair_free(&dy);
		pair_free(&dw);
		pair_free(&db);
		pair_free(&dx);
	}
	dt_plan_free(pc);
	dt_plan_free(pg);
}

static void test_deconv(void **state)
{
	need_gpu();
	deconv_case(4, 7, 7, 8, 16, 3, 1, 0, 0);  /* valid */
	deconv_case(4, 7, 6, 8, 4, 3, 2, 0, 1);   /* same, stride 2: one cut at the end */
	deconv_case(3, 5, 5, 6, 6, 4, 2, 1, 1);   /* 4x4, stride 2, same */
	deconv_case(3, 5, 5, 3, 4, 1, 2, 0, 0);   /* 1x1, stride 2 */
	deconv_case(3, 5, 5, 3, 4, 1, 2, 0, -1);  /* 1x1, stride 2: a trailing row only the bias reaches */
}

/* ---- cnnparts: spatial copies and resampling ---- */

static void test_shift_upsample(void **state)
{
	need_gpu();
	{
		struct pair x = pair_rnd(sh(4, 3, 5, 6, 4), 140, -1, 1);
		struct pair pad = pair_new(sh(4, 3, 8, 7, 4), NULL), crop = pair_new(sh(4, 3, 2, 3, 4), NULL);
		dt_op_shift2d(&x.c, &pad.c, -1, 0);
		dt_op_shift2d(&x.g, &pad.g, -1, 0);
		expect_equal("shift2d pad", &pad);
		dt_op_shift2d(&x.c, &crop.c, 2, 1);
		dt_op_shift2d(&x.g, &crop.g, 2, 1);
		expect_equal("shift2d crop", &crop);
		pair_free(&x);
		pair_free(&pad);
		pair_free(&crop);
	}
	{
		struct pair x = pair_rnd(sh(4, 3, 4, 5, 6), 143, -1, 1), m = pair_rnd(sh(2, 3, 6, 0, 0), 144, 0, 2);
		struct pair y = pair_new(x.c.shape, NULL);
		dt_op_mul_channels(&x.c, &m.c, &y.c);
		dt_op_mul_channels(&x.g, &m.g, &y.g);
		expect_equal("mul_channels", &y);
		pair_free(&x);
		pair_free(&m);
		pair_free(&y);
	}
	for (int mode = DT_INTERP_NEAREST; mode <= DT_INTERP_BILINEAR; mode++) {
		struct pair x = pair_rnd(sh(4, 2, 5, 7, 3), 141, -1, 1), y = pair_new(sh(4, 2, 15, 14, 3), NULL);
		struct pair dy = pair_rnd(y.c.shape, 142, -1, 1), dx = pair_new(x.c.shape, NULL);
		dt_op_upsample2d((enum dt_interp)mode, &x.c, &y.c);
		dt_op_upsample2d((enum dt_interp)mode, &x.g, &y.g);
		expect_close(mode ? "upsample2d bilinear" : "upsample2d nearest", &y, 1e-6);
		dt_op_upsample2d_backward((enum dt_interp)mode, &dy.c, &dx.c);
		dt_op_upsample2d_backward((enum dt_interp)mode, &dy.g, &dx.g);
		expect_close(mode ? "upsample2d bilinear backward" : "upsample2d nearest backward", &dx, 1e-6);
		pair_free(&x);
		pair_free(&y);
		pair_free(&dy);
		pair_free(&dx);
	}
}

/* Sequences (issue 14): conv1d and the 1-D poolings run the 2-D plans at height 1. */
static void conv1d_case(int n, int steps, int cin, int cout, int k, int stride, int dil, int pad_left, int pad_right)
{
	struct dt_conv_geom g = { .in_h = 1, .in_w = steps, .in_c = cin, .out_c = cout, .out_h = 1, .kh = 1, .kw = k,
				  .stride_h = 1, .stride_w = stride, .dil_h = 1, .dil_w = dil, .pad_left = pad_left,
				  .pad_right = pad_right };
	struct dt_plan *pc, *pg;
	g.out_w = (steps + pad_left + pad_right - (k - 1) * dil - 1) / stride + 1;
	pc = dt_plan_conv(DT_CPU, &g, n);
	pg = dt_plan_conv(GPU, &g, n);
	{
		struct pair x = pair_rnd(sh(3, n, steps, cin, 0), 150, -1, 1);
		struct pair wt = pair_rnd(sh(3, k, cin, cout, 0), 151, -0.5f, 0.5f), b = pair_rnd(sh(1, cout, 0, 0, 0), 152, -1, 1);
		struct pair y = pair_new(sh(3, n, g.out_w, cout, 0), NULL), dy = pair_rnd(y.c.shape, 153, -1, 1);
		struct pair dw = pair_new(wt.c.shape, NULL), db = pair_new(b.c.shape, NULL), dx = pair_new(x.c.shape, NULL);
		char what[128];
		snprintf(what, sizeof(what), "conv1d n=%d %dx%d->%d k%d s%d d%d pad %d,%d", n, steps, cin, cout, k, stride,
			 dil, pad_left, pad_right);
		dt_op_conv_forward(pc, &x.c, &wt.c, &b.c, &y.c);
		dt_op_conv_forward(pg, &x.g, &wt.g, &b.g, &y.g);
		expect_close(what, &y, conv_tol);
		dt_op_conv_backward(pc, &x.c, &wt.c, &dy.c, &dw.c, &db.c, &dx.c);
		dt_op_conv_backward(pg, &x.g, &wt.g, &dy.g, &dw.g, &db.g, &dx.g);
		expect_close(what, &dw, conv_tol);
		expect_close(what, &db, conv_tol);
		expect_close(what, &dx, conv_tol);
		pair_free(&x);
		pair_free(&wt);
		pair_free(&b);
		pair_free(&y);
		pair_free(&dy);
		pair_free(&dw);
		pair_free(&db);
		pair_free(&dx);
	}
	dt_plan_free(pc);
	dt_plan_free(pg);
}

static void pool1d_case(enum dt_pool kind, int n, int steps, int c, int k, int stride, int pad_left, int pad_right)
{
	struct dt_pool_geom g = { .kind = kind, .in_h = 1, .in_w = steps, .c = c, .out_h = 1, .kh = 1, .kw = k,
				  .stride_h = 1, .stride_w = stride, .pad_left = pad_left, .pad_right = pad_right };
	struct dt_plan *pc, *pg;
	g.out_w = (steps + pad_left + pad_right - k) / stride + 1;
	pc = dt_plan_pool(DT_CPU, &g, n);
	pg = dt_plan_pool(GPU, &g, n);
	{
		struct pair x = pair_rnd(sh(3, n, steps, c, 0), 160, -1, 1);
		struct pair y = pair_new(sh(3, n, g.out_w, c, 0), NULL);
		struct pair dy = pair_rnd(y.c.shape, 161, -1, 1), dx = pair_new(x.c.shape, NULL);
		dt_op_pool_forward(pc, &x.c, &y.c, 1);
		dt_op_pool_forward(pg, &x.g, &y.g, 1);
		expect_close("pool1d forward", &y, 1e-6);
		dt_op_pool_backward(pc, &dy.c, &dx.c);
		dt_op_pool_backward(pg, &dy.g, &dx.g);
		expect_close("pool1d backward", &dx, 1e-6);
		pair_free(&x);
		pair_free(&y);
		pair_free(&dy);
		pair_free(&dx);
	}
	dt_plan_free(pc);
	dt_plan_free(pg);
}

static void test_seq_conv_pool(void **state)
{
	need_gpu();
	conv1d_case(4, 50, 16, 32, 3, 1, 1, 0, 0);  /* valid */
	conv1d_case(4, 50, 16, 32, 5, 1, 1, 2, 2);  /* same */
	conv1d_case(4, 50, 8, 16, 3, 1, 4, 8, 0);   /* causal, dilation 4: padding before only */
	conv1d_case(3, 21, 8, 8, 4, 2, 1, 3, 0);    /* causal, stride 2 */
	pool1d_case(DT_POOL_MAX, 4, 30, 8, 2, 2, 0, 0);
	pool1d_case(DT_POOL_AVG, 4, 31, 8, 3, 2, 1, 1);
	pool1d_case(DT_POOL_MAX, 4, 40, 8, 40, 40, 0, 0); /* global_max_pooling1d */
	pool1d_case(DT_POOL_AVG, 4, 40, 8, 40, 40, 0, 0); /* global_average_pooling1d */
}

/* Embedding's gather and scatter-add, with repeated tokens and indices that name no row. */
static void test_embedding_ops(void **state)
{
	const int n = 64, steps = 30, vocab = 50, d = 24;
	struct pair idx, table, y, dy, dt;
	float *host;

	need_gpu();
	host = malloc((size_t)n * steps * sizeof(float));
	for (int i = 0; i < n * steps; i++)
		host[i] = (float)((i * 37) % vocab);
	host[3] = -1;
	host[5] = (float)vocab;
	host[7] = NAN;
	host[9] = 1e30f;
	idx = pair_new(sh(2, n, steps, 0, 0), host);
	table = pair_rnd(sh(2, vocab, d, 0, 0), 170, -1, 1);
	y = pair_new(sh(3, n, steps, d, 0), NULL);
	dy = pair_rnd(y.c.shape, 171, -1, 1);
	dt = pair_new(table.c.shape, NULL);
	dt_op_gather(&idx.c, &table.c, &y.c);
	dt_op_gather(&idx.g, &table.g, &y.g);
	expect_close("gather", &y, 0);
	dt_op_fill(&dt.c, 0);
	dt_op_fill(&dt.g, 0);
	dt_op_scatter_add(&idx.c, &dy.c, &dt.c);
	dt_op_scatter_add(&idx.g, &dy.g, &dt.g);
	expect_close("scatter_add", &dt, 1e-5); /* atomics add in another order */
	pair_free(&idx);
	pair_free(&table);
	pair_free(&y);
	pair_free(&dy);
	pair_free(&dt);
	free(host);
}

/* ---- layer normalization (issue 14, resnet): the GPU's kernels against oneDNN's primitive ---- */

static void ln_case(int n, int rows, int c, int use_gamma, int with_dx)
{
	struct dt_plan *pc = dt_plan_layernorm(DT_CPU, c, rows, 1e-3f, n);
	struct dt_plan *pg = dt_plan_layernorm(GPU, c, rows, 1e-3f, n);
	struct dt_shape xs = sh(3, n, rows, c, 0), cs = sh(1, c, 0, 0, 0);
	struct pair x = pair_rnd(xs, 150, -2, 3), y = pair_new(xs, NULL), dy = pair_rnd(xs, 151, -1, 1);
	struct pair dx = pair_new(xs, NULL), gamma = pair_rnd(cs, 152, 0.5f, 1.5f), beta = pair_rnd(cs, 153, -1, 1);
	struct pair dg = pair_new(cs, NULL), dbeta = pair_new(cs, NULL);
	const struct dt_tensor *gc = use_gamma ? &gamma.c : NULL, *gg = use_gamma ? &gamma.g : NULL;

	dt_op_layernorm_forward(pc, &x.c, gc, use_gamma ? &beta.c : NULL, &y.c);
	dt_op_layernorm_forward(pg, &x.g, gg, use_gamma ? &beta.g : NULL, &y.g);
	expect_close("layernorm forward", &y, TOL);
	dt_op_layernorm_backward(pc, &x.c, &dy.c, gc, use_gamma ? &dg.c : NULL, use_gamma ? &dbeta.c : NULL,
				 with_dx ? &dx.c : NULL);
	dt_op_layernorm_backward(pg, &x.g, &dy.g, gg, use_gamma ? &dg.g : NULL, use_gamma ? &dbeta.g : NULL,
				 with_dx ? &dx.g : NULL);
	if (with_dx)
		expect_close("layernorm dx", &dx, 1e-3);
	if (use_gamma) {
		expect_close("layernorm dgamma", &dg, TOL);
		expect_close("layernorm dbeta", &dbeta, TOL);
	}
	pair_free(&x);
	pair_free(&y);
	pair_free(&dy);
	pair_free(&dx);
	pair_free(&gamma);
	pair_free(&beta);
	pair_free(&dg);
	pair_free(&dbeta);
	dt_plan_free(pc);
	dt_plan_free(pg);
}

static void test_layernorm(void **state)
{
	need_gpu();
	ln_case(16, 49, 32, 1, 1);
	ln_case(7, 1, 10, 0, 1);
	ln_case(5, 28, 300, 1, 0); /* more channels than a block has threads; no dx (a first layer) */
	ln_case(64, 3, 3, 1, 1);
}

/* ---- rnn: cuDNN's recurrent plans and Bidirectional's merge against the CPU's (oneDNN) ---- */

static void rnn_case(enum dt_rnn_cell cell, enum dt_activation act, int n, int steps, int in, int units, int seqs,
		     int back, int use_bias)
{
	struct dt_rnn_geom geo = { cell, steps, in, units, act, use_bias, back, seqs };
	int G = dt_rnn_gates(cell), brows = dt_rnn_bias_rows(cell);
	struct dt_plan *pc = dt_plan_rnn(DT_CPU, &geo, n), *pg = dt_plan_rnn(GPU, &geo, n);
	struct dt_shape xs = sh(3, n, steps, in, 0), ys = seqs ? sh(3, n, steps, units, 0) : sh(2, n, units, 0, 0);
	struct dt_shape ws = sh(2, in, G * units, 0, 0), us = sh(2, units, G * units, 0, 0);
	struct dt_shape bs = brows == 2 ? sh(2, 2, G * units, 0, 0) : sh(1, G * units, 0, 0, 0);
	struct pair x = pair_rnd(xs, 150, -1, 1), w = pair_rnd(ws, 151, -0.5f, 0.5f), u = pair_rnd(us, 152, -0.5f, 0.5f);
	struct pair b = pair_rnd(bs, 153, -0.5f, 0.5f), y = pair_new(ys, NULL), dy = pair_rnd(ys, 154, -1, 1);
	struct pair dx = pair_new(xs, NULL), dw = pair_new(ws, NULL), du = pair_new(us, NULL), db = pair_new(bs, NULL);
	char what[96];

	assert_non_null(pc);
	assert_non_null(pg);
	dt_op_rnn_forward(pc, 1, &x.c, &w.c, &u.c, use_bias ? &b.c : NULL, &y.c);
	dt_op_rnn_forward(pg, 1, &x.g, &w.g, &u.g, use_bias ? &b.g : NULL, &y.g);
	snprintf(what, sizeof(what), "rnn cell %d seqs %d back %d: y", (int)cell, seqs, back);
	expect_close(what, &y, TOL);
	dt_op_rnn_backward(pc, &x.c, &w.c, &u.c, use_bias ? &b.c : NULL, &y.c, &dy.c, &dw.c, &du.c, &db.c, &dx.c);
	dt_op_rnn_backward(pg, &x.g, &w.g, &u.g, use_bias ? &b.g : NULL, &y.g, &dy.g, &dw.g, &du.g, &db.g, &dx.g);
	snprintf(what, sizeof(what), "rnn cell %d seqs %d back %d: dx", (int)cell, seqs, back);
	expect_close(what, &dx, 1e-3);
	snprintf(what, sizeof(what), "rnn cell %d seqs %d back %d: dkernel", (int)cell, seqs, back);
	expect_close(what, &dw, 1e-3);
	snprintf(what, sizeof(what), "rnn cell %d seqs %d back %d: drecurrent_kernel", (int)cell, seqs, back);
	expect_close(what, &du, 1e-3);
	if (use_bias) {
		snprintf(what, sizeof(what), "rnn cell %d seqs %d back %d: dbias", (int)cell, seqs, back);
		expect_close(what, &db, 1e-3);
	}
	pair_free(&x);
	pair_free(&w);
	pair_free(&u);
	pair_free(&b);
	pair_free(&y);
	pair_free(&dy);
	pair_free(&dx);
	pair_free(&dw);
	pair_free(&du);
	pair_free(&db);
	dt_plan_free(pc);
	dt_plan_free(pg);
}

static void merge_case(enum dt_rnn_merge mode, int n, int steps, int units)
{
	struct dt_shape hs = sh(3, n, steps, units, 0), ys = sh(3, n, steps, mode == DT_RNN_MERGE_CONCAT ? 2 * units : units, 0);
	struct pair yf = pair_rnd(hs, 160, -1, 1), yb = pair_rnd(hs, 161, -1, 1), y = pair_new(ys, NULL);
	struct pair dy = pair_rnd(ys, 162, -1, 1), dyf = pair_new(hs, NULL), dyb = pair_new(hs, NULL);
	dt_op_rnn_merge(mode, steps, &yf.c, &yb.c, &y.c);
	dt_op_rnn_merge(mode, steps, &yf.g, &yb.g, &y.g);
	expect_close("rnn merge", &y, 1e-6);
	dt_op_rnn_merge_backward(mode, steps, &dy.c, &yf.c, &yb.c, &dyf.c, &dyb.c);
	dt_op_rnn_merge_backward(mode, steps, &dy.g, &yf.g, &yb.g, &dyf.g, &dyb.g);
	expect_close("rnn merge dyf", &dyf, 1e-6);
	expect_close("rnn merge dyb", &dyb, 1e-6);
	pair_free(&yf);
	pair_free(&yb);
	pair_free(&y);
	pair_free(&dy);
	pair_free(&dyf);
	pair_free(&dyb);
}

static void test_rnn(void **state)
{
	need_gpu();
	rnn_case(DT_RNN_LSTM, DT_ACT_TANH, 16, 28, 28, 32, 0, 0, 1);
	rnn_case(DT_RNN_LSTM, DT_ACT_TANH, 5, 7, 3, 4, 1, 1, 1);
	rnn_case(DT_RNN_LSTM, DT_ACT_TANH, 3, 4, 5, 6, 1, 0, 0);
	rnn_case(DT_RNN_GRU_RESET_AFTER, DT_ACT_TANH, 8, 10, 6, 16, 0, 1, 1);
	rnn_case(DT_RNN_GRU_RESET_AFTER, DT_ACT_TANH, 4, 5, 3, 7, 1, 0, 1);
	rnn_case(DT_RNN_SIMPLE, DT_ACT_TANH, 6, 9, 4, 8, 1, 1, 1);
	rnn_case(DT_RNN_SIMPLE, DT_ACT_RELU, 6, 9, 4, 8, 0, 0, 1);
	/* the original GRU has no cuDNN cell: the plan says so with NULL */
	{
		struct dt_rnn_geom geo = { DT_RNN_GRU, 4, 3, 2, DT_ACT_TANH, 1, 0, 0 };
		assert_null(dt_plan_rnn(GPU, &geo, 4));
	}
	for (int m = 0; m < 4; m++) {
		merge_case((enum dt_rnn_merge)m, 3, 5, 4);
		merge_case((enum dt_rnn_merge)m, 4, 1, 6);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_loader_reports_consistently),
		cmocka_unit_test(test_precision_needs_gpu),
		cmocka_unit_test(test_host_buffers),
		cmocka_unit_test(test_elementwise),
		cmocka_unit_test(test_gemm),
		cmocka_unit_test(test_gemm_reduced_precision),
		cmocka_unit_test(test_bias),
		cmocka_unit_test(test_activations),
		cmocka_unit_test(test_dropout_same_mask),
		cmocka_unit_test(test_losses),
		cmocka_unit_test(test_loss_args),
		cmocka_unit_test(test_count_correct),
		cmocka_unit_test(test_error_sums),
		cmocka_unit_test(test_metric_counts),
		cmocka_unit_test(test_optimizers),
		cmocka_unit_test(test_regularize),
		cmocka_unit_test(test_conv),
		cmocka_unit_test(test_conv_heuristics_and_tf32),
		cmocka_unit_test(test_pool),
		cmocka_unit_test(test_batchnorm),
		cmocka_unit_test(test_seq_conv_pool),
		cmocka_unit_test(test_rnn),
		cmocka_unit_test(test_grouped_conv),
		cmocka_unit_test(test_deconv),
		cmocka_unit_test(test_shift_upsample),
		cmocka_unit_test(test_embedding_ops),
		cmocka_unit_test(test_layernorm),
	};
	dt_error_set_quiet(1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
