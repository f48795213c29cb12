/*
 * The CPU backend's plans on oneDNN primitives: convolution and batch
 * normalization, over dtrain's channels-last tensors (pooling, by hand, is
 * in pool.c).
 *
 * Layouts, measured on Keras' MNIST CNN and VGG-style shapes at batch 128
 * (tests/bench/conv_formats.c, AVX2, 1 and 2 threads): the forward and the
 * weight gradient read and write the NHWC activations in place and let
 * oneDNN choose the weights' layout (format_tag_any), into which the Keras
 * (kh, kw, in, out) kernel is reordered at each step and from which the
 * weight gradient is reordered back. HWIO weights send oneDNN 2.6 to its
 * gemm path, 1.4-2.5x slower. The data gradient lets oneDNN choose
 * every layout and reorders dy in and dx out: 20-25% faster where channels
 * grow (32 -> 64, 3 -> 32), 2-5% slower at 64 -> 64 and 64 -> 128. Where it
 * runs (every convolution but the first), the weight gradient takes
 * oneDNN's layouts too and shares that reorder of dy, paying one of x:
 * fashion_cnn's 32 -> 64 weight gradient went from 20.6 to 13.7 ms with cold
 * caches on AVX-512 (Zen 4, 1 thread) and its backward from 39.5 to 32.6
 * ms; under ONEDNN_MAX_CPU_ISA=AVX2 from 60.9 to 56.8 ms. A first layer's
 * 1- or 3-channel x would be padded to 8 or 16 channels blocked (2.6 times
 * slower on AVX2): it stays NHWC.
 *
 * That is for activations the model holds NHWC. Between two layers that
 * both take them (dt_cpu_conv_runs, the model's choose_layouts), it holds
 * them in oneDNN's channel blocks instead (DT_LAYOUT_BLOCKED): x, y, dy and
 * dx are then the primitives' own and none of their reorders runs.
 * fashion_cnn's step in `dtrain time` on a Xeon (AVX-512), old and new
 * binaries alternating: 92.6 ms against 102.3 at 1 thread (means of 6),
 * 54.4 against 57.2 at 2 (of 4). Its backward gains more (no reorders)
 * than its forward loses (oneDNN's blocked forward is slower inside the
 * step than brgconv's NHWC one, and so is the pooling that reads it).
 *
 * Where oneDNN runs AVX2, a float32 convolution's weight gradient with 32
 * input channels or more, or a first layer's (NHWC x of 1-3 channels, or
 * NHWC x with blocked dy), runs on sgemm instead (conv_gemm.c, measured
 * there): a plan with gemm_bww makes no weight-gradient primitive, and its
 * backward data reorders dy itself.
 *
 * A oneDNN primitive is made for one batch size. Each plan keeps a cache of
 * CACHE_SIZE sizes (the full batch, the epoch's short last batch, evaluation
 * tails, replica slices), least recently used out; a size is made once, on
 * first use, its backward primitives on its first backward. Every buffer a
 * primitive needs (scratchpad, reordered weights and gradients, batch
 * statistics) belongs to the plan and is sized when a primitive is made,
 * never during a step.
 * Scratchpads are in user mode: oneDNN's own global scratchpad is per
 * creating thread, and a plan may be made on one thread and run on another.
 */
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu/ops_cpu.h"

#define CACHE_SIZE 8

static dnnl_engine_t engine;
static dnnl_stream_t stream;
static _Atomic uint64_t primitives_made;
static dnnl_primitive_attr_t attr;      /* user scratchpad */
static dnnl_primitive_attr_t attr_relu; /* and a relu after the primitive (a convolution's dt_conv_geom.act) */
static pthread_once_t engine_once = PTHREAD_ONCE_INIT;

static void engine_init(void)
{
	dnnl_post_ops_t ops;

	DT_DNNL_CHECK(dnnl_engine_create(&engine, dnnl_cpu, 0));
	DT_DNNL_CHECK(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags));
	DT_DNNL_CHECK(dnnl_primitive_attr_create(&attr));
	DT_DNNL_CHECK(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
	DT_DNNL_CHECK(dnnl_primitive_attr_clone(&attr_relu, attr));
	DT_DNNL_CHECK(dnnl_post_ops_create(&ops));
	DT_DNNL_CHECK(dnnl_post_ops_append_eltwise(ops, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f));
	DT_DNNL_CHECK(dnnl_primitive_attr_set_post_ops(attr_relu, ops));
	DT_DNNL_CHECK(dnnl_post_ops_destroy(ops));
}

void dt_dnnl_shared(dnnl_engine_t *e, dnnl_stream_t *st, dnnl_primitive_attr_t *a)
{
	pthread_once(&engine_once, engine_init);
	*e = engine;
	*st = stream;
	*a = attr;
}

/* A plan-owned buffer; grows only when a primitive is made. */
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

/* A primitive and the memory object of its scratchpad (NULL when it needs none). */
struct prim {
	dnnl_primitive_t p;
	dnnl_memory_t scratch;
};

dnnl_memory_t dt_dnnl_mem_new(const dnnl_memory_desc_t *md)
{
	dnnl_memory_t m;
	pthread_once(&engine_once, engine_init);
	DT_DNNL_CHECK(dnnl_memory_create(&m, md, engine, DNNL_MEMORY_NONE));
	return m;
}

void dt_dnnl_mem_free(dnnl_memory_t *m)
{
	if (*m)
		DT_DNNL_CHECK(dnnl_memory_destroy(*m));
	*m = NULL;
}

dnnl_memory_t dt_dnnl_bind(dnnl_memory_t m, const void *data)
{
	DT_DNNL_CHECK(dnnl_memory_set_data_handle(m, (void *)data));
	return m;
}

static void pd_free(dnnl_primitive_desc_t *pd)
{
	if (*pd)
		DT_DNNL_CHECK(dnnl_primitive_desc_destroy(*pd));
	*pd = NULL;
}

static size_t md_bytes(const dnnl_memory_desc_t *md) { return md ? dnnl_memory_desc_get_size(md) : 0; }

/* Makes the primitive of pd (which the caller keeps) and grows the plan's scratchpad to fit. */
static void prim_make(struct prim *pr, const_dnnl_primitive_desc_t pd, struct buf *scratch)
{
	const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
	DT_DNNL_CHECK(dnnl_primitive_create(&pr->p, pd));
	primitives_made++;
	pr->scratch = NULL;
	if (md_bytes(md) > 0) {
		buf_reserve(scratch, md_bytes(md));
		pr->scratch = dt_dnnl_mem_new(md);
	}
}

/* Makes pd from an operation descriptor, then its primitive; relu: with attr_relu's post-op. Returns pd. */
static dnnl_primitive_desc_t prim_make_op(struct prim *pr, const_dnnl_op_desc_t op, const_dnnl_primitive_desc_t hint,
					  struct buf *scratch, int relu)
{
	dnnl_primitive_desc_t pd;
	DT_DNNL_CHECK(dnnl_primitive_desc_create(&pd, op, relu ? attr_relu : attr, engine, hint));
	prim_make(pr, pd, scratch);
	return pd;
}

static void prim_free(struct prim *pr)
{
	if (pr->p)
		DT_DNNL_CHECK(dnnl_primitive_destroy(pr->p));
	dt_dnnl_mem_free(&pr->scratch);
	pr->p = NULL;
}

/* Runs pr with nargs arguments; args has room for the scratchpad after them. */
static void prim_run(const struct prim *pr, const struct buf *scratch, int nargs, dnnl_exec_arg_t *args)
{
	if (pr->scratch)
		args[nargs++] = (dnnl_exec_arg_t){ DNNL_ARG_SCRATCHPAD, dt_dnnl_bind(pr->scratch, scratch->p) };
	DT_DNNL_CHECK(dnnl_primitive_execute(pr->p, stream, nargs, args));
}

