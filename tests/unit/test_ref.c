/*
 * Layers against PyTorch: every tests/ref/<case>.safetensors, written by
 * tests/ref/make_fixtures.py, is one test. A fixture holds one layer's YAML
 * and input shape (metadata), an input x, the parameters by Keras name, an
 * upstream gradient dy, and the expected y, dx, grad/<param> and
 * expect/<param> (state after the run, such as batch norm's moving
 * statistics). This builds the one-layer model, runs forward (training or
 * inference, over `steps` consecutive batches of x), then backward with dy,
 * and compares everything within RTOL relative plus ATOL absolute.
 *
 * Optimizers against PyTorch: a fixture with an "optimizer" metadata entry,
 * written by tests/ref/make_optimizer_fixtures.py, holds N weights w, the
 * gradients of `steps` steps and torch's weights and slots after each step;
 * dtrain's optimizer, read from the same YAML, makes the steps and every
 * step's weights and slots must agree within OPT_RTOL (see
 * optimizer_fixture).
 *
 * Models against Keras: a fixture with a "model" metadata entry, written by
 * tests/ref/make_keras_fixtures.py, holds a whole small model's parameters,
 * x, y, dy and every parameter's gradient (model_fixture): for semantics
 * that are Keras' own, such as Embedding's mask_zero.
 *
 * A fixture added to tests/ref/ is tested without another line here; one
 * whose layer type dtrain lacks fails. DT_REF_DIR overrides the directory;
 * DT_REF_VERBOSE=1 prints the worst error of every comparison.
 */
#include <dirent.h>
#include <math.h>

#include "helpers.h"

#include "core/checkpoint/checkpoint.h"
#include "core/config/config.h"
#include "core/model/model.h"
#include "core/model/optimizer.h"
#include "layers/layers.h"

#define RTOL 1e-4
#define ATOL 1e-5
/* Optimizer fixtures: |got - want| <= OPT_RTOL * the tensor's scale (optimizer_fixture). */
#define OPT_RTOL 1e-5

static char ref_dir[4096];
static int verbose;

/* tests/ref/ next to this file's tests/unit/, unless DT_REF_DIR says otherwise. */
static void find_ref_dir(void)
{
	const char *env = getenv("DT_REF_DIR"), *file = __FILE__, *cut = strstr(file, "unit/test_ref.c");
	if (env && *env)
		snprintf(ref_dir, sizeof(ref_dir), "%s", env);
	else if (cut)
		snprintf(ref_dir, sizeof(ref_dir), "%.*sref", (int)(cut - file), file);
	else
		snprintf(ref_dir, sizeof(ref_dir), "tests/ref");
}

/* "[1, 0, 2]": flat index i in shape s. */
static char *format_index(const struct dt_shape *s, int64_t i, char *buf, size_t size)
{
	int64_t idx[DT_MAX_DIMS];
	size_t len = 0;
	for (int d = s->ndim - 1; d >= 0; d--) {
		idx[d] = s->dim[d] ? i % s->dim[d] : 0;
		i = s->dim[d] ? i / s->dim[d] : 0;
	}
	len += snprintf(buf, size, "[");
	for (int d = 0; d < s->ndim && len < size; d++)
		len += snprintf(buf + len, size - len, "%s%lld", d ? ", " : "", (long long)idx[d]);
	if (len < size)
		snprintf(buf + len, size - len, "]");
	return buf;
}

/*
 * Compares got (the count of want's shape, host memory) with want. Prints the
 * number of elements out of tolerance and the worst one; returns 0 when all
 * are within it, -1 otherwise. NaN never passes.
 */
