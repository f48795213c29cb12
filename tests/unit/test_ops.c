/*
 * The CPU backend's ops against naive references and hand-computed values.
 */
#include <float.h>
#include <math.h>

#include "helpers.h"

#include "core/cpu/ops_cpu.h"
#include "core/ops.h"
#include "core/rows.h"
#include "core/rng.h"

static struct dt_tensor mat(float *d, int r, int c) { return (struct dt_tensor){ d, { 2, { r, c } }, DT_CPU }; }

static void fill_random(float *x, int n, uint64_t seed)
{
	struct dt_rng r;
	dt_rng_seed(&r, seed, 0);
	for (int i = 0; i < n; i++)
		x[i] = (float)(2 * dt_rng_uniform(&r) - 1);
}

/* t (cols x rows) = the transpose of x (rows x cols). */
static void transpose(const float *x, int rows, int cols, float *t)
{
	for (int i = 0; i < rows; i++)
		for (int j = 0; j < cols; j++)
			t[j * rows + i] = x[i * cols + j];
}

/* ref (m x n) = a (m x k) b (k x n) in double, of the operands rounded to bfloat16 when bf16. */
static void product(const float *a, const float *b, int m, int k, int n, int bf16, float *ref)
{
	for (int i = 0; i < m; i++)
		for (int j = 0; j < n; j++) {
			double s = 0;
			for (int l = 0; l < k; l++)
				s += (double)(bf16 ? dt_test_bf16(a[i * k + l]) : a[i * k + l]) *
				     (bf16 ? dt_test_bf16(b[l * n + j]) : b[l * n + j]);
			ref[i * n + j] = (float)s;
		}
}

/*
 * c = a b (m x k times k x n) for every transpose of a and b, with alpha 1
 * and beta 0 and with alpha 2 and beta 0.5 (c = 2 ab + 0.5), against ref
 * within tol; at and bt: a and b transposed.
 */
static void check_transposes(float *a, float *at, float *b, float *bt, const float *ref, int m, int k, int n,
			     float *c, double tol)
{
	for (int ta = 0; ta < 2; ta++)
		for (int tb = 0; tb < 2; tb++)
			for (int beta = 0; beta < 2; beta++) {
				struct dt_tensor A = ta ? mat(at, k, m) : mat(a, m, k), B = tb ? mat(bt, n, k) : mat(b, k, n);
				struct dt_tensor C = mat(c, m, n);
				for (int i = 0; i < m * n; i++)
					c[i] = 1;
				dt_op_gemm(ta, tb, beta ? 2 : 1, &A, &B, beta ? 0.5f : 0, &C);
				for (int i = 0; i < m * n; i++)
					assert_float_equal(c[i], beta ? 2 * ref[i] + 0.5f : ref[i], tol);
			}
}

static void test_gemm_all_transposes(void **state)
{
	enum { M = 7, K = 5, N = 3 };
	float a[M * K], b[K * N], at[K * M], bt[N * K], c[M * N], ref[M * N];
	fill_random(a, M * K, 1);
	fill_random(b, K * N, 2);
	transpose(a, M, K, at);
	transpose(b, K, N, bt);
	product(a, b, M, K, N, 0, ref);
	/* twice: a b^T goes to a cached matmul primitive (matmul.c), found the second time */
	for (int rep = 0; rep < 2; rep++)
		check_transposes(a, at, b, bt, ref, M, K, N, c, 1e-5);
}

/*
 * Operands whose rows are 512 and 1024 floats apart, which dt_cpu_sgemm copies
 * to longer rows on an AVX2 CPU (matmul.c): m and n of 512 and 1024 put them
 * on every operand in turn, at 1 and 2 threads, twice (the copies' buffers
 * are grown once and reused).
 */
