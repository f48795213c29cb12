/*
 * The CUDA backend's recurrent plans on cuDNN's RNN API (cudnnRNNForward,
 * cudnnRNNBackwardData_v8, cudnnRNNBackwardWeights_v8): SimpleRNN (RNN_TANH,
 * RNN_RELU), LSTM and GRU with reset_after (cuDNN's GRU is that one; the
 * original GRU, reset_after: false, has no cuDNN cell and the layer refuses
 * the GPU for it). One layer, one direction, zero initial state; the
 * sequences are batch-major (N, steps, C) as dtrain's tensors.
 *
 * cuDNN keeps the weights in one weight space of per-gate matrices (units,
 * in) and biases, at offsets cudnnGetRNNWeightParams gives (read once per
 * plan): the Keras kernels (in, G*units) are scattered into it at each step
 * and the weight gradients gathered back, mapping Keras' gate order to
 * cuDNN's (LSTM i, f, c, o as is; GRU z, r, h to cuDNN's r, z, h). The bias
 * mode is cuDNN's single input bias for SimpleRNN and LSTM and double bias
 * for GRU, Keras' (2, 3*units) rows. go_backwards reverses x in time into a
 * plan buffer (and dx back): cuDNN's y is then in Keras' go_backwards
 * order as it is. The training forward's reserve space, the workspace and
 * the device sequence lengths belong to a per-batch-size entry, taken from
 * the allocator when a size is first used.
 */
#include <stdlib.h>
#include <string.h>

#include "core/cuda/ops_cuda.h"

#define CACHE_SIZE 8
#define MAX_IDS 8 /* cuDNN's linear layers of a cell: 2 per gate */

/* Mirrors the head of dnn.cu's struct cuda_plan, so that dt_cuda_plan_free finds the kind. */
struct rnn_plan_head {
	struct dt_plan head;
	int kind; /* DT_CUDA_PLAN_RNN */
	struct dt_device dev;
};

struct rnn_entry {
	int n;
	uint64_t used;
	cudnnRNNDataDescriptor_t xd, yd;
	cudnnTensorDescriptor_t hd;
	int32_t *seq_lens; /* n device ints, all steps */
	size_t ws_bytes, reserve_bytes;
	float *ws, *reserve;
};

struct rnn_plan {
	struct rnn_plan_head h;
	struct dt_rnn_geom g;
	int gates, max_batch;
	uint64_t clock;
	cudnnRNNDescriptor_t rnn;
	cudnnDropoutDescriptor_t dropout;
	float *dropout_states;
	size_t wspace_bytes;
	float *wspace, *dwspace;
	int ids;
	int64_t m_off[MAX_IDS], b_off[MAX_IDS]; /* floats into the weight space; b_off -1: no bias there */
	int keras_gate[MAX_IDS];                  /* the Keras gate of each linear layer */
	int recurrent[MAX_IDS];                   /* 0: input matrix (in, ...), 1: recurrent (units, ...) */
	float *xr, *dxr;                          /* x reversed in time (go_backwards); dx before its reversal, or unused */
	float *seq, *dseq;                        /* the sequence y does not take, its zero gradient */
	float *last_c;
	struct rnn_entry cache[CACHE_SIZE];
};

static float *alloc_bytes(int dev, size_t bytes)
{
	return bytes ? dt_cuda_alloc(dev, (int64_t)((bytes + sizeof(float) - 1) / sizeof(float))) : NULL;
}

static void free_maybe(int dev, float *p)
{
	if (p)
		dt_cuda_free(dev, p);
}

/* dst (n, steps, c) = src with its steps in reverse order. */
__global__ void k_reverse_steps(const float *src, float *dst, int64_t n, int steps, int c)
{
	GRID_LOOP(i, n * steps * c)
	{
		int64_t ch = i % c, rest = i / c;
		int t = (int)(rest % steps);
		int64_t b = rest / steps;
		dst[i] = src[(b * steps + steps - 1 - t) * c + ch];
	}
}

/* to_space: space[off + j*k + i] = m[i*gu + col + j] (j < units, i < k); else the reverse. */
__global__ void k_weight(float *space, float *m, int64_t off, int k, int gu, int col, int units, int to_space)
{
	GRID_LOOP(e, (int64_t)k * units)
	{
		int64_t j = e / k, i = e % k;
		if (to_space)
			space[off + e] = m[i * gu + col + j];
		else
			m[i * gu + col + j] = space[off + e];
	}
}