static int compare(const char *name, const char *what, const float *got, const struct dt_ckpt_tensor *want)
{
	int64_t n = dt_shape_count(&want->shape), bad = 0, worst = 0;
	double worst_ratio = -1, worst_abs = 0;
	char idx[64];

	for (int64_t i = 0; i < n; i++) {
		double g = got[i], w = want->data[i], diff = fabs(g - w), tol = ATOL + RTOL * fabs(w);
		double ratio = isnan(diff) ? INFINITY : diff / tol;
		if (!(diff <= tol))
			bad++;
		if (ratio > worst_ratio) {
			worst_ratio = ratio;
			worst = i;
			worst_abs = diff;
		}
	}
	format_index(&want->shape, worst, idx, sizeof(idx));
	if (bad)
		print_error("%s: %s: %lld of %lld elements out of tolerance; worst %s: got %.8g, expected %.8g "
			    "(|diff| %.3g, %.1fx the tolerance %.3g)\n",
			    name, what, (long long)bad, (long long)n, idx, got[worst], want->data[worst], worst_abs,
			    worst_ratio, ATOL + RTOL * fabs(want->data[worst]));
	else if (verbose)
		print_message("# %s: %s: %lld elements ok; worst %s |diff| %.3g, %.3fx the tolerance\n", name,
			      what, (long long)n, idx, worst_abs, worst_ratio);
	return bad ? -1 : 0;
}

/* Reads "7,7,3". 0, or -1 when it is not a list of positive integers. */
static int parse_shape(const char *text, struct dt_shape *s)
{
	char *end;
	memset(s, 0, sizeof(*s));
	while (*text) {
		long d = strtol(text, &end, 10);
		if (end == text || d <= 0 || s->ndim == DT_MAX_DIMS - 1)
			return -1;
		s->dim[s->ndim++] = (int)d;
		text = *end == ',' ? end + 1 : end;
		if (*end && *end != ',')
			return -1;
	}
	return s->ndim ? 0 : -1;
}

/* The sample shape of a batch tensor: its shape without dim[0]. */
static struct dt_shape sample_of(const struct dt_shape *s)
{
	struct dt_shape r = { 0 };
	r.ndim = s->ndim - 1;
	for (int d = 1; d < s->ndim; d++)
		r.dim[d - 1] = s->dim[d];
	return r;
}

static const struct dt_param *param_named(const struct dt_layer *l, const char *name)
{
	for (int p = 0; p < l->nparams; p++)
		if (!strcmp(l->params[p].name, name))
			return &l->params[p];
	return NULL;
}

/* Every tensor of the file must mean something for this layer: a misnamed one fails. */
static int check_names(const char *name, const struct dt_ckpt *c, const struct dt_layer *l)
{
	int ret = 0;
	for (int i = 0; i < dt_checkpoint_count(c); i++) {
		const char *t = dt_checkpoint_at(c, i).name;
		const struct dt_param *p = NULL;
		if (!strcmp(t, "x") || !strcmp(t, "y") || !strcmp(t, "dy") || !strcmp(t, "dx"))
			continue;
		if (!strncmp(t, "grad/", 5))
			p = param_named(l, t + 5);
		else if (!strncmp(t, "expect/", 7))
			p = param_named(l, t + 7);
		else
			p = param_named(l, t);
		if (!p || (!strncmp(t, "grad/", 5) && !p->trainable)) {
			print_error("%s: tensor '%s' matches no %sparameter of dtrain's '%s' layer\n", name, t,
				    strncmp(t, "grad/", 5) ? "" : "trainable ", l->type->name);
			ret = -1;
		}
	}
	return ret;
}

static const struct dt_ckpt_tensor *need(const struct dt_ckpt *c, const char *name, const char *tensor)
{
	const struct dt_ckpt_tensor *t = dt_checkpoint_find(c, tensor);
	if (!t)
		fail_msg("%s: the fixture has no tensor '%s'", name, tensor);
	return t;
}

/* Fills n floats of a host buffer with NaN, so that anything left unwritten fails. */
static void fill_nan(float *p, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		p[i] = NAN;
}

/* What one test holds; the teardown frees it, also after a failure. */
static struct held {
	struct dt_ckpt *c;
	struct dt_doc *doc;
	struct dt_model m;
	struct dt_optimizer o;
	int built, optimizer_built;
	float *got, *nan, *dxmem;
} held;

static int release_held(void **state)
{
	if (held.optimizer_built)
		dt_optimizer_release(&held.o, &held.m);
	if (held.built)
		dt_model_release(&held.m);
	dt_doc_free(held.doc);
	dt_checkpoint_free(held.c);
	free(held.got);
	free(held.nan);
	if (held.dxmem)
		dt_device_free(DT_CPU, held.dxmem);
	memset(&held, 0, sizeof(held));
	return 0;
}