static void test_gemm_aliasing_rows(void **state)
{
	static const int shapes[][3] = { { 3, 6, 512 }, { 512, 6, 1024 }, { 1024, 4, 5 } }; /* m, k, n */
	(void)state;
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		int m = shapes[s][0], k = shapes[s][1], n = shapes[s][2];
		float *a = malloc(sizeof(float) * m * k), *at = malloc(sizeof(float) * m * k);
		float *b = malloc(sizeof(float) * k * n), *bt = malloc(sizeof(float) * k * n);
		float *c = malloc(sizeof(float) * m * n), *ref = malloc(sizeof(float) * m * n);
		fill_random(a, m * k, 10 + s);
		fill_random(b, k * n, 20 + s);
		transpose(a, m, k, at);
		transpose(b, k, n, bt);
		product(a, b, m, k, n, 0, ref);
		for (int threads = 1; threads <= 2; threads++) {
			dt_ops_set_threads(threads);
			for (int rep = 0; rep < 2; rep++)
				check_transposes(a, at, b, bt, ref, m, k, n, c, 1e-5);
		}
		dt_ops_set_threads(1);
		free(a), free(at), free(b), free(bt), free(c), free(ref);
	}
}

/*
 * Precision bf16 on a CPU that has it: products of bfloat16-rounded
 * operands summed in float32, for every transpose and with alpha and beta;
 * the operands go in unrounded, so a float32 product fails the tolerance.
 * On other CPUs bf16 is refused and tf32 everywhere.
 */
static void test_gemm_bf16(void **state)
{
	enum { M = 37, K = 53, N = 29 };
	float a[M * K], b[K * N], at[K * M], bt[N * K], c[M * N], ref[M * N];
	char why[256];

	assert_int_equal(dt_ops_set_cpu_precision(DT_PRECISION_TF32, why, sizeof why), -1);
	assert_non_null(strstr(why, "needs a GPU"));
	if (!dt_ops_cpu_has_bf16()) {
		assert_int_equal(dt_ops_set_cpu_precision(DT_PRECISION_BF16, why, sizeof why), -1);
		assert_non_null(strstr(why, dt_ops_cpu_isa()));
		return;
	}
	fill_random(a, M * K, 3);
	fill_random(b, K * N, 4);
	transpose(a, M, K, at);
	transpose(b, K, N, bt);
	product(a, b, M, K, N, 1, ref);
	assert_int_equal(dt_ops_set_cpu_precision(DT_PRECISION_BF16, why, sizeof why), 0);
	check_transposes(a, at, b, bt, ref, M, K, N, c, 2e-5);
	assert_int_equal(dt_ops_set_cpu_precision(DT_PRECISION_FP32, why, sizeof why), 0);
	{
		struct dt_tensor A = mat(a, M, K), B = mat(b, K, N), C = mat(c, M, N);
		double worst = 0;
		dt_op_gemm(0, 0, 1, &A, &B, 0, &C);
		for (int i = 0; i < M * N; i++)
			worst = fmax(worst, fabs(c[i] - ref[i]));
		assert_true(worst > 1e-4); /* fp32 again: the rounding is gone */
	}
}

