/*
 * Gradient checks by central differences: every layer type of the table (each
 * of its examples) and every loss with every kind of input. A layer added to
 * layers/layers.c is checked here without another line.
 */
#include <math.h>

#include "helpers.h"

#include "core/config/config.h"
#include "core/model/model.h"
#include "core/rng.h"
#include "layers/layers.h"

#define N 3
#define H 1e-3
#define ATOL 2e-3
#define RTOL 2e-2

static void expect_close(double analytic, double numeric, const char *what, int i)
{
	if (fabs(analytic - numeric) > ATOL + RTOL * fmax(fabs(analytic), fabs(numeric)))
		fail_msg("%s[%d]: analytic %.6g, numeric %.6g", what, i, analytic, numeric);
}

static struct dt_shape parse_shape(const char *s)
{
	struct dt_shape sh = { 0 };
	char *end;
	while (*s) {
		sh.dim[sh.ndim++] = (int)strtol(s, &end, 10);
		s = *end == ',' ? end + 1 : end;
	}
	return sh;
}

struct fixture {
	struct dt_doc *doc;
	struct dt_model m;
	struct dt_layer *l;
	struct dt_tensor x, y, dy, dx;
	float *r;         /* (N, out): L = sum(y * r) */
	float *dxmem;
	struct dt_step_ctx ctx;
};

static double objective(struct fixture *f)
{
	double s = 0;
	int64_t n = dt_tensor_count(&f->y);
	f->l->type->forward(f->l, &f->x, &f->y, &f->ctx);
	for (int64_t i = 0; i < n; i++)
		s += (double)f->y.data[i] * f->r[i];
	return s;
}

/* Central difference of the objective w.r.t. *v. */
static double numeric(struct fixture *f, float *v)
{
	float keep = *v;
	double plus, minus;
	*v = keep + (float)H;
	plus = objective(f);
	*v = keep - (float)H;
	minus = objective(f);
	*v = keep;
	return (plus - minus) / (2 * H);
}

static void check_example(const struct dt_layer_type *type, const struct dt_layer_example *ex)
{
	struct fixture f = { 0 };
	char text[512], what[128];
	struct dt_shape in = parse_shape(ex->input);
	struct dt_rng rng;
	int64_t nx, ny;

	if (ex->args)
		snprintf(text, sizeof(text), "layers:\n  - %s: %s\n", type->name, ex->args);
	else
		snprintf(text, sizeof(text), "layers:\n  - %s\n", type->name);
	f.doc = dt_doc_parse("example", text, ".");
	assert_non_null(f.doc);
	if (dt_model_init(&f.m, "t", &in, dt_node_get(dt_doc_root(f.doc), "layers"), dt_layer_types) < 0)
		fail_msg("%s %s: %s", type->name, text, dt_error_last());
	dt_model_alloc(&f.m, DT_CPU, N);
	f.l = &f.m.layers[0];
	dt_rng_seed(&rng, 11, 0);
	for (int64_t i = 0; i < f.m.nparams; i++)
		f.m.params[i] = (float)(2 * dt_rng_uniform(&rng) - 1);
	f.x = dt_tensor_batch(f.m.acts[0], DT_CPU, N, &f.l->in);
	f.y = dt_tensor_batch(f.m.acts[1], DT_CPU, N, &f.l->out);
	f.dy = dt_tensor_batch(f.m.dacts[1], DT_CPU, N, &f.l->out);
	nx = dt_tensor_count(&f.x);
	ny = dt_tensor_count(&f.y);
	f.dxmem = dt_device_alloc(DT_CPU, nx);
	f.dx = dt_tensor_batch(f.dxmem, DT_CPU, N, &f.l->in);
	f.r = malloc(ny * sizeof(float));
	for (int64_t i = 0; i < nx; i++)
		f.x.data[i] = (float)(2 * dt_rng_uniform(&rng) - 1);
	for (int64_t i = 0; i < ny; i++)
		f.r[i] = (float)(2 * dt_rng_uniform(&rng) - 1);
	f.ctx = (struct dt_step_ctx){ .training = 1, .key = 1234 };

	objective(&f);
	memcpy(f.dy.data, f.r, ny * sizeof(float));
	f.l->type->backward(f.l, &f.x, &f.y, &f.dy, &f.dx);
	/* Save analytic gradients before the numeric passes run forward again. */
	{
		float *dx = malloc(nx * sizeof(float)), *dp = malloc((f.m.nparams + 1) * sizeof(float));
		memcpy(dx, f.dx.data, nx * sizeof(float));
		memcpy(dp, f.m.grads, f.m.ntrainable * sizeof(float));
		for (int64_t i = 0; i < nx; i++) {
			snprintf(what, sizeof(what), "%s %s: dx", type->name, ex->args ? ex->args : "");
			expect_close(dx[i], numeric(&f, &f.x.data[i]), what, (int)i);
		}
		for (int p = 0; p < f.l->nparams; p++) {
			struct dt_param *pr = &f.l->params[p];
			if (!pr->trainable) /* state such as moving statistics has no gradient */
				continue;
			for (int64_t i = 0; i < dt_shape_count(&pr->shape); i++) {
				snprintf(what, sizeof(what), "%s %s: d%s", type->name, ex->args ? ex->args : "", pr->name);
				expect_close(dp[pr->offset + i], numeric(&f, &pr->value.data[i]), what, (int)i);
			}
		}
		free(dx);
		free(dp);
	}
	free(f.r);
	dt_device_free(DT_CPU, f.dxmem);
	dt_model_release(&f.m);
	dt_doc_free(f.doc);
}

