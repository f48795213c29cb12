/*
 * gru: Keras' GRU on the backend's recurrent plan: reset_after (default true)
 * is oneDNN's linear-before-reset GRU (cuDNN's GRU), with a (2, 3*units)
 * bias of input and recurrent rows; reset_after: false the original GRU.
 * Gates z, r, h. The arguments and parameters are in recurrent.h.
 */
#include "layers.h"
#include "recurrent.h"

static int gru_init(struct dt_layer *l, const struct dt_node *args)
{
	return dt_recurrent_init(l, args, DT_RNN_GRU);
}

static const struct dt_layer_example examples[] = {
	{ "4,3", "{units: 2}" },
	{ "3,2", "{units: 3, return_sequences: true}" },
	{ "4,3", "{units: 2, reset_after: false}" },
	{ "3,2", "{units: 2, reset_after: false, return_sequences: true, go_backwards: true}" },
	{ "3,3", "{units: 2, go_backwards: true, recurrent_regularizer: l2}" },
	{ "3,2", "{units: 2, use_bias: false}" },
	{ NULL, NULL },
};

const struct dt_layer_type dt_gru_layer = {
	.name = "gru",
	.class_name = "GRU",
	.examples = examples,
	.init = gru_init,
	.forward = dt_recurrent_forward,
	.backward = dt_recurrent_backward,
	.release = dt_recurrent_release,
	.alloc = dt_recurrent_alloc,
	.flops = dt_recurrent_flops,
	.export = dt_recurrent_export,
	.mask = DT_MASK_OWN,
};
