/*
 * The layer interface. Each layer type lives in its own file in layers/ and
 * is listed in the table of layers/layers.c; core/ knows none by name.
 *
 * Life of a layer: the model fills type, name, index and in (the per-sample
 * input shape) and calls type->init with the layer's YAML arguments. init
 * validates them, sets out and act, and declares its parameters and its
 * per-sample scratch buffers with dt_layer_param() and dt_layer_buffer(). The
 * model then places every parameter in its one flat buffer and sizes buffers
 * for the largest batch, setting the tensor views. forward and backward only
 * read and write those views and the tensors they are given: no allocation.
 */
#ifndef DT_LAYER_H
#define DT_LAYER_H

#include <stdint.h>

#include "core/config/config.h"
#include "core/ops.h"
#include "core/tensor.h"

struct dt_onnx; /* core/export/onnx.h */

#define DT_LAYER_MAX_PARAMS 8 /* Bidirectional: two recurrent layers of 3 */
#define DT_LAYER_MAX_BUFS 24 /* Bidirectional: its own 5 and its two masked copies' 7 each */

/* Keras' initializers; the *_normal ones draw from a normal truncated at 2 stddev, as Keras. */
enum dt_init {
	DT_INIT_ZEROS,
	DT_INIT_ONES,
	DT_INIT_GLOROT_UNIFORM,
	DT_INIT_GLOROT_NORMAL,
	DT_INIT_HE_UNIFORM,
	DT_INIT_HE_NORMAL,
	DT_INIT_LECUN_UNIFORM,
	DT_INIT_LECUN_NORMAL,
	/* Embedding's default (issue 14): Keras' "uniform" alias of RandomUniform(-0.05, 0.05), by either name. */
	DT_INIT_UNIFORM,
	DT_INIT_RANDOM_UNIFORM,
	DT_INIT_ORTHOGONAL,     /* Keras' Orthogonal, gain 1: (prod(shape[:-1]), shape[-1]) with orthonormal rows or columns */
	DT_INIT_COUNT
};
/* "zeros", "ones", "glorot_uniform", ...; NULL-terminated, indexed by enum. */
extern const char *const dt_init_names[];

struct dt_param {
	const char *name;        /* "kernel", "bias", "moving_mean": a static string */
	struct dt_shape shape;   /* Keras layout: dense kernel (in, out), conv kernel (kh, kw, in, out) */
	enum dt_init init;
	int fan_in, fan_out;
	int trainable;           /* 0: state the layer updates itself (batch norm's moving statistics) */
	float l1, l2;            /* regularization added to the loss (Keras' kernel_regularizer) */
	int64_t ones_at, ones_count; /* a slice drawn as ones whatever init says (LSTM's unit_forget_bias) */
	int64_t offset;          /* in the model's flat buffer, in floats: trainable ones first */
	struct dt_tensor value;  /* views into the model's parameter buffer */
	struct dt_tensor grad;   /* and gradient buffer (trainable parameters only) */
};

struct dt_layer_buf {
	const char *name;
	int64_t per_sample;      /* floats per sample */
	struct dt_tensor t;      /* (max_batch * per_sample) on the model's device */
};

/* What one forward pass needs to know beyond its input. */
struct dt_step_ctx {
	int training;       /* dropout active, batch statistics */
	uint64_t key;       /* randomness of this step, the same for every replica of a (seed, epoch, step) */
	int64_t first_row;  /* the global batch's row that is this replica's row 0: random
			       draws follow the sample, not the replica that computes it */
};

/*
 * Embedding's mask_zero (issue 14), as Keras' masks: which steps of each
 * sample of the batch hold a token other than 0. The embedding fills it on
 * the host in every forward pass; the layers after it see it as mask_in
 * until one that reads it (a recurrent layer, global_average_pooling1d)
 * uses it up. Layers of a type whose mask is DT_MASK_PASS hand it on
 * unchanged; any other layer that receives one must say what it does with
 * it (its init sets mask_out or refuses the model), and the model refuses
 * a layer that ignores a mask it is given, and a mask that reaches the output.
 */
struct dt_mask {
	int steps;
	int n;                /* samples of the last forward pass */
	unsigned char *valid; /* (max_batch, steps) on the host: 1 where the step holds a token */
	float *scratch;       /* (max_batch, steps) floats on the host for the layer that reads it, while it runs */
};

