/*
 * Layer normalization on the CPU: oneDNN's layer normalization primitive over
 * the last dimension of x (N, ..., C), seen as a 2-d (rows, C) tensor with
 * rows = N x the positions of a sample. Keras' LayerNormalization: per row,
 * y = (x - mean) / sqrt(var + epsilon) * gamma + beta with the biased
 * variance, the same in training and inference.
 *
 * As dnnl.c's plans: a primitive is made for one batch size and the plan
 * keeps CACHE_SIZE of them (least recently used out); the statistics of the
 * last forward, the scratchpad (user mode) and the stand-ins for an absent
 * gamma, beta or dx belong to the plan, sized when it is made, never in a step.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu/ops_cpu.h"

#define CACHE_SIZE 8

static dnnl_engine_t engine;
static dnnl_stream_t stream;
static dnnl_primitive_attr_t attr;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* dnnl.c's engine, stream and user-scratchpad attribute, shared by every CPU plan. */
static void engine_init(void) { dt_dnnl_shared(&engine, &stream, &attr); }

struct ln_entry {
	int n;          /* batch size; 0: free */
	uint64_t used;  /* clock of the last use */
	dnnl_primitive_desc_t fwd_pd;
	dnnl_primitive_t fwd, bwd;
	dnnl_memory_t x, y, dy, dx, mean, var, scratch_fwd, scratch_bwd;
};

struct ln_plan {
	struct dt_cpu_plan_head head;
	int c;
	int64_t rows;   /* rows per sample */
	float epsilon;
	int max_batch;
	uint64_t clock;
	int trained_n;  /* batch of the last forward, whose statistics backward uses */
	struct ln_entry cache[CACHE_SIZE];
	dnnl_memory_t scale, shift, dscale, dshift;
	float *mean, *var;              /* (max_batch * rows) */
	float *ones, *zeros, *dscale_unused, *dshift_unused; /* (c) */
	float *dx_unused;               /* (max_batch * rows * c): dx when the caller needs none */
	float *scratch;
	size_t scratch_bytes;
};

static const unsigned ln_flags = dnnl_use_scale | dnnl_use_shift;

static dnnl_memory_desc_t md_2d(int64_t rows, int64_t c)
{
	dnnl_memory_desc_t md;
	dnnl_dims_t dims = { rows, c };
	DT_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&md, 2, dims, dnnl_f32, dnnl_ab));
	return md;
}

static dnnl_memory_desc_t md_1d(int64_t n)
{
	dnnl_memory_desc_t md;
	dnnl_dims_t dims = { n };
	DT_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&md, 1, dims, dnnl_f32, dnnl_a));
	return md;
}

/* The primitive of pd, with its scratchpad's memory object (NULL when none); grows the plan's scratchpad. */
static dnnl_primitive_t prim_make(struct ln_plan *p, const_dnnl_primitive_desc_t pd, dnnl_memory_t *scratch)
{
	const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
	size_t bytes = md ? dnnl_memory_desc_get_size(md) : 0;
	dnnl_primitive_t prim;
	DT_DNNL_CHECK(dnnl_primitive_create(&prim, pd));
	*scratch = NULL;
	if (bytes > 0) {
		if (bytes > p->scratch_bytes) {
			dt_device_free(DT_CPU, p->scratch);
			p->scratch = dt_device_alloc(DT_CPU, (int64_t)((bytes + 3) / 4));
			p->scratch_bytes = bytes;
		}
		*scratch = dt_dnnl_mem_new(md);
	}
	return prim;
}

static void entry_clear(struct ln_entry *e)
{
	if (e->fwd)
		DT_DNNL_CHECK(dnnl_primitive_destroy(e->fwd));
	if (e->bwd)
		DT_DNNL_CHECK(dnnl_primitive_destroy(e->bwd));
	if (e->fwd_pd)
		DT_DNNL_CHECK(dnnl_primitive_desc_destroy(e->fwd_pd));
	dt_dnnl_mem_free(&e->x);
	dt_dnnl_mem_free(&e->y);
	dt_dnnl_mem_free(&e->dy);
	dt_dnnl_mem_free(&e->dx);
	dt_dnnl_mem_free(&e->mean);
	dt_dnnl_mem_free(&e->var);
	dt_dnnl_mem_free(&e->scratch_fwd);
	dt_dnnl_mem_free(&e->scratch_bwd);
	memset(e, 0, sizeof(*e));
}

/* The entry of batch size n: found, or made in the least recently used slot. */
static struct ln_entry *entry(struct ln_plan *p, int n)
{
	struct ln_entry *e = &p->cache[0];
	dnnl_memory_desc_t md, smd;
	dnnl_layer_normalization_desc_t op;