/*
 * A reorder between two layouts of one tensor. From float32 NHWC to oneDNN's
 * channel blocks (nChw16c, nChw8c: blocks of 16 or 8 channels, each block's
 * pixels in a row), float32 or bfloat16, from float32 to bfloat16 in the
 * same layout (NHWC, or channel blocks), and from float32 channel blocks
 * back to NHWC, it is a loop of ours. fashion_cnn's dy
 * (128x64x24x24) to nChw16c, 1 thread, Zen 4: inside the step oneDNN 2.6's
 * jit:uni reorder took 5.5 ms (ONEDNN_VERBOSE), the loop 1.6-1.9 ms; alone
 * with warm caches 2.1 against 1.3 (a memcpy 1.3); to bfloat16 blocks 2.9
 * against 1.9-2.3 in the step. The way back and the bfloat16 NHWC copy run
 * as fast as oneDNN's (one mechanism for all four). Every other pair of
 * layouts (the weights', padded channels) is oneDNN's.
 */
struct reorder {
	struct prim prim;      /* oneDNN's; p NULL when the loop does it */
	int64_t n, c, hw;      /* the loop's tensor: n images of hw pixels of c channels */
	int block;             /* channels per block (c itself: NHWC to NHWC); 0: oneDNN's reorder */
	int to_blocked, bf16;  /* the direction; bf16: the blocks are bfloat16 (to_blocked only) */
};

/*
 * b floats from src to dst, or to bfloat16 at dst (bf16). Float32 blocks are
 * 16 or 8: constant sizes, which the compiler copies in one or two vector
 * moves.
 */
static inline void move_block(void *restrict dst, const float *restrict src, int b, int bf16)
{
	if (bf16) {
		uint16_t *d = dst;
#pragma omp simd
		for (int j = 0; j < b; j++)
			d[j] = dt_bf16_round(src[j]);
	} else if (b == 16) {
		memcpy(dst, src, 16 * sizeof(float));
	} else {
		memcpy(dst, src, 8 * sizeof(float));
	}
}

/* The loop: NHWC rows to blocks of b channels (to_blocked) or back. */
static void channel_blocks(const struct reorder *r, float *nhwc, void *blocked)
{
	const int64_t hw = r->hw, c = r->c, nb = c / r->block;
	const int b = r->block, bf16 = r->bf16, to_blocked = r->to_blocked;
	const size_t elem = bf16 ? sizeof(uint16_t) : sizeof(float);
	const int64_t count = r->n * hw * c;

	if (nb == 1 && bf16) { /* one block of every channel (block c): the layout itself, converted */
		dt_cpu_to_bf16(blocked, nhwc, count);
		return;
	}
#pragma omp parallel for if (parallel: count > (1 << 15))
	for (int64_t ip = 0; ip < r->n * hw; ip++) {
		int64_t i = ip / hw, px = ip % hw;
		float *row = nhwc + ip * c;
		for (int64_t k = 0; k < nb; k++) {
			char *blk = (char *)blocked + (size_t)((i * nb + k) * hw + px) * (size_t)b * elem;
			if (to_blocked)
				move_block(blk, row + k * b, b, bf16);
			else
				move_block(row + k * b, (const float *)blk, b, 0);
		}
	}
}

/* A reorder from one memory object to another, both already bound. */
static void reorder_run(const struct reorder *r, const struct buf *scratch, dnnl_memory_t from, dnnl_memory_t to)
{
	dnnl_exec_arg_t args[3] = { { DNNL_ARG_FROM, from }, { DNNL_ARG_TO, to } };
	void *src, *dst;

	if (!r->block) {
		prim_run(&r->prim, scratch, 2, args);
		return;
	}
	DT_DNNL_CHECK(dnnl_memory_get_data_handle(from, &src));
	DT_DNNL_CHECK(dnnl_memory_get_data_handle(to, &dst));
	if (r->to_blocked)
		channel_blocks(r, src, dst);
	else
		channel_blocks(r, dst, src);
}

/*
 * The loop's block for a reorder between nhwc, a float32 tensor, and other:
 * c where other is nhwc's own layout in bfloat16 (bf16 allowed) and nhwc has
 * no padding (the loop converts element by element: NHWC, or channel blocks
 * that stay blocks); where nhwc is NHWC, 16 or 8 where other is nChw16c or
 * nChw8c without padded channels, in float32 or (bf16 allowed) bfloat16;
 * else 0.
 */
static int channel_block(const dnnl_memory_desc_t *nhwc, const dnnl_memory_desc_t *other, int bf16_allowed)
{
	static const dnnl_format_tag_t tags[] = { dnnl_aBcd16b, dnnl_aBcd8b };
	static const int sizes[] = { 16, 8 };
	dnnl_data_type_t type = other->data_type;
	dnnl_memory_desc_t md;

	if (nhwc->ndims != 4 || nhwc->data_type != dnnl_f32 || !(type == dnnl_f32 || (bf16_allowed && type == dnnl_bf16)))
		return 0;
	md = *nhwc;
	md.data_type = dnnl_bf16;
	if (type == dnnl_bf16 && dnnl_memory_desc_equal(&md, other) &&
	    md_bytes(nhwc) == (size_t)(nhwc->dims[0] * nhwc->dims[1] * nhwc->dims[2] * nhwc->dims[3]) * sizeof(float))
		return (int)nhwc->dims[1];
	DT_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&md, 4, nhwc->dims, dnnl_f32, dnnl_nhwc));
	if (!dnnl_memory_desc_equal(&md, nhwc))
		return 0;
	for (int i = 0; i < 2; i++) {
		if (nhwc->dims[1] % sizes[i])
			continue;
		DT_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&md, 4, nhwc->dims, type, tags[i]));
		if (dnnl_memory_desc_equal(&md, other))
			return sizes[i];
	}
	return 0;
}

static void reorder_make(struct reorder *r, const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to,
			 struct buf *scratch)
{
	dnnl_primitive_desc_t pd;
	const dnnl_memory_desc_t *nhwc = from;

	r->to_blocked = 1;
	r->block = channel_block(from, to, 1);
	if (!r->block) {
		r->to_blocked = 0;
		r->block = channel_block(to, from, 0);
		nhwc = to;
	}
	if (r->block) {
		r->bf16 = r->to_blocked && to->data_type == dnnl_bf16;
		r->n = nhwc->dims[0];
		r->c = nhwc->dims[1];
		r->hw = nhwc->dims[2] * nhwc->dims[3];
		return;
	}
	DT_DNNL_CHECK(dnnl_reorder_primitive_desc_create(&pd, from, engine, to, engine, attr));
	prim_make(&r->prim, pd, scratch);
	pd_free(&pd);
}

static void reorder_free(struct reorder *r)
{
	prim_free(&r->prim);
	r->block = r->bf16 = 0;
}

/* Logical (N, C, H, W) dims of one type, in layout tag. */
static dnnl_memory_desc_t md_4d(int64_t n, int64_t c, int64_t h, int64_t w, dnnl_data_type_t type,
				dnnl_format_tag_t tag)
{
	dnnl_memory_desc_t md;
	dnnl_dims_t dims = { n, c, h, w };
	DT_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&md, 4, dims, type, tag));
	return md;
}

/* float32 stored channels last: dtrain's activations. */
static dnnl_memory_desc_t md_nhwc(int64_t n, int64_t c, int64_t h, int64_t w)
{
	return md_4d(n, c, h, w, dnnl_f32, dnnl_nhwc);
}

