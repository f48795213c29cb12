/*
 * The CPU backend's recurrent plans on oneDNN's RNN primitives: vanilla RNN
 * (SimpleRNN), LSTM, GRU and linear-before-reset GRU (Keras' GRU with
 * reset_after), one layer, one direction, from a zero initial state.
 *
 * dtrain holds Keras' layout, which is oneDNN's ldigo for the kernels
 * (in, gates, units) and ldgo for the bias, in the gate order oneDNN takes
 * (LSTM i, f, c, o; GRU u = z, r, o = h); the sequences are (N, steps, C),
 * oneDNN's ntc. The primitives choose their own weight layouts
 * (format_tag_any): the kernels are reordered into them at each step and
 * the weight gradients back. What differs is mended here, at the op
 * boundary: Keras' reset_after bias (2, 3*units) holds input and recurrent
 * biases, while oneDNN's linear-before-reset bias is (4, units): z and r
 * summed, the input h bias, the recurrent h bias; go_backwards runs oneDNN
 * right to left, whose sequence output is in input order, so y (and dy) are
 * reversed in time when every step is returned, as Keras returns them.
 *
 * As dnnl.c's plans, a plan keeps primitives for CACHE_SIZE batch sizes,
 * made on first use; every buffer belongs to the plan and grows only when a
 * primitive is made.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu/ops_cpu.h"
#include "core/ops.h"

#define CACHE_SIZE 8

static dnnl_engine_t engine;
static dnnl_stream_t stream;
static dnnl_primitive_attr_t attr; /* user scratchpad */
static pthread_once_t engine_once = PTHREAD_ONCE_INIT;

/* dnnl.c's engine, stream and user-scratchpad attribute, shared by every CPU plan. */
static void engine_init(void) { dt_dnnl_shared(&engine, &stream, &attr); }

struct buf {
	float *p;
	size_t bytes;
};

static void buf_reserve(struct buf *b, size_t bytes)
{
	if (bytes <= b->bytes)
		return;
	dt_device_free(DT_CPU, b->p);
	b->p = dt_device_alloc(DT_CPU, (int64_t)((bytes + sizeof(float) - 1) / sizeof(float)));
	b->bytes = bytes;
}

static void buf_release(struct buf *b)
{
	dt_device_free(DT_CPU, b->p);
	b->p = NULL;
	b->bytes = 0;
}

static dnnl_memory_desc_t md_tag(int ndims, const dnnl_dims_t dims, dnnl_format_tag_t tag)
{
	dnnl_memory_desc_t md;
	DT_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&md, ndims, dims, dnnl_f32, tag));
	return md;
}

static void prim_free(dnnl_primitive_t *p)
{
	if (*p)
		DT_DNNL_CHECK(dnnl_primitive_destroy(*p));
	*p = NULL;
}

static size_t md_bytes(const dnnl_memory_desc_t *md) { return md ? dnnl_memory_desc_get_size(md) : 0; }

/*
 * A weight tensor as a primitive takes it: the memory object in its layout
 * (backed by a plan buffer) and the reorder from or to Keras' ldigo; both
 * NULL when the layouts agree and dtrain's tensor is bound as it is.
 */
struct weight {
	dnnl_primitive_t reorder;
	dnnl_memory_t mem;
	dnnl_memory_t scratch; /* the reorder's scratchpad (the plan's buffer), or NULL */
};

/* The memory object of pd's scratchpad, after growing the plan's buffer to fit; NULL when it needs none. */
static dnnl_memory_t scratch_mem(const_dnnl_primitive_desc_t pd, struct buf *scratch)
{
	const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
	if (md_bytes(md) == 0)
		return NULL;
	buf_reserve(scratch, md_bytes(md));
	return dt_dnnl_mem_new(md);
}

