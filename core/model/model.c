#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/model/model.h"
#include "core/model/residual.h"
#include "core/rng.h"

static const struct dt_layer_type *find_type(const struct dt_layer_type *const *types, const char *name)
{
	return !strcmp(name, "residual") ? &dt_residual_add_type : dt_layer_type_find(types, name);
}

/* "unknown layer type 'dense2'; did you mean 'dense'?", at the name. -1. */
static int unknown_type(const struct dt_node *at, const char *name, const struct dt_layer_type *const *types)
{
	const char *names[64], *close;
	char list[512] = "";
	int n = 0;
	while (types[n] && n < 62) {
		names[n] = types[n]->name;
		n++;
	}
	names[n++] = "residual";
	names[n] = NULL;
	close = dt_did_you_mean_config(name, names);
	if (close)
		return dt_node_error(at, "unknown layer type '%s'; did you mean '%s'?", name, close);
	for (int i = 0; i < n; i++)
		snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", i ? ", " : "", names[i]);
	return dt_node_error(at, "unknown layer type '%s' (expected one of: %s)", name, list);
}

/*
 * "- activation: softmax" for Keras' Activation('softmax'): the arguments are
 * a mapping, shown with the type's first example that has arguments. -1.
 */
static int args_not_map(const struct dt_node *args, const struct dt_layer_type *type)
{
	const struct dt_layer_example *e = type->examples;
	while (e && e->input && !e->args)
		e++;
	if (args->kind == DT_NODE_SCALAR && e && e->input)
		return dt_node_error(args, "the arguments of '%s' are a mapping, got '%s'; e.g. '- %s: %s'", type->name,
				     args->value, type->name, e->args);
	if (args->kind == DT_NODE_SCALAR)
		return dt_node_error(args, "'%s' takes no arguments here, got '%s'; write '- %s'", type->name,
				     args->value, type->name);
	return dt_node_expect(args, DT_NODE_MAP, type->name);
}

/*
 * The layer's type and its arguments from one item of the `layers:` list. A
 * bare name ("- flatten") gets `empty`, an empty mapping placed at the item,
 * so that "missing required key" errors still have a position.
 */
static int parse_item(const struct dt_node *item, const struct dt_layer_type *const *types,
		      const struct dt_layer_type **type, const struct dt_node **args, struct dt_node *empty)
{
	const char *name;
	const struct dt_node *name_node = item;

	memset(empty, 0, sizeof(*empty));
	empty->kind = DT_NODE_MAP;
	empty->file = item->file;
	empty->line = item->line;
	empty->col = item->col;
	empty->dir = item->dir;
	*args = empty;
	*type = NULL;
	if (item->kind == DT_NODE_MAP && item->n > 1) {
		/* A second layer without its '- ', or an argument indented as deep as the type. */
		const char *second = item->keys[1];
		const struct dt_node *v = item->items[1];
		if (find_type(types, second) && (v->kind == DT_NODE_MAP || !dt_node_get(item, second)))
			return dt_node_error(item->key_nodes[1], "a second layer '%s' in the item of '%s'; start each "
					     "layer with '- '", second, item->keys[0]);
		return dt_node_error(item->key_nodes[1], "'%s' is a second key in the item of layer '%s' (a layer is "
				     "one key naming its type); to make it an argument of '%s', indent it under '%s' "
				     "or put it inside its {...}", second, item->keys[0], item->keys[0], item->keys[0]);
	}
	if (item->kind == DT_NODE_SCALAR) {
		name = item->value;
	} else if (item->kind == DT_NODE_MAP && item->n == 1) {
		name = item->keys[0];
		name_node = item->key_nodes[0];
	} else {
		return dt_node_error(item, "a layer is one key naming its type, e.g. '- dense: {units: 10}'");
	}
	*type = find_type(types, name);
	if (!*type)
		return unknown_type(name_node, name, types);
	if (item->kind == DT_NODE_MAP && dt_node_get(item, name)) { /* else "- flatten:" with nothing after it */
		*args = item->items[0];
		if ((*args)->kind != DT_NODE_MAP)
			return args_not_map(*args, *type);
	}
	return 0;
}

/*
 * How many of its input's buffers layer i, a view (dt_layer_type.view),
 * takes as its output's: none unless it is the only reader of that input (no
 * other layer, no shortcut); then the activation, and the gradient too (2)
 * except at the model's input, which has none (dacts[0]).
 */
static int shares_input(const struct dt_model *m, int i)
{
	int j = m->from[i];
	if (!m->layers[i].type->view || m->shortcut[i] >= 0)
		return 0;
	for (int k = 0; k < m->nlayers; k++)
		if (k != i && (m->from[k] == j || m->shortcut[k] == j))
			return 0;
	return j > 0 ? 2 : 1;
}

/*
 * Places every parameter in the flat buffer: trainable ones first, then
 * state, so that the optimizer sees one contiguous block. The buffer's views
 * are 1-d, so it holds at most DT_MAX_COUNT floats: the error names the layer
 * that goes past it.
 */
