#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/export/onnx.h"
#include "recurrent.h"

enum { KERNEL, RECURRENT, BIAS };

static const char *cell_class(enum dt_rnn_cell cell)
{
	return cell == DT_RNN_SIMPLE ? "SimpleRNN" : cell == DT_RNN_LSTM ? "LSTM" : "GRU";
}

/*
 * Reads `key` as an activation that must be one of the allowed ones (the
 * cells oneDNN and cuDNN have): anything else is an error at the value.
 */
static int fixed_activation(const struct dt_layer *l, const struct dt_node *args, const char *key,
			    enum dt_activation def, enum dt_activation alt, enum dt_rnn_cell cell,
			    enum dt_activation *out)
{
	int v;
	if (dt_cfg_enum(args, key, dt_activation_names, def, &v) < 0)
		return -1;
	if (v != (int)def && v != (int)alt)
		return dt_node_error(dt_node_get(args, key),
				     "layer '%s': %s '%s' is not one %s on oneDNN and cuDNN supports; use %s%s%s",
				     l->name, key, dt_activation_names[v], cell_class(cell), dt_activation_names[def],
				     alt != def ? " or " : "", alt != def ? dt_activation_names[alt] : "");
	*out = (enum dt_activation)v;
	return 0;
}

int dt_recurrent_init(struct dt_layer *l, const struct dt_node *args, enum dt_rnn_cell cell)
{
	static const char *const simple_keys[] = { "units", "activation", "use_bias", "kernel_initializer",
						   "recurrent_initializer", "bias_initializer", "kernel_regularizer",
						   "recurrent_regularizer", "return_sequences", "go_backwards", NULL };
	static const char *const lstm_keys[] = { "units", "activation", "recurrent_activation", "use_bias",
						 "kernel_initializer", "recurrent_initializer", "bias_initializer",
						 "unit_forget_bias", "kernel_regularizer", "recurrent_regularizer",
						 "return_sequences", "go_backwards", NULL };
	static const char *const gru_keys[] = { "units", "activation", "recurrent_activation", "use_bias",
						"kernel_initializer", "recurrent_initializer", "bias_initializer",
						"reset_after", "kernel_regularizer", "recurrent_regularizer",
						"return_sequences", "go_backwards", NULL };
	struct dt_rnn_geom g = { 0 };
	int64_t units;
	int use_bias, seqs, back, forget = 0, reset_after = 1, gates, k, r;
	enum dt_activation act = DT_ACT_TANH, ract = DT_ACT_SIGMOID;
	enum dt_init kinit, rinit, binit;
	float kl1, kl2, rl1, rl2;
	char shape[64];
	struct dt_recurrent *rc;

	if (dt_layer_check_keys(l, args,
				cell == DT_RNN_SIMPLE ? simple_keys : cell == DT_RNN_LSTM ? lstm_keys : gru_keys) < 0 ||
	    dt_cfg_require(args, "units", l->type->name) < 0 ||
	    dt_cfg_int(args, "units", 0, 1, 1 << 16, &units) < 0 ||
	    fixed_activation(l, args, "activation", DT_ACT_TANH, cell == DT_RNN_SIMPLE ? DT_ACT_RELU : DT_ACT_TANH,
			     cell, &act) < 0 ||
	    (cell != DT_RNN_SIMPLE &&
	     fixed_activation(l, args, "recurrent_activation", DT_ACT_SIGMOID, DT_ACT_SIGMOID, cell, &ract) < 0) ||
	    dt_cfg_bool(args, "use_bias", 1, &use_bias) < 0 ||
	    dt_layer_initializer(args, "kernel_initializer", DT_INIT_GLOROT_UNIFORM, &kinit) < 0 ||
	    dt_layer_initializer(args, "recurrent_initializer", DT_INIT_ORTHOGONAL, &rinit) < 0 ||
	    dt_layer_initializer(args, "bias_initializer", DT_INIT_ZEROS, &binit) < 0 ||
	    (cell == DT_RNN_LSTM && dt_cfg_bool(args, "unit_forget_bias", 1, &forget) < 0) ||
	    (cell == DT_RNN_GRU && dt_cfg_bool(args, "reset_after", 1, &reset_after) < 0) ||
	    dt_layer_regularizer(args, "kernel_regularizer", &kl1, &kl2) < 0 ||
	    dt_layer_regularizer(args, "recurrent_regularizer", &rl1, &rl2) < 0 ||
	    dt_cfg_bool(args, "return_sequences", 0, &seqs) < 0 || dt_cfg_bool(args, "go_backwards", 0, &back) < 0)
		return -1;
	if (l->in.ndim != 2)
		return dt_node_error(args, "layer '%s' needs a sequence input (steps, features) but gets %s; add "
				     "'- reshape: {target_shape: [steps, features]}' before it",
				     l->name, dt_shape_format(&l->in, 1, shape, sizeof(shape)));
	if (cell == DT_RNN_GRU && reset_after)
		cell = DT_RNN_GRU_RESET_AFTER;
	gates = dt_rnn_gates(cell);
	if ((int64_t)gates * units * (l->in.dim[1] > units ? l->in.dim[1] : units) > DT_MAX_COUNT)
		return dt_node_error(dt_node_get(args, "units"), "layer '%s': %lld units of %d gates over %d "
				     "features make a kernel larger than dtrain takes", l->name, (long long)units,
				     gates, l->in.dim[1]);
	g.cell = cell;
	g.steps = l->in.dim[0];
	g.in = l->in.dim[1];
	g.units = (int)units;
	g.act = act;
	g.use_bias = use_bias;
	g.go_backwards = back;
	g.return_sequences = seqs;
	l->out = seqs ? dt_shape_make(2, (int[]){ g.steps, g.units }) : dt_shape_make(1, (int[]){ g.units });

	k = dt_layer_param(l, "kernel", dt_shape_make(2, (int[]){ g.in, gates * g.units }), kinit, g.in,
			   gates * g.units);
	l->params[k].l1 = kl1;
	l->params[k].l2 = kl2;
	r = dt_layer_param(l, "recurrent_kernel", dt_shape_make(2, (int[]){ g.units, gates * g.units }), rinit,
			   g.units, gates * g.units);
	l->params[r].l1 = rl1;
	l->params[r].l2 = rl2;
	if (use_bias) {
		int b = dt_layer_param(l, "bias",
				       dt_rnn_bias_rows(cell) == 2
					       ? dt_shape_make(2, (int[]){ 2, gates * g.units })
					       : dt_shape_make(1, (int[]){ gates * g.units }),
				       binit, 1, gates * g.units);
		if (forget) { /* Keras: ones for the forget gate, the second of i, f, c, o */
			l->params[b].ones_at = g.units;
			l->params[b].ones_count = g.units;
		}
	}
	rc = dt_calloc(1, sizeof(*rc));
	rc->g = g;
	l->priv = rc;
	if (l->mask_in) {
		int outs = seqs ? g.steps : 1;
		rc->mask = l->mask_in;
		rc->buf = dt_layer_buffer(l, "masked_x", (int64_t)g.steps * g.in);
		dt_layer_buffer(l, "masked_y", (int64_t)g.steps * g.units);
		dt_layer_buffer(l, "masked_dy", (int64_t)g.steps * g.units);
		dt_layer_buffer(l, "masked_dx", (int64_t)g.steps * g.in);
		dt_layer_buffer(l, "mask_take", g.steps);
		dt_layer_buffer(l, "mask_put", outs);
		dt_layer_buffer(l, "mask_back", g.steps);
		l->mask_out = seqs ? l->mask_in : NULL;
	}
	return 0;
}