static dnnl_memory_desc_t md_vec(int64_t c)
{
	dnnl_memory_desc_t md;
	dnnl_dims_t dims = { c };
	DT_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&md, 1, dims, dnnl_f32, dnnl_a));
	return md;
}

/* The head of every cache entry. */
struct slot {
	int n;         /* batch size; 0: free */
	uint64_t used; /* clock of the last use */
};

/* What every plan of this file has: the cache's clock and the scratchpad its primitives share. */
struct cpu_plan {
	struct dt_cpu_plan_head head;
	int max_batch;
	uint64_t clock;
	struct buf scratch;
};

static void plan_init(struct cpu_plan *p, enum dt_cpu_plan_kind kind, int max_batch)
{
	DT_ASSERT(max_batch > 0);
	pthread_once(&engine_once, engine_init);
	p->head.plan.backend = &dt_cpu_backend;
	p->head.kind = kind;
	p->max_batch = max_batch;
}

/*
 * The entry for batch size n in cache (CACHE_SIZE entries, stride bytes
 * apart, each starting with a struct slot): the one made for n, else a free
 * one or the least recently used, which the caller must empty and fill
 * (*fresh set).
 */
static void *cache_find(struct cpu_plan *p, void *cache, size_t stride, int n, int *fresh)
{
	struct slot *pick = NULL;
	DT_ASSERT(n > 0 && n <= p->max_batch);
	for (int i = 0; i < CACHE_SIZE; i++) {
		struct slot *s = (struct slot *)((char *)cache + i * stride);
		if (s->n == n) {
			s->used = ++p->clock;
			*fresh = 0;
			return s;
		}
		if (!pick || (pick->n && (!s->n || s->used < pick->used)))
			pick = s;
	}
	*fresh = 1;
	pick->used = ++p->clock;
	return pick;
}

/* ---- convolution ---- */

struct conv_entry {
	struct slot s;
	dnnl_primitive_desc_t fwd_pd; /* the hint of the backward ones */
	struct prim fwd, bwd_data, bwd_weights;
	/* reorders to and from the primitives' layouts, made only where layout_for returned a copy */
	struct reorder w_to_fwd, w_to_bwd, dw_from_bwd, dy_to_bwd, dx_from_bwd, x_to_bww, dy_to_bww;
	struct reorder x_to_lo;                                 /* precision bf16: x to bfloat16 NHWC */
	dnnl_memory_t x, y, dy, dx;                          /* NHWC at this n */
	dnnl_memory_t w_fwd, w_bwd, dw_bwd, dy_bwd, dx_bwd; /* in the primitives' layouts, or NULL */
	dnnl_memory_t x_bww, dy_bww;                        /* the weight gradient's x and dy, or NULL */
	int dy_shared;                                       /* backward data reads the weight gradient's dy */
	dnnl_memory_t x_lo;                                 /* bfloat16 NHWC, or NULL */
};

/*
 * Under precision bf16 (bf16 set) the three primitives read bfloat16: the
 * forward's x is converted to a bfloat16 copy in its own layout (x_lo) at
 * each step, the backward's x and dy and every weight are converted in the
 * reorders to the primitives' layouts, and y, dx and dw come out in float32
 * (float32 accumulation). Activations held in channel blocks stay so under
 * bf16: fashion_cnn's step in `dtrain time`, 1 thread, Zen 4, old and new
 * binaries alternating, went from 66.2 and 59.5 ms (NHWC) to 59.0 and 55.7.
 */
struct conv_plan {
	struct cpu_plan base;
	struct dt_conv_geom g;
	int bf16;
	struct conv_entry cache[CACHE_SIZE];
	dnnl_memory_desc_t w_md, b_md;    /* HWIO, (out_c) */
	dnnl_memory_t w, dw, b, db;       /* the caller's tensors */
	struct buf w_fwd, w_bwd, dw_bwd;  /* reordered weights */
	struct buf dy_bwd, dx_bwd;        /* backward data's blocked dy and dx */
	struct buf x_bww, dy_bww;         /* the weight gradient's x and dy */
	struct buf x_lo;                  /* bf16: the forward's bfloat16 copy of x */
	struct buf zero_bias, db_unused;  /* for b == NULL, db == NULL */
	int gemm_bww;                     /* the weight gradient on sgemm (conv_gemm.c), not a primitive */
	int gemm_threads;                 /* the threads gemm_work is sized for */
	struct buf gemm_work;
};

/*
 * The weights' descriptor: (out, in, kh, kw), or for a grouped convolution
 * (groups, out/groups, in/groups, kh, kw), whose dtrain layout (kh, kw,
 * in/groups, out) is oneDNN's hwigo (tag dnnl_hwio asks for it).
 */
static dnnl_memory_desc_t conv_weights_md(const struct dt_conv_geom *g, dnnl_data_type_t type, dnnl_format_tag_t tag)
{
	dnnl_memory_desc_t md;
	int groups = dt_conv_groups(g);
	if (groups > 1) {
		dnnl_dims_t dims = { groups, g->out_c / groups, g->in_c / groups, g->kh, g->kw };
		DT_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&md, 5, dims, type, tag == dnnl_hwio ? dnnl_hwigo : tag));
		return md;
	}
	dnnl_dims_t dims = { g->out_c, g->in_c, g->kh, g->kw };
	DT_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&md, 4, dims, type, tag));
	return md;
}

/* oneDNN's tag of a dt_layout: NHWC, or channel blocks of 16 or 8 (nChw16c, nChw8c). */
static dnnl_format_tag_t layout_tag(enum dt_layout layout, int block)
{
	if (layout == DT_LAYOUT_NHWC)
		return dnnl_nhwc;
	DT_ASSERT(block == 16 || block == 8);
	return block == 16 ? dnnl_aBcd16b : dnnl_aBcd8b;
}

/*
 * The descriptors of one batch size n: the type the primitives read
 * (bfloat16 under bf16), the activations as dtrain holds them (float32, in
 * the geometry's layouts), the forward's x as it reads it (x itself, or
 * NHWC bfloat16), the weights in any layout of that type.
 */
struct conv_mds {
	dnnl_data_type_t in;
	dnnl_format_tag_t x_tag, y_tag;
	dnnl_memory_desc_t x, y, x_in, w_in;
};

static struct conv_mds conv_mds(const struct dt_conv_geom *g, int n, int bf16)
{
	dnnl_data_type_t in = bf16 ? dnnl_bf16 : dnnl_f32;
	dnnl_format_tag_t xt = layout_tag(g->x_layout, g->block), yt = layout_tag(g->y_layout, g->block);
	/* One channel is NHWC and NCHW at once: oneDNN's JIT writes blocks from a first layer's NCHW only. */
	if (g->in_c == 1 && g->y_layout == DT_LAYOUT_BLOCKED)
		xt = dnnl_nchw;
	return (struct conv_mds){ .in = in,
				  .x_tag = xt,
				  .y_tag = yt,
				  .x = md_4d(n, g->in_c, g->in_h, g->in_w, dnnl_f32, xt),
				  .y = md_4d(n, g->out_c, g->out_h, g->out_w, dnnl_f32, yt),
				  .x_in = md_4d(n, g->in_c, g->in_h, g->in_w, in, xt),
				  .w_in = conv_weights_md(g, in, dnnl_format_tag_any) };
}

struct conv_dims {
	dnnl_dims_t strides, dilates, pad_l, pad_r;
};

static struct conv_dims conv_dims(const struct dt_conv_geom *g)
{
	/* oneDNN counts dilation from 0, Keras from 1. */
	return (struct conv_dims){ { g->stride_h, g->stride_w }, { g->dil_h - 1, g->dil_w - 1 },
				   { g->pad_top, g->pad_left }, { g->pad_bottom, g->pad_right } };
}