static float from_bits(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

/*
 * dt_cpu_to_bf16, the bfloat16 copies of bf16 products: at 1 and 2 threads,
 * into a line-aligned destination and one 2 bytes past it, over a length
 * that takes the threads' tiles and a tail, every value rounds to nearest
 * even (the test's own rounding), and the special values as
 * vcvtneps2bf16: denormals to a zero of their sign, infinities kept, NaN
 * quiet with its sign, the largest float to infinity.
 */
static void test_to_bf16(void **state)
{
	enum { N = 3 * 32768 + 45 };
	static const struct {
		uint32_t in;
		uint16_t out;
	} special[] = {
		{ 0x00000000u, 0x0000 }, { 0x80000000u, 0x8000 }, { 0x00000001u, 0x0000 }, { 0x807fffffu, 0x8000 },
		{ 0x3f808000u, 0x3f80 }, { 0x3f818000u, 0x3f82 }, { 0x3f808001u, 0x3f81 }, { 0x7f800000u, 0x7f80 },
		{ 0xff800000u, 0xff80 }, { 0x7f800001u, 0x7fc0 }, { 0xffc12345u, 0xffc1 }, { 0x7f7fffffu, 0x7f80 },
	};
	const int ns = (int)(sizeof(special) / sizeof(special[0]));
	float *src = malloc(N * sizeof(float));
	uint16_t *buf = aligned_alloc(64, ((N + 64) * sizeof(uint16_t) + 63) & ~(size_t)63); /* a multiple of the alignment */
	int threads = dt_ops_get_threads();

	fill_random(src, N, 7);
	for (int i = 0; i < N; i++)
		src[i] *= 1e3f;
	for (int i = 0; i < ns; i++) { /* in the first tile, in the second thread's, in the tail */
		src[5 + i] = from_bits(special[i].in);
		src[N / 2 + 7 + i] = from_bits(special[i].in);
		src[N - ns + i] = from_bits(special[i].in);
	}
	for (int t = 1; t <= 2; t++)
		for (int off = 0; off <= 1; off++) {
			uint16_t *dst = buf + off;
			int bad = 0;
			dt_ops_set_threads(t);
			memset(buf, 0xee, (N + 64) * sizeof(uint16_t));
			dt_cpu_to_bf16(dst, src, N);
			for (int i = 0; i < N; i++) {
				float r = dt_test_bf16(src[i]);
				uint32_t u;
				memcpy(&u, &r, sizeof(u));
				if (isfinite(src[i]) && fabsf(src[i]) >= FLT_MIN && fabsf(src[i]) < 3e38f && dst[i] != u >> 16)
					bad++;
			}
			for (int i = 0; i < ns; i++) {
				assert_int_equal(dst[5 + i], special[i].out);
				assert_int_equal(dst[N / 2 + 7 + i], special[i].out);
				assert_int_equal(dst[N - ns + i], special[i].out);
			}
			assert_int_equal(bad, 0);
			assert_int_equal(buf[off + N], 0xeeee); /* nothing past the end */
			if (off)
				assert_int_equal(buf[0], 0xeeee);
		}
	dt_ops_set_threads(threads);
	free(src);
	free(buf);
}

/*
 * dt_ops_set_threads makes the caller and the OpenMP team flush denormals
 * to zero (x86's FTZ and DAZ): a product below FLT_MIN comes out 0, and a
 * denormal operand counts as 0.
 */
static void test_threads_flush_denormals(void **state)
{
#if defined(__SSE2__)
	volatile float tiny = 1e-20f, denormal = 1e-40f;
	int zero_everywhere = 1;
	dt_ops_set_threads(2);
	assert_true(tiny * tiny == 0.0f);
	assert_true(denormal * 1e10f == 0.0f);
#pragma omp parallel reduction(&& : zero_everywhere)
	zero_everywhere = tiny * tiny == 0.0f && denormal + 0.0f == 0.0f;
	assert_true(zero_everywhere);
#else
	skip();
#endif
}

/*
 * Every optimizer's update with two threads (each its tiles, non-temporal
 * stores) gives the bits of one thread's plain loop, over a range that is
 * neither a multiple of the tile nor aligned to a cache line, in three steps.
 */
static void test_optimizer_threads_agree(void **state)
{
	enum { N = 100003 };
	static const struct {
		enum dt_opt_kind kind;
		float momentum;
		int nesterov, slots, amsgrad;
		float clipvalue;
	} cases[] = {
		{ DT_OPT_SGD, 0, 0, 0, 0, 0 },	     { DT_OPT_SGD, 0.9f, 1, 1, 0, 0 },	 { DT_OPT_ADAM, 0, 0, 2, 0, 0 },
		{ DT_OPT_ADAMW, 0, 0, 2, 0, 0 },     { DT_OPT_ADAM, 0, 0, 3, 1, 0.3f }, { DT_OPT_RMSPROP, 0.5f, 0, 2, 0, 0 },
		{ DT_OPT_ADAGRAD, 0, 0, 1, 0, 0 },   { DT_OPT_ADADELTA, 0, 0, 2, 0, 0 }, { DT_OPT_ADAMAX, 0, 0, 2, 0, 0 },
		{ DT_OPT_NADAM, 0, 0, 2, 0, 0.5f }, { DT_OPT_LION, 0, 0, 1, 0, 0 },
	};
	int threads = dt_ops_get_threads();
	float *buf[2][4], *grad = dt_malloc((N + 1) * sizeof(float));
	fill_random(grad, N + 1, 7);
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		for (int run = 0; run < 2; run++) {
			struct dt_shape s = { 1, { N } };
			struct dt_tensor t[4];
			for (int b = 0; b < 4; b++) {
				buf[run][b] = dt_calloc(N + 1, sizeof(float));
				t[b] = (struct dt_tensor){ buf[run][b] + 1, s, DT_CPU }; /* off a line's start */
			}
			fill_random(buf[run][0], N + 1, 3);
			struct dt_tensor g = { grad + 1, s, DT_CPU };
			dt_ops_set_threads(run ? 2 : 1);
			for (int step = 1; step <= 3; step++) {
				struct dt_opt_step st = { .kind = cases[k].kind, .lr = 0.01f, .momentum = cases[k].momentum,
							  .rho = 0.9, .nesterov = cases[k].nesterov, .beta_1 = 0.9,
							  .beta_2 = 0.999, .epsilon = 1e-7f, .t = step, .weight_decay = 0.004,
							  .grad_scale = 0.8f, .clipvalue = cases[k].clipvalue,
							  .amsgrad = cases[k].amsgrad, .nadam_product = 0.5 };
				int has1 = cases[k].slots >= 1 && (cases[k].kind != DT_OPT_RMSPROP || cases[k].momentum > 0);
				dt_op_optimizer_update(&st, &t[0], &g, has1 ? &t[1] : NULL,
						       cases[k].slots >= 2 ? &t[2] : NULL, cases[k].slots == 3 ? &t[3] : NULL);
			}
		}
		for (int b = 0; b < 4; b++) {
			if (memcmp(buf[0][b], buf[1][b], (N + 1) * sizeof(float)))
				fail_msg("%s: buffer %d differs between 1 and 2 threads", dt_optimizer_names[cases[k].kind], b);
			free(buf[0][b]);
			free(buf[1][b]);
		}
	}
	free(grad);
	dt_ops_set_threads(threads);
}

