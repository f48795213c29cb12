#include <string.h>

#include "error.h"
#include "layer.h"

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
	return l->nparams++;
}

int dt_layer_buffer(struct dt_layer *l, const char *name, int64_t per_sample)
{
	DT_ASSERT(l->nbufs < DT_LAYER_MAX_BUFS);
	memset(&l->bufs[l->nbufs], 0, sizeof(l->bufs[0]));
	l->bufs[l->nbufs].name = name;
	l->bufs[l->nbufs].per_sample = per_sample;
	return l->nbufs++;
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
		n += dt_shape_count(&l->params[i].shape);
	return n;
}

const struct dt_layer_type *dt_layer_type_find(const struct dt_layer_type *const *types, const char *name)
{
	for (int i = 0; types[i]; i++)
		if (!strcmp(types[i]->name, name))
			return types[i];
	return NULL;
}
