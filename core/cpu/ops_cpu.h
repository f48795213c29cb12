/*
 * Inside the CPU backend: what the files of core/cpu/ share. ops_cpu.c fills
 * dt_cpu_backend (oneDNN's sgemm, OpenMP loops over core/rows.h); the plans
 * live in dnnl.c (convolution and batch normalization on oneDNN primitives)
 * and pool.c (NHWC pooling loops) and fill their slots; arguments mean what
 * core/ops.h says. Only the CPU backend files include this header.
 */
#ifndef DT_OPS_CPU_H
#define DT_OPS_CPU_H

#include <stdint.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>

#include "core/backend.h"
#include "core/error.h"

/*
 * A oneDNN call that must not fail: a failure is a bug, reported with the call
 * and file:line; running out of memory is an error that ends the run with
 * status 1 (dt_exit_out_of_memory).
 */
#define DT_DNNL_CHECK(call) \
	do { \
		dnnl_status_t st_ = (call); \
		if (st_ == dnnl_out_of_memory) { \
			dt_error("out of memory in %s (at %s:%d)", #call, __FILE__, __LINE__); \
			dt_exit_out_of_memory(); \
		} \
		if (st_ != dnnl_success) \
			dt_bug(__FILE__, __LINE__, "%s failed: %s", #call, dnnl_status2str(st_)); \
	} while (0)

/*
 * oneDNN's objects every CPU plan file shares (dnnl.c makes them once): the
 * engine, the stream and a primitive attribute in user-scratchpad mode (a
 * plan may be made on one thread and run on another). Memory objects on that
 * engine: _mem_new (caller frees with _mem_free, which takes NULL), _bind
 * points one at data and returns it.
 */
void dt_dnnl_shared(dnnl_engine_t *engine, dnnl_stream_t *stream, dnnl_primitive_attr_t *attr);
dnnl_memory_t dt_dnnl_mem_new(const dnnl_memory_desc_t *md);
void dt_dnnl_mem_free(dnnl_memory_t *m);
dnnl_memory_t dt_dnnl_bind(dnnl_memory_t m, const void *data);

int dt_cpu_channel_block(void);
int dt_cpu_conv_runs(const struct dt_conv_geom *g, int with_dx);
struct dt_plan *dt_cpu_plan_conv(struct dt_device dev, const struct dt_conv_geom *g, int max_batch);
void dt_cpu_conv_forward(struct dt_plan *p, const struct dt_tensor *x, const struct dt_tensor *w,
			 const struct dt_tensor *b, struct dt_tensor *y);
void dt_cpu_conv_backward(struct dt_plan *p, const struct dt_tensor *x, const struct dt_tensor *w,
			  const struct dt_tensor *dy, struct dt_tensor *dw, struct dt_tensor *db,
			  struct dt_tensor *dx);
struct dt_plan *dt_cpu_plan_pool(struct dt_device dev, const struct dt_pool_geom *g, int max_batch);
void dt_cpu_pool_forward(struct dt_plan *p, const struct dt_tensor *x, struct dt_tensor *y, int training);
void dt_cpu_pool_backward(struct dt_plan *p, const struct dt_tensor *dy, struct dt_tensor *dx);
struct dt_plan *dt_cpu_plan_batchnorm(struct dt_device dev, int channels, int64_t spatial, float epsilon,
				      int max_batch);
void dt_cpu_batchnorm_forward(struct dt_plan *p, int training, float momentum, const struct dt_tensor *x,
			      const struct dt_tensor *gamma, const struct dt_tensor *beta,
			      struct dt_tensor *moving_mean, struct dt_tensor *moving_var, struct dt_tensor *y);
void dt_cpu_batchnorm_backward(struct dt_plan *p, const struct dt_tensor *x, const struct dt_tensor *dy,
			       const struct dt_tensor *gamma, struct dt_tensor *dgamma, struct dt_tensor *dbeta,
			       struct dt_tensor *dx);
void dt_cpu_plan_free(struct dt_plan *p);
/* Embedding (embedding.c). */
void dt_cpu_gather(const struct dt_tensor *idx, const struct dt_tensor *table, struct dt_tensor *y);
void dt_cpu_scatter_add(const struct dt_tensor *idx, const struct dt_tensor *dy, struct dt_tensor *dtable);
/* compile.precision on the CPU (dt_ops_set_cpu_precision): what plans read when they are made. */
enum dt_precision dt_cpu_precision(void);
/*
 * c (m x n) = alpha op(a) op(b) + beta c, dense row-major float32 operands
 * (op(a) is m x k, op(b) k x n; trans_*: the operand is stored transposed),
 * computed by oneDNN's matmul primitive (matmul.c): on bfloat16 copies of a
 * and b with float32 accumulation where bf16, else in float32.
 */
void dt_cpu_matmul(int bf16, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
		   const float *b, float beta, float *c);
/*
 * The same product in float32 on oneDNN's sgemm (matmul.c), an operand whose
 * rows alias in the caches copied first to longer rows where that is faster.
 */
void dt_cpu_sgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
		  const float *b, float beta, float *c);
/* The row stride at which sgemm reads rows of cols floats along k fast: cols, or longer where it would alias. */
int64_t dt_cpu_sgemm_ld(int64_t cols);
/*
 * A float32 convolution's weight gradient on sgemm (conv_gemm.c): whether
 * g's plan takes it (on this CPU), the floats of work it needs at `threads`
 * threads, and the gradient itself (dw, and db unless NULL, overwritten)
 * from x and dy in g's layouts at batch n > 0, for any ungrouped g on any CPU.
 */
int dt_cpu_conv_gemm_weights(const struct dt_conv_geom *g);
int64_t dt_cpu_conv_gemm_work(const struct dt_conv_geom *g, int threads);
void dt_cpu_conv_gemm_backward_weights(const struct dt_conv_geom *g, int n, int threads, const float *x,
				       const float *dy, float *dw, float *db, float *work);
/*
 * float32 to bfloat16 as the avx512_bf16 instruction (vcvtneps2bf16) and so
 * oneDNN there round: to nearest even, denormals to a zero of their sign, NaN
 * kept quiet.
 */
static inline uint16_t dt_bf16_round(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	if ((u & 0x7f800000u) == 0)
		return (uint16_t)((u >> 16) & 0x8000u);
	if ((u & 0x7f800000u) == 0x7f800000u)
		return (uint16_t)((u >> 16) | ((u & 0x7fffffu) ? 0x40u : 0));
	return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}
/*
 * dst[0, n) = src[0, n) in bfloat16, rounded as dt_bf16_round (ops_cpu.c):
 * the bfloat16 copies that products under precision bf16 read. With several
 * threads each converts the same tiles at every call and streams them.
 */
void dt_cpu_to_bf16(uint16_t *dst, const float *src, int64_t n);
/* oneDNN primitives (reorders included) the plans have made in this process: the tests' window on the cache. */
uint64_t dt_cpu_primitives_made(void);


/*
 * Where a layout (core/op_types.h) puts the values of a tensor of images of
 * `pixels` pixels of c channels, taken in groups of cw channels (a block of
 * BLOCKED, else all c): lane j of group k of image b at pixel p is at
 * b * image + k * group + p * pixel + j. NHWC: groups side by side in each
 * pixel; BLOCKED (cw the block): each group a plane of its own. The pooling
 * loops (pool.c) and the convolution's sgemm weight gradient (conv_gemm.c)
 * read both layouts through it.
 */
struct dt_cpu_strides {
	int64_t image, group;
	int pixel;
};

static inline struct dt_cpu_strides dt_cpu_strides_of(enum dt_layout layout, int64_t pixels, int c, int cw)
{
	if (layout == DT_LAYOUT_BLOCKED)
		return (struct dt_cpu_strides){ pixels * c, pixels * cw, cw };
	return (struct dt_cpu_strides){ pixels * c, cw, c };
}

/*
 * The head of every CPU plan, so that dt_cpu_plan_free (dnnl.c) frees each
 * kind: pooling plans are pool.c's own loops, the others oneDNN primitives
 * (dnnl.c).
 */
enum dt_cpu_plan_kind { DT_CPU_PLAN_CONV, DT_CPU_PLAN_POOL, DT_CPU_PLAN_BATCHNORM,
	DT_CPU_PLAN_LAYERNORM, /* layernorm.c */
	DT_CPU_PLAN_RNN,       /* rnn.c */
};
struct dt_cpu_plan_head {
	struct dt_plan plan;
	enum dt_cpu_plan_kind kind;
};
/* Frees a pooling plan (dt_cpu_plan_free calls it for DT_CPU_PLAN_POOL). */
void dt_cpu_pool_plan_free(struct dt_plan *p);

/* cnnparts: spatial copies and resampling (resample.c) */
void dt_cpu_shift2d(const struct dt_tensor *x, struct dt_tensor *y, int top, int left);
void dt_cpu_upsample2d(enum dt_interp mode, const struct dt_tensor *x, struct dt_tensor *y);
void dt_cpu_upsample2d_backward(enum dt_interp mode, const struct dt_tensor *dy, struct dt_tensor *dx);
void dt_cpu_mul_channels(const struct dt_tensor *x, const struct dt_tensor *m, struct dt_tensor *y);
/* cnnparts: transposed convolution plans (deconv.c); the plan's own table carries its ops and its free. */
struct dt_plan *dt_cpu_plan_deconv(struct dt_device dev, const struct dt_conv_geom *g, int max_batch);
/* Layer normalization (layernorm.c, oneDNN's primitive); dt_cpu_plan_free calls the free for its kind. */
struct dt_plan *dt_cpu_plan_layernorm(struct dt_device dev, int channels, int64_t rows, float epsilon, int max_batch);
void dt_cpu_layernorm_forward(struct dt_plan *p, const struct dt_tensor *x, const struct dt_tensor *gamma,
			      const struct dt_tensor *beta, struct dt_tensor *y);
void dt_cpu_layernorm_backward(struct dt_plan *p, const struct dt_tensor *x, const struct dt_tensor *dy,
			       const struct dt_tensor *gamma, struct dt_tensor *dgamma, struct dt_tensor *dbeta,
			       struct dt_tensor *dx);
void dt_cpu_layernorm_plan_free(struct dt_plan *p);
/* Recurrent layers (rnn.c, on oneDNN's RNN primitives). */
struct dt_plan *dt_cpu_plan_rnn(struct dt_device dev, const struct dt_rnn_geom *g, int max_batch);
void dt_cpu_rnn_forward(struct dt_plan *p, int training, const struct dt_tensor *x, const struct dt_tensor *w,
			const struct dt_tensor *u, const struct dt_tensor *b, struct dt_tensor *y);
void dt_cpu_rnn_backward(struct dt_plan *p, const struct dt_tensor *x, const struct dt_tensor *w,
			 const struct dt_tensor *u, const struct dt_tensor *b, const struct dt_tensor *y,
			 const struct dt_tensor *dy, struct dt_tensor *dw, struct dt_tensor *du, struct dt_tensor *db,
			 struct dt_tensor *dx);
void dt_cpu_rnn_merge(enum dt_rnn_merge mode, int steps, const struct dt_tensor *yf, const struct dt_tensor *yb,
		      struct dt_tensor *y);
void dt_cpu_rnn_merge_backward(enum dt_rnn_merge mode, int steps, const struct dt_tensor *dy,
			       const struct dt_tensor *yf, const struct dt_tensor *yb, struct dt_tensor *dyf,
			       struct dt_tensor *dyb);
/* Frees a recurrent plan (dt_cpu_plan_free calls it for DT_CPU_PLAN_RNN). */
void dt_cpu_rnn_plan_free(struct dt_plan *p);

#endif