static void test_bias(void **state)
{
	float y[6] = { 1, 2, 3, 4, 5, 6 }, b[3] = { 10, 20, 30 }, db[3] = { 1, 1, 1 };
	struct dt_tensor Y = mat(y, 2, 3), B = { b, { 1, { 3 } }, DT_CPU }, DB = { db, { 1, { 3 } }, DT_CPU };
	dt_op_bias_add(&Y, &B);
	assert_float_equal(y[0], 11, 0);
	assert_float_equal(y[5], 36, 0);
	dt_op_bias_grad(&Y, 0, &DB);
	assert_float_equal(db[0], 11 + 14, 0);
	assert_float_equal(db[2], 33 + 36, 0);
	dt_op_bias_grad(&Y, 1, &DB); /* accumulate */
	assert_float_equal(db[1], 2 * (22 + 25), 0);
}

static void test_bias_grad_wide(void **state)
{
	/* More columns than one block, rows enough to go parallel. */
	enum { R = 300, C = 150 };
	float *dy = malloc(R * C * sizeof(float)), db[C];
	struct dt_tensor DY = mat(dy, R, C), DB = { db, { 1, { C } }, DT_CPU };
	fill_random(dy, R * C, 3);
	dt_op_bias_grad(&DY, 0, &DB);
	for (int j = 0; j < C; j++) {
		double s = 0;
		for (int r = 0; r < R; r++)
			s += dy[r * C + j];
		assert_float_equal(db[j], s, 1e-3);
	}
	free(dy);
}

static void test_activations(void **state)
{
	float x[4] = { -2, -0.5f, 0.5f, 3 }, y[4];
	struct dt_tensor X = mat(x, 1, 4), Y = mat(y, 1, 4);
	dt_op_act_forward(DT_ACT_RELU, &X, &Y);
	assert_float_equal(y[0], 0, 0);
	assert_float_equal(y[3], 3, 0);
	dt_op_act_forward(DT_ACT_SIGMOID, &X, &Y);
	assert_float_equal(y[2], 1 / (1 + exp(-0.5)), 1e-6);
	dt_op_act_forward(DT_ACT_TANH, &X, &Y);
	assert_float_equal(y[0], tanh(-2), 1e-6);
	dt_op_act_forward(DT_ACT_SOFTMAX, &X, &Y);
	assert_float_equal(y[0] + y[1] + y[2] + y[3], 1, 1e-6);
	assert_float_equal(y[3] / y[2], exp(2.5), 1e-3);
	dt_op_act_forward(DT_ACT_LINEAR, &X, &Y);
	assert_memory_equal(x, y, sizeof(x));
	/* A NaN stays NaN through every activation (relu made it 0: a NaN input trained on silently). */
	for (enum dt_activation act = DT_ACT_RELU; act <= DT_ACT_SOFTPLUS; act++) {
		float v[4] = { NAN, -1, 1, NAN }, w[4];
		struct dt_tensor V = mat(v, 1, 4), W = mat(w, 1, 4);
		if (act == DT_ACT_SOFTMAX)
			continue;
		dt_op_act_forward(act, &V, &W);
		assert_true(isnan(w[0]) && isnan(w[3]));
		assert_false(isnan(w[1]) || isnan(w[2]));
	}
}