static int layout(struct dt_model *m)
{
	char a[32], b[32];
	for (int pass = 1; pass >= 0; pass--)
		for (int i = 0; i < m->nlayers; i++)
			for (int p = 0; p < m->layers[i].nparams; p++) {
				struct dt_layer *l = &m->layers[i];
				struct dt_param *pr = &l->params[p];
				if (pr->trainable != pass)
					continue;
				pr->offset = m->nparams;
				m->nparams = dt_count_add(m->nparams, dt_shape_count(&pr->shape));
				if (m->nparams > DT_MAX_COUNT)
					return dt_node_error(l->node,
							     "layer '%s' brings the model's parameters to %s; one "
							     "model holds at most %s",
							     l->name, dt_count_format(m->nparams, a, sizeof(a)),
							     dt_count_format(DT_MAX_COUNT, b, sizeof(b)));
				if (pass)
					m->ntrainable = m->nparams;
			}
	return 0;
}

/* Layers the items of `layers` become: a residual block is its layers, a projection and an add. */
static int count_layers(const struct dt_node *layers)
{
	int n = 0;
	if (!layers || layers->kind != DT_NODE_SEQ)
		return 0;
	for (int i = 0; i < layers->n; i++) {
		const struct dt_node *it = layers->items[i];
		if (it->kind == DT_NODE_MAP && it->n == 1 && !strcmp(it->keys[0], "residual") && it->items[0] &&
		    it->items[0]->kind == DT_NODE_MAP)
			n += count_layers(dt_node_get(it->items[0], "layers")) + 2;
		else
			n++;
	}
	return n;
}

struct builder {
	struct dt_model *m;
	const struct dt_layer_type *const *types;
	int cap;
};

/*
 * Appends a layer of `type` reading acts[from] (shape `in`), named `given`
 * or after its type, and runs its init. Returns its index, or -1.
 */
static int add_layer(struct builder *b, const struct dt_layer_type *type, const struct dt_node *item,
		     const struct dt_node *args, const char *given, int from, struct dt_shape in, int depth)
{
	struct dt_model *m = b->m;
	int i = m->nlayers, same = 0;
	struct dt_layer *l = &m->layers[i];
	char a[64], o[64], n[32], max[32];

	DT_ASSERT(i < b->cap);
	l->type = type;
	for (int j = 0; j < i; j++)
		same += m->layers[j].type == type;
	if (given)
		snprintf(l->name, sizeof(l->name), "%s", given);
	else if (same)
		snprintf(l->name, sizeof(l->name), "%s_%d", type->name, same);
	else
		snprintf(l->name, sizeof(l->name), "%s", type->name);
	for (int j = 0; j < i; j++)
		if (!strcmp(m->layers[j].name, l->name))
			return dt_node_error(item, "layer name '%s' is used twice", l->name);
	l->index = i;
	l->node = item;
	l->in = in;
	l->act = DT_ACT_LINEAR;
	m->from[i] = from;
	m->shortcut[i] = -1;
	m->depth[i] = depth;
	m->nlayers = i + 1;
	l->mask_in = from > 0 ? m->layers[from - 1].mask_out : NULL;
	if (type->init(l, args) < 0)
		return -1;
	if (type->mask == DT_MASK_PASS)
		l->mask_out = l->mask_in;
	else if (type->mask == DT_MASK_NONE && l->mask_in)
		return dt_node_error(item, "layer '%s' (%s) does not honour the mask of mask_zero: true, which reaches "
				     "it through the layers before it (Keras would drop the mask here with a "
				     "warning); put a layer that uses the mask up first (lstm, gru, simple_rnn, "
				     "bidirectional, global_average_pooling1d), or leave mask_zero false",
				     l->name, type->class_name);
	for (int p = 0; p < l->nparams; p++)
		if (l->params[p].init == DT_INIT_ORTHOGONAL && l->params[p].shape.ndim < 2)
			return dt_node_error(item, "layer '%s': the orthogonal initializer needs a parameter of two or "
					     "more dimensions, and '%s' has one", l->name, l->params[p].name);
	if (dt_shape_count(&l->out) <= 0)
		return dt_node_error(item, "layer '%s' maps input %s to an empty output %s", l->name,
				     dt_shape_format(&l->in, 1, a, sizeof(a)), dt_shape_format(&l->out, 1, o, sizeof(o)));
	if (dt_shape_count(&l->out) > DT_MAX_COUNT)
		return dt_node_error(item, "layer '%s' maps input %s to %s, %s values per sample; dtrain takes at most %s",
				     l->name, dt_shape_format(&l->in, 1, a, sizeof(a)),
				     dt_shape_format(&l->out, 1, o, sizeof(o)),
				     dt_count_format(dt_shape_count(&l->out), n, sizeof(n)),
				     dt_count_format(DT_MAX_COUNT, max, sizeof(max)));
	return i;
}