/* The three operations of batch size n, reading bfloat16 when bf16 (conv_mds). */
static dnnl_convolution_desc_t conv_fwd_op(const struct dt_conv_geom *g, int n, int bf16, const dnnl_memory_desc_t *b_md)
{
	struct conv_mds md = conv_mds(g, n, bf16);
	struct conv_dims d = conv_dims(g);
	dnnl_convolution_desc_t op;
	DT_DNNL_CHECK(dnnl_dilated_convolution_forward_desc_init(&op, dnnl_forward_training, dnnl_convolution_direct,
								 &md.x_in, &md.w_in, b_md, &md.y, d.strides,
								 d.dilates, d.pad_l, d.pad_r));
	return op;
}

/* The weight gradient, reading x and dy as dtrain holds them or (blocked) in the layouts oneDNN chooses (see the top). */
static dnnl_convolution_desc_t conv_bwd_weights_op(const struct dt_conv_geom *g, int n, int bf16,
						   const dnnl_memory_desc_t *b_md, int blocked)
{
	struct conv_mds md = conv_mds(g, n, bf16);
	dnnl_memory_desc_t x_any = md_4d(n, g->in_c, g->in_h, g->in_w, md.in, blocked ? dnnl_format_tag_any : md.x_tag);
	dnnl_memory_desc_t dy_any = md_4d(n, g->out_c, g->out_h, g->out_w, md.in,
					  blocked ? dnnl_format_tag_any : md.y_tag);
	dnnl_memory_desc_t dw_any = conv_weights_md(g, dnnl_f32, dnnl_format_tag_any);
	struct conv_dims d = conv_dims(g);
	dnnl_convolution_desc_t op;
	DT_DNNL_CHECK(dnnl_dilated_convolution_backward_weights_desc_init(&op, dnnl_convolution_direct, &x_any,
									  &dw_any, b_md, &dy_any, d.strides,
									  d.dilates, d.pad_l, d.pad_r));
	return op;
}

/* Backward data in the layouts oneDNN chooses for dy and dx (see the top). */
static dnnl_convolution_desc_t conv_bwd_data_op(const struct dt_conv_geom *g, int n, int bf16)
{
	struct conv_mds md = conv_mds(g, n, bf16);
	dnnl_memory_desc_t dx_any = md_4d(n, g->in_c, g->in_h, g->in_w, dnnl_f32, dnnl_format_tag_any);
	dnnl_memory_desc_t dy_any = md_4d(n, g->out_c, g->out_h, g->out_w, md.in, dnnl_format_tag_any);
	struct conv_dims d = conv_dims(g);
	dnnl_convolution_desc_t op;
	DT_DNNL_CHECK(dnnl_dilated_convolution_backward_data_desc_init(&op, dnnl_convolution_direct, &dx_any, &md.w_in,
								       &dy_any, d.strides, d.dilates, d.pad_l,
								       d.pad_r));
	return op;
}

/*
 * A tensor the primitive takes in layout `want` while dtrain holds it as
 * `have`: the memory object in `want`, backed by the plan's buffer b, and in
 * *r the reorder from have to want (to_prim) or back. NULL, and no reorder,
 * when the layouts agree.
 */
static dnnl_memory_t layout_for(struct cpu_plan *p, const dnnl_memory_desc_t *have, const dnnl_memory_desc_t *want,
				struct reorder *r, struct buf *b, int to_prim)
{
	if (dnnl_memory_desc_equal(want, have))
		return NULL;
	buf_reserve(b, md_bytes(want));
	if (to_prim)
		reorder_make(r, have, want, &p->scratch);
	else
		reorder_make(r, want, have, &p->scratch);
	return dt_dnnl_mem_new(want);
}

/*
 * What a primitive reads for m: m itself when layout_for made no copy (copy
 * NULL), else m reordered by r into copy, backed by b.
 */
static dnnl_memory_t in_layout(const struct reorder *r, const struct buf *scratch, dnnl_memory_t m, dnnl_memory_t copy,
			       const struct buf *b)
{
	if (!copy)
		return m;
	reorder_run(r, scratch, m, dt_dnnl_bind(copy, b->p));
	return copy;
}

static void conv_entry_clear(struct conv_entry *e)
{
	prim_free(&e->fwd);
	prim_free(&e->bwd_data);
	prim_free(&e->bwd_weights);
	reorder_free(&e->w_to_fwd);
	reorder_free(&e->w_to_bwd);
	reorder_free(&e->dw_from_bwd);
	reorder_free(&e->dy_to_bwd);
	reorder_free(&e->dx_from_bwd);
	reorder_free(&e->x_to_lo);
	reorder_free(&e->x_to_bww);
	reorder_free(&e->dy_to_bww);
	pd_free(&e->fwd_pd);
	dt_dnnl_mem_free(&e->x);
	dt_dnnl_mem_free(&e->y);
	dt_dnnl_mem_free(&e->dy);
	dt_dnnl_mem_free(&e->dx);
	dt_dnnl_mem_free(&e->w_fwd);
	dt_dnnl_mem_free(&e->w_bwd);
	dt_dnnl_mem_free(&e->dw_bwd);
	dt_dnnl_mem_free(&e->dy_bwd);
	dt_dnnl_mem_free(&e->dx_bwd);
	dt_dnnl_mem_free(&e->x_lo);
	dt_dnnl_mem_free(&e->x_bww);
	dt_dnnl_mem_free(&e->dy_bww);
	e->dy_shared = 0;
	e->s.n = 0;
}

static struct conv_entry *conv_entry(struct conv_plan *p, int n)
{
	const struct dt_conv_geom *g = &p->g;
	int fresh;
	struct conv_entry *e = cache_find(&p->base, p->cache, sizeof(p->cache[0]), n, &fresh);
	struct conv_mds md;
	dnnl_convolution_desc_t op;

	if (!fresh)
		return e;
	conv_entry_clear(e);
	e->s.n = n;
	if (p->gemm_bww && omp_get_max_threads() > p->gemm_threads) {
		p->gemm_threads = omp_get_max_threads();
		buf_reserve(&p->gemm_work, (size_t)dt_cpu_conv_gemm_work(g, p->gemm_threads) * sizeof(float));
	}
	md = conv_mds(g, n, p->bf16);
	op = conv_fwd_op(g, n, p->bf16, &p->b_md);
	e->fwd_pd = prim_make_op(&e->fwd, &op, NULL, &p->base.scratch, g->act == DT_ACT_RELU);
	e->w_fwd = layout_for(&p->base, &p->w_md, dnnl_primitive_desc_query_md(e->fwd_pd, dnnl_query_weights_md, 0),
			      &e->w_to_fwd, &p->w_fwd, 1);
	e->x_lo = layout_for(&p->base, &md.x, &md.x_in, &e->x_to_lo, &p->x_lo, 1);
	e->x = dt_dnnl_mem_new(&md.x);
	e->y = dt_dnnl_mem_new(&md.y);
	e->dx = dt_dnnl_mem_new(&md.x);
	e->dy = dt_dnnl_mem_new(&md.y);
	return e;
}

