/*
 * lstm: Keras' LSTM on the backend's recurrent plan (oneDNN's LSTM primitive on
 * the CPU, cuDNN's RNN API on the GPU). Gates i, f, c, o; unit_forget_bias
 * (default true) starts the forget gate's bias at 1. The arguments and
 * parameters are in recurrent.h.
 */
#include "layers.h"
#include "recurrent.h"

static int lstm_init(struct dt_layer *l, const struct dt_node *args)
{
	return dt_recurrent_init(l, args, DT_RNN_LSTM);
}

static const struct dt_layer_example examples[] = {
	{ "4,3", "{units: 2}" },
	{ "3,2", "{units: 3, return_sequences: true}" },
	{ "4,3", "{units: 2, go_backwards: true}" },
	{ "3,2", "{units: 2, return_sequences: true, go_backwards: true}" },
	{ "3,3", "{units: 2, use_bias: false, unit_forget_bias: false, kernel_regularizer: {l2: 0.1}}" },
	{ NULL, NULL },
};

const struct dt_layer_type dt_lstm_layer = {
	.name = "lstm",
	.class_name = "LSTM",
	.examples = examples,
	.init = lstm_init,
	.forward = dt_recurrent_forward,
	.backward = dt_recurrent_backward,
	.release = dt_recurrent_release,
	.alloc = dt_recurrent_alloc,
	.flops = dt_recurrent_flops,
	.export = dt_recurrent_export,
	.mask = DT_MASK_OWN,
};