/* The stride s of a 1x1 'valid' convolution that maps `in` positions to `out`, or 0. */
static int projection_stride(int in, int out)
{
	for (int s = 1; s <= in; s++)
		if ((in - 1) / s + 1 == out)
			return s;
	return 0;
}

static int build_list(struct builder *b, const struct dt_node *layers, int depth);

/*
 * A residual block: its layers read the block's input, then a projection
 * (when asked, or by default when the shapes differ) reads it too, and the
 * add sums the block's output and the shortcut.
 */
static int build_block(struct builder *b, const struct dt_node *item, const struct dt_node *args, int depth)
{
	static const char *const keys[] = { "layers", "shortcut", "activation", "name", NULL };
	static const char *const shortcuts[] = { "auto", "identity", "projection", NULL };
	enum { AUTO, IDENTITY, PROJECTION };
	struct dt_model *m = b->m;
	const struct dt_node *inner = dt_node_get(args, "layers");
	const char *given = NULL;
	int s = m->nlayers, main_out, kind, a, proj = -1;
	struct dt_shape in = s ? m->layers[s - 1].out : m->input, out;
	char name[64], pname[80], text[160], x[64], y[64];

	if (dt_cfg_check_keys(args, "residual", keys) < 0 || dt_cfg_require(args, "layers", "residual") < 0 ||
	    dt_node_expect(inner, DT_NODE_SEQ, "layers") < 0 || dt_cfg_enum(args, "shortcut", shortcuts, AUTO, &kind) < 0 ||
	    dt_cfg_string(args, "name", NULL, &given) < 0)
		return -1;
	if (inner->n == 0)
		return dt_node_error(inner, "a residual block's 'layers' is empty; give it at least one layer");
	if (build_list(b, inner, depth + 1) < 0)
		return -1;
	main_out = m->nlayers;
	out = m->layers[main_out - 1].out;
	{
		int same = 0;
		for (int j = 0; j < m->nlayers; j++)
			same += m->layers[j].type == &dt_residual_add_type;
		if (given)
			snprintf(name, sizeof(name), "%s", given);
		else if (same)
			snprintf(name, sizeof(name), "residual_%d", same);
		else
			snprintf(name, sizeof(name), "residual");
	}
	if (kind == AUTO)
		kind = dt_shape_equal(&in, &out) ? IDENTITY : PROJECTION;
	if (kind == IDENTITY && !dt_shape_equal(&in, &out))
		return dt_node_error(dt_node_get(args, "shortcut") ? dt_node_get(args, "shortcut") : item,
				     "residual block '%s': its layers map %s to %s, and an identity shortcut needs "
				     "the same shape; use 'shortcut: projection' (or leave shortcut out)",
				     name, dt_shape_format(&in, 1, x, sizeof(x)), dt_shape_format(&out, 1, y, sizeof(y)));
	if (kind == PROJECTION) {
		const struct dt_layer_type *t;
		struct dt_doc *doc;
		if (in.ndim == 3 && out.ndim == 3) {
			int sh = projection_stride(in.dim[0], out.dim[0]), sw = projection_stride(in.dim[1], out.dim[1]);
			if (!sh || !sw)
				return dt_node_error(item,
						     "residual block '%s': no strided 1x1 convolution maps its input %s "
						     "to its output %s; keep the block's height and width, or halve them "
						     "with a stride",
						     name, dt_shape_format(&in, 1, x, sizeof(x)),
						     dt_shape_format(&out, 1, y, sizeof(y)));
			t = dt_layer_type_find(b->types, "conv2d");
			snprintf(text, sizeof(text), "{filters: %d, kernel_size: 1, strides: [%d, %d]}", out.dim[2], sh, sw);
		} else if (in.ndim == 1 && out.ndim == 1) {
			t = dt_layer_type_find(b->types, "dense");
			snprintf(text, sizeof(text), "{units: %d}", out.dim[0]);
		} else {
			return dt_node_error(item,
					     "residual block '%s': a projection maps images to images (a 1x1 "
					     "convolution) or vectors to vectors (a dense layer), but the block maps "
					     "%s to %s",
					     name, dt_shape_format(&in, 1, x, sizeof(x)), dt_shape_format(&out, 1, y, sizeof(y)));
		}
		if (!t)
			return dt_node_error(item, "residual block '%s': the layer table has no '%s' for the projection",
					     name, in.ndim == 3 ? "conv2d" : "dense");
		if (!(doc = dt_doc_parse("residual projection", text, ".")))
			return -1;
		m->docs = dt_realloc(m->docs, (size_t)(m->ndocs + 1) * sizeof(*m->docs));
		m->docs[m->ndocs++] = doc;
		snprintf(pname, sizeof(pname), "%.50s_projection", name);
		if ((proj = add_layer(b, t, item, dt_doc_root(doc), pname, s, in, depth + 1)) < 0)
			return -1;
	}
	if ((a = add_layer(b, &dt_residual_add_type, item, args, name, proj >= 0 ? proj : main_out, out, depth)) < 0)
		return -1;
	m->shortcut[a] = proj >= 0 ? proj + 1 : s;
	if (dt_shape_count(&in) > m->scratch_count)
		m->scratch_count = dt_shape_count(&in);
	return 0;
}

