/*
 * What lstm, gru and simple_rnn share (and bidirectional wraps): Keras'
 * recurrent arguments, the parameters in Keras' layout and names, and the
 * backend's recurrent plan (dt_plan_rnn) behind forward and backward.
 *
 * Arguments of all three: units (required), activation (tanh; SimpleRNN
 * also relu), use_bias (true), kernel_initializer (glorot_uniform),
 * recurrent_initializer (orthogonal), bias_initializer (zeros),
 * kernel_regularizer, recurrent_regularizer (none), return_sequences
 * (false), go_backwards (false); LSTM and GRU: recurrent_activation
 * (sigmoid only); LSTM: unit_forget_bias (true); GRU: reset_after (true).
 * Parameters: kernel (in, G*units), recurrent_kernel (units, G*units), bias
 * (G*units; GRU reset_after (2, 3*units)). (steps, in) -> (units), or
 * (steps, units) with return_sequences.
 */
#ifndef DT_LAYERS_RECURRENT_H
#define DT_LAYERS_RECURRENT_H

#include "core/model/layer.h"

/*
 * Under a mask (mask_zero, issue 14) a recurrent layer runs as Keras: a
 * masked step leaves the state as it was and outputs the last output (or
 * zeros, zero_masked). oneDNN and cuDNN know no masks, so each sample's
 * unmasked steps, in the order they are read, are gathered to the front of
 * a sequence (xc; zeros after them) that the plan reads forwards, keeping
 * every step (yc); the output gathers, for each step read, the last
 * unmasked step's output, or for the last state the sample's last one. The
 * steps after a sample's own are padding that only later padding reads: the
 * scatter of dy into dyc gives them no gradient, so the plan's backward is
 * exact, and dx gathers dxc back to the unmasked steps (zeros elsewhere).
 */
struct dt_recurrent {
	struct dt_rnn_geom g;
	struct dt_plan *plan;
	const struct dt_mask *mask; /* l->mask_in; NULL: none */
	int zero_masked;            /* Keras' zero_output_for_mask (Bidirectional's copies with return_sequences) */
	int buf;                    /* the first of the layer's seven mask buffers */
	float *host;                /* the three index lists of a batch, made on the host */
};

/* init for a cell: reads the arguments (keys, the cell's own ones included), declares the parameters. */
int dt_recurrent_init(struct dt_layer *l, const struct dt_node *args, enum dt_rnn_cell cell);
int dt_recurrent_alloc(struct dt_layer *l, struct dt_device dev, int max_batch);
void dt_recurrent_forward(struct dt_layer *l, const struct dt_tensor *x, struct dt_tensor *y,
			  const struct dt_step_ctx *ctx);
void dt_recurrent_backward(struct dt_layer *l, const struct dt_tensor *x, const struct dt_tensor *y,
			   struct dt_tensor *dy, struct dt_tensor *dx);
void dt_recurrent_release(struct dt_layer *l);
int64_t dt_recurrent_flops(const struct dt_layer *l);
/* ONNX's RNN, LSTM or GRU operator (opset 13: time-major, so transposed in and out). */
const char *dt_recurrent_export(const struct dt_layer *l, struct dt_onnx *g, const char *x);

#endif