enum { XC, YC, DYC, DXC, TAKE, PUT, BACK }; /* the mask buffers, from rc->buf */

int dt_recurrent_alloc(struct dt_layer *l, struct dt_device dev, int max_batch)
{
	struct dt_recurrent *rc = l->priv;
	if (dev.kind == DT_DEVICE_CUDA && rc->g.cell == DT_RNN_GRU)
		return dt_node_error(l->node, "layer '%s': a GRU with reset_after: false has no cuDNN cell; use "
				     "reset_after: true (Keras 3's default) on a GPU, or train on the CPU", l->name);
	if (rc->mask) { /* the plan reads the gathered steps forwards and returns them all */
		struct dt_rnn_geom g = rc->g;
		if ((int64_t)max_batch * g.steps >= 1 << 24)
			return dt_error("layer '%s': a batch of %d sequences of %d steps is more than a masked "
					"recurrent layer indexes (2^24 steps)", l->name, max_batch, g.steps);
		g.go_backwards = 0;
		g.return_sequences = 1;
		free(rc->host);
		rc->host = dt_malloc((size_t)max_batch * g.steps * 3 * sizeof(float));
		rc->plan = dt_plan_rnn(dev, &g, max_batch);
	} else {
		rc->plan = dt_plan_rnn(dev, &rc->g, max_batch);
	}
	return rc->plan ? 0 : dt_error("layer '%s': the backend cannot make this recurrent layer", l->name);
}