__global__ void k_bias(float *space, float *b, int64_t off, int64_t at, int units, int to_space)
{
	GRID_LOOP(j, units)
	{
		if (to_space)
			space[off + j] = b[at + j];
		else
			b[at + j] = space[off + j];
	}
}

__global__ void k_set_int(int32_t *p, int64_t n, int32_t v)
{
	GRID_LOOP(i, n) p[i] = v;
}

static cudnnRNNMode_t cell_mode(const struct dt_rnn_geom *g)
{
	switch (g->cell) {
	case DT_RNN_SIMPLE:
		return g->act == DT_ACT_RELU ? CUDNN_RNN_RELU : CUDNN_RNN_TANH;
	case DT_RNN_LSTM:
		return CUDNN_LSTM;
	default:
		return CUDNN_GRU;
	}
}

struct dt_plan *dt_cuda_plan_rnn(struct dt_device dev, const struct dt_rnn_geom *g, int max_batch)
{
	struct dt_gpu *gpu;
	struct rnn_plan *p;
	size_t states;
	cudnnTensorDescriptor_t md, bd;
	static const int gru_gate[3] = { 1, 0, 2 }; /* cuDNN r, z, h -> Keras z, r, h */
	int64_t seq = (int64_t)max_batch * g->steps * g->units;

	if (g->cell == DT_RNN_GRU) /* reset_after: false has no cuDNN cell */
		return NULL;
	gpu = dt_gpu_use(dev);
	p = (struct rnn_plan *)calloc(1, sizeof(*p));
	DT_CUDA_ASSERT(p && max_batch > 0);
	p->h.head.backend = &dt_cuda_backend;
	p->h.kind = DT_CUDA_PLAN_RNN;
	p->h.dev = dev;
	p->g = *g;
	p->max_batch = max_batch;
	p->gates = g->cell == DT_RNN_SIMPLE ? 1 : g->cell == DT_RNN_LSTM ? 4 : 3;

	DT_CUDNN_CHECK(cudnnCreateDropoutDescriptor(&p->dropout));
	DT_CUDNN_CHECK(cudnnDropoutGetStatesSize(gpu->dnn, &states));
	p->dropout_states = alloc_bytes(dev.index, states);
	DT_CUDNN_CHECK(cudnnSetDropoutDescriptor(p->dropout, gpu->dnn, 0.0f, p->dropout_states, states, 0));
	DT_CUDNN_CHECK(cudnnCreateRNNDescriptor(&p->rnn));
	DT_CUDNN_CHECK(cudnnSetRNNDescriptor_v8(
		p->rnn, CUDNN_RNN_ALGO_STANDARD, cell_mode(g),
		!g->use_bias ? CUDNN_RNN_NO_BIAS : g->cell == DT_RNN_GRU_RESET_AFTER ? CUDNN_RNN_DOUBLE_BIAS
										    : CUDNN_RNN_SINGLE_INP_BIAS,
		CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT,
		dt_cuda_precision() == DT_PRECISION_FP32 ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH, g->in, g->units,
		g->units, 1, p->dropout, CUDNN_RNN_PADDED_IO_ENABLED));
	DT_CUDNN_CHECK(cudnnGetRNNWeightSpaceSize(gpu->dnn, p->rnn, &p->wspace_bytes));
	p->wspace = alloc_bytes(dev.index, p->wspace_bytes);
	p->dwspace = alloc_bytes(dev.index, p->wspace_bytes);

	p->ids = 2 * p->gates;
	DT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&md));
	DT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&bd));
	for (int id = 0; id < p->ids; id++) {
		void *m = NULL, *b = NULL;
		int q = id % p->gates;
		DT_CUDNN_CHECK(cudnnGetRNNWeightParams(gpu->dnn, p->rnn, 0, p->wspace_bytes, p->wspace, id, md, &m, bd,
						       &b));
		DT_CUDA_ASSERT(m);
		p->m_off[id] = (float *)m - p->wspace;
		p->b_off[id] = b ? (float *)b - p->wspace : -1;
		p->keras_gate[id] = g->cell == DT_RNN_GRU_RESET_AFTER ? gru_gate[q] : q;
		p->recurrent[id] = id >= p->gates;
	}
	DT_CUDNN_CHECK(cudnnDestroyTensorDescriptor(md));
	DT_CUDNN_CHECK(cudnnDestroyTensorDescriptor(bd));
	if (g->go_backwards)
		p->xr = dt_cuda_alloc(dev.index, (int64_t)max_batch * g->steps * g->in);
	p->dxr = dt_cuda_alloc(dev.index, (int64_t)max_batch * g->steps * g->in);
	p->seq = dt_cuda_alloc(dev.index, seq);
	p->dseq = dt_cuda_alloc(dev.index, seq); /* zeros: the allocator zeroes */
	p->last_c = dt_cuda_alloc(dev.index, (int64_t)max_batch * g->units);
	return &p->h.head;
}