static int build_list(struct builder *b, const struct dt_node *layers, int depth)
{
	struct dt_model *m = b->m;
	if (dt_node_expect(layers, DT_NODE_SEQ, "layers") < 0)
		return -1;
	for (int i = 0; i < layers->n; i++) {
		const struct dt_layer_type *type;
		const struct dt_node *args;
		struct dt_node empty;
		const char *given = NULL;
		int k = m->nlayers;

		if (parse_item(layers->items[i], b->types, &type, &args, &empty) < 0)
			return -1;
		if (type == &dt_residual_add_type) {
			if (build_block(b, layers->items[i], args, depth) < 0)
				return -1;
			continue;
		}
		if (dt_cfg_string(args, "name", NULL, &given) < 0 ||
		    add_layer(b, type, layers->items[i], args, given, k, k ? m->layers[k - 1].out : m->input, depth) < 0)
			return -1;
	}
	return 0;
}

int dt_model_init(struct dt_model *m, const char *name, const struct dt_shape *input,
		  const struct dt_node *layers, const struct dt_layer_type *const *types)
{
	char a[64], n[32], max[32];
	struct builder b = { m, types, 0 };

	memset(m, 0, sizeof(*m));
	snprintf(m->name, sizeof(m->name), "%s", name);
	m->input = *input;
	if (dt_node_expect(layers, DT_NODE_SEQ, "layers") < 0)
		return -1;
	if (layers->n == 0)
		return dt_node_error(layers, "'layers' is empty; a model needs at least one layer");
	if (dt_shape_count(input) > DT_MAX_COUNT)
		return dt_node_error(layers, "the model's input %s holds %s values per sample; dtrain takes at most %s",
				     dt_shape_format(input, 1, a, sizeof(a)),
				     dt_count_format(dt_shape_count(input), n, sizeof(n)),
				     dt_count_format(DT_MAX_COUNT, max, sizeof(max)));
	b.cap = count_layers(layers);
	m->layers = dt_calloc(b.cap, sizeof(*m->layers));
	m->from = dt_calloc(b.cap, sizeof(int));
	m->shortcut = dt_calloc(b.cap, sizeof(int));
	m->depth = dt_calloc(b.cap, sizeof(int));
	if (build_list(&b, layers, 0) < 0)
		goto fail;
	m->output = m->layers[m->nlayers - 1].out;
	if (m->layers[m->nlayers - 1].mask_out) {
		dt_node_error(m->layers[m->nlayers - 1].node,
			      "the mask of mask_zero: true reaches the model's output at layer '%s': dtrain's losses "
			      "and metrics take every step (Keras would skip the masked ones); end the model with a "
			      "layer that uses the mask up (a recurrent layer without return_sequences, "
			      "global_average_pooling1d), or leave mask_zero false",
			      m->layers[m->nlayers - 1].name);
		goto fail;
	}
	m->needs_grad = dt_calloc(m->nlayers + 1, 1);
	m->shares = dt_calloc(m->nlayers, 1);
	for (int i = 0; i < m->nlayers; i++) {
		m->needs_grad[i + 1] = m->layers[i].nparams > 0 || m->needs_grad[m->from[i]] ||
				       (m->shortcut[i] >= 0 && m->needs_grad[m->shortcut[i]]);
		m->shares[i] = (char)shares_input(m, i);
	}
	if (layout(m) < 0)
		goto fail;
	return 0;
fail:
	dt_model_release(m);
	return -1;
}

int64_t dt_model_bytes(const struct dt_model *m, int max_batch, int state, int *largest)
{
	int64_t total = dt_count_mul(dt_count_mul(max_batch, dt_shape_count(&m->input)), sizeof(float));
	int64_t most = -1;
	for (int i = 0; i < m->nlayers; i++) {
		int64_t b = dt_layer_bytes(&m->layers[i], max_batch, state);
		if (m->shares[i] && b < INT64_MAX) /* the buffers it shares with its input */
			b -= dt_count_mul(dt_count_mul(max_batch, dt_shape_count(&m->layers[i].out)),
					  m->shares[i] * (int64_t)sizeof(float));
		total = dt_count_add(total, b);
		if (b > most) {
			most = b;
			if (largest)
				*largest = i;
		}
	}
	/* the second gradient of an activation that a block's shortcut reads */
	return dt_count_add(total, dt_count_mul(dt_count_mul(max_batch, m->scratch_count), sizeof(float)));
}

