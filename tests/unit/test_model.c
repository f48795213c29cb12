/*
 * Model building (shapes, names, errors), optimizers against hand-computed
 * steps, and checkpoint round trips of a model with its optimizer.
 */
#include <math.h>

#include "helpers.h"

#include "core/checkpoint/checkpoint.h"
#include "core/model/model.h"
#include "core/model/optimizer.h"
#include "core/checkpoint/snapshot.h"
#include "layers/layers.h"

struct built {
	struct dt_doc *doc;
	struct dt_model m;
	struct dt_optimizer o;
	int has_opt;
};

enum { BUILD_NHWC = 1, BUILD_UNFUSED = 2 };

/*
 * Builds a model from "layers: ..." YAML with input shape in; with
 * BUILD_NHWC every activation NHWC, with BUILD_UNFUSED every layer applying
 * its own activation's gradient. -1 on error.
 */
static int build_opts(struct built *b, const char *yaml, int ndim, const int *dims, int opts)
{
	struct dt_shape in = dt_shape_make(ndim, dims);
	memset(b, 0, sizeof(*b));
	b->doc = dt_doc_parse("model.yaml", yaml, ".");
	assert_non_null(b->doc);
	if (dt_model_init(&b->m, "t", &in, dt_node_get(dt_doc_root(b->doc), "layers"), dt_layer_types) < 0)
		return -1;
	b->m.nhwc_only = !!(opts & BUILD_NHWC);
	b->m.unfused = !!(opts & BUILD_UNFUSED);
	dt_model_alloc(&b->m, DT_CPU, 4);
	return 0;
}

static int build(struct built *b, const char *yaml, int ndim, const int *dims)
{
	return build_opts(b, yaml, ndim, dims, 0);
}

static void with_optimizer(struct built *b, const char *yaml)
{
	struct dt_optimizer_config c;
	struct dt_doc *d = dt_doc_parse("compile.yaml", yaml, ".");
	assert_non_null(d);
	assert_int_equal(dt_optimizer_config_read(&c, dt_doc_root(d)), 0);
	dt_optimizer_init(&b->o, &c, &b->m);
	b->has_opt = 1;
	dt_doc_free(d);
}

static void release(struct built *b)
{
	if (b->has_opt)
		dt_optimizer_release(&b->o, &b->m);
	dt_model_release(&b->m);
	dt_doc_free(b->doc);
}

static void test_shapes_and_names(void **state)
{
	struct built b;
	assert_int_equal(build(&b, "layers:\n  - flatten\n  - dense: {units: 5}\n  - dropout: {rate: 0.1}\n"
				   "  - dense: {units: 3, activation: softmax}\n", 3, (int[]){ 4, 2, 1 }), 0);
	assert_int_equal(b.m.nlayers, 4);
	assert_string_equal(b.m.layers[1].name, "dense");
	assert_string_equal(b.m.layers[3].name, "dense_1");
	assert_int_equal(b.m.layers[0].out.dim[0], 8);
	assert_int_equal(b.m.output.dim[0], 3);
	assert_int_equal(dt_model_param_count(&b.m), 8 * 5 + 5 + 5 * 3 + 3);
	assert_int_equal(b.m.layers[3].params[0].offset, 8 * 5 + 5);
	release(&b);
}

/*
 * Flatten and reshape hand their input's buffers on as their output's where
 * nothing else reads that input; a residual block's shortcut that reads it
 * keeps a copy.
 */