/*
 * Compares the n floats of got with want (host memory): the largest
 * |got - want| must be within OPT_RTOL * scale. Prints the worst element on
 * failure (always with DT_REF_VERBOSE); 0 or -1.
 */
static int compare_scaled(const char *name, const char *what, int step, const float *got, const float *want,
			  int64_t n, double scale)
{
	int64_t worst = 0;
	double worst_diff = -1;
	for (int64_t i = 0; i < n; i++) {
		double diff = fabs((double)got[i] - want[i]);
		if (isnan(diff))
			diff = INFINITY;
		if (diff > worst_diff) {
			worst_diff = diff;
			worst = i;
		}
	}
	int bad = !(worst_diff <= OPT_RTOL * scale);
	if (bad || verbose)
		(bad ? print_error : print_message)("%s%s: %s after step %d: worst [%lld] got %.9g, expected %.9g "
						    "(|diff| %.3g, %.3g of the scale %.3g; tolerance %.3g)\n",
						    bad ? "" : "# ", name, what, step, (long long)worst, got[worst],
						    want[worst], worst_diff, worst_diff / scale, scale, OPT_RTOL);
	return bad ? -1 : 0;
}

/*
 * An optimizer fixture: dtrain's optimizer (compile.optimizer from the
 * metadata) on a model of one dense layer (1 input, N units, no bias) whose
 * kernel holds the N weights w; each step loads that step's gradient, calls
 * dt_optimizer_apply and compares the weights, relative to the farthest any
 * weight has moved from w by then, and each slot, relative to its largest
 * value (so a coefficient 1.3e-5 off, 1 - 0.999f for 1 - 0.999, fails).
 */
static void optimizer_fixture(const char *name, const struct dt_ckpt *c)
{
	const char *optimizer = dt_checkpoint_meta(c, "optimizer"), *steps_s = dt_checkpoint_meta(c, "steps");
	const struct dt_ckpt_tensor *w = need(c, name, "w"), *grad = need(c, name, "grad");
	const struct dt_ckpt_tensor *want_w = need(c, name, "expect/w"), *want_slot[DT_OPT_MAX_SLOTS] = { NULL };
	struct dt_shape in = dt_shape_make(1, (int[]){ 1 });
	struct dt_optimizer_config cfg;
	struct dt_model *m = &held.m;
	struct dt_optimizer *o = &held.o;
	char yaml[1024], what[64];
	int64_t n = dt_shape_count(&w->shape);
	int steps = steps_s ? atoi(steps_s) : 0, failed = 0, checks = 0, known = 3;
	float *got;

	if (steps < 1 || w->shape.ndim != 1)
		fail_msg("%s: bad steps '%s' or w not 1-d", name, steps_s ? steps_s : "");
	snprintf(yaml, sizeof(yaml), "optimizer: %s\nlayers:\n  - dense: {units: %lld, use_bias: false}\n", optimizer,
		 (long long)n);
	held.doc = dt_doc_parse(name, yaml, ".");
	if (!held.doc || dt_optimizer_config_read(&cfg, dt_doc_root(held.doc)) < 0)
		fail_msg("%s: cannot read the optimizer '%s': %s", name, optimizer, dt_error_last());
	if (dt_model_init(m, "ref", &in, dt_node_get(dt_doc_root(held.doc), "layers"), dt_layer_types) < 0)
		fail_msg("%s: %s", name, dt_error_last());
	held.built = 1;
	if (dt_model_alloc(m, DT_CPU, 1) < 0)
		fail_msg("%s: %s", name, dt_error_last());
	assert_int_equal(m->ntrainable, n);
	dt_optimizer_init(o, &cfg, m);
	held.optimizer_built = 1;
	for (int s = 0; s < o->nslots; s++) {
		if (!o->slot_names[s])
			continue;
		snprintf(what, sizeof(what), "expect/%s", o->slot_names[s]);
		if ((want_slot[s] = dt_checkpoint_find(c, what)))
			known++;
	}
	if (dt_checkpoint_count(c) != known)
		fail_msg("%s: the fixture has tensors other than w, grad, expect/w and expect/<slot> of dtrain's '%s'",
			 name, dt_optimizer_names[cfg.kind]);
	if (grad->shape.ndim != 2 || grad->shape.dim[0] != steps || grad->shape.dim[1] != n ||
	    !dt_shape_equal(&want_w->shape, &grad->shape))
		fail_msg("%s: grad and expect/w must be (steps, N) = (%d, %lld)", name, steps, (long long)n);
	for (int s = 0; s < DT_OPT_MAX_SLOTS; s++)
		if (want_slot[s] && !dt_shape_equal(&want_slot[s]->shape, &grad->shape))
			fail_msg("%s: expect/%s must be (steps, N)", name, o->slot_names[s]);

	struct dt_tensor weights = dt_model_params(m), grads = dt_model_grads(m);
	got = held.got = malloc((size_t)n * sizeof(float));
	dt_op_from_host(&weights, w->data);
	for (int t = 0; t < steps; t++) {
		const float *want = want_w->data + (int64_t)t * n;
		double moved = 0;
		dt_op_from_host(&grads, grad->data + (int64_t)t * n);
		dt_optimizer_apply(o, m);
		for (int64_t i = 0; i < n; i++)
			moved = fmax(moved, fabs((double)want[i] - w->data[i]));
		dt_op_to_host(&weights, got);
		checks++;
		failed += compare_scaled(name, "w", t + 1, got, want, n, moved) < 0;
		for (int s = 0; s < DT_OPT_MAX_SLOTS; s++) {
			const float *ws;
			double largest = 0;
			if (!want_slot[s])
				continue;
			ws = want_slot[s]->data + (int64_t)t * n;
			for (int64_t i = 0; i < n; i++)
				largest = fmax(largest, fabs(ws[i]));
			struct dt_tensor slot = dt_tensor_flat(o->slots[s], m->dev, n);
			dt_op_to_host(&slot, got);
			checks++;
			failed += compare_scaled(name, o->slot_names[s], t + 1, got, ws, n, largest) < 0;
		}
	}
	if (failed)
		fail_msg("%s (%s): %d of %d comparisons with PyTorch failed", name, optimizer, failed, checks);
}