static void entry_clear(struct rnn_plan *p, struct rnn_entry *e)
{
	int dev = p->h.dev.index;
	if (!e->n)
		return;
	DT_CUDNN_CHECK(cudnnDestroyRNNDataDescriptor(e->xd));
	DT_CUDNN_CHECK(cudnnDestroyRNNDataDescriptor(e->yd));
	DT_CUDNN_CHECK(cudnnDestroyTensorDescriptor(e->hd));
	free_maybe(dev, (float *)e->seq_lens);
	free_maybe(dev, e->ws);
	free_maybe(dev, e->reserve);
	memset(e, 0, sizeof(*e));
}

void dt_cuda_rnn_plan_free(struct dt_plan *pl)
{
	struct rnn_plan *p = (struct rnn_plan *)pl;
	int dev = p->h.dev.index;
	dt_gpu_use(p->h.dev);
	for (int i = 0; i < CACHE_SIZE; i++)
		entry_clear(p, &p->cache[i]);
	DT_CUDNN_CHECK(cudnnDestroyRNNDescriptor(p->rnn));
	DT_CUDNN_CHECK(cudnnDestroyDropoutDescriptor(p->dropout));
	free_maybe(dev, p->dropout_states);
	free_maybe(dev, p->wspace);
	free_maybe(dev, p->dwspace);
	free_maybe(dev, p->xr);
	free_maybe(dev, p->dxr);
	free_maybe(dev, p->seq);
	free_maybe(dev, p->dseq);
	free_maybe(dev, p->last_c);
	free(p);
}

static struct rnn_entry *entry_find(struct rnn_plan *p, struct dt_gpu *gpu, int n)
{
	struct rnn_entry *pick = NULL;
	const struct dt_rnn_geom *g = &p->g;
	int *lens;
	int dims[3] = { 1, n, g->units }, strides[3] = { n * g->units, g->units, 1 };

	DT_CUDA_ASSERT(n > 0 && n <= p->max_batch);
	for (int i = 0; i < CACHE_SIZE; i++) {
		struct rnn_entry *e = &p->cache[i];
		if (e->n == n) {
			e->used = ++p->clock;
			return e;
		}
		if (!pick || (pick->n && (!e->n || e->used < pick->used)))
			pick = e;
	}
	entry_clear(p, pick);
	pick->n = n;
	pick->used = ++p->clock;
	lens = (int *)malloc((size_t)n * sizeof(int));
	DT_CUDA_ASSERT(lens);
	for (int i = 0; i < n; i++)
		lens[i] = g->steps;
	DT_CUDNN_CHECK(cudnnCreateRNNDataDescriptor(&pick->xd));
	DT_CUDNN_CHECK(cudnnCreateRNNDataDescriptor(&pick->yd));
	DT_CUDNN_CHECK(cudnnSetRNNDataDescriptor(pick->xd, CUDNN_DATA_FLOAT, CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED,
						 g->steps, n, g->in, lens, NULL));
	DT_CUDNN_CHECK(cudnnSetRNNDataDescriptor(pick->yd, CUDNN_DATA_FLOAT, CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED,
						 g->steps, n, g->units, lens, NULL));
	free(lens);
	DT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&pick->hd));
	DT_CUDNN_CHECK(cudnnSetTensorNdDescriptor(pick->hd, CUDNN_DATA_FLOAT, 3, dims, strides));
	pick->seq_lens = (int32_t *)dt_cuda_alloc(p->h.dev.index, n);
	k_set_int LAUNCH(gpu, n)(pick->seq_lens, n, g->steps);
	DT_CUDA_LAUNCH_CHECK();
	DT_CUDNN_CHECK(cudnnGetRNNTempSpaceSizes(gpu->dnn, p->rnn, CUDNN_FWD_MODE_TRAINING, pick->xd, &pick->ws_bytes,
						 &pick->reserve_bytes));
	pick->ws = alloc_bytes(p->h.dev.index, pick->ws_bytes);
	pick->reserve = alloc_bytes(p->h.dev.index, pick->reserve_bytes);
	return pick;
}