static void test_views_share_buffers(void **state)
{
	struct built b;
	assert_int_equal(build(&b, "layers:\n  - flatten\n  - dense: {units: 6}\n  - reshape: {target_shape: [2, 3]}\n"
				   "  - conv1d: {filters: 2, kernel_size: 1}\n  - flatten\n",
			       2, (int[]){ 2, 2 }),
			 0);
	assert_ptr_equal(b.m.acts[1], b.m.acts[0]); /* the model's input: no gradient buffer to share */
	assert_ptr_not_equal(b.m.dacts[1], NULL);
	assert_ptr_equal(b.m.acts[3], b.m.acts[2]);
	assert_ptr_equal(b.m.dacts[3], b.m.dacts[2]);
	assert_ptr_equal(b.m.acts[5], b.m.acts[4]); /* the model's output */
	assert_ptr_equal(b.m.dacts[5], b.m.dacts[4]);
	assert_ptr_not_equal(b.m.acts[2], b.m.acts[1]); /* dense is no view */
	release(&b);
	assert_int_equal(build(&b, "layers:\n  - dense: {units: 4}\n"
				   "  - residual: {layers: [flatten, {dense: {units: 4}}]}\n",
			       1, (int[]){ 3 }),
			 0);
	assert_string_equal(b.m.layers[1].type->name, "flatten");
	assert_ptr_not_equal(b.m.acts[2], b.m.acts[1]); /* the shortcut reads acts[1] too */
	release(&b);
}

static void test_errors(void **state)
{
	struct built b;
	assert_int_equal(build(&b, "layers:\n  - dense: {units: 5}\n", 3, (int[]){ 28, 28, 1 }), -1);
	assert_error_contains("(None, 28, 28, 1)");
	assert_error_contains("flatten");
	release(&b);
	assert_int_equal(build(&b, "layers:\n  - dens: {units: 5}\n", 1, (int[]){ 3 }), -1);
	assert_error_contains("did you mean 'dense'");
	release(&b);
	assert_int_equal(build(&b, "layers:\n  - dense: {units: 5, name: a}\n  - dense: {units: 2, name: a}\n", 1, (int[]){ 3 }), -1);
	assert_error_contains("used twice");
	release(&b);
	assert_int_equal(build(&b, "layers: []\n", 1, (int[]){ 3 }), -1);
	assert_error_contains("empty");
	release(&b);
	assert_int_equal(build(&b, "layers:\n  - dropout: {rate: 1}\n", 1, (int[]){ 3 }), -1);
	assert_error_contains("'rate'");
	release(&b);
	assert_int_equal(build(&b, "layers:\n  - dense: {units: 3, activation: relux}\n", 1, (int[]){ 3 }), -1);
	assert_error_contains("did you mean 'relu'");
	release(&b);
	/* a sample has at most 4 dimensions: the batch makes the fifth */
	assert_int_equal(build(&b, "layers:\n  - reshape: {target_shape: [1, 1, 1, 2, 2]}\n", 1, (int[]){ 4 }), -1);
	assert_error_contains("1 to 4 sizes");
	release(&b);
}