static void weight_make(struct weight *wt, const dnnl_memory_desc_t *user, const dnnl_memory_desc_t *prim,
			struct buf *b, struct buf *scratch, int to_prim)
{
	dnnl_primitive_desc_t pd;
	if (dnnl_memory_desc_equal(user, prim))
		return;
	buf_reserve(b, md_bytes(prim));
	if (to_prim)
		DT_DNNL_CHECK(dnnl_reorder_primitive_desc_create(&pd, user, engine, prim, engine, attr));
	else
		DT_DNNL_CHECK(dnnl_reorder_primitive_desc_create(&pd, prim, engine, user, engine, attr));
	wt->scratch = scratch_mem(pd, scratch);
	DT_DNNL_CHECK(dnnl_primitive_create(&wt->reorder, pd));
	DT_DNNL_CHECK(dnnl_primitive_desc_destroy(pd));
	wt->mem = dt_dnnl_mem_new(prim);
}

static void weight_free(struct weight *wt)
{
	prim_free(&wt->reorder);
	dt_dnnl_mem_free(&wt->mem);
	dt_dnnl_mem_free(&wt->scratch);
}

static void reorder_run(const struct weight *wt, dnnl_memory_t from, dnnl_memory_t to, const struct buf *scratch)
{
	dnnl_exec_arg_t args[3] = { { DNNL_ARG_FROM, from }, { DNNL_ARG_TO, to } };
	int nargs = 2;
	if (wt->scratch)
		args[nargs++] = (dnnl_exec_arg_t){ DNNL_ARG_SCRATCHPAD, dt_dnnl_bind(wt->scratch, scratch->p) };
	DT_DNNL_CHECK(dnnl_primitive_execute(wt->reorder, stream, nargs, args));
}

struct rnn_entry {
	int n;         /* batch size; 0: free */
	uint64_t used; /* clock of the last use */
	dnnl_primitive_desc_t fwd_pd;
	dnnl_primitive_t fwd, bwd;
	struct weight w_fwd, u_fwd, w_bwd, u_bwd, dw_bwd, du_bwd;
	/* data at this n, bound at each run */
	dnnl_memory_t x, seq, last, last_c, dx, dseq, dlast, dlast_c;
	dnnl_memory_t ws, fwd_scratch, bwd_scratch; /* scratchpads: the plan's buffer */
};

struct rnn_plan {
	struct dt_cpu_plan_head head;
	struct dt_rnn_geom g;
	int gates, bias_gates; /* oneDNN's bias has 4 rows for the linear-before-reset GRU */
	int max_batch;
	uint64_t clock;
	struct rnn_entry cache[CACHE_SIZE];
	dnnl_memory_desc_t w_md, u_md, b_md; /* ldigo, ldigo, ldgo */
	dnnl_memory_t w, u, dw, du, b, db;   /* the caller's kernels, the plan's biases */
	struct buf scratch, ws;
	struct buf w_fwd, u_fwd, w_bwd, u_bwd, dw_bwd, du_bwd;
	struct buf bias, dbias;              /* oneDNN's bias and its gradient */
	struct buf seq, last, last_c;        /* the outputs y does not take */
	struct buf dseq, dlast, zero_c;      /* the gradients dy does not give (zeros), reversed dy */
	struct buf dx_unused;
};

static dnnl_alg_kind_t act_alg(enum dt_activation act)
{
	return act == DT_ACT_RELU ? dnnl_eltwise_relu : dnnl_eltwise_tanh;
}

