/*
 * bidirectional: Keras' Bidirectional wrapper around one recurrent layer
 * (lstm, gru, simple_rnn): a forward copy reads the sequence as given, a
 * backward copy with go_backwards flipped reads it reversed, and their
 * outputs are merged (merge_mode concat (default), sum, mul, ave); with
 * return_sequences the backward copy's steps are turned back into input
 * order first, as Keras does.
 * Arguments: layer (required: `{lstm: {units: 64}}`), merge_mode.
 * Parameters: the two copies', named forward_NAME/... and backward_NAME/...
 * after the wrapped layer's name (forward_lstm/kernel, ...), as Keras.
 * Under a mask both copies honour it, with zeros at the masked steps of
 * sequences (Keras sets its copies' zero_output_for_mask to return_sequences).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/export/onnx.h"
#include "layers.h"
#include "recurrent.h"

static const char *const merge_names[] = { "concat", "sum", "mul", "ave", NULL };

enum { FWD_Y, BWD_Y, FWD_DY, BWD_DY, BWD_DX }; /* buffers */

struct bidir {
	struct dt_layer dir[2]; /* forward, backward */
	enum dt_rnn_merge mode;
	int steps;              /* merged steps: the sequence's with return_sequences, else 1 */
	int own;                /* the first of the buffers above: the copies' mask buffers come first */
	char names[DT_LAYER_MAX_PARAMS][96];
	char buf_names[DT_LAYER_MAX_BUFS][96];
};

static int is_recurrent(const struct dt_layer_type *t)
{
	return t == &dt_lstm_layer || t == &dt_gru_layer || t == &dt_simple_rnn_layer;
}

static void bidir_release(struct dt_layer *l)
{
	struct bidir *b = l->priv;
	if (!b)
		return;
	for (int d = 0; d < 2; d++)
		if (b->dir[d].type && b->dir[d].type->release)
			b->dir[d].type->release(&b->dir[d]);
	free(b);
	l->priv = NULL;
}

/* The wrapped layer's type and arguments from `layer: {TYPE: {...}}`. */
static int inner_layer(const struct dt_layer *l, const struct dt_node *node, const struct dt_layer_type **type,
		       const struct dt_node **args)
{
	if (node->kind != DT_NODE_MAP || node->n != 1 || node->items[0]->kind != DT_NODE_MAP)
		return dt_node_error(node, "layer '%s': 'layer' is one recurrent layer and its arguments, e.g. "
				     "'layer: {lstm: {units: 64}}'", l->name);
	*type = dt_layer_type_find(dt_layer_types, node->keys[0]);
	if (!*type || !is_recurrent(*type))
		return dt_node_error(node->key_nodes[0], "layer '%s': bidirectional wraps lstm, gru or simple_rnn, "
				     "not '%s'", l->name, node->keys[0]);
	*args = node->items[0];
	return 0;
}