static void test_every_layer_type(void **state)
{
	int checked = 0;
	for (int t = 0; dt_layer_types[t]; t++) {
		const struct dt_layer_type *type = dt_layer_types[t];
		if (!type->examples || !type->examples[0].input)
			fail_msg("layer type '%s' has no examples to check", type->name);
		for (int e = 0; type->examples[e].input; e++, checked++)
			check_example(type, &type->examples[e]);
	}
	assert_true(checked >= 4);
}

/* ---- losses ---- */

struct loss_case {
	enum dt_loss loss;
	enum dt_loss_input input;
	int c;
	float delta, gamma, alpha, label_smoothing; /* 0: Keras' default (label_smoothing: none) */
	int apply_class_balancing;
};

static struct dt_loss_args args_of(const struct loss_case *k)
{
	struct dt_loss_args a = dt_loss_args_default();
	a.delta = k->delta ? k->delta : a.delta;
	a.gamma = k->gamma ? k->gamma : a.gamma;
	a.alpha = k->alpha ? k->alpha : a.alpha;
	a.label_smoothing = k->label_smoothing;
	a.apply_class_balancing = k->apply_class_balancing;
	return a;
}

/* The activation that makes the probabilities a loss takes: sigmoid, softmax, or none (values). */
static enum dt_activation prob_act(enum dt_loss loss)
{
	switch (loss) {
	case DT_LOSS_BINARY_CROSSENTROPY:
	case DT_LOSS_BINARY_FOCAL_CROSSENTROPY:
		return DT_ACT_SIGMOID;
	case DT_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY:
	case DT_LOSS_CATEGORICAL_CROSSENTROPY:
	case DT_LOSS_CATEGORICAL_FOCAL_CROSSENTROPY:
	case DT_LOSS_KL_DIVERGENCE:
	case DT_LOSS_POISSON:
		return DT_ACT_SOFTMAX;
	default:
		return DT_ACT_LINEAR;
	}
}

static double loss_of(const struct loss_case *k, float *z, float *t, int c)
{
	/* The loss as a function of what the gradient is taken against. */
	struct dt_tensor zt = dt_tensor_batch(z, DT_CPU, N, &(struct dt_shape){ 1, { c } });
	struct dt_shape ls = { 1, { k->loss == DT_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY ? 1 : c } };
	struct dt_tensor tt = dt_tensor_batch(t, DT_CPU, N, &ls);
	struct dt_loss_args a = args_of(k);
	if (k->input == DT_LOSS_FUSED) {
		float p[N * 8];
		struct dt_tensor pt = dt_tensor_batch(p, DT_CPU, N, &(struct dt_shape){ 1, { c } });
		dt_op_act_forward(prob_act(k->loss), &zt, &pt);
		return dt_op_loss_args(k->loss, &a, DT_LOSS_PROBS, &pt, &tt, NULL, NULL, 1);
	}
	return dt_op_loss_args(k->loss, &a, k->input, &zt, &tt, NULL, NULL, 1);
}