/* Sizes count in 64 bits and saturate; what no tensor or memory holds is refused at the layer. */
static void test_sizes(void **state)
{
	struct built b;
	struct dt_shape big = dt_shape_make(3, (int[]){ INT32_MAX, INT32_MAX, INT32_MAX });
	int largest = -1;

	assert_true(dt_count_mul(INT64_MAX / 2, 3) == INT64_MAX);
	assert_true(dt_count_add(INT64_MAX - 1, 2) == INT64_MAX);
	assert_true(dt_count_mul(1 << 20, 1 << 20) == (int64_t)1 << 40);
	assert_true(dt_shape_count(&big) == INT64_MAX);
	/* flatten of (65537, 65536) would be 4,295,032,832 values: not truncated, refused */
	assert_int_equal(build(&b, "layers:\n  - flatten\n", 2, (int[]){ 65537, 65536 }), -1);
	assert_error_contains("4,295,032,832 values per sample");
	release(&b);
	assert_int_equal(build(&b, "layers:\n  - reshape: {target_shape: [16, 16, 16]}\n"
				   "  - conv2d: {filters: 16777216, kernel_size: 1}\n", 1, (int[]){ 4096 }), -1);
	assert_error_contains("layer 'conv2d' maps input (None, 16, 16, 16) to (None, 16, 16, 16777216)");
	release(&b);
	assert_int_equal(build(&b, "layers:\n  - dense: {units: 128}\n  - dense: {units: 16777216}\n", 1,
			       (int[]){ 16384 }), -1);
	assert_error_contains("layer 'dense_1' brings the model's parameters to 2,149,580,928; one model holds at "
			      "most 2,147,483,647");
	release(&b);
	/* dense 3 -> 2, linear: 8 parameters, each with its gradient and 2 slots; input and 2 x output at batch 4 */
	assert_int_equal(build(&b, "layers:\n  - dense: {units: 2}\n", 1, (int[]){ 3 }), 0);
	assert_true(dt_model_bytes(&b.m, 4, 2, &largest) == (8 * 4 + 4 * 3 + 4 * 2 * 2) * 4);
	assert_int_equal(largest, 0);
	assert_int_equal(dt_model_check_memory(&b.m, 4, 1, 2, 240, "the test's budget"), 0);
	assert_int_equal(dt_model_check_memory(&b.m, 4, 2, 2, 479, "the test's budget"), -1);
	assert_error_contains("layer 'dense' needs 192.00 B (192 bytes) at batch 4");
	assert_error_contains("480 bytes) in all with its 2 replicas, more than the 479.00 B (479 bytes) of the "
			      "test's budget");
	release(&b);
	/*
	 * Views count no buffers they share: flatten at the model's input takes
	 * its output (not its gradient) from the input, 12 floats a sample of
	 * its 24; a reshape after dense takes both. Batch 4, 2 slots.
	 */
	assert_int_equal(build(&b, "layers:\n  - flatten\n  - dense: {units: 2}\n", 2, (int[]){ 4, 3 }), 0);
	assert_true(dt_model_bytes(&b.m, 4, 2, NULL) == (4 * 12 + 4 * 12 + 26 * 4 + 4 * 2 * 2) * 4);
	release(&b);
	assert_int_equal(build(&b, "layers:\n  - dense: {units: 6}\n  - reshape: {target_shape: [2, 3]}\n", 1,
			       (int[]){ 3 }),
			 0);
	assert_true(dt_model_bytes(&b.m, 4, 2, NULL) == (4 * 3 + 24 * 4 + 4 * 6 * 2) * 4);
	release(&b);
}

static void test_init_is_seeded(void **state)
{
	struct built a, b;
	const char *yaml = "layers:\n  - dense: {units: 50}\n";
	assert_int_equal(build(&a, yaml, 1, (int[]){ 30 }), 0);
	assert_int_equal(build(&b, yaml, 1, (int[]){ 30 }), 0);
	dt_model_init_params(&a.m, 7);
	dt_model_init_params(&b.m, 7);
	assert_memory_equal(a.m.params, b.m.params, a.m.nparams * sizeof(float));
	/* glorot_uniform: |w| <= sqrt(6 / (30 + 50)), biases zero */
	for (int i = 0; i < 1500; i++)
		assert_true(fabsf(a.m.params[i]) <= sqrtf(6.0f / 80));
	for (int i = 1500; i < 1550; i++)
		assert_float_equal(a.m.params[i], 0, 0);
	dt_model_init_params(&b.m, 8);
	assert_memory_not_equal(a.m.params, b.m.params, 1500 * sizeof(float));
	release(&a);
	release(&b);
}

/* One weight w = 1 and gradient g = 0.5 through one or two steps. */
static double one_step(const char *opt, int steps)
{
	struct built b;
	double w;
	assert_int_equal(build(&b, "layers:\n  - dense: {units: 1, use_bias: false}\n", 1, (int[]){ 1 }), 0);
	with_optimizer(&b, opt);
	b.m.params[0] = 1;
	for (int i = 0; i < steps; i++) {
		b.m.grads[0] = 0.5f;
		dt_optimizer_apply(&b.o, &b.m);
	}
	w = b.m.params[0];
	release(&b);
	return w;
}