/* The weight gradient; blocked when backward data runs too, which then shares its dy (see the top). */
static void conv_make_bwd_weights(struct conv_plan *p, struct conv_entry *e, int blocked)
{
	struct conv_mds md = conv_mds(&p->g, e->s.n, p->bf16);
	dnnl_convolution_desc_t op = conv_bwd_weights_op(&p->g, e->s.n, p->bf16, &p->b_md, blocked);
	dnnl_primitive_desc_t pd;

	pd = prim_make_op(&e->bwd_weights, &op, e->fwd_pd, &p->base.scratch, 0);
	e->x_bww = layout_for(&p->base, &md.x, dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0), &e->x_to_bww,
			      &p->x_bww, 1);
	e->dy_bww = layout_for(&p->base, &md.y, dnnl_primitive_desc_query_md(pd, dnnl_query_diff_dst_md, 0),
			       &e->dy_to_bww, &p->dy_bww, 1);
	e->dw_bwd = layout_for(&p->base, &p->w_md, dnnl_primitive_desc_query_md(pd, dnnl_query_diff_weights_md, 0),
			       &e->dw_from_bwd, &p->dw_bwd, 0);
	pd_free(&pd);
}

/*
 * Backward data, with the reorders of dy in and dx out where its layouts are
 * oneDNN's own; dy's is skipped when the weight gradient (made first) took
 * dy in the same layout.
 */
static void conv_make_bwd_data(struct conv_plan *p, struct conv_entry *e)
{
	struct conv_mds md = conv_mds(&p->g, e->s.n, p->bf16);
	dnnl_convolution_desc_t op = conv_bwd_data_op(&p->g, e->s.n, p->bf16);
	dnnl_primitive_desc_t pd;
	const_dnnl_primitive_desc_t wpd;
	const dnnl_memory_desc_t *dy_md;

	pd = prim_make_op(&e->bwd_data, &op, e->fwd_pd, &p->base.scratch, 0);
	e->w_bwd = layout_for(&p->base, &p->w_md, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0),
			      &e->w_to_bwd, &p->w_bwd, 1);
	dy_md = dnnl_primitive_desc_query_md(pd, dnnl_query_diff_dst_md, 0);
	if (e->bwd_weights.p) {
		DT_DNNL_CHECK(dnnl_primitive_get_primitive_desc(e->bwd_weights.p, &wpd));
		e->dy_shared = dnnl_memory_desc_equal(dy_md,
						      dnnl_primitive_desc_query_md(wpd, dnnl_query_diff_dst_md, 0));
	}
	if (!e->dy_shared)
		e->dy_bwd = layout_for(&p->base, &md.y, dy_md, &e->dy_to_bwd, &p->dy_bwd, 1);
	e->dx_bwd = layout_for(&p->base, &md.x, dnnl_primitive_desc_query_md(pd, dnnl_query_diff_src_md, 0),
			       &e->dx_from_bwd, &p->dx_bwd, 0);
	pd_free(&pd);
}

/* Floor of the output size, as Keras computes it from the padding it chose. */
static int64_t out_size(int in, int k, int stride, int dil, int pad_lo, int pad_hi)
{
	int64_t span = (int64_t)in + pad_lo + pad_hi - (int64_t)dil * (k - 1) - 1;
	return span < 0 ? 0 : span / stride + 1;
}

/* Whether oneDNN made pd with one of its reference loops ("ref:any"), tens of times slower than its JIT code. */
static int pd_is_reference(const_dnnl_primitive_desc_t pd)
{
	const char *impl = "";
	DT_DNNL_CHECK(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl));
	return strncmp(impl, "ref", 3) == 0;
}

/* Whether oneDNN makes a primitive for op (hint: the forward's), not a reference loop where jit_only. */
static int op_runs(const_dnnl_op_desc_t op, const_dnnl_primitive_desc_t hint, int jit_only)
{
	dnnl_primitive_desc_t pd = NULL;
	int ok = dnnl_primitive_desc_create(&pd, op, attr, engine, hint) == dnnl_success &&
		 !(jit_only && pd_is_reference(pd));
	pd_free(&pd);
	return ok;
}

/*
 * Whether oneDNN makes the primitives of convolution g at batch n, reading
 * bfloat16 when bf16: the forward, the weight gradient in each variant set
 * in bww (bit k: conv_bwd_weights_op's blocked = k) and, with_dx, the data
 * gradient; jit_only: none of them a reference loop.
 */
static int conv_prims_run(const struct dt_conv_geom *g, int n, int bf16, unsigned bww, int with_dx, int jit_only)
{
	dnnl_memory_desc_t b_md = md_vec(g->out_c);
	dnnl_convolution_desc_t op = conv_fwd_op(g, n, bf16, &b_md);
	dnnl_primitive_desc_t fpd = NULL;
	int ok = dnnl_primitive_desc_create(&fpd, &op, attr, engine, NULL) == dnnl_success &&
		 !(jit_only && pd_is_reference(fpd));

	for (int k = 0; k < 2; k++)
		if (bww & (1u << k)) {
			op = conv_bwd_weights_op(g, n, bf16, &b_md, k);
			ok = ok && op_runs(&op, fpd, jit_only);
		}
	if (with_dx) {
		op = conv_bwd_data_op(g, n, bf16);
		ok = ok && op_runs(&op, fpd, jit_only);
	}
	pd_free(&fpd);
	return ok;
}

/*
 * Whether oneDNN has bfloat16 primitives for this convolution in all three
 * directions, both weight-gradient variants (it has none for some grouped
 * shapes): if not, the plan stays float32 under precision bf16.
 */
static int conv_bf16_runs(const struct dt_conv_geom *g, int n) { return conv_prims_run(g, n, 1, 3, 1, 0); }

/* Whether a plan made now for g reads bfloat16: precision bf16, where oneDNN has the primitives. */
static int conv_reads_bf16(const struct dt_conv_geom *g, int n)
{
	return dt_cpu_precision() == DT_PRECISION_BF16 && conv_bf16_runs(g, n);
}

/* Whether a plan for g (reading bfloat16 when bf16) takes its weight gradient on sgemm (conv_gemm.c). */
static int conv_gemm_bww(const struct dt_conv_geom *g, int bf16) { return !bf16 && dt_cpu_conv_gemm_weights(g); }

/*
 * The channels of oneDNN's own blocks on this CPU: 16 from AVX-512 (the
 * Xeon Phi's aside), 8 on AVX2; none below.
 */
int dt_cpu_channel_block(void)
{
	switch (dnnl_get_effective_cpu_isa()) {
	case dnnl_cpu_isa_avx2:
	case dnnl_cpu_isa_avx2_vnni: return 8;
	case dnnl_cpu_isa_avx512_core:
	case dnnl_cpu_isa_avx512_core_vnni:
	case dnnl_cpu_isa_avx512_core_bf16:
	case dnnl_cpu_isa_avx512_core_amx: return 16;
	default: return 0;
	}
}

/*
 * Whether g's layouts run on oneDNN's JIT code in every direction the step
 * takes. fashion_cnn's 26x26x32 -> 24x24x64 at batch 128, 1 thread, Xeon
 * (AVX-512, tests/bench/conv_formats.c), nChw16c in and out: forward 13.9
 * ms, weight gradient 15.8, data gradient 15.5, against NHWC's 15.5, 17.7
 * and 16.8 with no reorder counted; a 1-channel x (described as NCHW,
 * conv_mds) with a blocked y runs too (forward 0.5 ms against 1.1), but not
 * its data gradient (a reference loop: 1 s), which a first layer does not
 * take. Blocked x with an NHWC y, and the reverse past a few channels, are
 * reference loops too.
 * Under precision bf16 the question is asked of the bfloat16 primitives the
 * plan will make (conv_reads_bf16). Grouped convolutions stay NHWC.
 */