/* A buffer's view for a batch of n as `rows` rows of `width` floats. */
static struct dt_tensor rows_view(const struct dt_layer *l, int buf, int n, int64_t rows, int width)
{
	struct dt_tensor t = dt_layer_buf_view(l, buf, n);
	return dt_tensor_batch(t.data, t.dev, (int)rows, &(struct dt_shape){ 1, { width } });
}

/* A buffer's view for a batch of n sequences: (n, steps, width). */
static struct dt_tensor seq_view(const struct dt_layer *l, int buf, int n, int steps, int width)
{
	struct dt_tensor t = dt_layer_buf_view(l, buf, n);
	return dt_tensor_batch(t.data, t.dev, n, &(struct dt_shape){ 2, { steps, width } });
}

/*
 * The batch's three index lists, as row numbers of (n * steps)-row tables
 * (-1: a row of zeros): take[s, j] the input step that is the j-th one read
 * of sample s, put[s, p] the gathered step whose output is the layer's at
 * the p-th step read (or put[s] the last state's), back[s, t] the gathered
 * step that input step t became.
 */
static void mask_indices(const struct dt_layer *l, struct dt_recurrent *rc, int n)
{
	const struct dt_rnn_geom *g = &rc->g;
	const int T = g->steps, outs = g->return_sequences ? T : 1;
	float *take = rc->host, *put = take + (int64_t)n * T, *back = put + (int64_t)n * outs;
	struct dt_tensor t;

	DT_ASSERT(rc->mask->n == n && rc->mask->steps == T);
	for (int s = 0; s < n; s++) {
		const unsigned char *valid = rc->mask->valid + (int64_t)s * T;
		int64_t base = (int64_t)s * T;
		int j = 0;
		for (int p = 0; p < T; p++) {
			int step = g->go_backwards ? T - 1 - p : p;
			if (valid[step]) {
				take[base + j] = (float)(base + step);
				back[base + step] = (float)(base + j);
				j++;
			} else {
				back[base + step] = -1;
			}
			if (g->return_sequences)
				put[base + p] = j > 0 && (valid[step] || !rc->zero_masked) ? (float)(base + j - 1) : -1;
		}
		if (!g->return_sequences)
			put[s] = j > 0 ? (float)(base + j - 1) : -1;
		for (; j < T; j++)
			take[base + j] = -1;
	}
	t = rows_view(l, rc->buf + TAKE, n, (int64_t)n * T, 1);
	dt_op_from_host(&t, take);
	t = rows_view(l, rc->buf + PUT, n, (int64_t)n * outs, 1);
	dt_op_from_host(&t, put);
	t = rows_view(l, rc->buf + BACK, n, (int64_t)n * T, 1);
	dt_op_from_host(&t, back);
}

void dt_recurrent_forward(struct dt_layer *l, const struct dt_tensor *x, struct dt_tensor *y,
			  const struct dt_step_ctx *ctx)
{
	struct dt_recurrent *rc = l->priv;
	const struct dt_tensor *b = l->nparams > BIAS ? &l->params[BIAS].value : NULL;
	int n = x->shape.dim[0], T = rc->g.steps;
	struct dt_tensor take, put, xt, xc, yc, yt;

	if (!rc->mask) {
		dt_op_rnn_forward(rc->plan, ctx ? ctx->training : 0, x, &l->params[KERNEL].value,
				  &l->params[RECURRENT].value, b, y);
		return;
	}
	mask_indices(l, rc, n);
	take = rows_view(l, rc->buf + TAKE, n, (int64_t)n * T, 1);
	put = rows_view(l, rc->buf + PUT, n, (int64_t)n * (rc->g.return_sequences ? T : 1), 1);
	xt = dt_tensor_batch(x->data, x->dev, n * T, &(struct dt_shape){ 1, { rc->g.in } });
	xc = seq_view(l, rc->buf + XC, n, T, rc->g.in);
	yc = seq_view(l, rc->buf + YC, n, T, rc->g.units);
	dt_op_gather(&take, &xt, &xc);
	dt_op_rnn_forward(rc->plan, ctx ? ctx->training : 0, &xc, &l->params[KERNEL].value,
			  &l->params[RECURRENT].value, b, &yc);
	yt = rows_view(l, rc->buf + YC, n, (int64_t)n * T, rc->g.units);
	dt_op_gather(&put, &yt, y);
}

