/*
 * ONNX export: a small graph builder that layer types emit their nodes
 * through (their optional `export` member, core/model/layer.h), and the
 * writer of a whole model (dtrain export).
 *
 * The graph keeps Keras' layout, channels last, from input to output: a
 * layer whose ONNX operator wants NCHW (Conv, MaxPool, AveragePool) wraps it
 * in Transpose nodes itself. Values are named by the builder
 * (dt_onnx_value); every string and array handed in is copied, so callers
 * keep ownership of theirs. The model is written with protobuf-c from
 * ONNX's published onnx.proto (compiled into build/gen/ at build time), at
 * opset DT_ONNX_OPSET.
 */
#ifndef DT_ONNX_H
#define DT_ONNX_H

#include <stdint.h>

#include "core/op_types.h"
#include "core/tensor.h"

#define DT_ONNX_OPSET 13

struct dt_onnx;
struct dt_model;
struct dt_param;
struct dt_preprocess;

/* A fresh value name, "PREFIX" or "PREFIX_N" when taken; owned by the graph. */
const char *dt_onnx_value(struct dt_onnx *g, const char *prefix);
/*
 * Adds node op_type with nin inputs (NULL for an omitted optional one) and one
 * output value named "PREFIX/OP_TYPE" (made unique); returns that name. Attributes
 * added next (dt_onnx_attr_*) go to this node.
 */
const char *dt_onnx_node(struct dt_onnx *g, const char *op_type, const char *const *in, int nin,
			 const char *prefix);
void dt_onnx_attr_int(struct dt_onnx *g, const char *name, int64_t v);
void dt_onnx_attr_float(struct dt_onnx *g, const char *name, float v);
void dt_onnx_attr_ints(struct dt_onnx *g, const char *name, int n, const int64_t *v);
/* A string attribute (Resize's mode, the recurrent operators' direction), copied. */
void dt_onnx_attr_string(struct dt_onnx *g, const char *name, const char *v);
/* A list of strings (the recurrent operators' activations), copied. */
void dt_onnx_attr_strings(struct dt_onnx *g, const char *name, int n, const char *const *v);
/* A float constant of shape dims (ndim), its data copied; returns its value name. */
const char *dt_onnx_floats(struct dt_onnx *g, const char *name, int ndim, const int64_t *dims, const float *data);
/* A 1-d int64 constant (Reshape's shape); returns its value name. */
const char *dt_onnx_int64s(struct dt_onnx *g, const char *name, int n, const int64_t *data);
/* A parameter's values on the host (malloc'ed, the caller frees), in its Keras layout. */
float *dt_onnx_param_alloc(const struct dt_param *p);
/* A parameter as a constant named "LAYER/PARAM" in its Keras layout; returns its value name. */
const char *dt_onnx_param(struct dt_onnx *g, const char *layer, const struct dt_param *p);
/* Transpose(x, perm): NHWC -> NCHW is {0, 3, 1, 2}, back {0, 2, 3, 1}; value "PREFIX/to_nchw" or "/to_nhwc". */
const char *dt_onnx_transpose(struct dt_onnx *g, const char *x, const int64_t perm[4], const char *prefix);
/* Reshape(x) to (batch, shape...): flatten and reshape, channels last as Keras. */
const char *dt_onnx_reshape(struct dt_onnx *g, const char *x, const struct dt_shape *shape, const char *prefix);
/* x through an activation, nodes named "PREFIX/OP" (the value x itself for linear); NULL for one ONNX lacks. */
const char *dt_onnx_activation(struct dt_onnx *g, enum dt_activation act, const char *x, const char *prefix);

/*
 * Writes model m (its weights in place) to path: the preprocessing pp
 * folded in as the first nodes (NULL: none), the layers' nodes, then
 * `final` (softmax or sigmoid on a model that outputs logits, else linear).
 * A layer type without `export` fails naming the layer and its type. 0 or -1.
 */
int dt_onnx_export(const struct dt_model *m, const struct dt_preprocess *pp, enum dt_activation final,
		   const char *path);

#endif
