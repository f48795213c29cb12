/*
 * The ONNX graph builder and model writer (see onnx.h). Every message and
 * string the graph holds is allocated through keep() and freed together
 * when the graph is released; the model is packed with protobuf-c.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx.pb-c.h"

#include "core/error.h"
#include "core/export/onnx.h"
#include "core/model/model.h"
#include "core/pipeline/pipeline.h"

struct dt_onnx {
	Onnx__GraphProto graph;
	Onnx__NodeProto *last;      /* the node attributes go to */
	void **kept;                /* every allocation, freed by graph_release */
	int nkept, cap_kept;
	int cap_node, cap_init;
};

/* p, freed with the graph. */
static void *keep(struct dt_onnx *g, void *p)
{
	if (g->nkept == g->cap_kept) {
		g->cap_kept = g->cap_kept ? 2 * g->cap_kept : 64;
		g->kept = dt_realloc(g->kept, (size_t)g->cap_kept * sizeof(void *));
	}
	g->kept[g->nkept++] = p;
	return p;
}

static void *zalloc(struct dt_onnx *g, size_t n)
{
	return keep(g, dt_calloc(1, n ? n : 1));
}

static char *copy_str(struct dt_onnx *g, const char *s)
{
	return keep(g, dt_strdup(s));
}

/* Is name already a value of the graph (a node output or a constant)? */
static int taken(const struct dt_onnx *g, const char *name)
{
	if (!strcmp(name, "input"))
		return 1;
	for (size_t i = 0; i < g->graph.n_node; i++)
		if (!strcmp(g->graph.node[i]->output[0], name))
			return 1;
	for (size_t i = 0; i < g->graph.n_initializer; i++)
		if (!strcmp(g->graph.initializer[i]->name, name))
			return 1;
	return 0;
}

const char *dt_onnx_value(struct dt_onnx *g, const char *prefix)
{
	char buf[160];
	snprintf(buf, sizeof(buf), "%s", prefix);
	for (int n = 1; taken(g, buf); n++)
		snprintf(buf, sizeof(buf), "%s_%d", prefix, n);
	return copy_str(g, buf);
}

/* A node whose output value is named `name` (made unique). */
static const char *add_node(struct dt_onnx *g, const char *op_type, const char *const *in, int nin,
			    const char *name)
{
	Onnx__NodeProto *n = zalloc(g, sizeof(*n));
	onnx__node_proto__init(n);
	n->op_type = copy_str(g, op_type);
	n->n_input = (size_t)nin;
	n->input = zalloc(g, (size_t)nin * sizeof(char *));
	for (int i = 0; i < nin; i++)
		n->input[i] = copy_str(g, in[i] ? in[i] : "");
	n->n_output = 1;
	n->output = zalloc(g, sizeof(char *));
	n->output[0] = (char *)dt_onnx_value(g, name);
	n->name = n->output[0];
	if (g->graph.n_node == (size_t)g->cap_node) {
		g->cap_node = g->cap_node ? 2 * g->cap_node : 32;
		g->graph.node = dt_realloc(g->graph.node, (size_t)g->cap_node * sizeof(*g->graph.node));
	}
	g->graph.node[g->graph.n_node++] = n;
	g->last = n;
	return n->output[0];
}

const char *dt_onnx_node(struct dt_onnx *g, const char *op_type, const char *const *in, int nin,
			 const char *prefix)
{
	char name[160];
	snprintf(name, sizeof(name), "%s/%s", prefix, op_type);
	return add_node(g, op_type, in, nin, name);
}

static Onnx__AttributeProto *attr(struct dt_onnx *g, const char *name, Onnx__AttributeProto__AttributeType type)
{
	Onnx__NodeProto *n = g->last;
	Onnx__AttributeProto *a = zalloc(g, sizeof(*a)), **list;
	onnx__attribute_proto__init(a);
	a->name = copy_str(g, name);
	a->has_type = 1;
	a->type = type;
	list = zalloc(g, (n->n_attribute + 1) * sizeof(*list));
	if (n->n_attribute)
		memcpy(list, n->attribute, n->n_attribute * sizeof(*list));
	list[n->n_attribute++] = a;
	n->attribute = list;
	return a;
}