static void test_softmax_large_logits(void **state)
{
	float x[3] = { 1000, 1001, -1000 }, y[3];
	struct dt_tensor X = mat(x, 1, 3), Y = mat(y, 1, 3);
	dt_op_act_forward(DT_ACT_SOFTMAX, &X, &Y);
	assert_false(isnan(y[0]) || isnan(y[1]));
	assert_float_equal(y[1], 1 / (1 + exp(-1)), 1e-6);
	assert_float_equal(y[2], 0, 1e-30);
}

static void test_dropout(void **state)
{
	enum { N = 100000 };
	float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float)), *m = malloc(N * sizeof(float));
	float *y2 = malloc(N * sizeof(float));
	struct dt_tensor X = mat(x, 1, N), Y = mat(y, 1, N), M = mat(m, 1, N), Y2 = mat(y2, 1, N);
	int zeros = 0;
	for (int i = 0; i < N; i++)
		x[i] = 1;
	dt_op_dropout(&X, &Y, &M, 0.3f, 42, 0);
	for (int i = 0; i < N; i++) {
		zeros += y[i] == 0;
		if (y[i] != 0)
			assert_float_equal(y[i], 1 / 0.7, 1e-6);
	}
	assert_in_range(zeros, 29000, 31000);
	dt_op_dropout(&X, &Y2, &M, 0.3f, 42, 0);
	assert_memory_equal(y, y2, N * sizeof(float)); /* same key, same mask */
	dt_op_dropout(&X, &Y2, &M, 0.3f, 43, 0);
	assert_memory_not_equal(y, y2, N * sizeof(float));
	/* Each mask value is dt_dropout_mask's of its element's index, up to the last the counter takes. */
	{
		const int64_t first = ((int64_t)1 << 32) - N;
		const float keep = 1 / (1 - 0.3f);
		dt_op_dropout(&X, &Y2, &M, 0.3f, 42, first);
		for (int i = 0; i < N; i++)
			assert_true(m[i] == dt_dropout_mask(42, first + i, 0.3f, keep) && y2[i] == m[i]);
	}
	/* A replica's slice from element 1234 of the batch draws the batch's mask there. */
	struct dt_tensor Xs = mat(x, 1, N - 1234), Ys = mat(y2, 1, N - 1234), Ms = mat(m, 1, N - 1234);
	dt_op_dropout(&Xs, &Ys, &Ms, 0.3f, 42, 1234);
	assert_memory_equal(y + 1234, y2, (N - 1234) * sizeof(float));
	dt_op_dropout(&Xs, &Ys, &Ms, 0.3f, 42, 0);
	assert_memory_not_equal(y + 1234, y2, (N - 1234) * sizeof(float));
	/* Two threads (streamed tiles) give one thread's y and mask, also off a cache line's start. */
	{
		int threads = dt_ops_get_threads();
		float *m2 = malloc(N * sizeof(float));
		struct dt_tensor Xo = mat(x + 1, 1, N - 1), Yo = mat(y + 1, 1, N - 1), Mo = mat(m + 1, 1, N - 1);
		struct dt_tensor Yo2 = mat(y2 + 1, 1, N - 1), Mo2 = mat(m2 + 1, 1, N - 1);
		fill_random(x, N, 5);
		dt_ops_set_threads(1);
		dt_op_dropout(&Xo, &Yo, &Mo, 0.3f, 7, 99);
		dt_ops_set_threads(2);
		dt_op_dropout(&Xo, &Yo2, &Mo2, 0.3f, 7, 99);
		assert_memory_equal(y + 1, y2 + 1, (N - 1) * sizeof(float));
		assert_memory_equal(m + 1, m2 + 1, (N - 1) * sizeof(float));
		/* Without a mask kept, the same y, in place too, and at 1 and 2 threads: what the layer's backward relies on. */
		for (int t = 1; t <= 2; t++) {
			dt_ops_set_threads(t);
			dt_op_dropout(&Xo, &Yo2, NULL, 0.3f, 7, 99);
			assert_memory_equal(y + 1, y2 + 1, (N - 1) * sizeof(float));
			memcpy(y2, x, N * sizeof(float));
			dt_op_dropout(&Yo2, &Yo2, NULL, 0.3f, 7, 99);
			assert_memory_equal(y + 1, y2 + 1, (N - 1) * sizeof(float));
		}
		for (int i = 1; i < N; i++)
			assert_true(y[i] == x[i] * m[i]);
		dt_ops_set_threads(threads);
		free(m2);
	}
	free(x);
	free(y);
	free(y2);
	free(m);
}