/* The rnn descriptor of p's cell for n: forward (training) or backward with every argument. */
static void rnn_desc(const struct rnn_plan *p, int n, int backward, dnnl_rnn_desc_t *d)
{
	const struct dt_rnn_geom *g = &p->g;
	dnnl_rnn_direction_t dir = g->go_backwards ? dnnl_unidirectional_right2left : dnnl_unidirectional_left2right;
	dnnl_memory_desc_t x = md_tag(3, (dnnl_dims_t){ g->steps, n, g->in }, dnnl_ntc);
	dnnl_memory_desc_t y = md_tag(3, (dnnl_dims_t){ g->steps, n, g->units }, dnnl_ntc);
	dnnl_memory_desc_t h = md_tag(4, (dnnl_dims_t){ 1, 1, n, g->units }, dnnl_ldnc);
	dnnl_memory_desc_t w = md_tag(5, (dnnl_dims_t){ 1, 1, g->in, p->gates, g->units }, dnnl_format_tag_any);
	dnnl_memory_desc_t u = md_tag(5, (dnnl_dims_t){ 1, 1, g->units, p->gates, g->units }, dnnl_format_tag_any);
	const dnnl_memory_desc_t *b = &p->b_md;

	if (!backward) {
		switch (g->cell) {
		case DT_RNN_SIMPLE:
			DT_DNNL_CHECK(dnnl_vanilla_rnn_forward_desc_init(d, dnnl_forward_training, act_alg(g->act), dir,
									 &x, NULL, &w, &u, b, &y, &h, 0, 0, 0));
			break;
		case DT_RNN_LSTM:
			DT_DNNL_CHECK(dnnl_lstm_forward_desc_init(d, dnnl_forward_training, dir, &x, NULL, NULL, &w, &u,
								  b, &y, &h, &h, 0));
			break;
		case DT_RNN_GRU:
			DT_DNNL_CHECK(dnnl_gru_forward_desc_init(d, dnnl_forward_training, dir, &x, NULL, &w, &u, b, &y,
								 &h, 0));
			break;
		case DT_RNN_GRU_RESET_AFTER:
			DT_DNNL_CHECK(dnnl_lbr_gru_forward_desc_init(d, dnnl_forward_training, dir, &x, NULL, &w, &u, b,
								     &y, &h, 0));
			break;
		}
		return;
	}
	switch (g->cell) {
	case DT_RNN_SIMPLE:
		DT_DNNL_CHECK(dnnl_vanilla_rnn_backward_desc_init(d, dnnl_backward, act_alg(g->act), dir, &x, NULL, &w,
								  &u, b, &y, &h, &x, NULL, &w, &u, b, &y, &h, 0, 0,
								  0));
		break;
	case DT_RNN_LSTM:
		DT_DNNL_CHECK(dnnl_lstm_backward_desc_init(d, dnnl_backward, dir, &x, NULL, NULL, &w, &u, b, &y, &h, &h,
							   &x, NULL, NULL, &w, &u, b, &y, &h, &h, 0));
		break;
	case DT_RNN_GRU:
		DT_DNNL_CHECK(dnnl_gru_backward_desc_init(d, dnnl_backward, dir, &x, NULL, &w, &u, b, &y, &h, &x, NULL,
							  &w, &u, b, &y, &h, 0));
		break;
	case DT_RNN_GRU_RESET_AFTER:
		DT_DNNL_CHECK(dnnl_lbr_gru_backward_desc_init(d, dnnl_backward, dir, &x, NULL, &w, &u, b, &y, &h, &x,
							      NULL, &w, &u, b, &y, &h, 0));
		break;
	}
}

static void entry_clear(struct rnn_entry *e)
{
	if (e->fwd_pd)
		DT_DNNL_CHECK(dnnl_primitive_desc_destroy(e->fwd_pd));
	e->fwd_pd = NULL;
	prim_free(&e->fwd);
	prim_free(&e->bwd);
	weight_free(&e->w_fwd);
	weight_free(&e->u_fwd);
	weight_free(&e->w_bwd);
	weight_free(&e->u_bwd);
	weight_free(&e->dw_bwd);
	weight_free(&e->du_bwd);
	dt_dnnl_mem_free(&e->x);
	dt_dnnl_mem_free(&e->seq);
	dt_dnnl_mem_free(&e->last);
	dt_dnnl_mem_free(&e->last_c);
	dt_dnnl_mem_free(&e->dx);
	dt_dnnl_mem_free(&e->dseq);
	dt_dnnl_mem_free(&e->dlast);
	dt_dnnl_mem_free(&e->dlast_c);
	dt_dnnl_mem_free(&e->ws);
	dt_dnnl_mem_free(&e->fwd_scratch);
	dt_dnnl_mem_free(&e->bwd_scratch);
	e->n = 0;
}

static struct rnn_entry *entry_find(struct rnn_plan *p, int n)
{
	struct rnn_entry *pick = NULL;
	const struct dt_rnn_geom *g = &p->g;
	dnnl_rnn_desc_t d;
	dnnl_memory_desc_t x_md, y_md, h_md;

