/*
 * embedding: rows of a trainable table looked up by token index, as Keras'
 * Embedding. Arguments: input_dim (required: the vocabulary, indices 0 to
 * input_dim - 1), output_dim (required), embeddings_initializer (uniform:
 * U(-0.05, 0.05)), embeddings_regularizer (none), mask_zero (false).
 * mask_zero: true makes index 0 padding, as Keras: the layer's output
 * carries a mask (struct dt_mask, core/model/layer.h) of the steps whose
 * index is not 0, which the recurrent layers and global_average_pooling1d
 * honour; the layers between hand it on (activation, dropout,
 * spatial_dropout1d, layer_normalization) and any other is refused.
 * Parameter: embeddings (input_dim, output_dim).
 * (steps,) -> (steps, output_dim), any input shape gaining a last dimension.
 * The layer must come first: it reads the data's values as indices, which
 * the pipeline checks (index_limit) and never rescales or normalizes.
 */
#include <stdlib.h>

#include "core/error.h"
#include "core/export/onnx.h"
#include "layers.h"

enum { TABLE };

struct embedding {
	struct dt_mask mask;  /* its scratch holds the batch's indices while the mask is made */
	int max_batch;
};

static int embedding_init(struct dt_layer *l, const struct dt_node *args)
{
	static const char *const keys[] = { "input_dim", "output_dim", "embeddings_initializer",
					    "embeddings_regularizer", "mask_zero", NULL };
	int64_t vocab, dim;
	int mask_zero, t;
	enum dt_init init;
	float l1, l2;
	struct dt_shape out;

	if (dt_layer_check_keys(l, args, keys) < 0 || dt_cfg_require(args, "input_dim", "embedding") < 0 ||
	    dt_cfg_int(args, "input_dim", 0, 1, 1 << 24, &vocab) < 0 ||
	    dt_cfg_require(args, "output_dim", "embedding") < 0 ||
	    dt_cfg_int(args, "output_dim", 0, 1, 1 << 24, &dim) < 0 ||
	    dt_layer_initializer(args, "embeddings_initializer", DT_INIT_UNIFORM, &init) < 0 ||
	    dt_layer_regularizer(args, "embeddings_regularizer", &l1, &l2) < 0 ||
	    dt_cfg_bool(args, "mask_zero", 0, &mask_zero) < 0)
		return -1;
	if (l->index != 0)
		return dt_node_error(args, "layer '%s': embedding must be the model's first layer: it reads the data's "
				     "values as token indices (0 to input_dim - 1)",
				     l->name);
	if (l->in.ndim >= DT_MAX_SAMPLE_DIMS)
		return dt_node_error(args, "layer '%s': an input of %d dimensions leaves no room for the embedding's; "
				     "at most %d",
				     l->name, l->in.ndim, DT_MAX_SAMPLE_DIMS - 1);
	if (dt_shape_count(&l->in) * dim > INT32_MAX)
		return dt_node_error(dt_node_get(args, "output_dim"),
				     "layer '%s': %lld steps of %lld values each is more than a sample may hold",
				     l->name, (long long)dt_shape_count(&l->in), (long long)dim);
	out = l->in;
	out.dim[out.ndim++] = (int)dim;
	l->out = out;
	t = dt_layer_param(l, "embeddings", dt_shape_make(2, (int[]){ (int)vocab, (int)dim }), init, (int)vocab,
			   (int)dim);
	l->params[t].l1 = l1;
	l->params[t].l2 = l2;
	if (mask_zero) {
		struct embedding *e;
		if (l->in.ndim != 1)
			return dt_node_error(dt_node_get(args, "mask_zero"),
					     "layer '%s': mask_zero masks the steps of a sequence of indices, (steps,), "
					     "and this input is %s",
					     l->name, dt_shape_format(&l->in, 1, (char[64]){ 0 }, 64));
		e = dt_calloc(1, sizeof(*e));
		e->mask.steps = l->in.dim[0];
		l->priv = e;
		l->mask_out = &e->mask;
	}
	return 0;
}