/* "layer/param" of a model fixture: the parameter of that name of the model's layer of that name, or NULL. */
static struct dt_param *model_param(struct dt_model *m, const char *path)
{
	const char *slash = strchr(path, '/');
	if (!slash)
		return NULL;
	for (int i = 0; i < m->nlayers; i++) {
		struct dt_layer *l = &m->layers[i];
		if (strlen(l->name) != (size_t)(slash - path) || strncmp(l->name, path, slash - path))
			continue;
		for (int p = 0; p < l->nparams; p++)
			if (!strcmp(l->params[p].name, slash + 1))
				return &l->params[p];
	}
	return NULL;
}

/*
 * A model fixture (tests/ref/make_keras_fixtures.py: Keras' own semantics,
 * such as mask_zero's masks): the model of the "model" metadata, every
 * parameter loaded from <layer>/<param>, one training forward of x compared
 * with y, then the model's backward from dy and every grad/<layer>/<param>.
 */
static void model_fixture(const char *name, const struct dt_ckpt *c)
{
	const char *layers = dt_checkpoint_meta(c, "model"), *shape = dt_checkpoint_meta(c, "input_shape");
	const struct dt_ckpt_tensor *x = need(c, name, "x"), *y = need(c, name, "y"), *dy = need(c, name, "dy");
	struct dt_step_ctx ctx = { .training = 1, .key = 0x5eed };
	struct dt_model *m = &held.m;
	struct dt_shape in, xs;
	struct dt_tensor xin, yout, dyv;
	char yaml[2048];
	int n, failed = 0, checks = 0, grads = 0;

	if (!shape || parse_shape(shape, &in) < 0)
		fail_msg("%s: bad input_shape '%s'", name, shape ? shape : "");
	snprintf(yaml, sizeof(yaml), "layers: %s\n", layers);
	if (!(held.doc = dt_doc_parse(name, yaml, ".")))
		fail_msg("%s: cannot parse the model '%s': %s", name, layers, dt_error_last());
	if (dt_model_init(m, "ref", &in, dt_node_get(dt_doc_root(held.doc), "layers"), dt_layer_types) < 0)
		fail_msg("%s: cannot build '%s': %s", name, layers, dt_error_last());
	held.built = 1;
	xs = sample_of(&x->shape);
	n = x->shape.dim[0];
	if (!dt_shape_equal(&xs, &in) || !dt_shape_equal(&y->shape, &dy->shape) || y->shape.dim[0] != n ||
	    dt_shape_count(&y->shape) != (int64_t)n * dt_shape_count(&m->output))
		fail_msg("%s: x, y and dy do not fit the model's input and output", name);
	for (int i = 0; i < dt_checkpoint_count(c); i++) {
		struct dt_ckpt_tensor at = dt_checkpoint_at(c, i);
		const char *t = at.name;
		struct dt_param *p = strncmp(t, "grad/", 5) ? model_param(m, t) : model_param(m, t + 5);
		if (!strcmp(t, "x") || !strcmp(t, "y") || !strcmp(t, "dy"))
			continue;
		if (!p || !dt_shape_equal(&p->shape, &at.shape))
			fail_msg("%s: tensor '%s' matches no parameter of that shape in the model", name, t);
		grads += !strncmp(t, "grad/", 5);
	}
	if (dt_model_alloc(m, DT_CPU, n) < 0)
		fail_msg("%s: %s", name, dt_error_last());
	for (int i = 0; i < m->nlayers; i++)
		for (int p = 0; p < m->layers[i].nparams; p++) {
			struct dt_param *pr = &m->layers[i].params[p];
			char what[160];
			snprintf(what, sizeof(what), "%s/%s", m->layers[i].name, pr->name);
			dt_op_from_host(&pr->value, need(c, name, what)->data);
		}
	held.got = malloc((size_t)(m->nparams + dt_shape_count(&y->shape)) * sizeof(float));
	xin = dt_model_input(m, n);
	dt_op_from_host(&xin, x->data);
	yout = dt_model_forward(m, n, &ctx);
	dt_op_to_host(&yout, held.got);
	checks++;
	failed += compare(name, "y", held.got, y) < 0;
	dyv = dt_model_output_grad(m, n);
	dt_op_from_host(&dyv, dy->data);
	dt_model_backward(m, n);
	for (int i = 0; i < m->nlayers; i++)
		for (int p = 0; p < m->layers[i].nparams; p++) {
			struct dt_param *pr = &m->layers[i].params[p];
			char what[160];
			if (!pr->trainable)
				continue;
			snprintf(what, sizeof(what), "grad/%s/%s", m->layers[i].name, pr->name);
			dt_op_to_host(&pr->grad, held.got);
			checks++;
			failed += compare(name, what, held.got, need(c, name, what)) < 0;
		}
	assert_int_equal(checks - 1, grads);
	if (failed)
		fail_msg("%s (%s): %d of %d comparisons with Keras failed", name, layers, failed, checks);
}