	DT_ASSERT(n > 0 && n <= p->max_batch);
	for (int i = 0; i < CACHE_SIZE; i++) {
		struct rnn_entry *e = &p->cache[i];
		if (e->n == n) {
			e->used = ++p->clock;
			return e;
		}
		if (!pick || (pick->n && (!e->n || e->used < pick->used)))
			pick = e;
	}
	entry_clear(pick);
	pick->n = n;
	pick->used = ++p->clock;
	rnn_desc(p, n, 0, &d);
	DT_DNNL_CHECK(dnnl_primitive_desc_create(&pick->fwd_pd, &d, attr, engine, NULL));
	DT_DNNL_CHECK(dnnl_primitive_create(&pick->fwd, pick->fwd_pd));
	pick->fwd_scratch = scratch_mem(pick->fwd_pd, &p->scratch);
	buf_reserve(&p->ws, md_bytes(dnnl_primitive_desc_query_md(pick->fwd_pd, dnnl_query_workspace_md, 0)));
	pick->ws = dt_dnnl_mem_new(dnnl_primitive_desc_query_md(pick->fwd_pd, dnnl_query_workspace_md, 0));
	weight_make(&pick->w_fwd, &p->w_md, dnnl_primitive_desc_query_md(pick->fwd_pd, dnnl_query_weights_md, 0),
		    &p->w_fwd, &p->scratch, 1);
	weight_make(&pick->u_fwd, &p->u_md, dnnl_primitive_desc_query_md(pick->fwd_pd, dnnl_query_weights_md, 1),
		    &p->u_fwd, &p->scratch, 1);
	x_md = md_tag(3, (dnnl_dims_t){ g->steps, n, g->in }, dnnl_ntc);
	y_md = md_tag(3, (dnnl_dims_t){ g->steps, n, g->units }, dnnl_ntc);
	h_md = md_tag(4, (dnnl_dims_t){ 1, 1, n, g->units }, dnnl_ldnc);
	pick->x = dt_dnnl_mem_new(&x_md);
	pick->seq = dt_dnnl_mem_new(&y_md);
	pick->last = dt_dnnl_mem_new(&h_md);
	pick->dx = dt_dnnl_mem_new(&x_md);
	pick->dseq = dt_dnnl_mem_new(&y_md);
	pick->dlast = dt_dnnl_mem_new(&h_md);
	if (g->cell == DT_RNN_LSTM) {
		pick->last_c = dt_dnnl_mem_new(&h_md);
		pick->dlast_c = dt_dnnl_mem_new(&h_md);
	}
	return pick;
}

/* The backward primitive of e and its weights' reorders, made on its first backward. */
static void bwd_make(struct rnn_plan *p, struct rnn_entry *e)
{
	dnnl_rnn_desc_t d;
	dnnl_primitive_desc_t pd;

	rnn_desc(p, e->n, 1, &d);
	DT_DNNL_CHECK(dnnl_primitive_desc_create(&pd, &d, attr, engine, e->fwd_pd));
	DT_DNNL_CHECK(dnnl_primitive_create(&e->bwd, pd));
	e->bwd_scratch = scratch_mem(pd, &p->scratch);
	weight_make(&e->w_bwd, &p->w_md, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), &p->w_bwd,
		    &p->scratch, 1);
	weight_make(&e->u_bwd, &p->u_md, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 1), &p->u_bwd,
		    &p->scratch, 1);
	weight_make(&e->dw_bwd, &p->w_md, dnnl_primitive_desc_query_md(pd, dnnl_query_diff_weights_md, 0),
		    &p->dw_bwd, &p->scratch, 0);
	weight_make(&e->du_bwd, &p->u_md, dnnl_primitive_desc_query_md(pd, dnnl_query_diff_weights_md, 1),
		    &p->du_bwd, &p->scratch, 0);
	DT_DNNL_CHECK(dnnl_primitive_desc_destroy(pd));
}

struct dt_plan *dt_cpu_plan_rnn(struct dt_device dev, const struct dt_rnn_geom *g, int max_batch)
{
	struct rnn_plan *p = dt_calloc(1, sizeof(*p));
	int64_t seq = (int64_t)max_batch * g->steps * g->units, last = (int64_t)max_batch * g->units;