static void test_count_correct(void **state)
{
	float p[6] = { 0.1f, 0.7f, 0.2f, 0.5f, 0.3f, 0.2f }, sparse[2] = { 1, 2 };
	float onehot[6] = { 0, 1, 0, 1, 0, 0 }, b[4] = { 0.2f, 0.8f, 0.6f, 0.4f }, bt[4] = { 0, 1, 0, 0 };
	struct dt_tensor P = mat(p, 2, 3), S = mat(sparse, 2, 1), O = mat(onehot, 2, 3);
	struct dt_tensor B = mat(b, 2, 2), BT = mat(bt, 2, 2);
	assert_int_equal(dt_op_count_correct(DT_ACC_SPARSE, &P, &S, 0), 1);
	assert_int_equal(dt_op_count_correct(DT_ACC_CATEGORICAL, &P, &O, 0), 2);
	assert_int_equal(dt_op_count_correct(DT_ACC_BINARY, &B, &BT, 0.5f), 3);
}

/* MAE and RMSE's sums over every element, by hand; a large batch takes the parallel path. */
static void test_error_sums(void **state)
{
	enum { R = 3000, C = 3 };
	float p[4] = { 1, -2, 0.5f, 4 }, t[4] = { 0, 1, 0.5f, 2 };
	float *bp = malloc(sizeof(float) * R * C), *bt = malloc(sizeof(float) * R * C);
	struct dt_tensor P = mat(p, 2, 2), T = mat(t, 2, 2), BP = mat(bp, R, C), BT = mat(bt, R, C);
	double sums[2], abs_ref = 0, sq_ref = 0;
	dt_op_error_sums(&P, &T, sums);
	assert_float_equal(sums[0], 1 + 3 + 0 + 2, 0);
	assert_float_equal(sums[1], 1 + 9 + 0 + 4, 0);
	fill_random(bp, R * C, 7);
	fill_random(bt, R * C, 8);
	for (int i = 0; i < R * C; i++) {
		double d = (double)bp[i] - bt[i];
		abs_ref += fabs(d);
		sq_ref += d * d;
	}
	dt_op_error_sums(&BP, &BT, sums);
	assert_float_equal(sums[0], abs_ref, 1e-9 * abs_ref);
	assert_float_equal(sums[1], sq_ref, 1e-9 * sq_ref);
	free(bp);
	free(bt);
}

static void test_loss_values(void **state)
{
	float p[4] = { 0.25f, 0.75f, 0.5f, 0.5f }, t[2] = { 1, 0 }, g[4];
	float mp[2] = { 1, 3 }, mt[2] = { 0, 1 }, mg[2];
	struct dt_tensor P = mat(p, 2, 2), T = mat(t, 2, 1), G = mat(g, 2, 2);
	struct dt_tensor MP = mat(mp, 1, 2), MT = mat(mt, 1, 2), MG = mat(mg, 1, 2);
	double l = dt_op_loss(DT_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY, DT_LOSS_PROBS, &P, &T, &G, 0.5f);
	assert_float_equal(l, -log(0.75) - log(0.5), 1e-6);
	assert_float_equal(g[1], -0.5 / 0.75, 1e-6);
	assert_float_equal(g[0], 0, 0);
	l = dt_op_loss(DT_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY, DT_LOSS_FUSED, &P, &T, &G, 0.5f);
	assert_float_equal(g[0], 0.5 * 0.25, 1e-6);
	assert_float_equal(g[1], 0.5 * (0.75 - 1), 1e-6);
	/* mse is the mean over the outputs: ((1-0)^2 + (3-1)^2) / 2 */
	l = dt_op_loss(DT_LOSS_MEAN_SQUARED_ERROR, DT_LOSS_PROBS, &MP, &MT, &MG, 1);
	assert_float_equal(l, 2.5, 1e-6);
	assert_float_equal(mg[1], 2 * 2 / 2.0, 1e-6);
	/* a probability of 0 is clipped to 1e-7, never -log(0) */
	p[1] = 0;
	l = dt_op_loss(DT_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY, DT_LOSS_PROBS, &P, &T, NULL, 1);
	assert_float_equal(l, -log(1e-7) - log(0.5), 1e-3);
}