static void test_optimizer_steps(void **state)
{
	/* Keras 3 update rules, computed by hand. */
	assert_float_equal(one_step("optimizer: {sgd: {learning_rate: 0.1}}", 1), 0.95, 1e-7);
	assert_float_equal(one_step("optimizer: {sgd: {learning_rate: 0.1, momentum: 0.9}}", 2), 0.855, 1e-6);
	assert_float_equal(one_step("optimizer: {sgd: {learning_rate: 0.1, momentum: 0.9, nesterov: true}}", 1), 0.905, 1e-6);
	/* adam: m = 0.05, v = 0.00025, alpha = 0.001 sqrt(0.001) / 0.1 */
	assert_float_equal(one_step("optimizer: adam", 1),
			   1 - 0.001 * sqrt(0.001) / 0.1 * 0.05 / (sqrt(0.00025) + 1e-7), 1e-7);
	assert_float_equal(one_step("optimizer: adamw", 1),
			   1 * (1 - 0.001 * 0.004) - 0.001 * sqrt(0.001) / 0.1 * 0.05 / (sqrt(0.00025) + 1e-7), 1e-7);
	/* rmsprop: v = 0.1 * 0.25, w -= lr g / sqrt(v + eps) */
	assert_float_equal(one_step("optimizer: rmsprop", 1), 1 - 0.001 * 0.5 / sqrt(0.025 + 1e-7), 1e-7);
	assert_float_equal(one_step("optimizer: {sgd: {learning_rate: 0.1, weight_decay: 0.5}}", 1),
			   1 * (1 - 0.1 * 0.5) - 0.05, 1e-7);
	/* the default is rmsprop, as Keras' compile */
	assert_float_equal(one_step("loss: mse", 1), 1 - 0.001 * 0.5 / sqrt(0.025 + 1e-7), 1e-7);
}

static void test_clipnorm_per_tensor(void **state)
{
	struct built b;
	assert_int_equal(build(&b, "layers:\n  - dense: {units: 1}\n", 1, (int[]){ 2 }), 0);
	with_optimizer(&b, "optimizer: {sgd: {learning_rate: 1, clipnorm: 1}}");
	b.m.params[0] = b.m.params[1] = b.m.params[2] = 1;
	b.m.grads[0] = 3; /* kernel gradient (3, 4): norm 5, clipped to 1 */
	b.m.grads[1] = 4;
	b.m.grads[2] = 0.5f; /* bias gradient under the norm: unchanged */
	dt_optimizer_apply(&b.o, &b.m);
	assert_float_equal(b.m.params[0], 1 - 0.6, 1e-6);
	assert_float_equal(b.m.params[1], 1 - 0.8, 1e-6);
	assert_float_equal(b.m.params[2], 0.5, 1e-6);
	release(&b);
}

static void test_optimizer_errors(void **state)
{
	struct dt_optimizer_config c;
	struct dt_doc *d = dt_doc_parse("c.yaml", "optimizer: {adamm: {}}\n", ".");
	assert_int_equal(dt_optimizer_config_read(&c, dt_doc_root(d)), -1);
	assert_error_contains("did you mean 'adam'");
	dt_doc_free(d);
	d = dt_doc_parse("c.yaml", "optimizer: {sgd: {beta_1: 0.9}}\n", ".");
	assert_int_equal(dt_optimizer_config_read(&c, dt_doc_root(d)), -1);
	assert_error_contains("unknown key 'beta_1'");
	dt_doc_free(d);
}

static void test_initializers(void **state)
{
	/* Keras' VarianceScaling: the stated stddev, truncated at 2 sigma before rescaling. */
	static const struct { const char *init; double stddev, bound; } cases[] = {
		{ "he_normal", 0.0625 /* sqrt(2/512) */, 2 * 0.0625 / 0.87962566 },
		{ "lecun_normal", 0.0441942 /* sqrt(1/512) */, 2 * 0.0441942 / 0.87962566 },
		{ "glorot_normal", 0.0510310 /* sqrt(2/768) */, 2 * 0.0510310 / 0.87962566 },
		{ "he_uniform", 0.0625, 0.108253 /* sqrt(6/512) */ },
		{ "lecun_uniform", 0.0441942, 0.0765466 /* sqrt(3/512) */ },
	};
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		struct built b;
		char yaml[160];
		double sum = 0, sq = 0, n;
		snprintf(yaml, sizeof(yaml), "layers:\n  - dense: {units: 256, kernel_initializer: %s, bias_initializer: ones}\n",
			 cases[c].init);
		assert_int_equal(build(&b, yaml, 1, (int[]){ 512 }), 0);
		dt_model_init_params(&b.m, 3);
		n = 512 * 256;
		for (int i = 0; i < n; i++) {
			float w = b.m.params[i];
			if (fabs(w) > cases[c].bound + 1e-6)
				fail_msg("%s: %g beyond %g", cases[c].init, w, cases[c].bound);
			sum += w;
			sq += (double)w * w;
		}
		assert_float_equal(sum / n, 0, 2e-3);
		assert_float_equal(sqrt(sq / n), cases[c].stddev, cases[c].stddev * 0.02);
		assert_float_equal(b.m.params[(int)n], 1, 0); /* bias: ones */
		release(&b);
	}
}