static int embedding_alloc(struct dt_layer *l, struct dt_device dev, int max_batch)
{
	struct embedding *e = l->priv;
	(void)dev;
	if (!e)
		return 0;
	free(e->mask.valid);
	free(e->mask.scratch);
	e->mask.valid = dt_malloc((size_t)max_batch * e->mask.steps);
	e->mask.scratch = dt_malloc((size_t)max_batch * e->mask.steps * sizeof(float));
	e->max_batch = max_batch;
	return 0;
}

static void embedding_release(struct dt_layer *l)
{
	struct embedding *e = l->priv;
	if (e) {
		free(e->mask.valid);
		free(e->mask.scratch);
	}
	free(e);
	l->priv = NULL;
}

/* mask_zero's mask of the batch x: a step counts where its index is not 0 (as Keras, inputs != 0). */
static void make_mask(struct embedding *e, const struct dt_tensor *x)
{
	int n = x->shape.dim[0];
	int64_t count = (int64_t)n * e->mask.steps;
	DT_ASSERT(n <= e->max_batch);
	dt_op_to_host(x, e->mask.scratch);
	for (int64_t i = 0; i < count; i++)
		e->mask.valid[i] = e->mask.scratch[i] != 0.0f;
	e->mask.n = n;
}

static void embedding_forward(struct dt_layer *l, const struct dt_tensor *x, struct dt_tensor *y,
			      const struct dt_step_ctx *ctx)
{
	if (l->priv)
		make_mask(l->priv, x);
	dt_op_gather(x, &l->params[TABLE].value, y);
}

/* Indices have no gradient: dx (when asked for) is zeros. */
static void embedding_backward(struct dt_layer *l, const struct dt_tensor *x, const struct dt_tensor *y,
			       struct dt_tensor *dy, struct dt_tensor *dx)
{
	dt_op_fill(&l->params[TABLE].grad, 0);
	dt_op_scatter_add(x, dy, &l->params[TABLE].grad);
	if (dx)
		dt_op_fill(dx, 0);
}

/* A lookup: no multiply-adds (dtrain time shows its time, not a rate). */
static int64_t embedding_flops(const struct dt_layer *l)
{
	return 0;
}

static int64_t embedding_index_limit(const struct dt_layer *l)
{
	return l->params[TABLE].shape.dim[0];
}

/* Gather(table, Cast(x, int64)) along axis 0: (N, steps) -> (N, steps, D). */
static const char *embedding_export(const struct dt_layer *l, struct dt_onnx *g, const char *x)
{
	const char *in[2];

	if (l->priv) {
		dt_error("layer '%s' has mask_zero: true, and the exported graph would not skip the padded steps "
			 "as dtrain does; export a model without mask_zero", l->name);
		return NULL;
	}
	in[1] = dt_onnx_node(g, "Cast", &x, 1, l->name);
	dt_onnx_attr_int(g, "to", 7); /* TensorProto.INT64 */
	in[0] = dt_onnx_param(g, l->name, &l->params[TABLE]);
	return dt_onnx_node(g, "Gather", in, 2, l->name);
}

static const struct dt_layer_example examples[] = {
	{ "5", "{input_dim: 3, output_dim: 2}" },
	{ "4", "{input_dim: 2, output_dim: 3, embeddings_regularizer: {l2: 0.1}}" },
	{ "2,3", "{input_dim: 4, output_dim: 2, embeddings_initializer: glorot_uniform}" },
	{ NULL, NULL },
};

const struct dt_layer_type dt_embedding_layer = {
	.name = "embedding",
	.class_name = "Embedding",
	.examples = examples,
	.init = embedding_init,
	.forward = embedding_forward,
	.backward = embedding_backward,
	.release = embedding_release,
	.alloc = embedding_alloc,
	.flops = embedding_flops,
	.export = embedding_export,
	.index_limit = embedding_index_limit,
	.mask = DT_MASK_OWN,
};
