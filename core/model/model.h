/*
 * A sequential model: layers in order, shapes inferred from the input shape,
 * all parameters of one replica in ONE flat buffer (and their gradients in
 * another of the same layout), activations sized for the largest batch.
 *
 *   dt_model_init      layers from the YAML list, shapes, parameter layout (no memory)
 *   dt_model_alloc     buffers on a device for batches up to max_batch
 *   dt_model_init_params  Keras' initializers, seeded
 *   dt_model_forward / dt_model_backward   one step, no allocation
 *   dt_model_release
 */
#ifndef DT_MODEL_H
#define DT_MODEL_H

#include "core/model/layer.h"

struct dt_model {
	char name[64];
	struct dt_shape input;        /* per-sample */
	struct dt_shape output;       /* per-sample, = last layer's out */
	int nlayers;
	struct dt_layer *layers;
	/*
	 * The graph, for residual blocks (core/model/residual.h): layer i reads
	 * acts[from[i]] (i in a plain sequence); a residual add also reads
	 * acts[shortcut[i]] (-1 for every other layer). depth[i]: how many
	 * blocks hold layer i (its inner layers and projection are one deeper
	 * than the add that closes the block).
	 */
	int *from, *shortcut, *depth;
	char *needs_grad;             /* needs_grad[j]: backward computes dacts[j] (a layer before has parameters) */
	char *shares;                 /* shares[i]: how many of its input's buffers layer i, a view, takes: 0, 1 (acts), 2 (and dacts) */
	int64_t nparams;              /* floats in the flat buffer: trainable, then state */
	int64_t ntrainable;           /* the first ntrainable floats: what the optimizer updates */
	int nhwc_only;                /* set before dt_model_alloc: every activation NHWC (tests compare with it) */
	int unfused;                  /* set before dt_model_alloc: each layer applies its own activation's
					 gradient (dt_layer.act_before; tests compare with it) */
	/* after dt_model_alloc: */
	struct dt_device dev;
	int max_batch;
	float *params, *grads;        /* (nparams) and (ntrainable), on dev */
	float **acts;                 /* acts[i]: input of layer i (i = 0..nlayers), max_batch samples */
	float **dacts;                /* gradient w.r.t. acts[i], i >= 1 */
	char *written;                /* in backward: dacts[j] holds a gradient, a second one is added to it */
	float *scratch;               /* that second gradient (models with residual blocks), max_batch samples */
	int64_t scratch_count;        /* floats of scratch per sample: the largest activation a shortcut reads */
	struct dt_doc **docs;         /* the projections' arguments */
	int ndocs;
	/*
	 * Optional (dtrain inspect): dt_model_forward calls observe with the
	 * input (layer -1) and then with each layer's output y (n, out) as soon
	 * as that layer has run. NULL: off.
	 */
	void (*observe)(void *arg, const struct dt_model *m, int layer, const struct dt_tensor *y);
	void *observe_arg;
};

/*
 * Builds the layers listed in `layers` (a YAML sequence of single-key
 * mappings such as `- dense: {units: 10}`, or bare names like `- flatten`)
 * from the table `types`, inferring shapes from `input`. An item
 * `- residual: {layers: [...], shortcut: ..., activation: ...}` is a residual
 * block, flattened into the list (core/model/residual.h); its projection
 * takes "conv2d" or "dense" from `types`. Errors name the YAML
 * position; a shape mismatch names the layer and both shapes.
 */
int dt_model_init(struct dt_model *m, const char *name, const struct dt_shape *input,
		  const struct dt_node *layers, const struct dt_layer_type *const *types);
/*
 * Bytes of the buffers of one replica for batches of max_batch: the input,
 * and every layer's dt_layer_bytes with `state` floats per trainable
 * parameter (optimizer slots, accumulation). INT64_MAX when that overflows.
 * *largest (may be NULL) is the index of the layer that holds the most.
 */
int64_t dt_model_bytes(const struct dt_model *m, int max_batch, int state, int *largest);
/*
 * Refuses, before anything is allocated, a model whose `replicas` replicas on
 * one device need more than `budget` bytes there (dt_model_bytes each). The
 * error is at the YAML position of the layer that holds the most, names it,
 * its bytes, the total and the budget, which `budget_what` describes ("the
 * physical memory of cpu:0", "fit.max_memory"). 0 or -1.
 */
int dt_model_check_memory(const struct dt_model *m, int max_batch, int replicas, int state, int64_t budget,
			  const char *budget_what);
/*
 * Allocates the buffers on dev for batches up to max_batch and makes the
 * layers' plans. 0, or -1 after an error (out of memory, a plan the backend
 * cannot make); dt_model_release frees what was made.
 */
int dt_model_alloc(struct dt_model *m, struct dt_device dev, int max_batch);
/* glorot_uniform kernels and zero biases (or as declared), from (seed, parameter index). */
void dt_model_init_params(struct dt_model *m, uint64_t seed);
void dt_model_release(struct dt_model *m);

/* The trainable part of the parameter buffer, and the gradient buffer, as flat tensors. */
struct dt_tensor dt_model_params(const struct dt_model *m);
struct dt_tensor dt_model_grads(const struct dt_model *m);
/*
 * Adds the regularizers' gradients, times scale, to the gradient buffer and
 * returns the penalty they add to the loss (0 without regularizers).
 */
double dt_model_regularize(struct dt_model *m, float scale);
/* The same for layer i's parameters alone: the sum over i is dt_model_regularize. */
double dt_model_regularize_layer(struct dt_model *m, int i, float scale);
/*
 * Where layer i's trainable parameters start in the flat buffers: the
 * gradients of layers i.. are [dt_model_grad_offset(m, i), ntrainable)
 * (parameters are laid out in layer order). ntrainable for i = nlayers.
 */
int64_t dt_model_grad_offset(const struct dt_model *m, int i);
/* The input view for a batch of n: write the batch here before forward. */
struct dt_tensor dt_model_input(const struct dt_model *m, int n);
/* Runs every layer on the batch in the input view; returns the output view (n, output). */
struct dt_tensor dt_model_forward(struct dt_model *m, int n, const struct dt_step_ctx *ctx);
/* The view that receives d(loss)/d(output) for a batch of n. */
struct dt_tensor dt_model_output_grad(const struct dt_model *m, int n);
/* Back-propagates the gradient in dt_model_output_grad(); fills the gradient buffer. */
void dt_model_backward(struct dt_model *m, int n);

/*
 * One layer of the two passes above, for callers that time layers (dtrain
 * time): running forward_layer for i = 0..nlayers-1, then backward_layer for
 * i = nlayers-1 down to 0, is dt_model_forward then dt_model_backward.
 * forward_layer reads acts[from[i]] (acts[i] outside residual blocks) and
 * returns layer i's output view (n, out), acts[i + 1]. backward_layer reads
 * dacts[i + 1], writes the layer's parameter gradients and, where a layer
 * before has parameters, dacts[from[i]] (added to what another reader of that
 * activation wrote there); where no gradient is needed it does nothing.
 * backward_layer(nlayers - 1) starts a backward pass.
 */
struct dt_tensor dt_model_forward_layer(struct dt_model *m, int i, int n, const struct dt_step_ctx *ctx);
void dt_model_backward_layer(struct dt_model *m, int i, int n);
/* Index of the first layer with parameters (nlayers when none has any). */
int dt_model_first_trainable(const struct dt_model *m);

/* Parameters in the model: trainable and state (non-trainable). */
int64_t dt_model_param_count(const struct dt_model *m);

#endif
