/*
 * Grouped convolution plans (dt_conv_geom.groups, behind depthwise_conv2d
 * and separable_conv2d) against plain loops on the CPU: forward, weight,
 * bias and data gradients, for depthwise groups (one input channel each,
 * the only case the PyTorch fixtures hold) and for groups of several input
 * and output channels, which checks the (kh, kw, in/groups, out) kernel
 * layout where in/groups > 1.
 */
#include <math.h>

#include "helpers.h"

#include "core/ops.h"
#include "core/rng.h"

struct geom {
	int n, h, w, cin, cout, groups, k, stride, pad;
};

static void fill(float *x, int64_t n, uint64_t seed)
{
	struct dt_rng r;
	dt_rng_seed(&r, seed, 3);
	for (int64_t i = 0; i < n; i++)
		x[i] = (float)(2 * dt_rng_uniform(&r) - 1);
}

static void expect_near(const char *what, const float *got, const double *want, int64_t n, double tol)
{
	for (int64_t i = 0; i < n; i++)
		if (fabs(got[i] - want[i]) > tol * (1 + fabs(want[i])))
			fail_msg("%s[%lld]: got %.7g, want %.7g", what, (long long)i, got[i], want[i]);
}

/*
 * One geometry's forward and backward against the loops, to tol: 1e-4 in
 * float32; under precision bf16 (a plan in bfloat16, or in float32 where
 * oneDNN has no bfloat16 primitive for the shape) 2e-2.
 */
static void check_tol(struct geom c, double tol)
{
	struct dt_conv_geom g = { 0 };
	int ig, og, oh, ow;
	int64_t nx, ny, nw;
	float *x, *w, *b, *y, *dy, *dw, *db, *dx;
	double *ry, *rdw, *rdb, *rdx;
	struct dt_plan *p;

	g.in_h = c.h;
	g.in_w = c.w;
	g.in_c = c.cin;
	g.out_c = c.cout;
	g.groups = c.groups;
	g.kh = g.kw = c.k;
	g.stride_h = g.stride_w = c.stride;
	g.dil_h = g.dil_w = 1;
	g.pad_top = g.pad_left = g.pad_bottom = g.pad_right = c.pad;
	oh = g.out_h = (c.h + 2 * c.pad - c.k) / c.stride + 1;
	ow = g.out_w = (c.w + 2 * c.pad - c.k) / c.stride + 1;
	ig = c.cin / c.groups;
	og = c.cout / c.groups;
	nx = (int64_t)c.n * c.h * c.w * c.cin;
	ny = (int64_t)c.n * oh * ow * c.cout;
	nw = (int64_t)c.k * c.k * ig * c.cout;
	x = malloc(nx * sizeof(float));
	dx = malloc(nx * sizeof(float));
	y = malloc(ny * sizeof(float));
	dy = malloc(ny * sizeof(float));
	w = malloc(nw * sizeof(float));
	dw = malloc(nw * sizeof(float));
	b = malloc(c.cout * sizeof(float));
	db = malloc(c.cout * sizeof(float));
	ry = calloc(ny, sizeof(double));
	rdx = calloc(nx, sizeof(double));
	rdw = calloc(nw, sizeof(double));
	rdb = calloc(c.cout, sizeof(double));
	fill(x, nx, 1);
	fill(w, nw, 2);
	fill(b, c.cout, 3);
	fill(dy, ny, 4);

	/* The loops: output channel o of group o / og reads input channels [grp * ig, grp * ig + ig). */
	for (int s = 0; s < c.n; s++)
		for (int i = 0; i < oh; i++)
			for (int j = 0; j < ow; j++)
				for (int o = 0; o < c.cout; o++) {
					int64_t yi = (((int64_t)s * oh + i) * ow + j) * c.cout + o;
					int grp = o / og;
					ry[yi] = b[o];
					rdb[o] += dy[yi];
					for (int u = 0; u < c.k; u++)
						for (int v = 0; v < c.k; v++) {
							int r = i * c.stride - c.pad + u, q = j * c.stride - c.pad + v;
							if (r < 0 || r >= c.h || q < 0 || q >= c.w)
								continue;
							for (int e = 0; e < ig; e++) {
								int64_t xi = (((int64_t)s * c.h + r) * c.w + q) * c.cin + grp * ig + e;
								int64_t wi = (((int64_t)u * c.k + v) * ig + e) * c.cout + o;
								ry[yi] += (double)x[xi] * w[wi];
								rdw[wi] += (double)x[xi] * dy[yi];
								rdx[xi] += (double)w[wi] * dy[yi];
							}
						}
				}

	p = dt_plan_conv(DT_CPU, &g, c.n);
	{
		struct dt_tensor X = { x, dt_shape_make(4, (int[]){ c.n, c.h, c.w, c.cin }), DT_CPU };
		struct dt_tensor DX = { dx, X.shape, DT_CPU };
		struct dt_tensor Y = { y, dt_shape_make(4, (int[]){ c.n, oh, ow, c.cout }), DT_CPU };
		struct dt_tensor DY = { dy, Y.shape, DT_CPU };
		struct dt_tensor W = { w, dt_shape_make(4, (int[]){ c.k, c.k, ig, c.cout }), DT_CPU };
		struct dt_tensor DW = { dw, W.shape, DT_CPU };
		struct dt_tensor B = { b, dt_shape_make(1, (int[]){ c.cout }), DT_CPU };
		struct dt_tensor DB = { db, B.shape, DT_CPU };
		dt_op_conv_forward(p, &X, &W, &B, &Y);
		dt_op_conv_backward(p, &X, &W, &DY, &DW, &DB, &DX);
	}
	expect_near("y", y, ry, ny, tol);
	expect_near("dw", dw, rdw, nw, tol);
	expect_near("db", db, rdb, c.cout, tol);
	expect_near("dx", dx, rdx, nx, tol);
	dt_plan_free(p);
	free(x);
	free(dx);
	free(y);
	free(dy);
	free(w);
	free(dw);
	free(b);
	free(db);
	free(ry);
	free(rdx);
	free(rdw);
	free(rdb);
}