static void test_elementwise(void **state)
{
	float a[3] = { 1, 2, 3 }, b[3] = { 4, 5, 6 }, c[3];
	struct dt_tensor A = mat(a, 1, 3), B = mat(b, 1, 3), C = mat(c, 1, 3);
	dt_op_mul(&A, &B, &C);
	assert_float_equal(c[2], 18, 0);
	dt_op_axpy(2, &A, &B);
	assert_float_equal(b[0], 6, 0);
	dt_op_scale(&A, -1);
	assert_float_equal(a[1], -2, 0);
	assert_float_equal(dt_op_sum_squares(&A), 14, 0);
	dt_op_fill(&C, 7);
	assert_float_equal(c[1], 7, 0);
	dt_op_copy(&C, &A);
	assert_float_equal(a[0], 7, 0);
}

/*
 * Embedding's ops: rows by index (a fraction rounds to the nearest),
 * repeated tokens summed in their row; an index that names no row
 * (negative, too large, NaN) reads zeros and adds nothing, never out of
 * bounds.
 */
static void test_gather_scatter(void **state)
{
	float table[4 * 2] = { 0, 1, 10, 11, 20, 21, 30, 31 };
	float idx[8] = { 2, 0, 2, -1, 4, NAN, 3, 0.9999f };
	float y[8 * 2], dy[8 * 2], dt[4 * 2];
	const float want_y[8 * 2] = { 20, 21, 0, 1, 20, 21, 0, 0, 0, 0, 0, 0, 30, 31, 10, 11 };
	const float want_dt[4 * 2] = { 2, 2, 8, 8, 4, 4, 7, 7 };
	struct dt_tensor ti = mat(idx, 2, 4), tt = mat(table, 4, 2), tdt = mat(dt, 4, 2);
	struct dt_tensor ty = { y, { 3, { 2, 4, 2 } }, DT_CPU }, tdy = { dy, { 3, { 2, 4, 2 } }, DT_CPU };

	dt_op_gather(&ti, &tt, &ty);
	for (int i = 0; i < 16; i++)
		assert_float_equal(y[i], want_y[i], 0);
	for (int i = 0; i < 8; i++) /* row i's gradient: i + 1 in both columns */
		dy[2 * i] = dy[2 * i + 1] = (float)(i + 1);
	dt_op_fill(&tdt, 0);
	dt_op_scatter_add(&ti, &tdy, &tdt);
	for (int i = 0; i < 8; i++)
		assert_float_equal(dt[i], want_dt[i], 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gemm_all_transposes),
		cmocka_unit_test(test_gemm_aliasing_rows),
		cmocka_unit_test(test_gemm_bf16),
		cmocka_unit_test(test_to_bf16),
		cmocka_unit_test(test_threads_flush_denormals),
		cmocka_unit_test(test_optimizer_threads_agree),
		cmocka_unit_test(test_bias),
		cmocka_unit_test(test_bias_grad_wide),
		cmocka_unit_test(test_activations),
		cmocka_unit_test(test_softmax_large_logits),
		cmocka_unit_test(test_dropout),
		cmocka_unit_test(test_count_correct),
		cmocka_unit_test(test_error_sums),
		cmocka_unit_test(test_loss_values),
		cmocka_unit_test(test_elementwise),
		cmocka_unit_test(test_gather_scatter),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