	for (int i = 0; i < CACHE_SIZE; i++) {
		if (p->cache[i].n == n) {
			p->cache[i].used = ++p->clock;
			return &p->cache[i];
		}
		if (p->cache[i].used < e->used)
			e = &p->cache[i];
	}
	entry_clear(e);
	e->n = n;
	e->used = ++p->clock;
	md = md_2d((int64_t)n * p->rows, p->c);
	smd = md_1d((int64_t)n * p->rows);
	DT_DNNL_CHECK(dnnl_layer_normalization_forward_desc_init(&op, dnnl_forward_training, &md, &smd, p->epsilon,
								 ln_flags));
	DT_DNNL_CHECK(dnnl_primitive_desc_create(&e->fwd_pd, &op, attr, engine, NULL));
	e->fwd = prim_make(p, e->fwd_pd, &e->scratch_fwd);
	e->x = dt_dnnl_mem_new(&md);
	e->y = dt_dnnl_mem_new(&md);
	e->dy = dt_dnnl_mem_new(&md);
	e->dx = dt_dnnl_mem_new(&md);
	e->mean = dt_dnnl_mem_new(&smd);
	e->var = dt_dnnl_mem_new(&smd);
	return e;
}

struct dt_plan *dt_cpu_plan_layernorm(struct dt_device dev, int channels, int64_t rows, float epsilon, int max_batch)
{
	struct ln_plan *p = dt_calloc(1, sizeof(*p));
	dnnl_memory_desc_t c_md;

	DT_ASSERT(dev.kind == DT_DEVICE_CPU);
	DT_ASSERT(channels > 0 && rows > 0 && epsilon > 0 && max_batch > 0);
	pthread_once(&once, engine_init);
	p->head.plan.backend = &dt_cpu_backend;
	p->head.kind = DT_CPU_PLAN_LAYERNORM;
	p->c = channels;
	p->rows = rows;
	p->epsilon = epsilon;
	p->max_batch = max_batch;
	c_md = md_1d(channels);
	p->scale = dt_dnnl_mem_new(&c_md);
	p->shift = dt_dnnl_mem_new(&c_md);
	p->dscale = dt_dnnl_mem_new(&c_md);
	p->dshift = dt_dnnl_mem_new(&c_md);
	p->mean = dt_device_alloc(DT_CPU, (int64_t)max_batch * rows);
	p->var = dt_device_alloc(DT_CPU, (int64_t)max_batch * rows);
	p->ones = dt_device_alloc(DT_CPU, channels);
	p->zeros = dt_device_alloc(DT_CPU, channels);
	p->dscale_unused = dt_device_alloc(DT_CPU, channels);
	p->dshift_unused = dt_device_alloc(DT_CPU, channels);
	p->dx_unused = dt_device_alloc(DT_CPU, dt_count_mul(dt_count_mul(max_batch, rows), channels));
	for (int i = 0; i < channels; i++)
		p->ones[i] = 1;
	entry(p, max_batch);
	return &p->head.plan;
}

static int ln_batch(const struct ln_plan *p, const struct dt_tensor *x)
{
	int n = x->shape.dim[0];
	DT_ASSERT(p->head.kind == DT_CPU_PLAN_LAYERNORM);
	DT_ASSERT(n <= p->max_batch && dt_tensor_count(x) == (int64_t)n * p->rows * p->c);
	return n;
}

void dt_cpu_layernorm_forward(struct dt_plan *pl, const struct dt_tensor *x, const struct dt_tensor *gamma,
			      const struct dt_tensor *beta, struct dt_tensor *y)
{
	struct ln_plan *p = (struct ln_plan *)pl;
	int n = ln_batch(p, x), k = 6;
	struct ln_entry *e;
	dnnl_exec_arg_t args[7];

	DT_ASSERT(!gamma || dt_tensor_count(gamma) == p->c);
	DT_ASSERT(!beta || dt_tensor_count(beta) == p->c);
	if (n == 0)
		return;
	e = entry(p, n);
	args[0] = (dnnl_exec_arg_t){ DNNL_ARG_SRC, dt_dnnl_bind(e->x, x->data) };
	args[1] = (dnnl_exec_arg_t){ DNNL_ARG_DST, dt_dnnl_bind(e->y, y->data) };
	args[2] = (dnnl_exec_arg_t){ DNNL_ARG_SCALE, dt_dnnl_bind(p->scale, gamma ? gamma->data : p->ones) };
	args[3] = (dnnl_exec_arg_t){ DNNL_ARG_SHIFT, dt_dnnl_bind(p->shift, beta ? beta->data : p->zeros) };
	args[4] = (dnnl_exec_arg_t){ DNNL_ARG_MEAN, dt_dnnl_bind(e->mean, p->mean) };
	args[5] = (dnnl_exec_arg_t){ DNNL_ARG_VARIANCE, dt_dnnl_bind(e->var, p->var) };
	if (e->scratch_fwd)
		args[k++] = (dnnl_exec_arg_t){ DNNL_ARG_SCRATCHPAD, dt_dnnl_bind(e->scratch_fwd, p->scratch) };
	DT_DNNL_CHECK(dnnl_primitive_execute(e->fwd, stream, k, args));
	p->trained_n = n;
}