static void test_regularizers(void **state)
{
	struct built b;
	double penalty;
	assert_int_equal(build(&b, "layers:\n  - dense: {units: 1, kernel_regularizer: {l1: 0.5, l2: 0.25}}\n",
			       1, (int[]){ 2 }), 0);
	b.m.params[0] = 2;
	b.m.params[1] = -1;
	b.m.params[2] = 7; /* the bias is not regularized */
	b.m.grads[0] = b.m.grads[1] = b.m.grads[2] = 0;
	penalty = dt_model_regularize(&b.m, 1);
	assert_float_equal(penalty, 0.5 * (2 + 1) + 0.25 * (4 + 1), 1e-6);
	assert_float_equal(b.m.grads[0], 0.5 + 2 * 0.25 * 2, 1e-6);
	assert_float_equal(b.m.grads[1], -0.5 + 2 * 0.25 * -1, 1e-6);
	assert_float_equal(b.m.grads[2], 0, 0);
	release(&b);
	/* the string form is Keras' default factor 0.01 */
	assert_int_equal(build(&b, "layers:\n  - dense: {units: 1, kernel_regularizer: l2}\n", 1, (int[]){ 1 }), 0);
	assert_float_equal(b.m.layers[0].params[0].l2, 0.01, 1e-9);
	assert_float_equal(b.m.layers[0].params[0].l1, 0, 0);
	release(&b);
	assert_int_equal(build(&b, "layers:\n  - dense: {units: 1, kernel_regularizer: L2}\n", 1, (int[]){ 1 }), -1);
	assert_error_contains("did you mean 'l2'");
	release(&b);
}

static void test_snapshot_round_trip(void **state)
{
	struct built a, b, c;
	char dir[] = "/tmp/dtrain-snap-XXXXXX", path[256];
	const char *yaml = "layers:\n  - dense: {units: 4}\n  - dense: {units: 2}\n";
	struct dt_ckpt_meta meta[] = { { "epoch", "3" } };
	struct dt_ckpt *ck;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/m.safetensors", dir);
	assert_int_equal(build(&a, yaml, 1, (int[]){ 3 }), 0);
	with_optimizer(&a, "optimizer: adam");
	dt_model_init_params(&a.m, 1);
	for (int64_t i = 0; i < a.m.nparams; i++)
		a.m.grads[i] = 0.1f * (float)i;
	dt_optimizer_apply(&a.o, &a.m);
	assert_int_equal(dt_snapshot_save(path, &a.m, &a.o, meta, 1), 0);

	assert_int_equal(build(&b, yaml, 1, (int[]){ 3 }), 0);
	with_optimizer(&b, "optimizer: adam");
	ck = dt_checkpoint_load(path);
	assert_non_null(ck);
	assert_non_null(dt_checkpoint_find(ck, "dense_1/kernel"));
	assert_non_null(dt_checkpoint_find(ck, "optimizer/dense/bias/v"));
	assert_string_equal(dt_checkpoint_meta(ck, "epoch"), "3");
	assert_int_equal(dt_snapshot_load(ck, &b.m, &b.o), 0);
	assert_memory_equal(a.m.params, b.m.params, a.m.nparams * sizeof(float));
	assert_memory_equal(a.o.slots[0], b.o.slots[0], a.m.nparams * sizeof(float));
	assert_memory_equal(a.o.slots[1], b.o.slots[1], a.m.nparams * sizeof(float));
	assert_int_equal(b.o.iterations, 1);
	dt_checkpoint_free(ck);

	/* A model with other shapes is refused, naming the tensor and both shapes. */
	assert_int_equal(build(&c, "layers:\n  - dense: {units: 5}\n  - dense: {units: 2}\n", 1, (int[]){ 3 }), 0);
	ck = dt_checkpoint_load(path);
	assert_int_equal(dt_snapshot_load(ck, &c.m, NULL), -1);
	assert_error_contains("'dense/kernel' has shape (3, 4) but the model needs (3, 5)");
	dt_checkpoint_free(ck);
	release(&c);
	/* ... and so is one with fewer layers than the file. */
	assert_int_equal(build(&c, "layers:\n  - dense: {units: 4}\n", 1, (int[]){ 3 }), 0);
	ck = dt_checkpoint_load(path);
	assert_int_equal(dt_snapshot_load(ck, &c.m, NULL), -1);
	assert_error_contains("'dense_1/");
	dt_checkpoint_free(ck);
	release(&c);

	release(&a);
	release(&b);
	unlink(path);
	rmdir(dir);
}