static int bidir_init(struct dt_layer *l, const struct dt_node *args)
{
	static const char *const keys[] = { "layer", "merge_mode", NULL };
	const struct dt_layer_type *type = NULL;
	const struct dt_node *inner = NULL;
	const char *inner_name;
	struct bidir *b;
	int mode;

	if (dt_layer_check_keys(l, args, keys) < 0 || dt_cfg_require(args, "layer", "bidirectional") < 0 ||
	    inner_layer(l, dt_node_get(args, "layer"), &type, &inner) < 0 ||
	    dt_cfg_enum(args, "merge_mode", merge_names, DT_RNN_MERGE_CONCAT, &mode) < 0 ||
	    dt_cfg_string(inner, "name", type->name, &inner_name) < 0)
		return -1;
	b = dt_calloc(1, sizeof(*b));
	l->priv = b;
	b->mode = (enum dt_rnn_merge)mode;
	for (int d = 0; d < 2; d++) {
		struct dt_layer *s = &b->dir[d];
		s->type = type;
		snprintf(s->name, sizeof(s->name), "%s_%s", d ? "backward" : "forward", inner_name);
		s->index = l->index;
		s->node = l->node;
		s->in = l->in;
		s->act = DT_ACT_LINEAR;
		s->mask_in = l->mask_in;
		if (type->init(s, inner) < 0)
			return -1;
		DT_ASSERT(l->nparams + s->nparams <= DT_LAYER_MAX_PARAMS);
		for (int p = 0; p < s->nparams; p++) {
			snprintf(b->names[l->nparams], sizeof(b->names[0]), "%s/%s", s->name, s->params[p].name);
			l->params[l->nparams] = s->params[p];
			l->params[l->nparams].name = b->names[l->nparams];
			l->nparams++;
		}
		/* the copy's buffers (a mask's) are the wrapper's, placed by the model */
		for (int k = 0; k < s->nbufs; k++) {
			snprintf(b->buf_names[l->nbufs], sizeof(b->buf_names[0]), "%s/%s", s->name, s->bufs[k].name);
			dt_layer_buffer(l, b->buf_names[l->nbufs], s->bufs[k].per_sample);
		}
	}
	{
		struct dt_recurrent *fw = b->dir[0].priv, *bw = b->dir[1].priv;
		const struct dt_shape *o = &b->dir[0].out;
		bw->g.go_backwards = !bw->g.go_backwards;
		b->steps = bw->g.return_sequences ? bw->g.steps : 1;
		/* Keras' Bidirectional: zeros, not the last output, at masked steps of sequences */
		fw->zero_masked = bw->zero_masked = bw->g.return_sequences;
		l->mask_out = b->dir[0].mask_out;
		b->own = l->nbufs;
		l->out = *o;
		if (b->mode == DT_RNN_MERGE_CONCAT)
			l->out.dim[o->ndim - 1] *= 2;
		dt_layer_buffer(l, "forward_y", dt_shape_count(o));
		dt_layer_buffer(l, "backward_y", dt_shape_count(o));
		dt_layer_buffer(l, "forward_dy", dt_shape_count(o));
		dt_layer_buffer(l, "backward_dy", dt_shape_count(o));
		dt_layer_buffer(l, "backward_dx", dt_shape_count(&l->in));
	}
	return 0;
}

/* The copies' parameters are views of the wrapper's, placed by the model. */
static int bidir_alloc(struct dt_layer *l, struct dt_device dev, int max_batch)
{
	struct bidir *b = l->priv;
	int j = 0, k = 0;
	for (int d = 0; d < 2; d++) {
		struct dt_layer *s = &b->dir[d];
		for (int p = 0; p < s->nparams; p++, j++) {
			s->params[p].value = l->params[j].value;
			s->params[p].grad = l->params[j].grad;
			s->params[p].offset = l->params[j].offset;
		}
		for (int i = 0; i < s->nbufs; i++, k++)
			s->bufs[i].t = l->bufs[k].t;
		if (s->type->alloc && s->type->alloc(s, dev, max_batch) < 0)
			return -1;
	}
	return 0;
}

static void bidir_forward(struct dt_layer *l, const struct dt_tensor *x, struct dt_tensor *y,
			  const struct dt_step_ctx *ctx)
{
	struct bidir *b = l->priv;
	int n = x->shape.dim[0];
	struct dt_tensor yf = dt_layer_buf_view(l, b->own + FWD_Y, n), yb = dt_layer_buf_view(l, b->own + BWD_Y, n);
	b->dir[0].type->forward(&b->dir[0], x, &yf, ctx);
	b->dir[1].type->forward(&b->dir[1], x, &yb, ctx);
	dt_op_rnn_merge(b->mode, b->steps, &yf, &yb, y);
}