static void check_loss(const struct loss_case *k)
{
	int c = k->c;
	float z[N * 8], t[N * 8], p[N * 8], g[N * 8];
	struct dt_rng rng;
	struct dt_shape cs = { 1, { c } };
	struct dt_shape ls = { 1, { k->loss == DT_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY ? 1 : c } };
	struct dt_tensor pt = dt_tensor_batch(p, DT_CPU, N, &cs), gt = dt_tensor_batch(g, DT_CPU, N, &cs);
	struct dt_tensor zt = dt_tensor_batch(z, DT_CPU, N, &cs), tt = dt_tensor_batch(t, DT_CPU, N, &ls);
	struct dt_loss_args a = args_of(k);
	char what[96];

	dt_rng_seed(&rng, 5, (uint64_t)k->loss * 10 + k->input);
	for (int i = 0; i < N * c; i++)
		z[i] = (float)(2 * dt_rng_uniform(&rng) - 1);
	for (int r = 0; r < N; r++)
		for (int j = 0; j < c; j++) {
			switch (k->loss) {
			case DT_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY:
				t[r] = (float)(r % c);
				break;
			case DT_LOSS_CATEGORICAL_CROSSENTROPY:
			case DT_LOSS_CATEGORICAL_FOCAL_CROSSENTROPY:
			case DT_LOSS_CATEGORICAL_HINGE:
				t[r * c + j] = j == (r + 1) % c;
				break;
			case DT_LOSS_BINARY_CROSSENTROPY:
			case DT_LOSS_BINARY_FOCAL_CROSSENTROPY:
			case DT_LOSS_HINGE:
			case DT_LOSS_SQUARED_HINGE:
				t[r * c + j] = (float)((r + j) % 2);
				break;
			default:
				t[r * c + j] = (float)dt_rng_uniform(&rng);
			}
		}
	/* Probabilities are a softmax (or sigmoid) of z, away from the clip range. */
	if (k->input == DT_LOSS_PROBS)
		dt_op_act_forward(prob_act(k->loss), &zt, &zt);
	if (k->input == DT_LOSS_FUSED) {
		dt_op_act_forward(prob_act(k->loss), &zt, &pt);
		dt_op_loss_args(k->loss, &a, DT_LOSS_FUSED, &pt, &tt, NULL, &gt, 0.5f);
	} else {
		dt_op_loss_args(k->loss, &a, k->input, &zt, &tt, NULL, &gt, 0.5f);
	}
	for (int i = 0; i < N * c; i++) {
		float keep = z[i];
		double plus, minus;
		z[i] = keep + (float)H;
		plus = loss_of(k, z, t, c);
		z[i] = keep - (float)H;
		minus = loss_of(k, z, t, c);
		z[i] = keep;
		snprintf(what, sizeof(what), "%s input %d", dt_loss_names[k->loss], (int)k->input);
		expect_close(g[i], 0.5 * (plus - minus) / (2 * H), what, i);
	}
}

/* ---- residual blocks: the whole model's gradients, through both paths of each block ---- */

struct model_case {
	const char *input;
	const char *layers; /* the YAML `layers:` list, flow style */
	int vocab;          /* > 0: the input is token indices below it (an embedding first), 0 among them */
};

/* sum(y * r) of the model's forward pass on its input view. */
static double model_objective(struct dt_model *m, const float *r, const struct dt_step_ctx *ctx)
{
	struct dt_tensor y = dt_model_forward(m, N, ctx);
	int64_t n = dt_tensor_count(&y);
	double s = 0;
	for (int64_t i = 0; i < n; i++)
		s += (double)y.data[i] * r[i];
	return s;
}