int dt_model_check_memory(const struct dt_model *m, int max_batch, int replicas, int state, int64_t budget,
			  const char *budget_what)
{
	int largest = 0;
	int64_t need = dt_count_mul(dt_model_bytes(m, max_batch, state, &largest), replicas);
	const struct dt_layer *l = &m->layers[largest];
	char a[32], b[32], c[32], d[32], e[32], f[32], r[64] = "";

	if (need <= budget)
		return 0;
	if (replicas > 1)
		snprintf(r, sizeof(r), " with its %d replicas", replicas);
	return dt_node_error(l->node, "layer '%s' needs %s (%s bytes) at batch %d for its parameters, gradients, "
			     "optimizer state and activations; the model needs %s (%s bytes) in all%s, more than "
			     "the %s (%s bytes) of %s",
			     l->name, dt_bytes_format((double)dt_layer_bytes(l, max_batch, state), a, sizeof(a)),
			     dt_count_format(dt_layer_bytes(l, max_batch, state), b, sizeof(b)), max_batch,
			     dt_bytes_format((double)need, c, sizeof(c)), dt_count_format(need, d, sizeof(d)), r,
			     dt_bytes_format((double)budget, e, sizeof(e)), dt_count_format(budget, f, sizeof(f)),
			     budget_what);
}

/*
 * Whether activation j may take another layout than NHWC: one layer writes
 * it and one reads it, inside the model (a shortcut's or a second reader's
 * activation stays NHWC, as do the model's input and output).
 */
static int act_free(const struct dt_model *m, int j)
{
	if (j < 1 || j >= m->nlayers || m->from[j] != j)
		return 0;
	for (int k = 0; k < m->nlayers; k++)
		if ((k != j && m->from[k] == j) || m->shortcut[k] == j)
			return 0;
	return 1;
}

/*
 * The layouts of the activations (core/op_types.h): BLOCKED wherever the
 * layers on both sides run it, as many as can be. Along a run of free
 * activations each takes one of two layouts, and each layer allows some
 * pairs (in, out): the best choice is a shortest path (Viterbi), best[s]
 * the most BLOCKED activations of the run up to this one in layout s.
 */
static void choose_layouts(struct dt_model *m)
{
	int block = m->nhwc_only ? 0 : dt_op_channel_block(m->dev), best[2] = { 0, -1 };
	int (*back)[2] = dt_calloc((size_t)m->nlayers + 1, sizeof(*back));

	for (int i = 0; i < m->nlayers; i++) {
		struct dt_layer *l = &m->layers[i];
		l->x_layout = l->y_layout = DT_LAYOUT_NHWC;
		l->block = 0;
	}
	for (int i = 0; block && i < m->nlayers; i++) {
		struct dt_layer *l = &m->layers[i];
		unsigned pairs = DT_LAYOUT_PAIR(0, 0);
		int j = i + 1, out_free = act_free(m, j), next[2] = { -1, -1 };
		if (l->type->layouts)
			pairs |= l->type->layouts(l, m->dev, block, m->needs_grad[m->from[i]]);
		if (!act_free(m, m->from[i]))
			best[0] = 0, best[1] = -1;
		for (int s = 0; s <= out_free; s++)
			for (int r = 0; r < 2; r++)
				if (best[r] >= 0 && (pairs & DT_LAYOUT_PAIR(r, s)) && best[r] + s > next[s]) {
					next[s] = best[r] + s;
					back[j][s] = r;
				}
		best[0] = next[0];
		best[1] = next[1];
		if (out_free)
			continue;
		/* The run ends NHWC at j: back along it to the layer that read an activation it does not share. */
		for (int a = j, s = 0;; a--) {
			struct dt_layer *w = &m->layers[a - 1];
			int r = back[a][s];
			w->y_layout = s ? DT_LAYOUT_BLOCKED : DT_LAYOUT_NHWC;
			w->x_layout = r ? DT_LAYOUT_BLOCKED : DT_LAYOUT_NHWC;
			w->block = r || s ? block : 0;
			if (!act_free(m, a - 1))
				break;
			s = r;
		}
	}
	free(back);
}

/*
 * An activation whose gradient is a function of its output alone (relu,
 * sigmoid, tanh, ...), before a layer that selects (max pooling): the
 * selected input's gradient is the output's times the activation's
 * gradient at the selected value, which is the output. So the pooling
 * applies it to its own output's gradient, and the layer before skips it:
 * on fashion_cnn's 2x2 pool, a quarter of the values.
 */
static void fuse_act_grads(struct dt_model *m)
{
	for (int i = 1; i < m->nlayers; i++) {
		struct dt_layer *w = &m->layers[i - 1], *l = &m->layers[i];
		enum dt_activation a = w->act;
		l->act_before = DT_ACT_LINEAR;
		if (m->unfused || !l->selects || !act_free(m, i) || a == DT_ACT_LINEAR || a == DT_ACT_SOFTMAX ||
		    dt_act_needs_input(a))
			continue;
		l->act_before = a;
		w->fused_act = 1;
	}
}