void dt_onnx_attr_int(struct dt_onnx *g, const char *name, int64_t v)
{
	Onnx__AttributeProto *a = attr(g, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
	a->has_i = 1;
	a->i = v;
}

void dt_onnx_attr_float(struct dt_onnx *g, const char *name, float v)
{
	Onnx__AttributeProto *a = attr(g, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
	a->has_f = 1;
	a->f = v;
}

void dt_onnx_attr_ints(struct dt_onnx *g, const char *name, int n, const int64_t *v)
{
	Onnx__AttributeProto *a = attr(g, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
	a->n_ints = (size_t)n;
	a->ints = zalloc(g, (size_t)n * sizeof(int64_t));
	memcpy(a->ints, v, (size_t)n * sizeof(int64_t));
}

void dt_onnx_attr_string(struct dt_onnx *g, const char *name, const char *v)
{
	Onnx__AttributeProto *a = attr(g, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
	a->has_s = 1;
	a->s.len = strlen(v);
	a->s.data = (uint8_t *)copy_str(g, v);
}

void dt_onnx_attr_strings(struct dt_onnx *g, const char *name, int n, const char *const *v)
{
	Onnx__AttributeProto *a = attr(g, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS);
	a->n_strings = (size_t)n;
	a->strings = zalloc(g, (size_t)n * sizeof(*a->strings));
	for (int i = 0; i < n; i++) {
		a->strings[i].len = strlen(v[i]);
		a->strings[i].data = (uint8_t *)copy_str(g, v[i]);
	}
}

/* A constant (an initializer) of shape dims with `bytes` bytes of raw little-endian data. */
static const char *constant(struct dt_onnx *g, const char *name, int type, int ndim, const int64_t *dims,
			    const void *data, size_t bytes)
{
	Onnx__TensorProto *t = zalloc(g, sizeof(*t));
	onnx__tensor_proto__init(t);
	t->name = (char *)dt_onnx_value(g, name);
	t->has_data_type = 1;
	t->data_type = type;
	t->n_dims = (size_t)ndim;
	t->dims = zalloc(g, (size_t)ndim * sizeof(int64_t));
	if (ndim) /* a scalar has no dims (and dims may be NULL) */
		memcpy(t->dims, dims, (size_t)ndim * sizeof(int64_t));
	t->has_raw_data = 1;
	t->raw_data.len = bytes;
	t->raw_data.data = zalloc(g, bytes);
	memcpy(t->raw_data.data, data, bytes);
	if (g->graph.n_initializer == (size_t)g->cap_init) {
		g->cap_init = g->cap_init ? 2 * g->cap_init : 32;
		g->graph.initializer = dt_realloc(g->graph.initializer,
						  (size_t)g->cap_init * sizeof(*g->graph.initializer));
	}
	g->graph.initializer[g->graph.n_initializer++] = t;
	return t->name;
}

const char *dt_onnx_floats(struct dt_onnx *g, const char *name, int ndim, const int64_t *dims, const float *data)
{
	size_t count = 1;
	for (int i = 0; i < ndim; i++)
		count *= (size_t)dims[i];
	return constant(g, name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, ndim, dims, data, count * sizeof(float));
}

const char *dt_onnx_int64s(struct dt_onnx *g, const char *name, int n, const int64_t *data)
{
	int64_t dims[1] = { n };
	return constant(g, name, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 1, dims, data, (size_t)n * sizeof(int64_t));
}

float *dt_onnx_param_alloc(const struct dt_param *p)
{
	float *data = dt_malloc((size_t)dt_shape_count(&p->shape) * sizeof(float));
	dt_op_to_host(&p->value, data);
	return data;
}

const char *dt_onnx_param(struct dt_onnx *g, const char *layer, const struct dt_param *p)
{
	char name[160];
	int64_t dims[DT_MAX_DIMS];
	float *data = dt_onnx_param_alloc(p);
	const char *v;
	for (int i = 0; i < p->shape.ndim; i++)
		dims[i] = p->shape.dim[i];
	snprintf(name, sizeof(name), "%s/%s", layer, p->name);
	v = dt_onnx_floats(g, name, p->shape.ndim, dims, data);
	free(data);
	return v;
}

const char *dt_onnx_transpose(struct dt_onnx *g, const char *x, const int64_t perm[4], const char *prefix)
{
	char name[160];
	const char *v;
	snprintf(name, sizeof(name), "%s/%s", prefix, perm[1] == 3 ? "to_nchw" : "to_nhwc");
	v = add_node(g, "Transpose", &x, 1, name);
	dt_onnx_attr_ints(g, "perm", 4, perm);
	return v;
}

const char *dt_onnx_reshape(struct dt_onnx *g, const char *x, const struct dt_shape *shape, const char *prefix)
{
	int64_t dims[DT_MAX_DIMS + 1] = { -1 };
	char name[160];
	const char *in[2];
	for (int i = 0; i < shape->ndim; i++)
		dims[i + 1] = shape->dim[i];
	snprintf(name, sizeof(name), "%s/shape", prefix);
	in[0] = x;
	in[1] = dt_onnx_int64s(g, name, shape->ndim + 1, dims);
	return dt_onnx_node(g, "Reshape", in, 2, prefix);
}

/* x op c for a scalar constant c. */
static const char *scalar_op(struct dt_onnx *g, const char *op, const char *x, float c, const char *prefix)
{
	char name[160];
	const char *in[2];
	snprintf(name, sizeof(name), "%s/%s_c", prefix, op);
	in[0] = x;
	in[1] = dt_onnx_floats(g, name, 0, NULL, &c);
	return dt_onnx_node(g, op, in, 2, prefix);
}

const char *dt_onnx_activation(struct dt_onnx *g, enum dt_activation act, const char *x, const char *prefix)
{
	static const char *const plain[DT_ACT_COUNT] = {
		[DT_ACT_RELU] = "Relu", [DT_ACT_SIGMOID] = "Sigmoid", [DT_ACT_TANH] = "Tanh",
		[DT_ACT_SOFTPLUS] = "Softplus", [DT_ACT_SOFTMAX] = "Softmax", [DT_ACT_LEAKY_RELU] = "LeakyRelu",
		[DT_ACT_ELU] = "Elu",
	};
	const char *v, *in[2];
	if (act == DT_ACT_LINEAR)
		return x;
	if (act >= 0 && act < DT_ACT_COUNT && plain[act]) {
		v = dt_onnx_node(g, plain[act], &x, 1, prefix);
		if (act == DT_ACT_SOFTMAX)
			dt_onnx_attr_int(g, "axis", -1);
		else if (act == DT_ACT_LEAKY_RELU)
			dt_onnx_attr_float(g, "alpha", 0.2f);
		else if (act == DT_ACT_ELU)
			dt_onnx_attr_float(g, "alpha", 1.0f);
		return v;
	}
	if (act == DT_ACT_SWISH) { /* x * sigmoid(x) */
		in[0] = x;
		in[1] = dt_onnx_node(g, "Sigmoid", &x, 1, prefix);
		return dt_onnx_node(g, "Mul", in, 2, prefix);
	}
	if (act == DT_ACT_GELU) { /* x * 0.5 * (1 + erf(x / sqrt(2))) */
		v = scalar_op(g, "Div", x, (float)M_SQRT2, prefix);
		v = dt_onnx_node(g, "Erf", &v, 1, prefix);
		v = scalar_op(g, "Add", v, 1.0f, prefix);
		v = scalar_op(g, "Mul", v, 0.5f, prefix);
		in[0] = x;
		in[1] = v;
		return dt_onnx_node(g, "Mul", in, 2, prefix);
	}
	return NULL;
}

/* The graph's input or output: float, (batch, shape...). */
static Onnx__ValueInfoProto *value_info(struct dt_onnx *g, const char *name, const struct dt_shape *shape)
{
	Onnx__ValueInfoProto *v = zalloc(g, sizeof(*v));
	Onnx__TypeProto *t = zalloc(g, sizeof(*t));
	Onnx__TypeProto__Tensor *tt = zalloc(g, sizeof(*tt));
	Onnx__TensorShapeProto *s = zalloc(g, sizeof(*s));

	onnx__value_info_proto__init(v);
	onnx__type_proto__init(t);
	onnx__type_proto__tensor__init(tt);
	onnx__tensor_shape_proto__init(s);
	s->n_dim = (size_t)shape->ndim + 1;
	s->dim = zalloc(g, s->n_dim * sizeof(*s->dim));
	for (size_t i = 0; i < s->n_dim; i++) {
		Onnx__TensorShapeProto__Dimension *d = zalloc(g, sizeof(*d));
		onnx__tensor_shape_proto__dimension__init(d);
		if (i == 0) {
			d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
			d->dim_param = copy_str(g, "batch");
		} else {
			d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
			d->dim_value = shape->dim[i - 1];
		}
		s->dim[i] = d;
	}
	tt->has_elem_type = 1;
	tt->elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
	tt->shape = s;
	t->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
	t->tensor_type = tt;
	v->name = copy_str(g, name);
	v->type = t;
	return v;
}

/* data.rescale and the normalization fit saved, as training applies them: (x * rescale - mean) / std. */
static const char *preprocess(struct dt_onnx *g, const struct dt_preprocess *pp, const char *x)
{
	int64_t n;
	const char *in[2];
	if (!pp)
		return x;
	if (pp->rescale != 1)
		x = scalar_op(g, "Mul", x, pp->rescale, "rescale");
	if (!pp->nchan)
		return x;
	n = pp->nchan;
	in[0] = x;
	in[1] = dt_onnx_floats(g, "normalize/mean", 1, &n, pp->mean);
	x = dt_onnx_node(g, "Sub", in, 2, "normalize");
	in[0] = x;
	in[1] = dt_onnx_floats(g, "normalize/std", 1, &n, pp->std);
	return dt_onnx_node(g, "Div", in, 2, "normalize");
}

/*
 * The layers' nodes after the preprocessing, then `final`; the last value, or
 * NULL after an error. Each layer reads the value of its input activation
 * (m->from): a residual block's shortcut reads the block's input.
 */
static const char *build(struct dt_onnx *g, const struct dt_model *m, const struct dt_preprocess *pp,
			 enum dt_activation final)
{
	const char **names = dt_calloc(m->nlayers + 1, sizeof(*names));
	const char *x;
	names[0] = preprocess(g, pp, "input");
	for (int i = 0; i < m->nlayers; i++) {
		const struct dt_layer *l = &m->layers[i];
		if (m->shortcut[i] >= 0) { /* a residual block's Add: its output and the shortcut */
			const char *in[2] = { names[m->from[i]], names[m->shortcut[i]] };
			names[i + 1] = dt_onnx_activation(g, l->act, dt_onnx_node(g, "Add", in, 2, l->name), l->name);
			if (!names[i + 1]) {
				dt_error("layer '%s': ONNX has no %s activation", l->name, dt_activation_names[l->act]);
				free(names);
				return NULL;
			}
			continue;
		}
		if (!l->type->export) {
			dt_error("layer '%s' (%s) cannot be exported to ONNX: its type has no export yet", l->name,
				 l->type->class_name);
			free(names);
			return NULL;
		}
		if (!(names[i + 1] = l->type->export(l, g, names[m->from[i]]))) {
			free(names);
			return NULL;
		}
	}
	x = names[m->nlayers];
	free(names);
	if (final != DT_ACT_LINEAR)
		x = dt_onnx_activation(g, final, x, "probabilities");
	/* The graph's output is named "output": an Identity gives it that name whatever came last. */
	return add_node(g, "Identity", &x, 1, "output");
}

static void graph_release(struct dt_onnx *g)
{
	for (int i = 0; i < g->nkept; i++)
		free(g->kept[i]);
	free(g->kept);
	free(g->graph.node);
	free(g->graph.initializer);
}

/* The packed model to path. 0 or -1. */
static int write_file(const char *path, const uint8_t *buf, size_t len)
{
	FILE *f = fopen(path, "wb");
	if (!f)
		return dt_error("cannot write '%s': %s", path, strerror(errno));
	if (fwrite(buf, 1, len, f) != len || fflush(f) != 0) {
		int e = errno;
		fclose(f);
		remove(path);
		return dt_error("cannot write '%s': %s", path, strerror(e));
	}
	if (fclose(f) != 0) {
		int e = errno;
		remove(path);
		return dt_error("cannot write '%s': %s", path, strerror(e));
	}
	return 0;
}

int dt_onnx_export(const struct dt_model *m, const struct dt_preprocess *pp, enum dt_activation final,
		   const char *path)
{
	struct dt_onnx g = { 0 };
	Onnx__ModelProto model = ONNX__MODEL_PROTO__INIT;
	Onnx__OperatorSetIdProto opset = ONNX__OPERATOR_SET_ID_PROTO__INIT, *opsets[1] = { &opset };
	Onnx__ValueInfoProto *in, *out;
	const char *y;
	uint8_t *buf = NULL;
	size_t len;
	int rc = -1;

	onnx__graph_proto__init(&g.graph);
	if (!(y = build(&g, m, pp, final)))
		goto out;
	in = value_info(&g, "input", &m->input);
	out = value_info(&g, y, &m->output);
	g.graph.name = copy_str(&g, m->name);
	g.graph.n_input = 1;
	g.graph.input = &in;
	g.graph.n_output = 1;
	g.graph.output = &out;
	opset.domain = "";
	opset.has_version = 1;
	opset.version = DT_ONNX_OPSET;
	model.has_ir_version = 1;
	model.ir_version = 7; /* the IR of opset 13 (ONNX 1.8) */
	model.n_opset_import = 1;
	model.opset_import = opsets;
	model.producer_name = "dtrain";
	model.producer_version = DT_VERSION;
	model.graph = &g.graph;
	len = onnx__model_proto__get_packed_size(&model);
	buf = dt_malloc(len ? len : 1);
	onnx__model_proto__pack(&model, buf);
	rc = write_file(path, buf, len);
out:
	free(buf);
	graph_release(&g);
	return rc;
}