static void test_fixture(void **state)
{
	const char *path = *state;
	char name[256], yaml[1024], a[64], b[64], e[64];
	const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path, *layer, *shape, *mode, *steps_s;
	const struct dt_ckpt_tensor *x, *y, *dy;
	struct dt_ckpt *c;
	struct dt_doc *doc;
	struct dt_model *mp = &held.m;
	struct dt_layer *l;
	struct dt_shape in;
	struct dt_step_ctx ctx = { .training = 1, .key = 0x5eed };
	int steps = 1, n, failed = 0, checks = 0;
	int64_t in_count, out_count;
	float *got;

	snprintf(name, sizeof(name), "%.*s", (int)(strlen(base) - strlen(".safetensors")), base);
	c = held.c = dt_checkpoint_load(path);
	if (!c)
		fail_msg("%s", dt_error_last());
	if (dt_checkpoint_meta(c, "optimizer")) {
		optimizer_fixture(name, c);
		return;
	}
	if (dt_checkpoint_meta(c, "model")) {
		model_fixture(name, c);
		return;
	}
	layer = dt_checkpoint_meta(c, "layer");
	shape = dt_checkpoint_meta(c, "input_shape");
	mode = dt_checkpoint_meta(c, "mode");
	steps_s = dt_checkpoint_meta(c, "steps");
	if (!layer || !shape)
		fail_msg("%s: the fixture's metadata lacks 'layer' or 'input_shape'", name);
	if (parse_shape(shape, &in) < 0)
		fail_msg("%s: bad input_shape '%s'", name, shape);
	if (mode && strcmp(mode, "training") && strcmp(mode, "inference"))
		fail_msg("%s: mode '%s' is neither 'training' nor 'inference'", name, mode);
	ctx.training = !mode || !strcmp(mode, "training");
	if (steps_s && (steps = atoi(steps_s)) < 1)
		fail_msg("%s: bad steps '%s'", name, steps_s);

	snprintf(yaml, sizeof(yaml), "layers:\n  - %s\n", layer);
	doc = held.doc = dt_doc_parse(name, yaml, ".");
	if (!doc)
		fail_msg("%s: cannot parse the layer '%s': %s", name, layer, dt_error_last());
	if (dt_model_init(mp, "ref", &in, dt_node_get(dt_doc_root(doc), "layers"), dt_layer_types) < 0)
		fail_msg("%s: cannot build '%s' on input %s: %s", name, layer, shape, dt_error_last());
	held.built = 1;
	l = &mp->layers[0];
	assert_int_equal(mp->nlayers, 1);

	x = need(c, name, "x");
	y = need(c, name, "y");
	dy = dt_checkpoint_find(c, "dy");
	{
		struct dt_shape xs = sample_of(&x->shape), ys = sample_of(&y->shape);
		if (!dt_shape_equal(&xs, &in) || x->shape.dim[0] % steps)
			fail_msg("%s: x has shape %s; expected (steps * N, %s)", name,
				 dt_shape_format(&x->shape, 0, a, sizeof(a)), shape);
		if (!dt_shape_equal(&ys, &l->out) || y->shape.dim[0] != x->shape.dim[0])
			fail_msg("%s: dtrain's '%s' maps %s to %s but PyTorch's y is %s", name, layer,
				 dt_shape_format(&in, 1, a, sizeof(a)), dt_shape_format(&l->out, 1, b, sizeof(b)),
				 dt_shape_format(&y->shape, 0, e, sizeof(e)));
	}
	n = x->shape.dim[0] / steps;
	in_count = dt_shape_count(&in);
	out_count = dt_shape_count(&l->out);
	if (check_names(name, c, l) < 0)
		fail_msg("%s: the fixture's tensors do not match dtrain's layer", name);
	if (dy && (steps != 1 || !ctx.training))
		fail_msg("%s: dy goes with one training step only", name);
	if (!dy && (dt_checkpoint_find(c, "dx")))
		fail_msg("%s: dx without dy", name);

	for (int p = 0; p < l->nparams; p++) {
		struct dt_param *pr = &l->params[p];
		const struct dt_ckpt_tensor *t = dt_checkpoint_find(c, pr->name);
		if (!t)
			fail_msg("%s: dtrain's layer has a parameter '%s' that the fixture lacks", name, pr->name);
		if (!dt_shape_equal(&t->shape, &pr->shape))
			fail_msg("%s: parameter '%s' is %s in dtrain but %s in the fixture", name, pr->name,
				 dt_shape_format(&pr->shape, 0, a, sizeof(a)), dt_shape_format(&t->shape, 0, b, sizeof(b)));
	}
	if (dt_model_alloc(mp, DT_CPU, n) < 0)
		fail_msg("%s: cannot allocate '%s' for a batch of %d: %s", name, layer, n, dt_error_last());
	for (int p = 0; p < l->nparams; p++)
		dt_op_from_host(&l->params[p].value, dt_checkpoint_find(c, l->params[p].name)->data);

	/* Forward over each batch in turn; y collects the outputs. */
	{
		int64_t most = x->shape.dim[0] * (in_count > out_count ? in_count : out_count);
		got = held.got = malloc((size_t)(most > mp->nparams ? most : mp->nparams) * sizeof(float));
	}
	for (int s = 0; s < steps; s++) {
		struct dt_tensor xin = dt_model_input(mp, n), yout;
		dt_op_from_host(&xin, x->data + (int64_t)s * n * in_count);
		yout = dt_model_forward(mp, n, &ctx);
		dt_op_to_host(&yout, got + (int64_t)s * n * out_count);
	}
	checks++;
	failed += compare(name, "y", got, y) < 0;

	/* Backward: dx from the layer itself (the model gives none to its first layer). */
	if (dy) {
		struct dt_tensor xv = dt_model_input(mp, n), yv = dt_tensor_batch(mp->acts[1], mp->dev, n, &l->out);
		struct dt_tensor dyv = dt_model_output_grad(mp, n), dxv;
		float *dxmem = held.dxmem = dt_device_alloc(mp->dev, n * in_count);
		float *nan = held.nan = malloc((size_t)(mp->ntrainable + n * in_count + 1) * sizeof(float));
		fill_nan(nan, mp->ntrainable + n * in_count);
		dxv = dt_tensor_batch(dxmem, mp->dev, n, &l->in);
		dt_op_from_host(&dxv, nan);
		if (mp->ntrainable) {
			struct dt_tensor g = dt_model_grads(mp);
			dt_op_from_host(&g, nan);
		}
		if (!dt_shape_equal(&dy->shape, &y->shape))
			fail_msg("%s: dy and y differ in shape", name);
		dt_op_from_host(&dyv, dy->data);
		l->type->backward(l, &xv, &yv, &dyv, &dxv);
		dt_op_to_host(&dxv, got);
		checks++;
		failed += compare(name, "dx", got, need(c, name, "dx")) < 0;
		for (int p = 0; p < l->nparams; p++) {
			struct dt_param *pr = &l->params[p];
			char what[80];
			if (!pr->trainable)
				continue;
			snprintf(what, sizeof(what), "grad/%s", pr->name);
			dt_op_to_host(&pr->grad, got);
			checks++;
			failed += compare(name, what, got, need(c, name, what)) < 0;
		}
	}

	/* State after the run: batch norm's moving statistics. */
	for (int p = 0; p < l->nparams; p++) {
		struct dt_param *pr = &l->params[p];
		char what[80];
		const struct dt_ckpt_tensor *t;
		snprintf(what, sizeof(what), "expect/%s", pr->name);
		if (!(t = dt_checkpoint_find(c, what)))
			continue;
		dt_op_to_host(&pr->value, got);
		checks++;
		failed += compare(name, what, got, t) < 0;
	}

	snprintf(yaml, sizeof(yaml), "%s (%s, input %s): %d of %d comparisons with PyTorch failed", name, layer,
		 shape, failed, checks);
	if (failed)
		fail_msg("%s", yaml);
}