int dt_model_alloc(struct dt_model *m, struct dt_device dev, int max_batch)
{
	m->dev = dev;
	m->max_batch = max_batch;
	choose_layouts(m);
	fuse_act_grads(m);
	m->acts = dt_calloc(m->nlayers + 1, sizeof(float *));
	m->dacts = dt_calloc(m->nlayers + 1, sizeof(float *));
	m->written = dt_calloc(m->nlayers + 1, 1);
	if (m->scratch_count && !(m->scratch = dt_device_try_alloc(dev, dt_count_mul(max_batch, m->scratch_count))))
		return -1;
	if (!(m->params = dt_device_try_alloc(dev, m->nparams)) ||
	    !(m->grads = dt_device_try_alloc(dev, m->ntrainable)) ||
	    !(m->acts[0] = dt_device_try_alloc(dev, dt_count_mul(max_batch, dt_shape_count(&m->input)))))
		return -1;
	for (int i = 0; i < m->nlayers; i++) {
		struct dt_layer *l = &m->layers[i];
		int64_t out = dt_count_mul(max_batch, dt_shape_count(&l->out));
		int shared = m->shares[i], j = m->from[i];
		if (!(m->acts[i + 1] = shared >= 1 ? m->acts[j] : dt_device_try_alloc(dev, out)) ||
		    !(m->dacts[i + 1] = shared == 2 ? m->dacts[j] : dt_device_try_alloc(dev, out)))
			return -1;
		for (int p = 0; p < l->nparams; p++) {
			struct dt_param *pr = &l->params[p];
			pr->value = (struct dt_tensor){ m->params + pr->offset, pr->shape, dev };
			if (pr->trainable)
				pr->grad = (struct dt_tensor){ m->grads + pr->offset, pr->shape, dev };
		}
		for (int k = 0; k < l->nbufs; k++) {
			struct dt_layer_buf *bf = &l->bufs[k];
			int dims[2] = { max_batch, (int)bf->per_sample };
			DT_ASSERT(bf->per_sample > 0 && bf->per_sample <= DT_MAX_COUNT);
			if (!(bf->t.data = dt_device_try_alloc(dev, dt_count_mul(max_batch, bf->per_sample))))
				return -1;
			bf->t.shape = dt_shape_make(2, dims);
			bf->t.dev = dev;
		}
		if (l->type->alloc && l->type->alloc(l, dev, max_batch) < 0)
			return -1;
	}
	return 0;
}

/* A normal draw truncated at two standard deviations, as Keras' truncated_normal. */
static double truncated_normal(struct dt_rng *rng)
{
	double z;
	do
		z = dt_rng_normal(rng);
	while (z < -2 || z > 2);
	return z;
}

/* One value of initializer `init` for a parameter with these fans (Keras' VarianceScaling). */
static float draw(enum dt_init init, int fan_in, int fan_out, struct dt_rng *rng)
{
	/* stddev of a unit normal truncated at 2 sigma: Keras divides by it */
	const double trunc = 0.87962566103423978;
	double fan_avg = (fan_in + fan_out) / 2.0;
	switch (init) {
	case DT_INIT_ZEROS:
		return 0;
	case DT_INIT_ONES:
		return 1;
	case DT_INIT_GLOROT_UNIFORM:
		return (float)((2 * dt_rng_uniform(rng) - 1) * sqrt(3.0 / fan_avg));
	case DT_INIT_GLOROT_NORMAL:
		return (float)(truncated_normal(rng) * sqrt(1.0 / fan_avg) / trunc);
	case DT_INIT_HE_UNIFORM:
		return (float)((2 * dt_rng_uniform(rng) - 1) * sqrt(6.0 / fan_in));
	case DT_INIT_HE_NORMAL:
		return (float)(truncated_normal(rng) * sqrt(2.0 / fan_in) / trunc);
	case DT_INIT_LECUN_UNIFORM:
		return (float)((2 * dt_rng_uniform(rng) - 1) * sqrt(3.0 / fan_in));
	case DT_INIT_LECUN_NORMAL:
		return (float)(truncated_normal(rng) * sqrt(1.0 / fan_in) / trunc);
	case DT_INIT_UNIFORM:
	case DT_INIT_RANDOM_UNIFORM: /* Keras' RandomUniform defaults: minval -0.05, maxval 0.05 */
		return (float)((2 * dt_rng_uniform(rng) - 1) * 0.05);
	default:
		DT_BUG("initializer %d", (int)init);
	}
}

/*
 * Keras' Orthogonal (gain 1) into w, a (rows, cols) matrix, rows the product
 * of the shape's leading dimensions: a normal (max, min) matrix's QR with
 * the signs of R's diagonal folded into Q, transposed when rows < cols.
 * Gram-Schmidt (twice, for precision) gives that Q: orthonormal columns with
 * R's diagonal positive.
 */