/* Keras' kernels and bias into the weight space (to_space), or the gradients' space back into them. */
static void weights_move(struct rnn_plan *p, struct dt_gpu *gpu, float *space, float *w, float *u, float *b,
			 int to_space)
{
	const struct dt_rnn_geom *g = &p->g;
	int gu = p->gates * g->units;
	for (int id = 0; id < p->ids; id++) {
		int k = p->recurrent[id] ? g->units : g->in, col = p->keras_gate[id] * g->units;
		int64_t n = (int64_t)k * g->units;
		k_weight LAUNCH(gpu, n)(space, p->recurrent[id] ? u : w, p->m_off[id], k, gu, col, g->units, to_space);
		DT_CUDA_LAUNCH_CHECK();
		if (b && p->b_off[id] >= 0 && (!p->recurrent[id] || g->cell == DT_RNN_GRU_RESET_AFTER)) {
			/* GRU: the recurrent linear layers take Keras' second bias row */
			int64_t at = (p->recurrent[id] ? gu : 0) + col;
			k_bias LAUNCH(gpu, g->units)(space, b, p->b_off[id], at, g->units, to_space);
			DT_CUDA_LAUNCH_CHECK();
		}
	}
}

void dt_cuda_rnn_forward(struct dt_plan *pl, int training, const struct dt_tensor *x,
				    const struct dt_tensor *w, const struct dt_tensor *u, const struct dt_tensor *b,
				    struct dt_tensor *y)
{
	struct rnn_plan *p = (struct rnn_plan *)pl;
	const struct dt_rnn_geom *g = &p->g;
	struct dt_gpu *gpu = dt_gpu_use(x->dev);
	int n = (int)t_rows(x);
	struct rnn_entry *e = entry_find(p, gpu, n);
	const float *xin = x->data;
	float *yseq = g->return_sequences ? y->data : p->seq, *hy = g->return_sequences ? NULL : y->data;

	(void)training; /* always the training mode: the reserve space is the plan's */
	if (g->go_backwards) {
		int64_t c = (int64_t)n * g->steps * g->in;
		k_reverse_steps LAUNCH(gpu, c)(x->data, p->xr, n, g->steps, g->in);
		DT_CUDA_LAUNCH_CHECK();
		xin = p->xr;
	}
	weights_move(p, gpu, p->wspace, w->data, u->data, b ? b->data : NULL, 1);
	DT_CUDNN_CHECK(cudnnRNNForward(gpu->dnn, p->rnn, CUDNN_FWD_MODE_TRAINING, e->seq_lens, e->xd, xin, e->yd, yseq,
				       e->hd, NULL, hy, e->hd, NULL, g->cell == DT_RNN_LSTM ? p->last_c : NULL,
				       p->wspace_bytes, p->wspace, e->ws_bytes, e->ws, e->reserve_bytes, e->reserve));
}

void dt_cuda_rnn_backward(struct dt_plan *pl, const struct dt_tensor *x, const struct dt_tensor *w,
				     const struct dt_tensor *u, const struct dt_tensor *b, const struct dt_tensor *y,
				     const struct dt_tensor *dy, struct dt_tensor *dw, struct dt_tensor *du,
				     struct dt_tensor *db, struct dt_tensor *dx)
{
	struct rnn_plan *p = (struct rnn_plan *)pl;
	const struct dt_rnn_geom *g = &p->g;
	struct dt_gpu *gpu = dt_gpu_use(x->dev);
	int n = (int)t_rows(x);
	struct rnn_entry *e = entry_find(p, gpu, n);
	const float *xin = g->go_backwards ? p->xr : x->data;
	const float *yseq = g->return_sequences ? y->data : p->seq;
	const float *dyseq = g->return_sequences ? dy->data : p->dseq, *dhy = g->return_sequences ? NULL : dy->data;
	float *dxo = g->go_backwards || !dx ? p->dxr : dx->data;

