/*
 * The recurrent layers beyond what test_gradcheck and test_ref check: Keras'
 * initial weights (orthogonal recurrent kernels, unit_forget_bias), a
 * backward that overwrites its gradients rather than adding to them, and a
 * plan that serves several batch sizes alike.
 */
#include <math.h>

#include "helpers.h"

#include "core/model/model.h"
#include "layers/layers.h"

struct built {
	struct dt_doc *doc;
	struct dt_model m;
};

static void build(struct built *b, const char *layer, const char *input, int max_batch)
{
	char yaml[256];
	struct dt_shape in = { 0 };
	char *end;
	for (const char *s = input; *s; s = *end == ',' ? end + 1 : end)
		in.dim[in.ndim++] = (int)strtol(s, &end, 10);
	snprintf(yaml, sizeof(yaml), "layers:\n  - %s\n", layer);
	b->doc = dt_doc_parse("model.yaml", yaml, ".");
	assert_non_null(b->doc);
	if (dt_model_init(&b->m, "t", &in, dt_node_get(dt_doc_root(b->doc), "layers"), dt_layer_types) < 0)
		fail_msg("%s: %s", layer, dt_error_last());
	assert_int_equal(dt_model_alloc(&b->m, DT_CPU, max_batch), 0);
}

static void release(struct built *b)
{
	dt_model_release(&b->m);
	dt_doc_free(b->doc);
}

/* (rows, cols) w has orthonormal rows (rows <= cols) or columns. */
static void expect_orthonormal(const float *w, int rows, int cols)
{
	int k = rows < cols ? rows : cols;
	for (int a = 0; a < k; a++)
		for (int b = 0; b < k; b++) {
			double dot = 0;
			for (int i = 0; i < (rows < cols ? cols : rows); i++)
				dot += rows < cols ? (double)w[a * cols + i] * w[b * cols + i]
						   : (double)w[i * cols + a] * w[i * cols + b];
			if (fabs(dot - (a == b)) > 1e-5)
				fail_msg("(%d, %d) w: row/column %d . %d = %g", rows, cols, a, b, dot);
		}
}

static void test_keras_initial_weights(void **state)
{
	struct built b;
	struct dt_layer *l;
	int u = 5;

	build(&b, "lstm: {units: 5}", "3,4", 2);
	dt_model_init_params(&b.m, 42);
	l = &b.m.layers[0];
	assert_string_equal(l->params[1].name, "recurrent_kernel");
	expect_orthonormal(l->params[1].value.data, u, 4 * u); /* (5, 20): orthonormal rows */
	for (int j = 0; j < 4 * u; j++) /* unit_forget_bias: f's slice ones, the others zeros */
		assert_float_equal(l->params[2].value.data[j], j >= u && j < 2 * u ? 1 : 0, 0);
	release(&b);

	build(&b, "gru: {units: 6, kernel_initializer: orthogonal}", "4,2", 2);
	dt_model_init_params(&b.m, 7);
	l = &b.m.layers[0];
	expect_orthonormal(l->params[0].value.data, 2, 18);
	expect_orthonormal(l->params[1].value.data, 6, 18);
	for (int j = 0; j < 2 * 18; j++) /* GRU: no forget gate, a (2, 18) bias of zeros */
		assert_float_equal(l->params[2].value.data[j], 0, 0);
	release(&b);

	build(&b, "simple_rnn: {units: 3, kernel_initializer: orthogonal}", "4,7", 2);
	dt_model_init_params(&b.m, 7);
	expect_orthonormal(b.m.layers[0].params[0].value.data, 7, 3); /* (7, 3): orthonormal columns */
	expect_orthonormal(b.m.layers[0].params[1].value.data, 3, 3);
	release(&b);

	build(&b, "lstm: {units: 2, unit_forget_bias: false, bias_initializer: ones}", "3,4", 2);
	dt_model_init_params(&b.m, 1);
	for (int j = 0; j < 8; j++)
		assert_float_equal(b.m.layers[0].params[2].value.data[j], 1, 0);
	release(&b);
}

static void fill(float *p, int64_t n, float scale, int seed)
{
	for (int64_t i = 0; i < n; i++)
		p[i] = scale * (float)sin(0.7 * (double)(i + 1) * (seed + 1));
}

/*
 * Two backwards of one forward give the same gradients (oneDNN adds into
 * its weight gradients: the plan must start them at zero), and the first
 * rows of a batch of 4 match a batch of 2 of the same rows: each batch size
 * gets its own primitives.
 */
static void check_batches(const char *layer)
{
	struct built b;
	struct dt_layer *l;
	int64_t nx, ny, np;
	float *grad1, *y4;
	struct dt_tensor x, y, dy;
	struct dt_step_ctx ctx = { .training = 1 };

	build(&b, layer, "5,3", 4);
	l = &b.m.layers[0];
	fill(b.m.params, b.m.nparams, 0.5f, 1);
	x = dt_tensor_batch(b.m.acts[0], DT_CPU, 4, &l->in);
	y = dt_tensor_batch(b.m.acts[1], DT_CPU, 4, &l->out);
	dy = dt_tensor_batch(b.m.dacts[1], DT_CPU, 4, &l->out);
	nx = dt_tensor_count(&x);
	ny = dt_tensor_count(&y);
	np = b.m.ntrainable;
	grad1 = malloc((size_t)np * sizeof(float));
	y4 = malloc((size_t)ny * sizeof(float));
	fill(x.data, nx, 1, 2);
	l->type->forward(l, &x, &y, &ctx);
	memcpy(y4, y.data, (size_t)ny * sizeof(float));
	fill(dy.data, ny, 1, 3);
	l->type->backward(l, &x, &y, &dy, NULL);
	memcpy(grad1, b.m.grads, (size_t)np * sizeof(float));
	fill(dy.data, ny, 1, 3);
	l->type->backward(l, &x, &y, &dy, NULL);
	for (int64_t i = 0; i < np; i++)
		if (fabsf(grad1[i] - b.m.grads[i]) > 1e-6f * (1 + fabsf(grad1[i])))
			fail_msg("%s: gradient %lld: %g, then %g on the same backward", layer, (long long)i,
				 grad1[i], b.m.grads[i]);
	x = dt_tensor_batch(b.m.acts[0], DT_CPU, 2, &l->in);
	y = dt_tensor_batch(b.m.acts[1], DT_CPU, 2, &l->out);
	l->type->forward(l, &x, &y, &ctx);
	for (int64_t i = 0; i < ny / 2; i++)
		if (fabsf(y4[i] - y.data[i]) > 1e-5f)
			fail_msg("%s: y[%lld] %g at batch 4, %g at batch 2", layer, (long long)i, y4[i], y.data[i]);
	free(grad1);
	free(y4);
	release(&b);
}

static void test_backward_overwrites_and_batch_sizes(void **state)
{
	check_batches("lstm: {units: 4}");
	check_batches("lstm: {units: 3, return_sequences: true, go_backwards: true}");
	check_batches("gru: {units: 4, return_sequences: true}");
	check_batches("gru: {units: 4, reset_after: false, go_backwards: true}");
	check_batches("simple_rnn: {units: 4, activation: relu}");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_keras_initial_weights),
		cmocka_unit_test(test_backward_overwrites_and_batch_sizes),
	};
	dt_error_set_quiet(1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