/*
 * dt_model_forward_layer / dt_model_backward_layer in order are exactly the
 * whole passes, and nothing runs before the first layer with parameters.
 */
static void test_layer_by_layer(void **state)
{
	struct built b;
	struct dt_step_ctx ctx = { .training = 1, .key = 99 };
	struct dt_tensor x, y, dy;
	float out[4 * 3], grads[8 * 5 + 5 + 5 * 3 + 3], *sentinel;
	int n = 4;
	assert_int_equal(build(&b, "layers:\n  - flatten\n  - dense: {units: 5, activation: relu}\n"
				   "  - dropout: {rate: 0.5}\n  - dense: {units: 3, activation: tanh}\n",
			       3, (int[]){ 4, 2, 1 }), 0);
	assert_int_equal(dt_model_first_trainable(&b.m), 1);
	dt_model_init_params(&b.m, 3);
	x = dt_model_input(&b.m, n);
	for (int i = 0; i < n * 8; i++)
		x.data[i] = (float)((i * 37) % 11) / 11.0f - 0.4f;

	y = dt_model_forward(&b.m, n, &ctx);
	memcpy(out, y.data, sizeof(out));
	dy = dt_model_output_grad(&b.m, n);
	for (int i = 0; i < n * 3; i++)
		dy.data[i] = 0.1f * (float)(i % 5) - 0.2f;
	dt_model_backward(&b.m, n);
	assert_int_equal(b.m.ntrainable, (int64_t)(sizeof(grads) / sizeof(float)));
	memcpy(grads, b.m.grads, sizeof(grads));

	memset(b.m.grads, 0, sizeof(grads));
	for (int i = 0; i < b.m.nlayers; i++)
		y = dt_model_forward_layer(&b.m, i, n, &ctx);
	assert_ptr_equal(y.data, b.m.acts[b.m.nlayers]);
	assert_memory_equal(out, y.data, sizeof(out));
	for (int i = 0; i < n * 3; i++)
		dy.data[i] = 0.1f * (float)(i % 5) - 0.2f;
	sentinel = b.m.dacts[1]; /* the flatten layer's output gradient: never needed */
	sentinel[0] = 1234.5f;
	for (int i = b.m.nlayers - 1; i >= 0; i--)
		dt_model_backward_layer(&b.m, i, n);
	assert_memory_equal(grads, b.m.grads, sizeof(grads));
	assert_float_equal(sentinel[0], 1234.5f, 0);
	release(&b);
}

/*
 * Two builds of one model, b computed another way than a: from the same
 * parameters, input and output gradient (a training step of dropout key
 * key), the same outputs and parameter gradients, within tol of each value.
 */