enum dt_mask_rule {
	DT_MASK_NONE, /* the layer handles no mask: the model refuses it after a masked layer */
	DT_MASK_PASS, /* step by step (activation, dropout, ...): its output keeps its input's mask */
	DT_MASK_OWN,  /* its init reads mask_in and sets mask_out (embedding, recurrent layers, ...) */
};

struct dt_layer {
	const struct dt_layer_type *type;
	char name[64];                /* "dense_1", unique in the model */
	int index;                    /* position in the model */
	const struct dt_node *node;   /* its item of the YAML `layers` list: the place errors name */
	struct dt_shape in, out;      /* per-sample shapes */
	enum dt_activation act;       /* the layer's output activation */
	int fused_act;                /* set by the model when the loss (softmax/sigmoid +
					 crossentropy) or the next layer (its act_before) hands
					 backward the gradient before act */
	int selects;                  /* set by init: each output is one of the inputs, and backward
					 routes its gradient there alone (max pooling) */
	enum dt_activation act_before; /* set by the model on a layer that selects: the
					 activation of the layer before, whose gradient (a
					 function of its output alone) this one's backward applies
					 to its own output's gradient, on fewer values; LINEAR: none */
	int nparams;
	struct dt_param params[DT_LAYER_MAX_PARAMS];
	int nbufs;
	struct dt_layer_buf bufs[DT_LAYER_MAX_BUFS];
	const struct dt_mask *mask_in; /* the mask of its input, set before init; NULL: none */
	const struct dt_mask *mask_out; /* its output's */
	void *priv;                   /* the type's own state */
	/*
	 * The layouts of x and y (core/op_types.h), set by the model before
	 * alloc: NHWC unless the layer's type takes BLOCKED there
	 * (dt_layer_type.layouts) and so does its neighbour; block: the
	 * channels of a block, 0 when both are NHWC.
	 */
	enum dt_layout x_layout, y_layout;
	int block;
};

/* A configuration the tests build: input shape like "28,28,1" and YAML arguments. */
struct dt_layer_example {
	const char *input;
	const char *args;
};

struct dt_layer_type {
	const char *name;       /* YAML name: "dense" */
	const char *class_name; /* Keras class for summaries: "Dense" */
	/* Configurations the gradient check runs (at least one; ends with {NULL, NULL}). */
	const struct dt_layer_example *examples;
	/* args: the layer's mapping (an empty one, placed at the item, for a bare "- flatten"). 0 or -1. */
	int (*init)(struct dt_layer *l, const struct dt_node *args);
	/* x (N, in) -> y (N, out) */
	void (*forward)(struct dt_layer *l, const struct dt_tensor *x, struct dt_tensor *y,
			const struct dt_step_ctx *ctx);
	/*
	 * From dy (N, out) and the forward's x and y: parameter gradients
	 * (overwritten, not accumulated) and dx (N, in); dx is NULL for the first
	 * layer. dy may be overwritten.
	 */
	void (*backward)(struct dt_layer *l, const struct dt_tensor *x, const struct dt_tensor *y,
			 struct dt_tensor *dy, struct dt_tensor *dx);
	void (*release)(struct dt_layer *l); /* frees priv and plans; may be NULL */
	/*
	 * Optional: makes backend plans (dt_plan_conv, ...) once the device and the
	 * largest batch are known, after the buffers are placed. 0 or -1.
	 */
	int (*alloc)(struct dt_layer *l, struct dt_device dev, int max_batch);
	/* Optional: multiply-adds x 2 of one sample's forward pass, for dtrain time. */
	int64_t (*flops)(const struct dt_layer *l);
	/*
	 * Optional: emits the layer's inference nodes into an ONNX graph
	 * (core/export/onnx.h), from the value named x (N, in...) channels last;
	 * returns the output's value name, or NULL after an error. NULL here:
	 * dtrain export refuses the model, naming the layer and its type.
	 */
	const char *(*export)(const struct dt_layer *l, struct dt_onnx *g, const char *x);
	/*
	 * Optional (embedding, issue 14): the layer reads its input as token
	 * indices, whole numbers in [0, limit); returns limit. As the model's
	 * first layer, the data pipeline then refuses any other input value,
	 * naming the file and record, and data.rescale and data.normalize are
	 * refused (cmd/app.c).
	 */
	int64_t (*index_limit)(const struct dt_layer *l);
	/*
	 * Optional (the convolutions and pooling of the CPU): the pairs of
	 * layouts (x, y) the layer runs on dev in blocks of `block` channels,
	 * as DT_LAYOUT_PAIR bits; with_dx: its backward computes dx. Its alloc
	 * then makes its plans in the x_layout and y_layout the model chose.
	 */
	unsigned (*layouts)(const struct dt_layer *l, struct dt_device dev, int block, int with_dx);
	/* What the layer does with a mask of mask_zero's (struct dt_mask above). */
	enum dt_mask_rule mask;
	/*
	 * 1: y holds x's values in x's order (flatten, reshape). Where nothing
	 * else reads x, the model hands the layer x's buffers as y and dy
	 * (dt_model_alloc), and its forward and backward copies are no-ops
	 * (dt_op_copy of a buffer onto itself).
	 */
	int view;
};