int dt_cpu_conv_runs(const struct dt_conv_geom *g, int with_dx)
{
	int bf16;
	unsigned bww;

	if (dt_conv_groups(g) > 1)
		return 0;
	if ((g->x_layout == DT_LAYOUT_BLOCKED && g->in_c % g->block) ||
	    (g->y_layout == DT_LAYOUT_BLOCKED && g->out_c % g->block))
		return 0;
	pthread_once(&engine_once, engine_init);
	/* the weight gradient takes oneDNN's layouts when dx runs too (conv_make_bwd_weights), or runs on sgemm */
	bf16 = conv_reads_bf16(g, 1);
	bww = conv_gemm_bww(g, bf16) ? 0 : 1u << (with_dx ? 1 : 0);
	return conv_prims_run(g, 1, bf16, bww, with_dx, 1);
}

struct dt_plan *dt_cpu_plan_conv(struct dt_device dev, const struct dt_conv_geom *g, int max_batch)
{
	struct conv_plan *p = dt_calloc(1, sizeof(*p));
	DT_ASSERT(dev.kind == DT_DEVICE_CPU);
	DT_ASSERT(g->in_c > 0 && g->out_c > 0 && g->kh > 0 && g->kw > 0);
	DT_ASSERT(g->in_c % dt_conv_groups(g) == 0 && g->out_c % dt_conv_groups(g) == 0);
	DT_ASSERT(g->stride_h > 0 && g->stride_w > 0 && g->dil_h > 0 && g->dil_w > 0);
	DT_ASSERT(g->pad_top >= 0 && g->pad_left >= 0 && g->pad_bottom >= 0 && g->pad_right >= 0);
	DT_ASSERT(g->out_h > 0 && g->out_h == out_size(g->in_h, g->kh, g->stride_h, g->dil_h, g->pad_top, g->pad_bottom));
	DT_ASSERT(g->out_w > 0 && g->out_w == out_size(g->in_w, g->kw, g->stride_w, g->dil_w, g->pad_left, g->pad_right));
	plan_init(&p->base, DT_CPU_PLAN_CONV, max_batch);
	p->g = *g;
	p->w_md = conv_weights_md(g, dnnl_f32, dnnl_hwio);
	p->bf16 = conv_reads_bf16(g, max_batch);
	p->gemm_bww = conv_gemm_bww(g, p->bf16);
	p->b_md = md_vec(g->out_c);
	p->w = dt_dnnl_mem_new(&p->w_md);
	p->dw = dt_dnnl_mem_new(&p->w_md);
	p->b = dt_dnnl_mem_new(&p->b_md);
	p->db = dt_dnnl_mem_new(&p->b_md);
	buf_reserve(&p->zero_bias, md_bytes(&p->b_md));
	buf_reserve(&p->db_unused, md_bytes(&p->b_md));
	conv_entry(p, max_batch);
	return &p->base.head.plan;
}

static int conv_batch(const struct conv_plan *p, const struct dt_tensor *x, const struct dt_tensor *y)
{
	const struct dt_conv_geom *g = &p->g;
	int n = x->shape.dim[0];
	DT_ASSERT(x->shape.ndim >= 1 && y->shape.ndim >= 1 && y->shape.dim[0] == n);
	DT_ASSERT(dt_tensor_count(x) == (int64_t)n * g->in_h * g->in_w * g->in_c);
	DT_ASSERT(dt_tensor_count(y) == (int64_t)n * g->out_h * g->out_w * g->out_c);
	return n;
}

void dt_cpu_conv_forward(struct dt_plan *pl, const struct dt_tensor *x, const struct dt_tensor *w,
			 const struct dt_tensor *b, struct dt_tensor *y)
{
	struct conv_plan *p = (struct conv_plan *)pl;
	const struct dt_conv_geom *g = &p->g;
	int n = conv_batch(p, x, y);
	struct conv_entry *e;
	dnnl_memory_t wm, xm;
	dnnl_exec_arg_t args[5];

	DT_ASSERT(p->base.head.kind == DT_CPU_PLAN_CONV);
	DT_ASSERT(dt_tensor_count(w) == dt_conv_kernel_count(g));
	DT_ASSERT(!b || dt_tensor_count(b) == g->out_c);
	if (n == 0)
		return;
	e = conv_entry(p, n);
	wm = in_layout(&e->w_to_fwd, &p->base.scratch, dt_dnnl_bind(p->w, w->data), e->w_fwd, &p->w_fwd);
	xm = in_layout(&e->x_to_lo, &p->base.scratch, dt_dnnl_bind(e->x, x->data), e->x_lo, &p->x_lo);
	args[0] = (dnnl_exec_arg_t){ DNNL_ARG_SRC, xm };
	args[1] = (dnnl_exec_arg_t){ DNNL_ARG_WEIGHTS, wm };
	args[2] = (dnnl_exec_arg_t){ DNNL_ARG_BIAS, dt_dnnl_bind(p->b, b ? b->data : p->zero_bias.p) };
	args[3] = (dnnl_exec_arg_t){ DNNL_ARG_DST, dt_dnnl_bind(e->y, y->data) };
	prim_run(&e->fwd, &p->base.scratch, 4, args);
}

/*
 * The weight gradient (dw, db when not NULL) on the entry's primitive, or on
 * sgemm; the dy it read in the primitive's layout, which backward data may
 * share (NULL on sgemm).
 */
static dnnl_memory_t conv_backward_weights(struct conv_plan *p, struct conv_entry *e, const struct dt_tensor *x,
					   const struct dt_tensor *dy, struct dt_tensor *dw, struct dt_tensor *db)
{
	dnnl_memory_t xm, dym, dwm;
	dnnl_exec_arg_t args[5]; /* and prim_run's scratchpad */

	if (p->gemm_bww) {
		dt_cpu_conv_gemm_backward_weights(&p->g, e->s.n, p->gemm_threads, x->data, dy->data, dw->data,
						  db ? db->data : NULL, p->gemm_work.p);
		return NULL;
	}
	xm = in_layout(&e->x_to_bww, &p->base.scratch, dt_dnnl_bind(e->x, x->data), e->x_bww, &p->x_bww);
	dym = in_layout(&e->dy_to_bww, &p->base.scratch, dt_dnnl_bind(e->dy, dy->data), e->dy_bww, &p->dy_bww);
	dwm = e->dw_bwd ? dt_dnnl_bind(e->dw_bwd, p->dw_bwd.p) : dt_dnnl_bind(p->dw, dw->data);
	args[0] = (dnnl_exec_arg_t){ DNNL_ARG_SRC, xm };
	args[1] = (dnnl_exec_arg_t){ DNNL_ARG_DIFF_DST, dym };
	args[2] = (dnnl_exec_arg_t){ DNNL_ARG_DIFF_WEIGHTS, dwm };
	args[3] = (dnnl_exec_arg_t){ DNNL_ARG_DIFF_BIAS, dt_dnnl_bind(p->db, db ? db->data : p->db_unused.p) };
	prim_run(&e->bwd_weights, &p->base.scratch, 4, args);
	if (e->dw_bwd)
		reorder_run(&e->dw_from_bwd, &p->base.scratch, dwm, dt_dnnl_bind(p->dw, dw->data));
	return dym;
}

void dt_cpu_conv_backward(struct dt_plan *pl, const struct dt_tensor *x, const struct dt_tensor *w,
			  const struct dt_tensor *dy, struct dt_tensor *dw, struct dt_tensor *db,
			  struct dt_tensor *dx)
{
	struct conv_plan *p = (struct conv_plan *)pl;
	const struct dt_conv_geom *g = &p->g;
	int n = conv_batch(p, x, dy);
	struct conv_entry *e;
	dnnl_memory_t dym;
	dnnl_exec_arg_t args[4]; /* and prim_run's scratchpad */