static void compare_models(struct dt_model *a, struct dt_model *b, int n, uint64_t key, double tol)
{
	struct dt_step_ctx ctx = { .training = 1, .key = key };
	struct dt_tensor xa, xb, ya, yb, dya, dyb;
	dt_model_init_params(a, 11);
	dt_model_init_params(b, 11);
	xa = dt_model_input(a, n);
	xb = dt_model_input(b, n);
	for (int64_t i = 0; i < dt_tensor_count(&xa); i++)
		xa.data[i] = xb.data[i] = (float)((i * 37) % 23) / 23.0f - 0.3f;
	ya = dt_model_forward(a, n, &ctx);
	yb = dt_model_forward(b, n, &ctx);
	for (int64_t i = 0; i < dt_tensor_count(&ya); i++)
		assert_float_equal(yb.data[i], ya.data[i], tol * (1 + fabsf(ya.data[i])));
	dya = dt_model_output_grad(a, n);
	dyb = dt_model_output_grad(b, n);
	for (int64_t i = 0; i < dt_tensor_count(&dya); i++)
		dya.data[i] = dyb.data[i] = 0.1f * (float)(i % 7) - 0.3f;
	dt_model_backward(a, n);
	dt_model_backward(b, n);
	for (int64_t i = 0; i < a->ntrainable; i++)
		assert_float_equal(b->grads[i], a->grads[i], tol * (1 + fabsf(a->grads[i])));
}

/*
 * Where the CPU keeps activations in channel blocks (dt_op_channel_block),
 * a run of convolutions and pooling computes what the same model computes
 * in NHWC: the output and every gradient, at two batch sizes. models[k]:
 * the YAML, its input, and each layer's layouts (x, y: 'N' NHWC, 'B'
 * blocked, '?' either: a first convolution's blocked output is taken where
 * its weight gradient runs blocked, on oneDNN's JIT code on AVX-512, on
 * sgemm on AVX2 (conv_gemm.c)); each layer's y is the next one's x.
 * In float32, and under precision bf16 where the CPU has it. There both
 * builds round the same values to bfloat16 (on Zen 4 they agree to the last
 * bit), but an activation that differs in its last bits between two kernels
 * may round the other way, hence the looser tolerance; a block read in the
 * wrong order is wrong by far more.
 */
static void test_blocked_layouts(void **state)
{
	static const struct {
		const char *yaml;
		int in[3];
		const char *layouts;
	} models[] = {
		{ "layers:\n  - conv2d: {filters: 32, kernel_size: 3, activation: relu}\n"
		  "  - max_pooling2d: {pool_size: 2, strides: 1}\n"
		  "  - conv2d: {filters: 32, kernel_size: 3, padding: same, activation: tanh}\n"
		  "  - average_pooling2d: {pool_size: 2, padding: same}\n  - flatten\n  - dense: {units: 3}\n",
		  { 12, 12, 1 }, "N? ?B BB BN NN NN" },
		{ "layers:\n  - max_pooling2d: {pool_size: 2}\n  - conv2d: {filters: 32, kernel_size: 3, activation: relu}\n"
		  "  - max_pooling2d: {pool_size: 2}\n  - flatten\n  - dense: {units: 2}\n",
		  { 10, 10, 32 }, "NB BB BN NN NN" },
	};
	char why[256];
	(void)state;
	if (!dt_op_channel_block(DT_CPU))
		skip(); /* a CPU below AVX2: every activation NHWC */
	for (int bf16 = 0; bf16 <= dt_ops_cpu_has_bf16(); bf16++) {
		enum dt_precision p = bf16 ? DT_PRECISION_BF16 : DT_PRECISION_FP32;
		assert_int_equal(dt_ops_set_cpu_precision(p, why, sizeof why), 0);
		for (size_t k = 0; k < sizeof(models) / sizeof(models[0]); k++)
			for (int n = 4; n >= 3; n--) {
				struct built a, b;
				build_opts(&a, models[k].yaml, 3, models[k].in, BUILD_NHWC);
				build_opts(&b, models[k].yaml, 3, models[k].in, 0);
				for (int i = 0; i < b.m.nlayers; i++) {
					const char *want = models[k].layouts + 3 * i;
					assert_int_equal(a.m.layers[i].x_layout, DT_LAYOUT_NHWC);
					assert_int_equal(a.m.layers[i].y_layout, DT_LAYOUT_NHWC);
					if (want[0] != '?')
						assert_int_equal(b.m.layers[i].x_layout,
								 want[0] == 'B' ? DT_LAYOUT_BLOCKED : DT_LAYOUT_NHWC);
					if (want[1] != '?')
						assert_int_equal(b.m.layers[i].y_layout,
								 want[1] == 'B' ? DT_LAYOUT_BLOCKED : DT_LAYOUT_NHWC);
					if (i > 0)
						assert_int_equal(b.m.layers[i].x_layout, b.m.layers[i - 1].y_layout);
				}
				compare_models(&a.m, &b.m, n, 5, bf16 ? 1e-2 : 1e-4);
				release(&a);
				release(&b);
			}
	}
	assert_int_equal(dt_ops_set_cpu_precision(DT_PRECISION_FP32, why, sizeof why), 0);
}