static void bidir_backward(struct dt_layer *l, const struct dt_tensor *x, const struct dt_tensor *y,
			   struct dt_tensor *dy, struct dt_tensor *dx)
{
	struct bidir *b = l->priv;
	int n = x->shape.dim[0];
	struct dt_tensor yf = dt_layer_buf_view(l, b->own + FWD_Y, n), yb = dt_layer_buf_view(l, b->own + BWD_Y, n);
	struct dt_tensor dyf = dt_layer_buf_view(l, b->own + FWD_DY, n);
	struct dt_tensor dyb = dt_layer_buf_view(l, b->own + BWD_DY, n);
	struct dt_tensor dxb = dt_layer_buf_view(l, b->own + BWD_DX, n);
	dt_op_rnn_merge_backward(b->mode, b->steps, dy, &yf, &yb, &dyf, &dyb);
	b->dir[0].type->backward(&b->dir[0], x, &yf, &dyf, dx);
	b->dir[1].type->backward(&b->dir[1], x, &yb, &dyb, dx ? &dxb : NULL);
	if (dx)
		dt_op_axpy(1, &dxb, dx);
}

static int64_t bidir_flops(const struct dt_layer *l)
{
	const struct bidir *b = l->priv;
	return b->dir[0].type->flops(&b->dir[0]) + b->dir[1].type->flops(&b->dir[1]) + dt_shape_count(&l->out);
}

/* Each copy's own nodes, the backward one's steps reversed back (Slice, step -1), then the merge. */
static const char *bidir_export(const struct dt_layer *l, struct dt_onnx *g, const char *x)
{
	const struct bidir *b = l->priv;
	const char *in[2], *y;
	char name[160];

	for (int d = 0; d < 2; d++)
		if (!(in[d] = b->dir[d].type->export(&b->dir[d], g, x)))
			return NULL;
	if (b->steps > 1) {
		const char *s[5] = { in[1] };
		snprintf(name, sizeof(name), "%s/rev_starts", l->name);
		s[1] = dt_onnx_int64s(g, name, 1, (int64_t[]){ -1 });
		snprintf(name, sizeof(name), "%s/rev_ends", l->name);
		s[2] = dt_onnx_int64s(g, name, 1, (int64_t[]){ INT64_MIN });
		snprintf(name, sizeof(name), "%s/rev_axes", l->name);
		s[3] = dt_onnx_int64s(g, name, 1, (int64_t[]){ 1 });
		snprintf(name, sizeof(name), "%s/rev_steps", l->name);
		s[4] = dt_onnx_int64s(g, name, 1, (int64_t[]){ -1 });
		in[1] = dt_onnx_node(g, "Slice", s, 5, l->name);
	}
	switch (b->mode) {
	case DT_RNN_MERGE_CONCAT:
		y = dt_onnx_node(g, "Concat", in, 2, l->name);
		dt_onnx_attr_int(g, "axis", -1);
		return y;
	case DT_RNN_MERGE_SUM:
		return dt_onnx_node(g, "Add", in, 2, l->name);
	case DT_RNN_MERGE_MUL:
		return dt_onnx_node(g, "Mul", in, 2, l->name);
	case DT_RNN_MERGE_AVE:
		in[0] = dt_onnx_node(g, "Add", in, 2, l->name);
		snprintf(name, sizeof(name), "%s/half", l->name);
		in[1] = dt_onnx_floats(g, name, 0, NULL, (float[]){ 0.5f });
		return dt_onnx_node(g, "Mul", in, 2, l->name);
	}
	return NULL;
}

static const struct dt_layer_example examples[] = {
	{ "4,3", "{layer: {lstm: {units: 2}}}" },
	{ "3,2", "{layer: {lstm: {units: 2, return_sequences: true}}, merge_mode: sum}" },
	{ "3,3", "{layer: {gru: {units: 2, return_sequences: true}}, merge_mode: mul}" },
	{ "4,2", "{layer: {gru: {units: 3, reset_after: false, go_backwards: true}}, merge_mode: ave}" },
	{ "3,2", "{layer: {simple_rnn: {units: 2, return_sequences: true, go_backwards: true}}}" },
	{ NULL, NULL },
};

const struct dt_layer_type dt_bidirectional_layer = {
	.name = "bidirectional",
	.class_name = "Bidirectional",
	.examples = examples,
	.init = bidir_init,
	.forward = bidir_forward,
	.backward = bidir_backward,
	.release = bidir_release,
	.alloc = bidir_alloc,
	.flops = bidir_flops,
	.export = bidir_export,
	.mask = DT_MASK_OWN,
};
