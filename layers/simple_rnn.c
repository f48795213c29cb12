/*
 * simple_rnn: Keras' SimpleRNN, h = act(x @ kernel + h @ recurrent_kernel +
 * bias), act tanh (default) or relu, on the backend's recurrent plan
 * (oneDNN's vanilla RNN). The arguments and parameters are in recurrent.h.
 */
#include "layers.h"
#include "recurrent.h"

static int simple_rnn_init(struct dt_layer *l, const struct dt_node *args)
{
	return dt_recurrent_init(l, args, DT_RNN_SIMPLE);
}

static const struct dt_layer_example examples[] = {
	{ "4,3", "{units: 2}" },
	{ "3,2", "{units: 3, return_sequences: true}" },
	{ "4,3", "{units: 2, activation: relu, go_backwards: true}" },
	{ "3,2", "{units: 2, return_sequences: true, go_backwards: true, use_bias: false}" },
	{ NULL, NULL },
};

const struct dt_layer_type dt_simple_rnn_layer = {
	.name = "simple_rnn",
	.class_name = "SimpleRNN",
	.examples = examples,
	.init = simple_rnn_init,
	.forward = dt_recurrent_forward,
	.backward = dt_recurrent_backward,
	.release = dt_recurrent_release,
	.alloc = dt_recurrent_alloc,
	.flops = dt_recurrent_flops,
	.export = dt_recurrent_export,
	.mask = DT_MASK_OWN,
};