/* Declares a trainable parameter; returns its index in l->params. */
int dt_layer_param(struct dt_layer *l, const char *name, struct dt_shape shape, enum dt_init init,
		   int fan_in, int fan_out);
/* Declares non-trainable state kept with the parameters (checkpointed, not optimized). */
int dt_layer_state(struct dt_layer *l, const char *name, struct dt_shape shape, enum dt_init init);
/* Reads an optional initializer key such as `kernel_initializer: he_normal`. */
int dt_layer_initializer(const struct dt_node *args, const char *key, enum dt_init def, enum dt_init *out);
/*
 * Reads an optional regularizer key: `kernel_regularizer: l2` (0.01, Keras'
 * default), `{l2: 0.001}`, `{l1: 0.01, l2: 0.01}`. Absent: both 0.
 */
int dt_layer_regularizer(const struct dt_node *args, const char *key, float *l1, float *l2);
/* Declares a scratch buffer of per_sample floats per sample; returns its index. */
int dt_layer_buffer(struct dt_layer *l, const char *name, int64_t per_sample);
/* The buffer's view for a batch of n: (n, per_sample). */
struct dt_tensor dt_layer_buf_view(const struct dt_layer *l, int i, int n);
/*
 * The output activation of a layer that computes its pre-activation z into y
 * and then y = act(z) in place (dense and the convolutions). In init, after
 * l->act and l->out are set, dt_layer_act_buffer declares the "preact"
 * buffer that keeps z when act's derivative needs its input (gelu, swish);
 * it must be the layer's last buffer, and buf is the index it gets (or would
 * get). dt_layer_act_forward keeps z there and applies act to y;
 * dt_layer_act_backward turns dy (the gradient of y) into the gradient of z,
 * in place, unless the loss or the next layer does (fused_act).
 */
void dt_layer_act_buffer(struct dt_layer *l);
void dt_layer_act_forward(const struct dt_layer *l, int buf, struct dt_tensor *y);
void dt_layer_act_backward(const struct dt_layer *l, int buf, const struct dt_tensor *y, struct dt_tensor *dy);
/* Checks args against allowed keys (plus the common "name"); NULL args pass. */
int dt_layer_check_keys(const struct dt_layer *l, const struct dt_node *args, const char *const *allowed);
/* Reads an optional `activation:` key. */
int dt_layer_activation(const struct dt_node *args, enum dt_activation *out);
/* Parameters of the layer (sum of the counts of its params; INT64_MAX when that overflows). */
int64_t dt_layer_param_count(const struct dt_layer *l);
/*
 * Bytes the layer holds in one replica for batches of max_batch: its
 * parameters, the gradients and `state` more floats (optimizer slots, the
 * accumulation buffer) per trainable one, its output and the output's
 * gradient, and its scratch buffers. INT64_MAX when that overflows.
 */
int64_t dt_layer_bytes(const struct dt_layer *l, int max_batch, int state);

/* Finds a type by YAML name in a NULL-terminated table, or NULL. */
const struct dt_layer_type *dt_layer_type_find(const struct dt_layer_type *const *types, const char *name);

#endif