static void orthogonal(float *w, int64_t rows, int64_t cols, struct dt_rng *rng)
{
	int64_t m = rows > cols ? rows : cols, k = rows > cols ? cols : rows;
	double *a = dt_malloc((size_t)(m * k) * sizeof(double)); /* (m, k) row-major */

	for (int64_t i = 0; i < m * k; i++)
		a[i] = dt_rng_normal(rng);
	for (int64_t j = 0; j < k; j++) {
		double norm = 0;
		for (int pass = 0; pass < 2; pass++)
			for (int64_t q = 0; q < j; q++) {
				double dot = 0;
				for (int64_t i = 0; i < m; i++)
					dot += a[i * k + q] * a[i * k + j];
				for (int64_t i = 0; i < m; i++)
					a[i * k + j] -= dot * a[i * k + q];
			}
		for (int64_t i = 0; i < m; i++)
			norm += a[i * k + j] * a[i * k + j];
		norm = sqrt(norm);
		for (int64_t i = 0; i < m; i++)
			a[i * k + j] = norm > 0 ? a[i * k + j] / norm : 0;
	}
	for (int64_t r = 0; r < rows; r++)
		for (int64_t c = 0; c < cols; c++)
			w[r * cols + c] = (float)(rows >= cols ? a[r * k + c] : a[c * k + r]);
	free(a);
}

void dt_model_init_params(struct dt_model *m, uint64_t seed)
{
	int index = 0;
	for (int i = 0; i < m->nlayers; i++) {
		struct dt_layer *l = &m->layers[i];
		for (int p = 0; p < l->nparams; p++, index++) {
			struct dt_param *pr = &l->params[p];
			int64_t n = dt_shape_count(&pr->shape);
			float *host = dt_malloc((size_t)n * sizeof(float));
			struct dt_rng rng;
			dt_rng_seed(&rng, seed, 1000 + index);
			DT_ASSERT(pr->init <= DT_INIT_ONES || (pr->fan_in > 0 && pr->fan_out > 0));
			if (pr->init == DT_INIT_ORTHOGONAL) {
				int64_t cols = pr->shape.dim[pr->shape.ndim - 1];
				DT_ASSERT(pr->shape.ndim >= 2);
				orthogonal(host, n / cols, cols, &rng);
			} else {
				for (int64_t k = 0; k < n; k++)
					host[k] = draw(pr->init, pr->fan_in, pr->fan_out, &rng);
			}
			for (int64_t k = pr->ones_at; k < pr->ones_at + pr->ones_count; k++)
				host[k] = 1;
			dt_op_from_host(&pr->value, host);
			free(host);
		}
	}
}

double dt_model_regularize_layer(struct dt_model *m, int i, float scale)
{
	double penalty = 0;
	for (int p = 0; p < m->layers[i].nparams; p++) {
		struct dt_param *pr = &m->layers[i].params[p];
		if (pr->l1 > 0 || pr->l2 > 0)
			penalty += dt_op_regularize(&pr->value, &pr->grad, pr->l1, pr->l2, scale);
	}
	return penalty;
}

double dt_model_regularize(struct dt_model *m, float scale)
{
	double penalty = 0;
	for (int i = 0; i < m->nlayers; i++)
		penalty += dt_model_regularize_layer(m, i, scale);
	return penalty;
}

int64_t dt_model_grad_offset(const struct dt_model *m, int i)
{
	for (; i < m->nlayers; i++)
		for (int p = 0; p < m->layers[i].nparams; p++)
			if (m->layers[i].params[p].trainable)
				return m->layers[i].params[p].offset;
	return m->ntrainable;
}

void dt_model_release(struct dt_model *m)
{
	for (int i = 0; i < m->nlayers; i++) {
		struct dt_layer *l = &m->layers[i];
		if (l->type && l->type->release)
			l->type->release(l);
		for (int k = 0; k < l->nbufs; k++)
			if (l->bufs[k].t.data)
				dt_device_free(m->dev, l->bufs[k].t.data);
	}
	if (m->acts) {
		for (int i = 0; i <= m->nlayers; i++) {
			int shared = i > 0 ? m->shares[i - 1] : 0;
			if (shared < 1)
				dt_device_free(m->dev, m->acts[i]);
			if (shared < 2)
				dt_device_free(m->dev, m->dacts[i]);
		}
	}
	free(m->acts);
	free(m->dacts);
	if (m->scratch)
		dt_device_free(m->dev, m->scratch);
	for (int i = 0; i < m->ndocs; i++)
		dt_doc_free(m->docs[i]);
	free(m->docs);
	free(m->written);
	free(m->needs_grad);
	free(m->shares);
	free(m->from);
	free(m->shortcut);
	free(m->depth);
	if (m->params) {
		dt_device_free(m->dev, m->params);
		dt_device_free(m->dev, m->grads);
	}
	free(m->layers);
	memset(m, 0, sizeof(*m));
}