void dt_recurrent_backward(struct dt_layer *l, const struct dt_tensor *x, const struct dt_tensor *y,
			   struct dt_tensor *dy, struct dt_tensor *dx)
{
	struct dt_recurrent *rc = l->priv;
	const struct dt_tensor *b = l->nparams > BIAS ? &l->params[BIAS].value : NULL;
	struct dt_tensor *db = l->nparams > BIAS ? &l->params[BIAS].grad : NULL;
	int n = x->shape.dim[0], T = rc->g.steps;
	struct dt_tensor put, back, xc, yc, dyc, dyt, dxc, dxt;

	if (!rc->mask) {
		dt_op_rnn_backward(rc->plan, x, &l->params[KERNEL].value, &l->params[RECURRENT].value, b, y, dy,
				   &l->params[KERNEL].grad, &l->params[RECURRENT].grad, db, dx);
		return;
	}
	put = rows_view(l, rc->buf + PUT, n, (int64_t)n * (rc->g.return_sequences ? T : 1), 1);
	back = rows_view(l, rc->buf + BACK, n, (int64_t)n * T, 1);
	xc = seq_view(l, rc->buf + XC, n, T, rc->g.in);
	yc = seq_view(l, rc->buf + YC, n, T, rc->g.units);
	dyc = seq_view(l, rc->buf + DYC, n, T, rc->g.units);
	dxc = seq_view(l, rc->buf + DXC, n, T, rc->g.in);
	dyt = rows_view(l, rc->buf + DYC, n, (int64_t)n * T, rc->g.units);
	dxt = rows_view(l, rc->buf + DXC, n, (int64_t)n * T, rc->g.in);
	dt_op_fill(&dyc, 0);
	dt_op_scatter_add(&put, dy, &dyt);
	dt_op_rnn_backward(rc->plan, &xc, &l->params[KERNEL].value, &l->params[RECURRENT].value, b, &yc, &dyc,
			   &l->params[KERNEL].grad, &l->params[RECURRENT].grad, db, dx ? &dxc : NULL);
	if (dx)
		dt_op_gather(&back, &dxt, dx);
}

void dt_recurrent_release(struct dt_layer *l)
{
	struct dt_recurrent *rc = l->priv;
	if (rc) {
		dt_plan_free(rc->plan);
		free(rc->host);
	}
	free(rc);
	l->priv = NULL;
}

/* The products with both kernels at every step, plus the cell's elementwise work (about 10 per gate value). */
int64_t dt_recurrent_flops(const struct dt_layer *l)
{
	const struct dt_rnn_geom *g = &((const struct dt_recurrent *)l->priv)->g;
	int64_t gu = (int64_t)dt_rnn_gates(g->cell) * g->units;
	return (int64_t)g->steps * (2 * gu * (g->in + g->units) + 10 * gu);
}

/* x reversed along axis (Slice with step -1). */
static const char *reverse_axis(struct dt_onnx *g, const char *x, int64_t axis, const char *prefix)
{
	char name[160];
	const char *in[5] = { x };
	snprintf(name, sizeof(name), "%s/rev_starts", prefix);
	in[1] = dt_onnx_int64s(g, name, 1, (int64_t[]){ -1 });
	snprintf(name, sizeof(name), "%s/rev_ends", prefix);
	in[2] = dt_onnx_int64s(g, name, 1, (int64_t[]){ INT64_MIN });
	snprintf(name, sizeof(name), "%s/rev_axes", prefix);
	in[3] = dt_onnx_int64s(g, name, 1, (int64_t[]){ axis });
	snprintf(name, sizeof(name), "%s/rev_steps", prefix);
	in[4] = dt_onnx_int64s(g, name, 1, (int64_t[]){ -1 });
	return dt_onnx_node(g, "Slice", in, 5, prefix);
}

/*
 * ONNX's RNN, LSTM or GRU (opset 13: time-major X (steps, N, in), Y (steps,
 * 1, N, units) in input order for both directions). W (1, G*units, in) and
 * R (1, G*units, units) are the kernels transposed per gate, in ONNX's gate
 * order (LSTM i, o, f, c from Keras' i, f, c, o; GRU z, r, h as Keras); B
 * (1, 2*G*units) the input then the recurrent biases (zeros where Keras has
 * one bias). go_backwards is direction "reverse", whose Y is reversed back
 * into the order Keras returns it; the last state is Y's last (or, reverse,
 * first) step.
 */