	DT_ASSERT(p->base.head.kind == DT_CPU_PLAN_CONV);
	DT_ASSERT(dt_tensor_count(w) == dt_conv_kernel_count(g));
	DT_ASSERT(dt_tensor_count(dw) == dt_tensor_count(w));
	DT_ASSERT(!db || dt_tensor_count(db) == g->out_c);
	DT_ASSERT(!dx || dt_tensor_count(dx) == dt_tensor_count(x));
	if (n == 0) {
		memset(dw->data, 0, (size_t)dt_tensor_count(dw) * sizeof(float));
		if (db)
			memset(db->data, 0, (size_t)g->out_c * sizeof(float));
		return;
	}
	e = conv_entry(p, n);
	if (!p->gemm_bww && !e->bwd_weights.p)
		conv_make_bwd_weights(p, e, dx != NULL);
	if (dx && !e->bwd_data.p)
		conv_make_bwd_data(p, e);

	dym = conv_backward_weights(p, e, x, dy, dw, db);
	if (dx) {
		dnnl_memory_t dxm = dt_dnnl_bind(e->dx, dx->data);
		dnnl_memory_t wm = in_layout(&e->w_to_bwd, &p->base.scratch, dt_dnnl_bind(p->w, w->data), e->w_bwd,
					     &p->w_bwd);
		args[0] = (dnnl_exec_arg_t){ DNNL_ARG_DIFF_DST,
					     e->dy_shared ? dym :
					     in_layout(&e->dy_to_bwd, &p->base.scratch, dt_dnnl_bind(e->dy, dy->data),
						       e->dy_bwd, &p->dy_bwd) };
		args[1] = (dnnl_exec_arg_t){ DNNL_ARG_WEIGHTS, wm };
		args[2] = (dnnl_exec_arg_t){ DNNL_ARG_DIFF_SRC, e->dx_bwd ? dt_dnnl_bind(e->dx_bwd, p->dx_bwd.p) : dxm };
		prim_run(&e->bwd_data, &p->base.scratch, 3, args);
		if (e->dx_bwd)
			reorder_run(&e->dx_from_bwd, &p->base.scratch, e->dx_bwd, dxm);
	}
}

static void conv_plan_free(struct conv_plan *p)
{
	for (int i = 0; i < CACHE_SIZE; i++)
		conv_entry_clear(&p->cache[i]);
	dt_dnnl_mem_free(&p->w);
	dt_dnnl_mem_free(&p->dw);
	dt_dnnl_mem_free(&p->b);
	dt_dnnl_mem_free(&p->db);
	buf_release(&p->w_fwd);
	buf_release(&p->w_bwd);
	buf_release(&p->dw_bwd);
	buf_release(&p->dy_bwd);
	buf_release(&p->dx_bwd);
	buf_release(&p->x_lo);
	buf_release(&p->x_bww);
	buf_release(&p->dy_bww);
	buf_release(&p->zero_bias);
	buf_release(&p->db_unused);
	buf_release(&p->gemm_work);
}

/* ---- batch normalization ---- */

struct bn_entry {
	struct slot s;
	dnnl_primitive_desc_t train_pd;
	struct prim train, infer, bwd;
	dnnl_memory_t x, y, dy, dx; /* (n, C, spatial, 1) channels last */
};

struct bn_plan {
	struct cpu_plan base;
	int c;
	int64_t spatial;
	float epsilon;
	struct bn_entry cache[CACHE_SIZE];
	dnnl_memory_t mean, var, scale, shift, dscale, dshift; /* (C) */
	struct buf batch_mean, batch_var; /* of the last training forward */
	struct buf ones, zeros;           /* gamma, beta NULL */
	struct buf dscale_unused, dshift_unused;
	int trained_n;
};

static const unsigned bn_flags = dnnl_use_scale | dnnl_use_shift;

static void bn_entry_clear(struct bn_entry *e)
{
	prim_free(&e->train);
	prim_free(&e->infer);
	prim_free(&e->bwd);
	pd_free(&e->train_pd);
	dt_dnnl_mem_free(&e->x);
	dt_dnnl_mem_free(&e->y);
	dt_dnnl_mem_free(&e->dy);
	dt_dnnl_mem_free(&e->dx);
	e->s.n = 0;
}

static dnnl_memory_desc_t bn_data_md(const struct bn_plan *p, int n) { return md_nhwc(n, p->c, p->spatial, 1); }

static struct bn_entry *bn_entry(struct bn_plan *p, int n)
{
	int fresh;
	struct bn_entry *e = cache_find(&p->base, p->cache, sizeof(p->cache[0]), n, &fresh);
	dnnl_memory_desc_t md;
	dnnl_batch_normalization_desc_t op;

	if (!fresh)
		return e;
	bn_entry_clear(e);
	e->s.n = n;
	md = bn_data_md(p, n);
	DT_DNNL_CHECK(dnnl_batch_normalization_forward_desc_init(&op, dnnl_forward_training, &md, p->epsilon, bn_flags));
	e->train_pd = prim_make_op(&e->train, &op, NULL, &p->base.scratch, 0);
	e->x = dt_dnnl_mem_new(&md);
	e->y = dt_dnnl_mem_new(&md);
	e->dx = dt_dnnl_mem_new(&md);
	e->dy = dt_dnnl_mem_new(&md);
	return e;
}

struct dt_plan *dt_cpu_plan_batchnorm(struct dt_device dev, int channels, int64_t spatial, float epsilon,
				      int max_batch)
{
	struct bn_plan *p = dt_calloc(1, sizeof(*p));
	dnnl_memory_desc_t c_md = md_vec(channels);
	size_t bytes = md_bytes(&c_md);
	float *ones;

	DT_ASSERT(dev.kind == DT_DEVICE_CPU);
	DT_ASSERT(channels > 0 && spatial > 0 && epsilon > 0);
	plan_init(&p->base, DT_CPU_PLAN_BATCHNORM, max_batch);
	p->c = channels;
	p->spatial = spatial;
	p->epsilon = epsilon;
	p->mean = dt_dnnl_mem_new(&c_md);
	p->var = dt_dnnl_mem_new(&c_md);
	p->scale = dt_dnnl_mem_new(&c_md);
	p->shift = dt_dnnl_mem_new(&c_md);
	p->dscale = dt_dnnl_mem_new(&c_md);
	p->dshift = dt_dnnl_mem_new(&c_md);
	buf_reserve(&p->batch_mean, bytes);
	buf_reserve(&p->batch_var, bytes);
	buf_reserve(&p->ones, bytes);
	buf_reserve(&p->zeros, bytes);
	buf_reserve(&p->dscale_unused, bytes);
	buf_reserve(&p->dshift_unused, bytes);
	ones = p->ones.p;
	for (int i = 0; i < channels; i++)
		ones[i] = 1;
	bn_entry(p, max_batch);
	return &p->base.head.plan;
}

static int bn_batch(const struct bn_plan *p, const struct dt_tensor *x)
{
	int n = x->shape.dim[0];
	DT_ASSERT(x->shape.ndim >= 1 && dt_tensor_count(x) == (int64_t)n * p->spatial * p->c);
	return n;
}

void dt_cpu_batchnorm_forward(struct dt_plan *pl, int training, float momentum, const struct dt_tensor *x,
			      const struct dt_tensor *gamma, const struct dt_tensor *beta,
			      struct dt_tensor *moving_mean, struct dt_tensor *moving_var, struct dt_tensor *y)
{
	struct bn_plan *p = (struct bn_plan *)pl;
	int n = bn_batch(p, x);
	struct bn_entry *e;
	dnnl_exec_arg_t args[8];
	const struct prim *pr;