struct dt_tensor dt_model_params(const struct dt_model *m) { return dt_tensor_flat(m->params, m->dev, m->ntrainable); }
struct dt_tensor dt_model_grads(const struct dt_model *m) { return dt_tensor_flat(m->grads, m->dev, m->ntrainable); }

struct dt_tensor dt_model_input(const struct dt_model *m, int n)
{
	DT_ASSERT(n > 0 && n <= m->max_batch);
	return dt_tensor_batch(m->acts[0], m->dev, n, &m->input);
}

struct dt_tensor dt_model_output_grad(const struct dt_model *m, int n)
{
	return dt_tensor_batch(m->dacts[m->nlayers], m->dev, n, &m->output);
}

struct dt_tensor dt_model_forward_layer(struct dt_model *m, int i, int n, const struct dt_step_ctx *ctx)
{
	struct dt_layer *l;
	struct dt_tensor x, y;
	DT_ASSERT(i >= 0 && i < m->nlayers && n > 0 && n <= m->max_batch);
	l = &m->layers[i];
	x = dt_tensor_batch(m->acts[m->from[i]], m->dev, n, &l->in);
	y = dt_tensor_batch(m->acts[i + 1], m->dev, n, &l->out);
	if (m->shortcut[i] >= 0)
		((struct dt_residual_add *)l->priv)->shortcut = dt_tensor_batch(m->acts[m->shortcut[i]], m->dev, n, &l->in);
	l->type->forward(l, &x, &y, ctx);
	return y;
}

struct dt_tensor dt_model_forward(struct dt_model *m, int n, const struct dt_step_ctx *ctx)
{
	struct dt_tensor y = dt_model_input(m, n);
	if (m->observe)
		m->observe(m->observe_arg, m, -1, &y);
	for (int i = 0; i < m->nlayers; i++) {
		y = dt_model_forward_layer(m, i, n, ctx);
		if (m->observe)
			m->observe(m->observe_arg, m, i, &y);
	}
	return y;
}

int dt_model_first_trainable(const struct dt_model *m)
{
	for (int i = 0; i < m->nlayers; i++)
		if (m->layers[i].nparams)
			return i;
	return m->nlayers;
}

/*
 * Where the gradient of acts[j] goes: dacts[j] for its first reader in the
 * backward pass, the scratch buffer for a second one (*add set: the caller
 * adds it to dacts[j] after the layer ran).
 */
static struct dt_tensor grad_target(struct dt_model *m, int j, int n, const struct dt_shape *shape, int *add)
{
	*add = m->written[j];
	m->written[j] = 1;
	if (*add) {
		DT_ASSERT(dt_shape_count(shape) <= m->scratch_count);
		return dt_tensor_batch(m->scratch, m->dev, n, shape);
	}
	return dt_tensor_batch(m->dacts[j], m->dev, n, shape);
}

void dt_model_backward_layer(struct dt_model *m, int i, int n)
{
	struct dt_layer *l;
	struct dt_tensor x, y, dy, dx, ds;
	int j, add_dx = 0, add_ds = 0;
	DT_ASSERT(i >= 0 && i < m->nlayers && n > 0 && n <= m->max_batch);
	if (i == m->nlayers - 1) { /* a new pass: the loss wrote the output's gradient */
		memset(m->written, 0, (size_t)m->nlayers + 1);
		m->written[m->nlayers] = 1;
	}
	if (!m->needs_grad[i + 1])
		return;
	l = &m->layers[i];
	j = m->from[i];
	x = dt_tensor_batch(m->acts[j], m->dev, n, &l->in);
	y = dt_tensor_batch(m->acts[i + 1], m->dev, n, &l->out);
	dy = dt_tensor_batch(m->dacts[i + 1], m->dev, n, &l->out);
	if (m->needs_grad[j])
		dx = grad_target(m, j, n, &l->in, &add_dx);
	if (m->shortcut[i] >= 0) {
		struct dt_residual_add *r = l->priv;
		r->dshortcut = NULL;
		if (m->needs_grad[m->shortcut[i]]) {
			ds = grad_target(m, m->shortcut[i], n, &l->in, &add_ds);
			DT_ASSERT(!(add_dx && add_ds)); /* one scratch buffer */
			r->dshortcut = &ds;
		}
	}
	l->type->backward(l, &x, &y, &dy, m->needs_grad[j] ? &dx : NULL);
	if (add_dx) {
		struct dt_tensor to = dt_tensor_batch(m->dacts[j], m->dev, n, &l->in);
		dt_op_axpy(1, &dx, &to);
	}
	if (add_ds) {
		struct dt_tensor to = dt_tensor_batch(m->dacts[m->shortcut[i]], m->dev, n, &l->in);
		dt_op_axpy(1, &ds, &to);
	}
}

void dt_model_backward(struct dt_model *m, int n)
{
	for (int i = m->nlayers - 1, first = dt_model_first_trainable(m); i >= first; i--)
		dt_model_backward_layer(m, i, n);
}

int64_t dt_model_param_count(const struct dt_model *m) { return m->nparams; }