static void check_model(const struct model_case *k)
{
	struct dt_model m;
	struct dt_doc *doc;
	struct dt_rng rng;
	struct dt_shape in = parse_shape(k->input);
	struct dt_step_ctx ctx = { .training = 1, .key = 99 };
	char text[1024], what[160];
	struct dt_tensor x, dy;
	float *r, *grads;
	int64_t ny;
	int adds = 0;

	snprintf(text, sizeof(text), "layers: %s\n", k->layers);
	doc = dt_doc_parse("model", text, ".");
	assert_non_null(doc);
	if (dt_model_init(&m, "t", &in, dt_node_get(dt_doc_root(doc), "layers"), dt_layer_types) < 0)
		fail_msg("%s: %s", k->layers, dt_error_last());
	for (int i = 0; i < m.nlayers; i++)
		adds += m.shortcut[i] >= 0 || m.layers[i].type->view;
	assert_true(adds > 0 || k->vocab > 0); /* what the plain layer checks do not cover */
	assert_int_equal(dt_model_alloc(&m, DT_CPU, N), 0);
	dt_rng_seed(&rng, 17, 0);
	for (int64_t i = 0; i < m.nparams; i++)
		m.params[i] = (float)(2 * dt_rng_uniform(&rng) - 1) * 0.7f;
	x = dt_model_input(&m, N);
	for (int64_t i = 0; i < dt_tensor_count(&x); i++)
		x.data[i] = k->vocab ? (float)(int)(dt_rng_uniform(&rng) * k->vocab) : (float)(2 * dt_rng_uniform(&rng) - 1);
	if (k->vocab) { /* sample 0 all padding, sample 1 padded before its tokens, sample 2 as drawn */
		int64_t steps = dt_tensor_count(&x) / N;
		for (int64_t t = 0; t < steps; t++) {
			x.data[t] = 0;
			x.data[steps + t] = t < steps / 2 ? 0 : 1 + t % (k->vocab - 1);
		}
	}
	ny = (int64_t)N * dt_shape_count(&m.output);
	r = malloc(ny * sizeof(float));
	for (int64_t i = 0; i < ny; i++)
		r[i] = (float)(2 * dt_rng_uniform(&rng) - 1);
	model_objective(&m, r, &ctx);
	dy = dt_model_output_grad(&m, N);
	memcpy(dy.data, r, ny * sizeof(float));
	dt_model_backward(&m, N);
	grads = malloc((m.ntrainable + 1) * sizeof(float));
	memcpy(grads, m.grads, m.ntrainable * sizeof(float));
	for (int i = 0; i < m.nlayers; i++)
		for (int p = 0; p < m.layers[i].nparams; p++) {
			struct dt_param *pr = &m.layers[i].params[p];
			if (!pr->trainable)
				continue;
			for (int64_t e = 0; e < dt_shape_count(&pr->shape); e++) {
				float keep = pr->value.data[e];
				double plus, minus;
				pr->value.data[e] = keep + (float)H;
				plus = model_objective(&m, r, &ctx);
				pr->value.data[e] = keep - (float)H;
				minus = model_objective(&m, r, &ctx);
				pr->value.data[e] = keep;
				snprintf(what, sizeof(what), "%s: %s/%s", k->layers, m.layers[i].name, pr->name);
				expect_close(grads[pr->offset + e], (plus - minus) / (2 * H), what, (int)e);
			}
		}
	free(grads);
	free(r);
	dt_model_release(&m);
	dt_doc_free(doc);
}

