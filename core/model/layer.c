#include <string.h>

#include "core/error.h"
#include "core/model/layer.h"

int dt_layer_param(struct dt_layer *l, const char *name, struct dt_shape shape, enum dt_init init,
		   int fan_in, int fan_out)
{
	struct dt_param *p;
	DT_ASSERT(l->nparams < DT_LAYER_MAX_PARAMS);
	p = &l->params[l->nparams];
	memset(p, 0, sizeof(*p));
	p->name = name;
	p->shape = shape;
	p->init = init;
	p->fan_in = fan_in;
	p->fan_out = fan_out;
	p->trainable = 1;
	return l->nparams++;
}

const char *const dt_init_names[] = { "zeros", "ones", "glorot_uniform", "glorot_normal", "he_uniform",
				      "he_normal", "lecun_uniform", "lecun_normal",
				      /* embedding */
				      "uniform", "random_uniform",
				      /* recurrent kernels */
				      "orthogonal", NULL };

int dt_layer_state(struct dt_layer *l, const char *name, struct dt_shape shape, enum dt_init init)
{
	int i = dt_layer_param(l, name, shape, init, 0, 0);
	l->params[i].trainable = 0;
	return i;
}

int dt_layer_initializer(const struct dt_node *args, const char *key, enum dt_init def, enum dt_init *out)
{
	int v;
	if (dt_cfg_enum(args, key, dt_init_names, def, &v) < 0)
		return -1;
	*out = (enum dt_init)v;
	return 0;
}

int dt_layer_regularizer(const struct dt_node *args, const char *key, float *l1, float *l2)
{
	static const char *const keys[] = { "l1", "l2", NULL };
	static const char *const names[] = { "l1", "l2", "l1_l2", NULL };
	const struct dt_node *n = dt_node_get(args, key);
	double a = 0, b = 0;
	int which;

	*l1 = *l2 = 0;
	if (!n)
		return 0;
	if (n->kind == DT_NODE_SCALAR) {
		/* Keras' string forms: "l1", "l2" and "l1_l2", each with 0.01. */
		if (dt_cfg_enum(args, key, names, 0, &which) < 0)
			return -1;
		*l1 = which != 1 ? 0.01f : 0;
		*l2 = which != 0 ? 0.01f : 0;
		return 0;
	}
	if (dt_node_expect(n, DT_NODE_MAP, key) < 0 || dt_cfg_check_keys(n, key, keys) < 0 ||
	    dt_cfg_float(n, "l1", 0, 0, 1e6, &a) < 0 || dt_cfg_float(n, "l2", 0, 0, 1e6, &b) < 0)
		return -1;
	*l1 = (float)a;
	*l2 = (float)b;
	return 0;
}

int dt_layer_buffer(struct dt_layer *l, const char *name, int64_t per_sample)
{
	DT_ASSERT(l->nbufs < DT_LAYER_MAX_BUFS);
	memset(&l->bufs[l->nbufs], 0, sizeof(l->bufs[0]));
	l->bufs[l->nbufs].name = name;
	l->bufs[l->nbufs].per_sample = per_sample;
	return l->nbufs++;
}

void dt_layer_act_buffer(struct dt_layer *l)
{
	if (dt_act_needs_input(l->act))
		dt_layer_buffer(l, "preact", dt_shape_count(&l->out));
}

void dt_layer_act_forward(const struct dt_layer *l, int buf, struct dt_tensor *y)
{
	if (l->nbufs > buf) {
		struct dt_tensor z = dt_layer_buf_view(l, buf, y->shape.dim[0]);
		dt_op_copy(y, &z);
	}
	if (l->act != DT_ACT_LINEAR)
		dt_op_act_forward(l->act, y, y);
}

void dt_layer_act_backward(const struct dt_layer *l, int buf, const struct dt_tensor *y, struct dt_tensor *dy)
{
	struct dt_tensor z;
	if (l->act == DT_ACT_LINEAR || l->fused_act)
		return;
	if (l->nbufs > buf)
		z = dt_layer_buf_view(l, buf, y->shape.dim[0]);
	dt_op_act_backward(l->act, l->nbufs > buf ? &z : NULL, y, dy, dy);
}

struct dt_tensor dt_layer_buf_view(const struct dt_layer *l, int i, int n)
{
	const struct dt_layer_buf *b = &l->bufs[i];
	struct dt_tensor t = b->t;
	DT_ASSERT(n <= t.shape.dim[0]);
	t.shape.dim[0] = n;
	return t;
}

int dt_layer_check_keys(const struct dt_layer *l, const struct dt_node *args, const char *const *allowed)
{
	const char *keys[16];
	int n = 0;
	if (!args)
		return 0;
	/*
	 * Keras takes the sample shape on the first layer (Dense(10, input_shape=(64,))), PyTorch the
	 * input's size on every layer (Linear(in_features, out_features)); dtrain on the model.
	 * (embedding's input_dim is its vocabulary, a key of its own.)
	 */
	for (int i = 0; args->kind == DT_NODE_MAP && i < args->n; i++)
		if (dt_name_index(allowed, args->keys[i]) < 0 &&
		    (!strcmp(args->keys[i], "input_shape") || !strcmp(args->keys[i], "input_dim") ||
		     !strcmp(args->keys[i], "in_features") || !strcmp(args->keys[i], "in_channels")))
			return dt_node_error(args->key_nodes[i], "unknown key '%s' in '%s': the samples' shape is "
					     "model.input_shape, a key beside model.layers (without it, the data's)",
					     args->keys[i], l->type->name);
	while (allowed[n] && n < 14) {
		keys[n] = allowed[n];
		n++;
	}
	keys[n++] = "name";
	keys[n] = NULL;
	return dt_cfg_check_keys(args, l->type->name, keys);
}

int dt_layer_activation(const struct dt_node *args, enum dt_activation *out)
{
	int a;
	if (dt_cfg_enum(args, "activation", dt_activation_names, DT_ACT_LINEAR, &a) < 0)
		return -1;
	*out = (enum dt_activation)a;
	return 0;
}

int64_t dt_layer_param_count(const struct dt_layer *l)
{
	int64_t n = 0;
	for (int i = 0; i < l->nparams; i++)
		n = dt_count_add(n, dt_shape_count(&l->params[i].shape));
	return n;
}

int64_t dt_layer_bytes(const struct dt_layer *l, int max_batch, int state)
{
	int64_t floats = 0, per_sample = dt_count_mul(2, dt_shape_count(&l->out));
	for (int i = 0; i < l->nparams; i++) {
		int64_t n = dt_shape_count(&l->params[i].shape);
		floats = dt_count_add(floats, dt_count_mul(n, l->params[i].trainable ? 2 + state : 1));
	}
	for (int i = 0; i < l->nbufs; i++)
		per_sample = dt_count_add(per_sample, l->bufs[i].per_sample);
	floats = dt_count_add(floats, dt_count_mul(max_batch, per_sample));
	return dt_count_mul(floats, sizeof(float));
}

const struct dt_layer_type *dt_layer_type_find(const struct dt_layer_type *const *types, const char *name)
{
	for (int i = 0; types[i]; i++)
		if (!strcmp(types[i]->name, name))
			return types[i];
	return NULL;
}