	DT_ASSERT(max_batch > 0 && g->steps > 0 && g->in > 0 && g->units > 0);
	pthread_once(&engine_once, engine_init);
	p->head.plan.backend = &dt_cpu_backend;
	p->head.kind = DT_CPU_PLAN_RNN;
	p->g = *g;
	p->max_batch = max_batch;
	p->gates = dt_rnn_gates(g->cell);
	p->bias_gates = g->cell == DT_RNN_GRU_RESET_AFTER ? 4 : p->gates;
	p->w_md = md_tag(5, (dnnl_dims_t){ 1, 1, g->in, p->gates, g->units }, dnnl_ldigo);
	p->u_md = md_tag(5, (dnnl_dims_t){ 1, 1, g->units, p->gates, g->units }, dnnl_ldigo);
	p->b_md = md_tag(4, (dnnl_dims_t){ 1, 1, p->bias_gates, g->units }, dnnl_ldgo);
	p->w = dt_dnnl_mem_new(&p->w_md);
	p->u = dt_dnnl_mem_new(&p->u_md);
	p->dw = dt_dnnl_mem_new(&p->w_md);
	p->du = dt_dnnl_mem_new(&p->u_md);
	buf_reserve(&p->bias, md_bytes(&p->b_md));
	buf_reserve(&p->dbias, md_bytes(&p->b_md));
	memset(p->bias.p, 0, p->bias.bytes);
	p->b = dt_dnnl_bind(dt_dnnl_mem_new(&p->b_md), p->bias.p);
	p->db = dt_dnnl_bind(dt_dnnl_mem_new(&p->b_md), p->dbias.p);
	buf_reserve(&p->seq, (size_t)seq * sizeof(float));
	buf_reserve(&p->dseq, (size_t)seq * sizeof(float));
	buf_reserve(&p->last, (size_t)last * sizeof(float));
	buf_reserve(&p->dlast, (size_t)last * sizeof(float));
	buf_reserve(&p->dx_unused, (size_t)max_batch * g->steps * g->in * sizeof(float));
	if (g->cell == DT_RNN_LSTM) {
		buf_reserve(&p->last_c, (size_t)last * sizeof(float));
		buf_reserve(&p->zero_c, (size_t)last * sizeof(float));
		memset(p->zero_c.p, 0, p->zero_c.bytes);
	}
	return &p->head.plan;
}

void dt_cpu_rnn_plan_free(struct dt_plan *pl)
{
	struct rnn_plan *p = (struct rnn_plan *)pl;
	struct buf *bufs[] = { &p->scratch, &p->ws, &p->w_fwd, &p->u_fwd, &p->w_bwd, &p->u_bwd, &p->dw_bwd,
			       &p->du_bwd, &p->bias, &p->dbias, &p->seq, &p->last, &p->last_c, &p->dseq,
			       &p->dlast, &p->zero_c, &p->dx_unused };
	for (int i = 0; i < CACHE_SIZE; i++)
		entry_clear(&p->cache[i]);
	dt_dnnl_mem_free(&p->w);
	dt_dnnl_mem_free(&p->u);
	dt_dnnl_mem_free(&p->dw);
	dt_dnnl_mem_free(&p->du);
	dt_dnnl_mem_free(&p->b);
	dt_dnnl_mem_free(&p->db);
	for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
		buf_release(bufs[i]);
	free(p);
}

/* dst (n, steps, c) = src with its steps in reverse order. */
static void reverse_steps(const float *src, float *dst, int n, int steps, int c)
{
	for (int i = 0; i < n; i++)
		for (int t = 0; t < steps; t++)
			memcpy(dst + ((int64_t)i * steps + t) * c, src + ((int64_t)i * steps + steps - 1 - t) * c,
			       (size_t)c * sizeof(float));
}

/* Keras' bias into oneDNN's (see the top). */
static void bias_in(struct rnn_plan *p, const struct dt_tensor *b)
{
	int u = p->g.units;
	float *o = p->bias.p;
	if (!b)
		return; /* zeros since the plan was made */
	if (p->g.cell != DT_RNN_GRU_RESET_AFTER) {
		memcpy(o, b->data, (size_t)p->gates * u * sizeof(float));
		return;
	}
	for (int j = 0; j < 2 * u; j++)
		o[j] = b->data[j] + b->data[3 * u + j];
	memcpy(o + 2 * u, b->data + 2 * u, (size_t)u * sizeof(float));
	memcpy(o + 3 * u, b->data + 5 * u, (size_t)u * sizeof(float));
}