static void test_no_fixtures(void **state)
{
	fail_msg("no fixtures in '%s'; run from the repository root or set DT_REF_DIR", ref_dir);
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(void)
{
	struct CMUnitTest *tests;
	char **paths = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	DIR *d;
	int ret;

	find_ref_dir();
	verbose = getenv("DT_REF_VERBOSE") && atoi(getenv("DT_REF_VERBOSE"));
	dt_error_set_quiet(1);
	if ((d = opendir(ref_dir))) {
		while ((e = readdir(d))) {
			size_t len = strlen(e->d_name), suf = strlen(".safetensors");
			if (len <= suf || strcmp(e->d_name + len - suf, ".safetensors"))
				continue;
			if (n == cap)
				paths = realloc(paths, (cap = cap ? 2 * cap : 32) * sizeof(*paths));
			paths[n] = malloc(strlen(ref_dir) + len + 2);
			sprintf(paths[n++], "%s/%s", ref_dir, e->d_name);
		}
		closedir(d);
	}
	if (!n) {
		const struct CMUnitTest none[] = { cmocka_unit_test(test_no_fixtures) };
		return cmocka_run_group_tests(none, NULL, NULL);
	}
	qsort(paths, n, sizeof(*paths), by_name);
	tests = calloc(n, sizeof(*tests));
	for (size_t i = 0; i < n; i++) {
		const char *base = strrchr(paths[i], '/') + 1;
		char *tname = malloc(strlen(base) + 8);
		sprintf(tname, "ref %.*s", (int)(strlen(base) - strlen(".safetensors")), base);
		tests[i] = (struct CMUnitTest){ .name = tname, .test_func = test_fixture,
						.teardown_func = release_held, .initial_state = paths[i] };
	}
	ret = _cmocka_run_group_tests("test_ref", tests, n, NULL, NULL);
	for (size_t i = 0; i < n; i++) {
		free((char *)tests[i].name);
		free(paths[i]);
	}
	free(tests);
	free(paths);
	return ret;
}