static void test_residual_blocks(void **state)
{
	/* A layer with parameters comes first, so that its gradient sums the block's two paths. */
	static const struct model_case cases[] = {
		/* image, identity, activation after the add */
		{ "5,5,2", "[{conv2d: {filters: 2, kernel_size: 3, padding: same}},"
			   " {residual: {layers: [{conv2d: {filters: 2, kernel_size: 3, padding: same, activation: tanh}},"
			   " {conv2d: {filters: 2, kernel_size: 3, padding: same}}], activation: elu}}, flatten,"
			   " {dense: {units: 3}}]", 0 },
		/* image, projection by a strided 1x1 convolution (the default when the shape changes) */
		{ "6,5,2", "[{conv2d: {filters: 2, kernel_size: 1}},"
			   " {residual: {layers: [{conv2d: {filters: 3, kernel_size: 3, strides: 2, padding: same}},"
			   " batch_normalization], shortcut: projection, activation: tanh}}, global_average_pooling2d]", 0 },
		/* image, projection asked for though the shape stays */
		{ "4,4,2", "[{conv2d: {filters: 2, kernel_size: 1}},"
			   " {residual: {layers: [{conv2d: {filters: 2, kernel_size: 3, padding: same}}],"
			   " shortcut: projection}}, flatten]", 0 },
		/* flat, identity and projection (dense) */
		{ "4", "[{dense: {units: 3, activation: tanh}},"
		       " {residual: {layers: [{dense: {units: 3, activation: tanh}}, {dense: {units: 3}}], shortcut: identity}},"
		       " {residual: {layers: [{dense: {units: 2, activation: swish}}], activation: tanh}}]", 0 },
		/* a block first: nothing before it needs a gradient, its input gets none */
		{ "4", "[{residual: {layers: [{dense: {units: 4, activation: tanh}}], activation: tanh}}, {dense: {units: 2}}]", 0 },
		/* nested blocks, the inner one first in the outer */
		{ "4", "[{dense: {units: 3}},"
		       " {residual: {layers: [{residual: {layers: [{dense: {units: 3, activation: tanh}}]}},"
		       " {dense: {units: 3}}], activation: tanh}}, {dense: {units: 2}}]", 0 },
	};
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_model(&cases[i]);
}

/* Views (flatten, reshape) that share their input's buffers: the gradient reaches the layers before them. */
static void test_views(void **state)
{
	static const struct model_case cases[] = {
		{ "4,4,1", "[{conv2d: {filters: 2, kernel_size: 3}}, flatten, {dense: {units: 3}}]", 0 },
		{ "5", "[{dense: {units: 6, activation: tanh}}, {reshape: {target_shape: [3, 2]}},"
		       " {conv1d: {filters: 2, kernel_size: 2}}, flatten]", 0 },
	};
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_model(&cases[i]);
}

/* ---- mask_zero's masks (issue 14): through recurrent layers, the layers that pass them, the masked mean ---- */

static void test_masks(void **state)
{
	static const struct model_case cases[] = {
		{ "6", "[{embedding: {input_dim: 4, output_dim: 3, mask_zero: true}},"
		       " {lstm: {units: 3, return_sequences: true}}, {dropout: {rate: 0.3}},"
		       " {gru: {units: 2, go_backwards: true}}]", 4 },
		{ "5", "[{embedding: {input_dim: 3, output_dim: 2, mask_zero: true}},"
		       " {bidirectional: {layer: {simple_rnn: {units: 2, return_sequences: true}}, merge_mode: mul}},"
		       " {spatial_dropout1d: {rate: 0.3}}, global_average_pooling1d]", 3 },
		{ "5", "[{embedding: {input_dim: 4, output_dim: 3, mask_zero: true}}, layer_normalization,"
		       " {activation: {activation: tanh}}, {gru: {units: 2, reset_after: false}}]", 4 },
		{ "6", "[{embedding: {input_dim: 4, output_dim: 2, mask_zero: true}},"
		       " {bidirectional: {layer: {lstm: {units: 2, go_backwards: true}}}}]", 4 },
	};
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_model(&cases[i]);
}

/* ---- losses ---- */