static void bias_out(const struct rnn_plan *p, struct dt_tensor *db)
{
	int u = p->g.units;
	const float *d = p->dbias.p;
	if (!db)
		return;
	if (p->g.cell != DT_RNN_GRU_RESET_AFTER) {
		memcpy(db->data, d, (size_t)p->gates * u * sizeof(float));
		return;
	}
	memcpy(db->data, d, (size_t)3 * u * sizeof(float));
	memcpy(db->data + 3 * u, d, (size_t)2 * u * sizeof(float));
	memcpy(db->data + 5 * u, d + 3 * u, (size_t)u * sizeof(float));
}

/* The memory a kernel is bound as for a primitive: reordered into its layout, or dtrain's tensor as is. */
static dnnl_memory_t weight_in(const struct weight *wt, const struct buf *b, dnnl_memory_t user, const float *data,
			       const struct buf *scratch)
{
	dt_dnnl_bind(user, data);
	if (!wt->mem)
		return user;
	dt_dnnl_bind(wt->mem, b->p);
	reorder_run(wt, user, wt->mem, scratch);
	return wt->mem;
}

void dt_cpu_rnn_forward(struct dt_plan *pl, int training, const struct dt_tensor *x, const struct dt_tensor *w,
			const struct dt_tensor *u, const struct dt_tensor *b, struct dt_tensor *y)
{
	struct rnn_plan *p = (struct rnn_plan *)pl;
	const struct dt_rnn_geom *g = &p->g;
	int n = x->shape.dim[0], nargs = 0;
	struct rnn_entry *e = entry_find(p, n);
	int direct = g->return_sequences && !g->go_backwards; /* y is oneDNN's dst_layer as it is */
	dnnl_exec_arg_t args[12];

	(void)training; /* the training primitive serves inference too: its workspace is the plan's */
	bias_in(p, b);
	args[nargs++] = (dnnl_exec_arg_t){ DNNL_ARG_SRC_LAYER, dt_dnnl_bind(e->x, x->data) };
	args[nargs++] = (dnnl_exec_arg_t){ DNNL_ARG_WEIGHTS_LAYER, weight_in(&e->w_fwd, &p->w_fwd, p->w, w->data, &p->scratch) };
	args[nargs++] = (dnnl_exec_arg_t){ DNNL_ARG_WEIGHTS_ITER, weight_in(&e->u_fwd, &p->u_fwd, p->u, u->data, &p->scratch) };
	args[nargs++] = (dnnl_exec_arg_t){ DNNL_ARG_BIAS, p->b };
	args[nargs++] = (dnnl_exec_arg_t){ DNNL_ARG_DST_LAYER, dt_dnnl_bind(e->seq, direct ? y->data : p->seq.p) };
	args[nargs++] = (dnnl_exec_arg_t){ DNNL_ARG_DST_ITER, dt_dnnl_bind(e->last, g->return_sequences ? p->last.p : y->data) };
	if (e->last_c)
		args[nargs++] = (dnnl_exec_arg_t){ DNNL_ARG_DST_ITER_C, dt_dnnl_bind(e->last_c, p->last_c.p) };
	if (e->ws)
		args[nargs++] = (dnnl_exec_arg_t){ DNNL_ARG_WORKSPACE, dt_dnnl_bind(e->ws, p->ws.p) };
	if (e->fwd_scratch)
		args[nargs++] = (dnnl_exec_arg_t){ DNNL_ARG_SCRATCHPAD, dt_dnnl_bind(e->fwd_scratch, p->scratch.p) };
	DT_DNNL_CHECK(dnnl_primitive_execute(e->fwd, stream, nargs, args));
	if (g->return_sequences && g->go_backwards)
		reverse_steps(p->seq.p, y->data, n, g->steps, g->units);
}