/*
 * An activation's gradient taken by the max pooling after it, on the
 * pooling's output (dt_layer.act_before), against each layer applying its
 * own: the same parameter gradients. fused lists, per layer, whether the
 * next one took its activation's gradient (F) or not (-).
 */
static void test_fused_act_grads(void **state)
{
	static const struct {
		const char *yaml;
		int in[3];
		const char *fused;
	} models[] = {
		{ "layers:\n  - conv2d: {filters: 16, kernel_size: 3, activation: relu}\n"
		  "  - max_pooling2d: {pool_size: 2}\n  - dropout: {rate: 0.25}\n  - flatten\n"
		  "  - dense: {units: 3}\n",
		  { 9, 9, 2 }, "F----" },
		/* overlapping windows, padding; an activation layer's; a global max */
		{ "layers:\n  - conv2d: {filters: 8, kernel_size: 3, activation: tanh}\n"
		  "  - max_pooling2d: {pool_size: 3, strides: 2, padding: same}\n  - activation: {activation: relu}\n"
		  "  - global_max_pooling2d\n  - dense: {units: 2}\n",
		  { 8, 7, 3 }, "F-F--" },
		/* not taken: gelu reads its input, average pooling selects nothing; taken by the last layer */
		{ "layers:\n  - conv2d: {filters: 8, kernel_size: 3, activation: gelu}\n"
		  "  - max_pooling2d: {pool_size: 2}\n  - conv2d: {filters: 8, kernel_size: 1, activation: relu}\n"
		  "  - average_pooling2d: {pool_size: 2}\n  - conv2d: {filters: 4, kernel_size: 1, activation: elu}\n"
		  "  - max_pooling2d: {pool_size: 1}\n",
		  { 9, 9, 1 }, "----F-" },
	};
	(void)state;
	for (size_t k = 0; k < sizeof(models) / sizeof(models[0]); k++)
		for (int n = 4; n >= 3; n--) {
			struct built a, b;
			build_opts(&a, models[k].yaml, 3, models[k].in, BUILD_UNFUSED);
			build_opts(&b, models[k].yaml, 3, models[k].in, 0);
			assert_int_equal(b.m.nlayers, (int)strlen(models[k].fused));
			for (int i = 0; i < b.m.nlayers; i++) {
				int f = models[k].fused[i] == 'F';
				assert_int_equal(a.m.layers[i].fused_act, 0);
				assert_int_equal(b.m.layers[i].fused_act, f);
				if (i + 1 < b.m.nlayers)
					assert_int_equal(b.m.layers[i + 1].act_before, f ? b.m.layers[i].act : DT_ACT_LINEAR);
			}
			compare_models(&a.m, &b.m, n, 9, 1e-5);
			release(&a);
			release(&b);
		}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shapes_and_names),
		cmocka_unit_test(test_views_share_buffers),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_sizes),
		cmocka_unit_test(test_init_is_seeded),
		cmocka_unit_test(test_optimizer_steps),
		cmocka_unit_test(test_clipnorm_per_tensor),
		cmocka_unit_test(test_optimizer_errors),
		cmocka_unit_test(test_initializers),
		cmocka_unit_test(test_regularizers),
		cmocka_unit_test(test_snapshot_round_trip),
		cmocka_unit_test(test_layer_by_layer),
		cmocka_unit_test(test_blocked_layouts),
		cmocka_unit_test(test_fused_act_grads),
	};
	dt_error_set_quiet(1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