static void check(struct geom c) { check_tol(c, 1e-4); }

static void test_depthwise(void **state)
{
	check((struct geom){ .n = 3, .h = 7, .w = 6, .cin = 4, .cout = 4, .groups = 4, .k = 3, .stride = 1, .pad = 1 });
	check((struct geom){ .n = 2, .h = 8, .w = 7, .cin = 3, .cout = 6, .groups = 3, .k = 3, .stride = 2, .pad = 0 });
}

static void test_groups_of_several_channels(void **state)
{
	check((struct geom){ .n = 2, .h = 6, .w = 6, .cin = 8, .cout = 12, .groups = 4, .k = 3, .stride = 1, .pad = 1 });
	check((struct geom){ .n = 2, .h = 5, .w = 7, .cin = 6, .cout = 4, .groups = 2, .k = 2, .stride = 2, .pad = 0 });
}

/* Where the CPU runs bf16: the same geometries in bfloat16, to its tolerance. */
static void test_bf16(void **state)
{
	char why[256];
	if (!dt_ops_cpu_has_bf16())
		skip();
	assert_int_equal(dt_ops_set_cpu_precision(DT_PRECISION_BF16, why, sizeof why), 0);
	check_tol((struct geom){ .n = 3, .h = 7, .w = 6, .cin = 4, .cout = 4, .groups = 4, .k = 3, .stride = 1, .pad = 1 },
		  2e-2);
	check_tol((struct geom){ .n = 2, .h = 8, .w = 7, .cin = 3, .cout = 6, .groups = 3, .k = 3, .stride = 2, .pad = 0 },
		  2e-2);
	check_tol((struct geom){ .n = 2, .h = 6, .w = 6, .cin = 8, .cout = 12, .groups = 4, .k = 3, .stride = 1, .pad = 1 },
		  2e-2);
	assert_int_equal(dt_ops_set_cpu_precision(DT_PRECISION_FP32, why, sizeof why), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_depthwise),
		cmocka_unit_test(test_groups_of_several_channels),
		cmocka_unit_test(test_bf16),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