void dt_cpu_layernorm_backward(struct dt_plan *pl, const struct dt_tensor *x, const struct dt_tensor *dy,
			       const struct dt_tensor *gamma, struct dt_tensor *dgamma, struct dt_tensor *dbeta,
			       struct dt_tensor *dx)
{
	struct ln_plan *p = (struct ln_plan *)pl;
	int n = ln_batch(p, x), k = 9;
	struct ln_entry *e;
	dnnl_exec_arg_t args[10];

	DT_ASSERT(dt_tensor_count(dy) == dt_tensor_count(x));
	DT_ASSERT(!dgamma || dt_tensor_count(dgamma) == p->c);
	DT_ASSERT(!dbeta || dt_tensor_count(dbeta) == p->c);
	if (n == 0) {
		if (dgamma)
			memset(dgamma->data, 0, (size_t)p->c * sizeof(float));
		if (dbeta)
			memset(dbeta->data, 0, (size_t)p->c * sizeof(float));
		return;
	}
	DT_ASSERT(p->trained_n == n); /* the statistics are those of this batch's forward */
	e = entry(p, n);
	if (!e->bwd) {
		dnnl_memory_desc_t md = md_2d((int64_t)n * p->rows, p->c), smd = md_1d((int64_t)n * p->rows);
		dnnl_layer_normalization_desc_t op;
		dnnl_primitive_desc_t pd;
		DT_DNNL_CHECK(dnnl_layer_normalization_backward_desc_init(&op, dnnl_backward, &md, &md, &smd, p->epsilon,
									  ln_flags));
		DT_DNNL_CHECK(dnnl_primitive_desc_create(&pd, &op, attr, engine, e->fwd_pd));
		e->bwd = prim_make(p, pd, &e->scratch_bwd);
		DT_DNNL_CHECK(dnnl_primitive_desc_destroy(pd));
	}
	args[0] = (dnnl_exec_arg_t){ DNNL_ARG_SRC, dt_dnnl_bind(e->x, x->data) };
	args[1] = (dnnl_exec_arg_t){ DNNL_ARG_DIFF_DST, dt_dnnl_bind(e->dy, dy->data) };
	args[2] = (dnnl_exec_arg_t){ DNNL_ARG_MEAN, dt_dnnl_bind(e->mean, p->mean) };
	args[3] = (dnnl_exec_arg_t){ DNNL_ARG_VARIANCE, dt_dnnl_bind(e->var, p->var) };
	args[4] = (dnnl_exec_arg_t){ DNNL_ARG_SCALE, dt_dnnl_bind(p->scale, gamma ? gamma->data : p->ones) };
	args[5] = (dnnl_exec_arg_t){ DNNL_ARG_SHIFT, dt_dnnl_bind(p->shift, p->zeros) }; /* unread */
	args[6] = (dnnl_exec_arg_t){ DNNL_ARG_DIFF_SRC, dt_dnnl_bind(e->dx, dx ? dx->data : p->dx_unused) };
	args[7] = (dnnl_exec_arg_t){ DNNL_ARG_DIFF_SCALE, dt_dnnl_bind(p->dscale, dgamma ? dgamma->data : p->dscale_unused) };
	args[8] = (dnnl_exec_arg_t){ DNNL_ARG_DIFF_SHIFT, dt_dnnl_bind(p->dshift, dbeta ? dbeta->data : p->dshift_unused) };
	if (e->scratch_bwd)
		args[k++] = (dnnl_exec_arg_t){ DNNL_ARG_SCRATCHPAD, dt_dnnl_bind(e->scratch_bwd, p->scratch) };
	DT_DNNL_CHECK(dnnl_primitive_execute(e->bwd, stream, k, args));
}

void dt_cpu_layernorm_plan_free(struct dt_plan *pl)
{
	struct ln_plan *p = (struct ln_plan *)pl;
	for (int i = 0; i < CACHE_SIZE; i++)
		entry_clear(&p->cache[i]);
	dt_dnnl_mem_free(&p->scale);
	dt_dnnl_mem_free(&p->shift);
	dt_dnnl_mem_free(&p->dscale);
	dt_dnnl_mem_free(&p->dshift);
	dt_device_free(DT_CPU, p->mean);
	dt_device_free(DT_CPU, p->var);
	dt_device_free(DT_CPU, p->ones);
	dt_device_free(DT_CPU, p->zeros);
	dt_device_free(DT_CPU, p->dscale_unused);
	dt_device_free(DT_CPU, p->dshift_unused);
	dt_device_free(DT_CPU, p->dx_unused);
	dt_device_free(DT_CPU, p->scratch);
	free(p);
}