static void test_every_loss(void **state)
{
/* A case's loss, input and classes; the arguments follow by name. */
#define K(l, in, classes) .loss = DT_LOSS_##l, .input = DT_LOSS_##in, .c = classes
	static const struct loss_case cases[] = {
		{ K(SPARSE_CATEGORICAL_CROSSENTROPY, PROBS, 4) },
		{ K(SPARSE_CATEGORICAL_CROSSENTROPY, LOGITS, 4) },
		{ K(SPARSE_CATEGORICAL_CROSSENTROPY, FUSED, 4) },
		{ K(CATEGORICAL_CROSSENTROPY, PROBS, 3) },
		{ K(CATEGORICAL_CROSSENTROPY, LOGITS, 3) },
		{ K(CATEGORICAL_CROSSENTROPY, FUSED, 3) },
		{ K(CATEGORICAL_CROSSENTROPY, PROBS, 3), .label_smoothing = 0.2f },
		{ K(CATEGORICAL_CROSSENTROPY, LOGITS, 3), .label_smoothing = 0.2f },
		{ K(CATEGORICAL_CROSSENTROPY, FUSED, 3), .label_smoothing = 0.2f },
		{ K(BINARY_CROSSENTROPY, PROBS, 2) },
		{ K(BINARY_CROSSENTROPY, LOGITS, 2) },
		{ K(BINARY_CROSSENTROPY, FUSED, 1) },
		{ K(BINARY_CROSSENTROPY, LOGITS, 2), .label_smoothing = 0.1f },
		{ K(BINARY_CROSSENTROPY, FUSED, 2), .label_smoothing = 0.1f },
		{ K(MEAN_SQUARED_ERROR, PROBS, 3) },
		{ K(MEAN_ABSOLUTE_ERROR, PROBS, 3) },
		{ K(HUBER, PROBS, 3) },
		{ K(HUBER, PROBS, 4), .delta = 0.3f },
		{ K(LOG_COSH, PROBS, 3) },
		{ K(KL_DIVERGENCE, PROBS, 4) },
		{ K(POISSON, PROBS, 3) },
		{ K(COSINE_SIMILARITY, PROBS, 4) },
		{ K(HINGE, PROBS, 3) },
		{ K(SQUARED_HINGE, PROBS, 3) },
		{ K(CATEGORICAL_HINGE, PROBS, 4) },
		{ K(BINARY_FOCAL_CROSSENTROPY, PROBS, 2) },
		{ K(BINARY_FOCAL_CROSSENTROPY, LOGITS, 2) },
		{ K(BINARY_FOCAL_CROSSENTROPY, PROBS, 3), .gamma = 1.5f, .alpha = 0.4f,
		  .label_smoothing = 0.1f, .apply_class_balancing = 1 },
		{ K(BINARY_FOCAL_CROSSENTROPY, LOGITS, 3), .gamma = 0.5f, .apply_class_balancing = 1 },
		{ K(CATEGORICAL_FOCAL_CROSSENTROPY, PROBS, 3) },
		{ K(CATEGORICAL_FOCAL_CROSSENTROPY, LOGITS, 3) },
		{ K(CATEGORICAL_FOCAL_CROSSENTROPY, PROBS, 4), .gamma = 1.5f, .alpha = 0.5f,
		  .label_smoothing = 0.1f },
		{ K(CATEGORICAL_FOCAL_CROSSENTROPY, LOGITS, 4), .gamma = 3.0f, .label_smoothing = 0.3f },
	};
	int covered[DT_LOSS_COUNT] = { 0 };
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		check_loss(&cases[i]);
		covered[cases[i].loss] = 1;
	}
	for (int l = 0; l < DT_LOSS_COUNT; l++)
		if (!covered[l])
			fail_msg("loss '%s' has no gradient check", dt_loss_names[l]);
}
#undef K

/* The logits form and the probability form agree on the loss value. */
static void test_logits_match_probs(void **state)
{
	float z[6] = { 0.2f, -1.0f, 2.0f, 0.5f, 0.1f, -0.3f }, p[6], t[2] = { 2, 0 };
	struct dt_shape cs = { 1, { 3 } }, ls = { 1, { 1 } };
	struct dt_tensor zt = dt_tensor_batch(z, DT_CPU, 2, &cs), pt = dt_tensor_batch(p, DT_CPU, 2, &cs);
	struct dt_tensor tt = dt_tensor_batch(t, DT_CPU, 2, &ls);
	double a, b, expect;
	dt_op_act_forward(DT_ACT_SOFTMAX, &zt, &pt);
	a = dt_op_loss(DT_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY, DT_LOSS_LOGITS, &zt, &tt, NULL, 1);
	b = dt_op_loss(DT_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY, DT_LOSS_PROBS, &pt, &tt, NULL, 1);
	expect = -log(p[2]) - log(p[3]);
	assert_float_equal(a, expect, 1e-5);
	assert_float_equal(b, expect, 1e-5);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_layer_type),
		cmocka_unit_test(test_residual_blocks),
		cmocka_unit_test(test_views),
		cmocka_unit_test(test_masks),
		cmocka_unit_test(test_every_loss),
		cmocka_unit_test(test_logits_match_probs),
	};
	dt_error_set_quiet(1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