void dt_cpu_rnn_backward(struct dt_plan *pl, const struct dt_tensor *x, const struct dt_tensor *w,
			 const struct dt_tensor *u, const struct dt_tensor *b, const struct dt_tensor *y,
			 const struct dt_tensor *dy, struct dt_tensor *dw, struct dt_tensor *du, struct dt_tensor *db,
			 struct dt_tensor *dx)
{
	struct rnn_plan *p = (struct rnn_plan *)pl;
	const struct dt_rnn_geom *g = &p->g;
	int n = x->shape.dim[0], nargs = 0;
	struct rnn_entry *e = entry_find(p, n);
	int direct = g->return_sequences && !g->go_backwards;
	int64_t seq = (int64_t)n * g->steps * g->units, last = (int64_t)n * g->units;
	dnnl_memory_t dwm, dum;
	dnnl_exec_arg_t args[20];
	const float *dseq, *dlast;

	if (!e->bwd)
		bwd_make(p, e);
	if (g->return_sequences) {
		if (g->go_backwards)
			reverse_steps(dy->data, p->dseq.p, n, g->steps, g->units);
		dseq = direct ? dy->data : p->dseq.p;
		memset(p->dlast.p, 0, (size_t)last * sizeof(float));
		dlast = p->dlast.p;
	} else {
		memset(p->dseq.p, 0, (size_t)seq * sizeof(float));
		dseq = p->dseq.p;
		dlast = dy->data;
	}
	/* oneDNN adds to the weight gradients: they start at zero */
	if (e->dw_bwd.mem) {
		dwm = dt_dnnl_bind(e->dw_bwd.mem, p->dw_bwd.p);
		memset(p->dw_bwd.p, 0, p->dw_bwd.bytes);
	} else {
		dwm = dt_dnnl_bind(p->dw, dw->data);
		memset(dw->data, 0, (size_t)dt_tensor_count(dw) * sizeof(float));
	}
	if (e->du_bwd.mem) {
		dum = dt_dnnl_bind(e->du_bwd.mem, p->du_bwd.p);
		memset(p->du_bwd.p, 0, p->du_bwd.bytes);
	} else {
		dum = dt_dnnl_bind(p->du, du->data);
		memset(du->data, 0, (size_t)dt_tensor_count(du) * sizeof(float));
	}
	memset(p->dbias.p, 0, p->dbias.bytes);
	bias_in(p, b);

	args[nargs++] = (dnnl_exec_arg_t){ DNNL_ARG_SRC_LAYER, dt_dnnl_bind(e->x, x->data) };
	args[nargs++] = (dnnl_exec_arg_t){ DNNL_ARG_WEIGHTS_LAYER, weight_in(&e->w_bwd, &p->w_bwd, p->w, w->data, &p->scratch) };
	args[nargs++] = (dnnl_exec_arg_t){ DNNL_ARG_WEIGHTS_ITER, weight_in(&e->u_bwd, &p->u_bwd, p->u, u->data, &p->scratch) };
	args[nargs++] = (dnnl_exec_arg_t){ DNNL_ARG_BIAS, p->b };
	args[nargs++] = (dnnl_exec_arg_t){ DNNL_ARG_DST_LAYER, dt_dnnl_bind(e->seq, direct ? y->data : p->seq.p) };
	args[nargs++] = (dnnl_exec_arg_t){ DNNL_ARG_DST_ITER, dt_dnnl_bind(e->last, g->return_sequences ? p->last.p : y->data) };
	args[nargs++] = (dnnl_exec_arg_t){ DNNL_ARG_DIFF_DST_LAYER, dt_dnnl_bind(e->dseq, dseq) };
	args[nargs++] = (dnnl_exec_arg_t){ DNNL_ARG_DIFF_DST_ITER, dt_dnnl_bind(e->dlast, dlast) };
	if (e->last_c) {
		args[nargs++] = (dnnl_exec_arg_t){ DNNL_ARG_DST_ITER_C, dt_dnnl_bind(e->last_c, p->last_c.p) };
		args[nargs++] = (dnnl_exec_arg_t){ DNNL_ARG_DIFF_DST_ITER_C, dt_dnnl_bind(e->dlast_c, p->zero_c.p) };
	}
	if (e->ws)
		args[nargs++] = (dnnl_exec_arg_t){ DNNL_ARG_WORKSPACE, dt_dnnl_bind(e->ws, p->ws.p) };
	args[nargs++] = (dnnl_exec_arg_t){ DNNL_ARG_DIFF_SRC_LAYER, dt_dnnl_bind(e->dx, dx ? dx->data : p->dx_unused.p) };
	args[nargs++] = (dnnl_exec_arg_t){ DNNL_ARG_DIFF_WEIGHTS_LAYER, dwm };
	args[nargs++] = (dnnl_exec_arg_t){ DNNL_ARG_DIFF_WEIGHTS_ITER, dum };
	args[nargs++] = (dnnl_exec_arg_t){ DNNL_ARG_DIFF_BIAS, p->db };
	if (e->bwd_scratch)
		args[nargs++] = (dnnl_exec_arg_t){ DNNL_ARG_SCRATCHPAD, dt_dnnl_bind(e->bwd_scratch, p->scratch.p) };
	DT_DNNL_CHECK(dnnl_primitive_execute(e->bwd, stream, nargs, args));
	if (e->dw_bwd.mem)
		reorder_run(&e->dw_bwd, e->dw_bwd.mem, dt_dnnl_bind(p->dw, dw->data), &p->scratch);
	if (e->du_bwd.mem)
		reorder_run(&e->du_bwd, e->du_bwd.mem, dt_dnnl_bind(p->du, du->data), &p->scratch);
	if (g->use_bias)
		bias_out(p, db);
}