	DT_ASSERT(p->base.head.kind == DT_CPU_PLAN_BATCHNORM);
	DT_ASSERT(dt_tensor_count(moving_mean) == p->c && dt_tensor_count(moving_var) == p->c);
	DT_ASSERT(!gamma || dt_tensor_count(gamma) == p->c);
	DT_ASSERT(!beta || dt_tensor_count(beta) == p->c);
	if (n == 0)
		return;
	e = bn_entry(p, n);
	if (!training && !e->infer.p) {
		dnnl_memory_desc_t md = bn_data_md(p, n);
		dnnl_batch_normalization_desc_t op;
		dnnl_primitive_desc_t pd;
		DT_DNNL_CHECK(dnnl_batch_normalization_forward_desc_init(&op, dnnl_forward_inference, &md, p->epsilon,
									 bn_flags | dnnl_use_global_stats));
		pd = prim_make_op(&e->infer, &op, NULL, &p->base.scratch, 0);
		pd_free(&pd);
	}
	pr = training ? &e->train : &e->infer;
	args[0] = (dnnl_exec_arg_t){ DNNL_ARG_SRC, dt_dnnl_bind(e->x, x->data) };
	args[1] = (dnnl_exec_arg_t){ DNNL_ARG_DST, dt_dnnl_bind(e->y, y->data) };
	args[2] = (dnnl_exec_arg_t){ DNNL_ARG_SCALE, dt_dnnl_bind(p->scale, gamma ? gamma->data : p->ones.p) };
	args[3] = (dnnl_exec_arg_t){ DNNL_ARG_SHIFT, dt_dnnl_bind(p->shift, beta ? beta->data : p->zeros.p) };
	args[4] = (dnnl_exec_arg_t){ DNNL_ARG_MEAN, dt_dnnl_bind(p->mean, training ? p->batch_mean.p : moving_mean->data) };
	args[5] = (dnnl_exec_arg_t){ DNNL_ARG_VARIANCE, dt_dnnl_bind(p->var, training ? p->batch_var.p : moving_var->data) };
	prim_run(pr, &p->base.scratch, 6, args);
	if (training) {
		const float *bm = p->batch_mean.p, *bv = p->batch_var.p;
		float *mm = moving_mean->data, *mv = moving_var->data;
		for (int i = 0; i < p->c; i++) {
			mm[i] = momentum * mm[i] + (1 - momentum) * bm[i];
			mv[i] = momentum * mv[i] + (1 - momentum) * bv[i];
		}
		p->trained_n = n;
	}
}

void dt_cpu_batchnorm_backward(struct dt_plan *pl, const struct dt_tensor *x, const struct dt_tensor *dy,
			       const struct dt_tensor *gamma, struct dt_tensor *dgamma, struct dt_tensor *dbeta,
			       struct dt_tensor *dx)
{
	struct bn_plan *p = (struct bn_plan *)pl;
	int n = bn_batch(p, x);
	struct bn_entry *e;
	dnnl_exec_arg_t args[10];

	DT_ASSERT(p->base.head.kind == DT_CPU_PLAN_BATCHNORM);
	DT_ASSERT(dt_tensor_count(dy) == dt_tensor_count(x));
	DT_ASSERT(!gamma || dt_tensor_count(gamma) == p->c);
	DT_ASSERT(!dgamma || dt_tensor_count(dgamma) == p->c);
	DT_ASSERT(!dbeta || dt_tensor_count(dbeta) == p->c);
	if (n == 0) {
		if (dgamma)
			memset(dgamma->data, 0, (size_t)p->c * sizeof(float));
		if (dbeta)
			memset(dbeta->data, 0, (size_t)p->c * sizeof(float));
		return;
	}
	/* The batch statistics are those of the training forward of this batch. */
	DT_ASSERT(p->trained_n == n);
	e = bn_entry(p, n);
	if (!e->bwd.p) {
		dnnl_memory_desc_t md = bn_data_md(p, n);
		dnnl_batch_normalization_desc_t op;
		dnnl_primitive_desc_t pd;
		DT_DNNL_CHECK(dnnl_batch_normalization_backward_desc_init(&op, dnnl_backward, &md, &md, p->epsilon,
									  bn_flags));
		pd = prim_make_op(&e->bwd, &op, e->train_pd, &p->base.scratch, 0);
		pd_free(&pd);
	}
	args[0] = (dnnl_exec_arg_t){ DNNL_ARG_SRC, dt_dnnl_bind(e->x, x->data) };
	args[1] = (dnnl_exec_arg_t){ DNNL_ARG_DIFF_DST, dt_dnnl_bind(e->dy, dy->data) };
	args[2] = (dnnl_exec_arg_t){ DNNL_ARG_MEAN, dt_dnnl_bind(p->mean, p->batch_mean.p) };
	args[3] = (dnnl_exec_arg_t){ DNNL_ARG_VARIANCE, dt_dnnl_bind(p->var, p->batch_var.p) };
	args[4] = (dnnl_exec_arg_t){ DNNL_ARG_SCALE, dt_dnnl_bind(p->scale, gamma ? gamma->data : p->ones.p) };
	args[5] = (dnnl_exec_arg_t){ DNNL_ARG_SHIFT, dt_dnnl_bind(p->shift, p->zeros.p) }; /* unread, but counted */
	args[6] = (dnnl_exec_arg_t){ DNNL_ARG_DIFF_SRC, dt_dnnl_bind(e->dx, dx->data) };
	args[7] = (dnnl_exec_arg_t){ DNNL_ARG_DIFF_SCALE, dt_dnnl_bind(p->dscale, dgamma ? dgamma->data : p->dscale_unused.p) };
	args[8] = (dnnl_exec_arg_t){ DNNL_ARG_DIFF_SHIFT, dt_dnnl_bind(p->dshift, dbeta ? dbeta->data : p->dshift_unused.p) };
	prim_run(&e->bwd, &p->base.scratch, 9, args);
}

static void bn_plan_free(struct bn_plan *p)
{
	for (int i = 0; i < CACHE_SIZE; i++)
		bn_entry_clear(&p->cache[i]);
	dt_dnnl_mem_free(&p->mean);
	dt_dnnl_mem_free(&p->var);
	dt_dnnl_mem_free(&p->scale);
	dt_dnnl_mem_free(&p->shift);
	dt_dnnl_mem_free(&p->dscale);
	dt_dnnl_mem_free(&p->dshift);
	buf_release(&p->batch_mean);
	buf_release(&p->batch_var);
	buf_release(&p->ones);
	buf_release(&p->zeros);
	buf_release(&p->dscale_unused);
	buf_release(&p->dshift_unused);
}

uint64_t dt_cpu_primitives_made(void) { return primitives_made; }

void dt_cpu_plan_free(struct dt_plan *pl)
{
	struct cpu_plan *p = (struct cpu_plan *)pl;
	if (!p)
		return;
	switch (p->head.kind) {
	case DT_CPU_PLAN_CONV:
		conv_plan_free((struct conv_plan *)p);
		break;
	case DT_CPU_PLAN_POOL: /* pool.c's own plan, not a struct cpu_plan */
		dt_cpu_pool_plan_free(pl);
		return;
	case DT_CPU_PLAN_LAYERNORM: /* layernorm.c's own plan */
		dt_cpu_layernorm_plan_free(pl);
		return;
	case DT_CPU_PLAN_RNN: /* rnn.c's own plan */
		dt_cpu_rnn_plan_free(pl);
		return;
	case DT_CPU_PLAN_BATCHNORM:
		bn_plan_free((struct bn_plan *)p);
		break;
	}
	buf_release(&p->scratch);
	free(p);
}