	DT_CUDNN_CHECK(cudnnRNNBackwardData_v8(gpu->dnn, p->rnn, e->seq_lens, e->yd, yseq, dyseq, e->xd, dxo, e->hd,
					       NULL, dhy, NULL, e->hd, NULL, NULL, NULL, p->wspace_bytes, p->wspace,
					       e->ws_bytes, e->ws, e->reserve_bytes, e->reserve));
	DT_CUDA_CHECK(cudaMemsetAsync(p->dwspace, 0, p->wspace_bytes, gpu->stream)); /* cuDNN adds */
	DT_CUDNN_CHECK(cudnnRNNBackwardWeights_v8(gpu->dnn, p->rnn, CUDNN_WGRAD_MODE_ADD, e->seq_lens, e->xd, xin,
						  e->hd, NULL, e->yd, yseq, p->wspace_bytes, p->dwspace, e->ws_bytes,
						  e->ws, e->reserve_bytes, e->reserve));
	weights_move(p, gpu, p->dwspace, dw->data, du->data, g->use_bias && db ? db->data : NULL, 0);
	if (g->go_backwards && dx) {
		int64_t c = (int64_t)n * g->steps * g->in;
		k_reverse_steps LAUNCH(gpu, c)(p->dxr, dx->data, n, g->steps, g->in);
		DT_CUDA_LAUNCH_CHECK();
	}
	(void)b;
}

/* ---- Bidirectional's merge: the CPU's loops (core/cpu/rnn.c) as one kernel each ---- */

__global__ void k_merge(int mode, int64_t n, int steps, int64_t u, const float *yf, const float *yb, float *y)
{
	GRID_LOOP(e, n * steps * u)
	{
		int64_t j = e % u, rest = e / u;
		int t = (int)(rest % steps);
		int64_t i = rest / steps;
		float f = yf[e], b = yb[(i * steps + steps - 1 - t) * u + j];
		switch (mode) {
		case DT_RNN_MERGE_CONCAT:
			y[rest * 2 * u + j] = f;
			y[rest * 2 * u + u + j] = b;
			break;
		case DT_RNN_MERGE_SUM:
			y[e] = f + b;
			break;
		case DT_RNN_MERGE_MUL:
			y[e] = f * b;
			break;
		default:
			y[e] = 0.5f * (f + b);
		}
	}
}

__global__ void k_merge_backward(int mode, int64_t n, int steps, int64_t u, const float *dy, const float *yf,
				 const float *yb, float *dyf, float *dyb)
{
	GRID_LOOP(e, n * steps * u)
	{
		int64_t j = e % u, rest = e / u;
		int t = (int)(rest % steps);
		int64_t i = rest / steps, bo = (i * steps + steps - 1 - t) * u + j;
		switch (mode) {
		case DT_RNN_MERGE_CONCAT:
			dyf[e] = dy[rest * 2 * u + j];
			dyb[bo] = dy[rest * 2 * u + u + j];
			break;
		case DT_RNN_MERGE_SUM:
			dyf[e] = dy[e];
			dyb[bo] = dy[e];
			break;
		case DT_RNN_MERGE_MUL:
			dyf[e] = dy[e] * yb[bo];
			dyb[bo] = dy[e] * yf[e];
			break;
		default:
			dyf[e] = 0.5f * dy[e];
			dyb[bo] = 0.5f * dy[e];
		}
	}
}

void dt_cuda_rnn_merge(enum dt_rnn_merge mode, int steps, const struct dt_tensor *yf,
				  const struct dt_tensor *yb, struct dt_tensor *y)
{
	struct dt_gpu *gpu = dt_gpu_use(y->dev);
	int64_t n = t_rows(yf), total = t_count(yf), u = total / (n * steps);
	k_merge LAUNCH(gpu, total)((int)mode, n, steps, u, yf->data, yb->data, y->data);
	DT_CUDA_LAUNCH_CHECK();
}

void dt_cuda_rnn_merge_backward(enum dt_rnn_merge mode, int steps, const struct dt_tensor *dy,
					   const struct dt_tensor *yf, const struct dt_tensor *yb,
					   struct dt_tensor *dyf, struct dt_tensor *dyb)
{
	struct dt_gpu *gpu = dt_gpu_use(dy->dev);
	int64_t n = t_rows(yf), total = t_count(yf), u = total / (n * steps);
	k_merge_backward LAUNCH(gpu, total)((int)mode, n, steps, u, dy->data, yf->data, yb->data, dyf->data,
					     dyb->data);
	DT_CUDA_LAUNCH_CHECK();
}