const char *dt_recurrent_export(const struct dt_layer *l, struct dt_onnx *g, const char *x)
{
	static const int lstm_order[4] = { 0, 3, 1, 2 }; /* ONNX gate q is Keras gate order[q] */
	static const int same_order[4] = { 0, 1, 2, 3 };
	const struct dt_rnn_geom *r = &((const struct dt_recurrent *)l->priv)->g;
	int G = dt_rnn_gates(r->cell), U = r->units, I = r->in, T = r->steps;
	const int *order = r->cell == DT_RNN_LSTM ? lstm_order : same_order;
	float *k = dt_onnx_param_alloc(&l->params[KERNEL]), *rk = dt_onnx_param_alloc(&l->params[RECURRENT]);
	float *bias = l->nparams > BIAS ? dt_onnx_param_alloc(&l->params[BIAS]) : NULL;
	float *W = dt_malloc((size_t)G * U * I * sizeof(float)), *R = dt_malloc((size_t)G * U * U * sizeof(float));
	float *B = dt_calloc((size_t)2 * G * U, sizeof(float));
	const char *in[4], *y;
	char name[160];
	static const int64_t to_time[3] = { 1, 0, 2 };

	for (int q = 0; q < G; q++)
		for (int j = 0; j < U; j++) {
			int col = order[q] * U + j;
			for (int i = 0; i < I; i++)
				W[((int64_t)q * U + j) * I + i] = k[(int64_t)i * G * U + col];
			for (int i = 0; i < U; i++)
				R[((int64_t)q * U + j) * U + i] = rk[(int64_t)i * G * U + col];
			if (bias) {
				B[q * U + j] = bias[col];
				if (r->cell == DT_RNN_GRU_RESET_AFTER)
					B[G * U + q * U + j] = bias[G * U + col];
			}
		}
	snprintf(name, sizeof(name), "%s/to_time_major", l->name);
	in[0] = dt_onnx_node(g, "Transpose", &x, 1, name);
	dt_onnx_attr_ints(g, "perm", 3, to_time);
	snprintf(name, sizeof(name), "%s/W", l->name);
	in[1] = dt_onnx_floats(g, name, 3, (int64_t[]){ 1, (int64_t)G * U, I }, W);
	snprintf(name, sizeof(name), "%s/R", l->name);
	in[2] = dt_onnx_floats(g, name, 3, (int64_t[]){ 1, (int64_t)G * U, U }, R);
	snprintf(name, sizeof(name), "%s/B", l->name);
	in[3] = dt_onnx_floats(g, name, 2, (int64_t[]){ 1, (int64_t)2 * G * U }, B);
	free(k);
	free(rk);
	free(bias);
	free(W);
	free(R);
	free(B);
	y = dt_onnx_node(g, r->cell == DT_RNN_SIMPLE ? "RNN" : r->cell == DT_RNN_LSTM ? "LSTM" : "GRU", in, 4,
			 l->name);
	dt_onnx_attr_int(g, "hidden_size", U);
	dt_onnx_attr_string(g, "direction", r->go_backwards ? "reverse" : "forward");
	if (r->cell == DT_RNN_SIMPLE)
		dt_onnx_attr_strings(g, "activations", 1, (const char *[]){ r->act == DT_ACT_RELU ? "Relu" : "Tanh" });
	if (r->cell == DT_RNN_GRU_RESET_AFTER)
		dt_onnx_attr_int(g, "linear_before_reset", 1);
	if (!r->return_sequences) { /* (1, 1, N, U) of the last step read, then (N, U) */
		const char *gin[2] = { y };
		snprintf(name, sizeof(name), "%s/last_step", l->name);
		gin[1] = dt_onnx_int64s(g, name, 1, (int64_t[]){ r->go_backwards ? 0 : T - 1 });
		y = dt_onnx_node(g, "Gather", gin, 2, l->name);
		return dt_onnx_reshape(g, y, &l->out, l->name);
	}
	if (r->go_backwards)
		y = reverse_axis(g, y, 0, l->name);
	snprintf(name, sizeof(name), "%s/to_batch_major", l->name);
	y = dt_onnx_node(g, "Transpose", &y, 1, name);
	dt_onnx_attr_ints(g, "perm", 4, (int64_t[]){ 2, 0, 1, 3 });
	return dt_onnx_reshape(g, y, &l->out, l->name);
}
