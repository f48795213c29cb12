/*
 * spatial_dropout1d/2d beyond the gradient check and the fixture: a mask
 * covers whole channels, it follows the sample's row in the global batch
 * (a replica computing rows 2..3 draws what one device draws for them), it
 * is dt_op_dropout's draw on a (batch, C) tensor, and inference is the
 * identity.
 */
#include "helpers.h"

#include "core/config/config.h"
#include "core/model/model.h"
#include "core/rng.h"
#include "layers/layers.h"

#define N 4

struct one {
	struct dt_doc *doc;
	struct dt_model m;
	struct dt_layer *l;
};

static void one_init(struct one *o, const char *yaml, struct dt_shape in)
{
	memset(o, 0, sizeof(*o));
	o->doc = dt_doc_parse("model.yaml", yaml, ".");
	assert_non_null(o->doc);
	assert_int_equal(dt_model_init(&o->m, "t", &in, dt_node_get(dt_doc_root(o->doc), "layers"), dt_layer_types), 0);
	assert_int_equal(dt_model_alloc(&o->m, DT_CPU, N), 0);
	o->l = &o->m.layers[0];
}

static void one_release(struct one *o)
{
	dt_model_release(&o->m);
	dt_doc_free(o->doc);
}

/* y of rows [first, first + n) of x (N, ...), computed as a replica whose row 0 is global row `first`. */
static void run(struct one *o, const float *x, float *y, int first, int n, int training)
{
	int64_t per = dt_shape_count(&o->l->in);
	struct dt_shape s = o->l->in;
	struct dt_tensor xt, yt;
	struct dt_step_ctx ctx = { .training = training, .key = 99, .first_row = first };
	s.ndim++;
	for (int i = s.ndim - 1; i > 0; i--)
		s.dim[i] = s.dim[i - 1];
	s.dim[0] = n;
	xt = (struct dt_tensor){ (float *)x + first * per, s, DT_CPU };
	yt = (struct dt_tensor){ y, s, DT_CPU };
	o->l->type->forward(o->l, &xt, &yt, &ctx);
}

static void check(const char *yaml, struct dt_shape in, float rate)
{
	struct one o;
	int c = in.dim[in.ndim - 1];
	int64_t per = dt_shape_count(&in), spots = per / c;
	float *x = malloc(N * per * sizeof(float)), *y = malloc(N * per * sizeof(float));
	float *part = malloc(N * per * sizeof(float)), mask[N * 64], *ones = malloc(N * c * sizeof(float));
	int zeros = 0;

	one_init(&o, yaml, in);
	for (int64_t i = 0; i < N * per; i++)
		x[i] = 1.0f + (float)(i % 7);
	run(&o, x, y, 0, N, 1);
	/* The mask of dt_op_dropout on a (N, C) tensor of ones, the layer's key. */
	for (int i = 0; i < N * c; i++)
		ones[i] = 1;
	{
		struct dt_tensor t = { ones, dt_shape_make(2, (int[]){ N, c }), DT_CPU };
		struct dt_tensor m = { mask, t.shape, DT_CPU };
		dt_op_dropout(&t, &t, &m, rate, dt_hash64(99, 0), 0);
	}
	for (int b = 0; b < N; b++)
		for (int64_t s = 0; s < spots; s++)
			for (int ch = 0; ch < c; ch++) {
				int64_t i = (b * spots + s) * c + ch;
				if (y[i] != x[i] * mask[b * c + ch])
					fail_msg("%s: y[%lld] = %g, want x * mask = %g * %g", yaml, (long long)i, y[i], x[i],
						 mask[b * c + ch]);
			}
	for (int i = 0; i < N * c; i++)
		zeros += mask[i] == 0;
	if (zeros == 0 || zeros == N * c)
		fail_msg("%s: the mask drops %d of %d channels: no test", yaml, zeros, N * c);
	/* Rows 2..3 on their own, as the second of two replicas: the same values. */
	run(&o, x, part, 2, 2, 1);
	for (int64_t i = 0; i < 2 * per; i++)
		if (part[i] != y[2 * per + i])
			fail_msg("%s: replica row %lld: %g, one device: %g", yaml, (long long)i, part[i], y[2 * per + i]);
	/* Inference: the identity. */
	run(&o, x, y, 0, N, 0);
	for (int64_t i = 0; i < N * per; i++)
		if (y[i] != x[i])
			fail_msg("%s: inference changed element %lld", yaml, (long long)i);
	one_release(&o);
	free(x);
	free(y);
	free(part);
	free(ones);
}

static void test_spatial_dropout1d(void **state)
{
	check("layers:\n  - spatial_dropout1d: {rate: 0.5}\n", dt_shape_make(2, (int[]){ 6, 8 }), 0.5f);
}

static void test_spatial_dropout2d(void **state)
{
	check("layers:\n  - spatial_dropout2d: {rate: 0.4}\n", dt_shape_make(3, (int[]){ 3, 2, 10 }), 0.4f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_spatial_dropout1d),
		cmocka_unit_test(test_spatial_dropout2d),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