/* ---- Bidirectional's merge ---- */

void dt_cpu_rnn_merge(enum dt_rnn_merge mode, int steps, const struct dt_tensor *yf, const struct dt_tensor *yb,
		      struct dt_tensor *y)
{
	int64_t rows = dt_tensor_count(yf), n = yf->shape.dim[0], u = rows / (n * steps);
#pragma omp parallel for collapse(2) if (rows > 65536)
	for (int64_t i = 0; i < n; i++)
		for (int t = 0; t < steps; t++) {
			const float *f = yf->data + (i * steps + t) * u, *b = yb->data + (i * steps + steps - 1 - t) * u;
			float *o = y->data + (i * steps + t) * u * (mode == DT_RNN_MERGE_CONCAT ? 2 : 1);
			for (int64_t j = 0; j < u; j++)
				switch (mode) {
				case DT_RNN_MERGE_CONCAT:
					o[j] = f[j];
					o[u + j] = b[j];
					break;
				case DT_RNN_MERGE_SUM:
					o[j] = f[j] + b[j];
					break;
				case DT_RNN_MERGE_MUL:
					o[j] = f[j] * b[j];
					break;
				case DT_RNN_MERGE_AVE:
					o[j] = 0.5f * (f[j] + b[j]);
					break;
				}
		}
}

void dt_cpu_rnn_merge_backward(enum dt_rnn_merge mode, int steps, const struct dt_tensor *dy,
			       const struct dt_tensor *yf, const struct dt_tensor *yb, struct dt_tensor *dyf,
			       struct dt_tensor *dyb)
{
	int64_t rows = dt_tensor_count(yf), n = yf->shape.dim[0], u = rows / (n * steps);
#pragma omp parallel for collapse(2) if (rows > 65536)
	for (int64_t i = 0; i < n; i++)
		for (int t = 0; t < steps; t++) {
			int64_t fo = (i * steps + t) * u, bo = (i * steps + steps - 1 - t) * u;
			const float *d = dy->data + fo * (mode == DT_RNN_MERGE_CONCAT ? 2 : 1);
			for (int64_t j = 0; j < u; j++)
				switch (mode) {
				case DT_RNN_MERGE_CONCAT:
					dyf->data[fo + j] = d[j];
					dyb->data[bo + j] = d[u + j];
					break;
				case DT_RNN_MERGE_SUM:
					dyf->data[fo + j] = d[j];
					dyb->data[bo + j] = d[j];
					break;
				case DT_RNN_MERGE_MUL:
					dyf->data[fo + j] = d[j] * yb->data[bo + j];
					dyb->data[bo + j] = d[j] * yf->data[fo + j];
					break;
				case DT_RNN_MERGE_AVE:
					dyf->data[fo + j] = 0.5f * d[j];
					dyb->data[bo + j] = 0.5f * d[j];
					break;
				}
		}
}
