/*
 * The CUDA backend's plans: convolution on cuDNN, pooling and batch
 * normalization on own kernels, over dtrain's channels-last tensors.
 *
 * Convolution: cuDNN's NHWC activations are dtrain's as they are; its NHWC
 * filter layout is (out, kh, kw, in) where Keras keeps (kh, kw, in, out), so
 * the kernel is transposed into a plan buffer at each step (and the weight
 * gradient back), a few microseconds. cuDNN pads symmetrically only: Keras'
 * "same" with an even total padding puts the extra row and column at the
 * bottom and right, and then the plan pads x into its own buffer and runs
 * cuDNN unpadded. Algorithms are chosen once per direction and batch size,
 * on the first step of that size: timed on that step's buffers
 * (cudnnFind*AlgorithmEx, as PyTorch's cudnn.benchmark; DTRAIN_CUDNN_FIND=0
 * takes cuDNN's heuristic order, cudnnGet*Algorithm_v7, instead), the
 * fastest that the precision allows, then cached with the size of their
 * workspace; the GPU's one workspace (dt_gpu_workspace), shared by every
 * plan, grows to it then and never on later steps.
 * Under precision bf16 a plan converts x, w and dy to bfloat16 buffers of
 * its own and runs cuDNN's pseudo-bfloat16 configuration (bf16 tensors,
 * float32 compute), converting y, dw and dx back; where cuDNN proposes no
 * bfloat16 algorithm for the geometry, the plan stays float32 (TF32). fp32 asks for FMA math and refuses
 * tensor-op (TF32) proposals so that results match the CPU's; tf32 and bf16
 * allow tensor-op math.
 *
 * Pooling and batch normalization are the CPU backend's loops as kernels,
 * with its exact semantics: max pooling remembers the first maximal window
 * position (cuDNN's backward needs x and y, which the interface does not
 * pass, and breaks ties its own way); batch normalization uses the biased
 * batch variance for both normalizing and the moving average (cuDNN's
 * running variance is unbiased) and accepts any epsilon > 0 (cuDNN's needs
 * >= 1e-5). Both reduce per channel with the deterministic column reduction.
 */
#include <stdlib.h>
#include <string.h>

#include <cuda_bf16.h>

#include "core/cuda/ops_cuda.h"

#define CACHE_SIZE 8
#define MAX_WORKSPACE ((size_t)1 << 30)
#define FIND_WORKSPACE ((size_t)256 << 20)

enum plan_kind { PLAN_CONV, PLAN_POOL, PLAN_BATCHNORM };

struct cuda_plan {
	struct dt_plan head;
	enum plan_kind kind;
	struct dt_device dev;
	int max_batch;
	uint64_t clock;
};

static void plan_init(struct cuda_plan *p, enum plan_kind kind, struct dt_device dev, int max_batch)
{
	DT_CUDA_ASSERT(dev.kind == DT_DEVICE_CUDA && max_batch > 0);
	p->head.backend = &dt_cuda_backend;
	p->kind = kind;
	p->dev = dev;
	p->max_batch = max_batch;
}

static int64_t out_size(int in, int k, int stride, int dil, int pad_lo, int pad_hi)
{
	int64_t span = (int64_t)in + pad_lo + pad_hi - (int64_t)dil * (k - 1) - 1;
	return span < 0 ? 0 : span / stride + 1;
}

__global__ void k_to_bf16(const float *x, __nv_bfloat16 *y, int64_t n)
{
	GRID_LOOP(i, n) y[i] = __float2bfloat16_rn(x[i]);
}

__global__ void k_from_bf16(const __nv_bfloat16 *x, float *y, int64_t n)
{
	GRID_LOOP(i, n) y[i] = __bfloat162float(x[i]);
}

/* out (cols, rows) = in (rows, cols)^T */
__global__ void k_transpose(const float *in, float *out, int64_t rows, int64_t cols)
{
	GRID_LOOP(i, rows * cols)
	{
		int64_t r = i / cols, c = i % cols;
		out[c * rows + r] = in[i];
	}
}

/* xp (n, hp, wp, c) = x (n, h, w, c) padded by top, left (zeros elsewhere). */
__global__ void k_pad(const float *x, float *xp, int64_t total, int h, int w, int c, int hp, int wp, int top, int left)
{
	GRID_LOOP(i, total)
	{
		int ch = (int)(i % c);
		int64_t rest = i / c;
		int iw = (int)(rest % wp) - left;
		rest /= wp;
		int ih = (int)(rest % hp) - top;
		int64_t b = rest / hp;
		xp[i] = ih >= 0 && ih < h && iw >= 0 && iw < w ? x[((b * h + ih) * w + iw) * c + ch] : 0.0f;
	}
}

/* dx (n, h, w, c) = the interior of dxp (n, hp, wp, c). */
__global__ void k_crop(const float *dxp, float *dx, int64_t total, int h, int w, int c, int hp, int wp, int top,
		       int left)
{
	GRID_LOOP(i, total)
	{
		int ch = (int)(i % c);
		int64_t rest = i / c;
		int iw = (int)(rest % w);
		rest /= w;
		int ih = (int)(rest % h);
		int64_t b = rest / h;
		dx[i] = dxp[((b * hp + ih + top) * wp + iw + left) * c + ch];
	}
}

/* ---- convolution ---- */

struct conv_entry {
	int n;
	uint64_t used;
	cudnnTensorDescriptor_t x, y;
	cudnnConvolutionFwdAlgo_t fwd;
	cudnnConvolutionBwdDataAlgo_t bwd_data;
	cudnnConvolutionBwdFilterAlgo_t bwd_filter;
	cudnnMathType_t fwd_math, data_math, filter_math;
	int have_fwd, have_filter, have_data; /* algorithms chosen */
};

struct conv_plan {
	struct cuda_plan base;
	struct dt_conv_geom g;
	int padded;                 /* asymmetric padding: x goes through xp */
	int in_h, in_w;             /* of what cuDNN sees (padded when padded) */
	cudnnFilterDescriptor_t w;
	cudnnConvolutionDescriptor_t conv;
	float *w_t, *dw_t;          /* (out, kh, kw, in) */
	float *xp, *dxp;            /* (max_batch, in_h, in_w, in_c) when padded */
	/*
	 * precision bf16: cuDNN runs on bfloat16 copies (float32 accumulation,
	 * cuDNN's PSEUDO_BFLOAT16 configuration) of x (and then dx), y (and
	 * then dy), w and dw; float32 everywhere else.
	 */
	cudnnDataType_t dtype;
	__nv_bfloat16 *xb, *yb, *wb, *dwb;
	size_t ws_bytes; /* the workspace its algorithms need (dt_gpu_workspace) */
	struct conv_entry cache[CACHE_SIZE];
};

/* The descriptor's math type while cuDNN proposes algorithms: fp32 asks for FMA kernels only. */
static cudnnMathType_t math_asked(void)
{
	return dt_cuda_precision() == DT_PRECISION_FP32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
}

/*
 * Whether a proposal fits the precision: under fp32 none that uses tensor
 * cores (TF32), as PyTorch does with allow_tf32 off, and in the first pass
 * only FMA ones. The proposal's own math type is then set on the
 * descriptor, the one it was proposed with.
 */
static int math_ok(cudnnMathType_t m, int pass)
{
	if (dt_cuda_precision() != DT_PRECISION_FP32)
		return 1;
	return pass == 0 ? m == CUDNN_FMA_MATH : m != CUDNN_TENSOR_OP_MATH && m != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

static void ws_reserve(struct conv_plan *p, size_t bytes)
{
	if (bytes > p->ws_bytes)
		p->ws_bytes = bytes;
}

/*
 * From proposals sorted best first, the first the precision allows (FMA
 * ones first under fp32) whose workspace cuDNN can size and that fits
 * MAX_WORKSPACE; its index, or -1. size(algo, &bytes) asks cuDNN with the
 * proposal's math type set on the descriptor.
 */
template <typename Perf, typename Size> static int pick(struct conv_plan *p, const Perf *perf, int got, Size size,
							 size_t *bytes)
{
	for (int k = 0; k < 2 * got; k++) {
		int i = k % got;
		if (perf[i].status != CUDNN_STATUS_SUCCESS || !math_ok(perf[i].mathType, k / got))
			continue;
		DT_CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, perf[i].mathType));
		if (!size(perf[i].algo, bytes) || *bytes > MAX_WORKSPACE)
			continue;
		return i;
	}
	return -1;
}

/*
 * Whether to time the algorithms (cudnnFind*AlgorithmEx on the step's own
 * buffers, as PyTorch's cudnn.benchmark) rather than take cuDNN's heuristic
 * order; DTRAIN_CUDNN_FIND=0 turns timing off.
 */
static int find_enabled(void)
{
	const char *v = getenv("DTRAIN_CUDNN_FIND");
	return !(v && !strcmp(v, "0"));
}

/* Scratch for timing: from the allocator, handed back (and kept in its cache) at once. */
static void *find_ws(struct conv_plan *p) { return dt_cuda_alloc(p->base.dev.index, FIND_WORKSPACE / sizeof(float)); }

static void choose_fwd(struct conv_plan *p, struct dt_gpu *g, struct conv_entry *e, const void *x, const void *w,
		       void *y)
{
	cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
	int got = 0, i = -1;
	size_t bytes = 0;
	auto size = [&](cudnnConvolutionFwdAlgo_t a, size_t *b) {
		return cudnnGetConvolutionForwardWorkspaceSize(g->dnn, e->x, p->w, p->conv, e->y, a, b) ==
		       CUDNN_STATUS_SUCCESS;
	};
	DT_CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, math_asked()));
	if (x && y && find_enabled()) {
		void *ws = find_ws(p);
		if (cudnnFindConvolutionForwardAlgorithmEx(g->dnn, e->x, x, p->w, w, p->conv, e->y, y,
							   CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf, ws,
							   FIND_WORKSPACE) == CUDNN_STATUS_SUCCESS)
			i = pick(p, perf, got, size, &bytes);
		dt_cuda_free(p->base.dev.index, (float *)ws);
	}
	if (i < 0) {
		DT_CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, math_asked()));
		DT_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(g->dnn, e->x, p->w, p->conv, e->y,
								   CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf));
		i = pick(p, perf, got, size, &bytes);
	}
	if (i < 0)
		DT_CUDA_BUG("cuDNN has no forward convolution algorithm for batch %d", e->n);
	e->fwd = perf[i].algo;
	e->fwd_math = perf[i].mathType;
	e->have_fwd = 1;
	ws_reserve(p, bytes);
}

static void choose_filter(struct conv_plan *p, struct dt_gpu *g, struct conv_entry *e, const void *x, const void *dy,
			  void *dw)
{
	cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
	int got = 0, i = -1;
	size_t bytes = 0;
	auto size = [&](cudnnConvolutionBwdFilterAlgo_t a, size_t *b) {
		return cudnnGetConvolutionBackwardFilterWorkspaceSize(g->dnn, e->x, e->y, p->conv, p->w, a, b) ==
		       CUDNN_STATUS_SUCCESS;
	};
	DT_CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, math_asked()));
	if (find_enabled()) {
		void *ws = find_ws(p);
		if (cudnnFindConvolutionBackwardFilterAlgorithmEx(g->dnn, e->x, x, e->y, dy, p->conv, p->w, dw,
								  CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, perf,
								  ws, FIND_WORKSPACE) == CUDNN_STATUS_SUCCESS)
			i = pick(p, perf, got, size, &bytes);
		dt_cuda_free(p->base.dev.index, (float *)ws);
	}
	if (i < 0) {
		DT_CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, math_asked()));
		DT_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(g->dnn, e->x, e->y, p->conv, p->w,
									  CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got,
									  perf));
		i = pick(p, perf, got, size, &bytes);
	}
	if (i < 0)
		DT_CUDA_BUG("cuDNN has no backward-filter convolution algorithm for batch %d", e->n);
	e->bwd_filter = perf[i].algo;
	e->filter_math = perf[i].mathType;
	e->have_filter = 1;
	ws_reserve(p, bytes);
}

static void choose_data(struct conv_plan *p, struct dt_gpu *g, struct conv_entry *e, const void *w, const void *dy,
			void *dx)
{
	cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
	int got = 0, i = -1;
	size_t bytes = 0;
	auto size = [&](cudnnConvolutionBwdDataAlgo_t a, size_t *b) {
		return cudnnGetConvolutionBackwardDataWorkspaceSize(g->dnn, p->w, e->y, p->conv, e->x, a, b) ==
		       CUDNN_STATUS_SUCCESS;
	};
	DT_CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, math_asked()));
	if (find_enabled()) {
		void *ws = find_ws(p);
		if (cudnnFindConvolutionBackwardDataAlgorithmEx(g->dnn, p->w, w, e->y, dy, p->conv, e->x, dx,
								CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, perf, ws,
								FIND_WORKSPACE) == CUDNN_STATUS_SUCCESS)
			i = pick(p, perf, got, size, &bytes);
		dt_cuda_free(p->base.dev.index, (float *)ws);
	}
	if (i < 0) {
		DT_CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, math_asked()));
		DT_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(g->dnn, p->w, e->y, p->conv, e->x,
									CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, perf));
		i = pick(p, perf, got, size, &bytes);
	}
	if (i < 0)
		DT_CUDA_BUG("cuDNN has no backward-data convolution algorithm for batch %d", e->n);
	e->bwd_data = perf[i].algo;
	e->data_math = perf[i].mathType;
	e->have_data = 1;
	ws_reserve(p, bytes);
}

/*
 * The entry for batch size n: cached, else its descriptors made in a free
 * or the least recently used slot. Algorithms are chosen on their first use
 * (choose_*), on that step's buffers.
 */
static struct conv_entry *conv_entry(struct conv_plan *p, int n)
{
	const struct dt_conv_geom *c = &p->g;
	struct conv_entry *e = NULL;
	DT_CUDA_ASSERT(n > 0 && n <= p->base.max_batch);
	for (int i = 0; i < CACHE_SIZE; i++) {
		struct conv_entry *f = &p->cache[i];
		if (f->n == n) {
			f->used = ++p->base.clock;
			return f;
		}
		if (!e || (e->n && (!f->n || f->used < e->used)))
			e = f;
	}
	if (!e->x) {
		DT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&e->x));
		DT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&e->y));
	}
	e->n = n;
	e->have_fwd = e->have_filter = e->have_data = 0;
	DT_CUDNN_CHECK(cudnnSetTensor4dDescriptor(e->x, CUDNN_TENSOR_NHWC, p->dtype, n, c->in_c, p->in_h, p->in_w));
	DT_CUDNN_CHECK(cudnnSetTensor4dDescriptor(e->y, CUDNN_TENSOR_NHWC, p->dtype, n, c->out_c, c->out_h, c->out_w));
	e->used = ++p->base.clock;
	return e;
}

/*
 * Whether cuDNN proposes any forward algorithm for this geometry in
 * bfloat16 (x, w, y bf16, float32 compute) at max_batch: the plan falls
 * back to float32 with TF32 tensor cores where it does not.
 */
static int bf16_supported(struct conv_plan *p, int n)
{
	const struct dt_conv_geom *c = &p->g;
	struct dt_gpu *g = dt_gpu_use(p->base.dev);
	cudnnTensorDescriptor_t x, y;
	cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
	int got = 0, ok = 0;
	DT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&x));
	DT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&y));
	DT_CUDNN_CHECK(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NHWC, CUDNN_DATA_BFLOAT16, n, c->in_c, p->in_h, p->in_w));
	DT_CUDNN_CHECK(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NHWC, CUDNN_DATA_BFLOAT16, n, c->out_c, c->out_h, c->out_w));
	DT_CUDNN_CHECK(cudnnSetFilter4dDescriptor(p->w, CUDNN_DATA_BFLOAT16, CUDNN_TENSOR_NHWC, c->out_c, c->in_c / dt_conv_groups(c), c->kh,
					       c->kw));
	DT_CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, CUDNN_TENSOR_OP_MATH));
	if (cudnnGetConvolutionForwardAlgorithm_v7(g->dnn, x, p->w, p->conv, y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got,
						   perf) == CUDNN_STATUS_SUCCESS)
		for (int i = 0; i < got; i++)
			ok |= perf[i].status == CUDNN_STATUS_SUCCESS;
	DT_CUDNN_CHECK(cudnnDestroyTensorDescriptor(x));
	DT_CUDNN_CHECK(cudnnDestroyTensorDescriptor(y));
	return ok;
}

/* Queues x (n floats) -> bf16. */
static const void *to_bf16(struct dt_gpu *g, const float *x, __nv_bfloat16 *xb, int64_t n)
{
	k_to_bf16 LAUNCH(g, n)(x, xb, n);
	DT_CUDA_LAUNCH_CHECK();
	return xb;
}

static void from_bf16(struct dt_gpu *g, const __nv_bfloat16 *xb, float *x, int64_t n)
{
	k_from_bf16 LAUNCH(g, n)(xb, x, n);
	DT_CUDA_LAUNCH_CHECK();
}

struct dt_plan *dt_cuda_plan_conv(struct dt_device dev, const struct dt_conv_geom *c, int max_batch)
{
	struct conv_plan *p = (struct conv_plan *)calloc(1, sizeof(*p));
	int64_t wn = dt_conv_kernel_count(c);
	int pad_h, pad_w;

	DT_CUDA_ASSERT(p);
	DT_CUDA_ASSERT(c->in_c > 0 && c->out_c > 0 && c->kh > 0 && c->kw > 0);
	DT_CUDA_ASSERT(c->stride_h > 0 && c->stride_w > 0 && c->dil_h > 0 && c->dil_w > 0);
	DT_CUDA_ASSERT(c->pad_top >= 0 && c->pad_left >= 0 && c->pad_bottom >= 0 && c->pad_right >= 0);
	DT_CUDA_ASSERT(c->out_h > 0 &&
		    c->out_h == out_size(c->in_h, c->kh, c->stride_h, c->dil_h, c->pad_top, c->pad_bottom));
	DT_CUDA_ASSERT(c->out_w > 0 &&
		    c->out_w == out_size(c->in_w, c->kw, c->stride_w, c->dil_w, c->pad_left, c->pad_right));
	plan_init(&p->base, PLAN_CONV, dev, max_batch);
	dt_gpu_use(dev);
	p->g = *c;
	p->padded = c->pad_top != c->pad_bottom || c->pad_left != c->pad_right;
	p->in_h = p->padded ? c->in_h + c->pad_top + c->pad_bottom : c->in_h;
	p->in_w = p->padded ? c->in_w + c->pad_left + c->pad_right : c->in_w;
	pad_h = p->padded ? 0 : c->pad_top;
	pad_w = p->padded ? 0 : c->pad_left;
	DT_CUDNN_CHECK(cudnnCreateFilterDescriptor(&p->w));
	DT_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&p->conv));
	DT_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(p->conv, pad_h, pad_w, c->stride_h, c->stride_w, c->dil_h, c->dil_w,
						    CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
	DT_CUDNN_CHECK(cudnnSetConvolutionGroupCount(p->conv, dt_conv_groups(c))); /* cnnparts: depthwise, grouped */
	p->dtype = dt_cuda_precision() == DT_PRECISION_BF16 && bf16_supported(p, max_batch) ? CUDNN_DATA_BFLOAT16
											   : CUDNN_DATA_FLOAT;
	DT_CUDNN_CHECK(cudnnSetFilter4dDescriptor(p->w, p->dtype, CUDNN_TENSOR_NHWC, c->out_c, c->in_c / dt_conv_groups(c),
					       c->kh, c->kw));
	p->w_t = dt_cuda_alloc(dev.index, wn);
	p->dw_t = dt_cuda_alloc(dev.index, wn);
	if (p->padded) {
		int64_t xn = (int64_t)max_batch * p->in_h * p->in_w * c->in_c;
		p->xp = dt_cuda_alloc(dev.index, xn);
		p->dxp = dt_cuda_alloc(dev.index, xn);
	}
	if (p->dtype == CUDNN_DATA_BFLOAT16) {
		int64_t xn = (int64_t)max_batch * p->in_h * p->in_w * c->in_c;
		int64_t yn = (int64_t)max_batch * c->out_h * c->out_w * c->out_c;
		p->xb = (__nv_bfloat16 *)dt_cuda_alloc(dev.index, (xn + 1) / 2);
		p->yb = (__nv_bfloat16 *)dt_cuda_alloc(dev.index, (yn + 1) / 2);
		p->wb = (__nv_bfloat16 *)dt_cuda_alloc(dev.index, (wn + 1) / 2);
		p->dwb = (__nv_bfloat16 *)dt_cuda_alloc(dev.index, (wn + 1) / 2);
	}
	conv_entry(p, max_batch); /* descriptors now; algorithms on the first step */
	return &p->base.head;
}

static int conv_batch(const struct conv_plan *p, const struct dt_tensor *x, const struct dt_tensor *y)
{
	const struct dt_conv_geom *c = &p->g;
	int n = x->shape.dim[0];
	DT_CUDA_ASSERT(x->shape.ndim >= 1 && y->shape.ndim >= 1 && y->shape.dim[0] == n);
	DT_CUDA_ASSERT(t_count(x) == (int64_t)n * c->in_h * c->in_w * c->in_c);
	DT_CUDA_ASSERT(t_count(y) == (int64_t)n * c->out_h * c->out_w * c->out_c);
	return n;
}

/* x as cuDNN sees it: padded into the plan's buffer when the padding is asymmetric. */
static const float *conv_input(struct conv_plan *p, struct dt_gpu *g, const float *x, int n)
{
	const struct dt_conv_geom *c = &p->g;
	int64_t total = (int64_t)n * p->in_h * p->in_w * c->in_c;
	if (!p->padded)
		return x;
	k_pad LAUNCH(g, total)(x, p->xp, total, c->in_h, c->in_w, c->in_c, p->in_h, p->in_w, c->pad_top, c->pad_left);
	DT_CUDA_LAUNCH_CHECK();
	return p->xp;
}

static void weights_to_cudnn(struct conv_plan *p, struct dt_gpu *g, const float *w)
{
	const struct dt_conv_geom *c = &p->g;
	int64_t rows = (int64_t)c->kh * c->kw * (c->in_c / dt_conv_groups(c)), cols = c->out_c;
	k_transpose LAUNCH(g, rows * cols)(w, p->w_t, rows, cols);
	DT_CUDA_LAUNCH_CHECK();
}

void dt_cuda_conv_forward(struct dt_plan *pl, const struct dt_tensor *x, const struct dt_tensor *w,
			  const struct dt_tensor *b, struct dt_tensor *y)
{
	struct conv_plan *p = (struct conv_plan *)pl;
	const struct dt_conv_geom *c = &p->g;
	struct dt_gpu *g = dt_gpu_use(p->base.dev);
	int n = conv_batch(p, x, y);
	const float one = 1, zero = 0;
	const int64_t wn = dt_conv_kernel_count(c);
	const float *xin;
	const void *cx, *cw;
	void *cy;
	struct conv_entry *e;

	DT_CUDA_ASSERT(p->base.kind == PLAN_CONV);
	DT_CUDA_ASSERT(t_count(w) == wn);
	DT_CUDA_ASSERT(!b || t_count(b) == c->out_c);
	if (n == 0)
		return;
	e = conv_entry(p, n);
	weights_to_cudnn(p, g, w->data);
	xin = conv_input(p, g, x->data, n);
	cx = xin;
	cw = p->w_t;
	cy = y->data;
	if (p->dtype == CUDNN_DATA_BFLOAT16) {
		cx = to_bf16(g, xin, p->xb, (int64_t)n * p->in_h * p->in_w * c->in_c);
		cw = to_bf16(g, p->w_t, p->wb, wn);
		cy = p->yb;
	}
	if (!e->have_fwd)
		choose_fwd(p, g, e, cx, cw, cy);
	DT_CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, e->fwd_math));
	DT_CUDNN_CHECK(cudnnConvolutionForward(g->dnn, &one, e->x, cx, p->w, cw, p->conv, e->fwd,
					    dt_gpu_workspace(g, p->ws_bytes), p->ws_bytes, &zero, e->y, cy));
	if (p->dtype == CUDNN_DATA_BFLOAT16)
		from_bf16(g, p->yb, y->data, t_count(y));
	if (b)
		dt_cuda_backend.bias_add(y, b);
	if (c->act != DT_ACT_LINEAR) /* not fused here */
		dt_cuda_backend.act_forward(c->act, y, y);
}

void dt_cuda_conv_backward(struct dt_plan *pl, const struct dt_tensor *x, const struct dt_tensor *w,
			   const struct dt_tensor *dy, struct dt_tensor *dw, struct dt_tensor *db, struct dt_tensor *dx)
{
	struct conv_plan *p = (struct conv_plan *)pl;
	const struct dt_conv_geom *c = &p->g;
	struct dt_gpu *g = dt_gpu_use(p->base.dev);
	int n = conv_batch(p, x, dy);
	const float one = 1, zero = 0;
	int64_t rows = (int64_t)c->kh * c->kw * (c->in_c / dt_conv_groups(c)), cols = c->out_c;
	const int bf16 = p->dtype == CUDNN_DATA_BFLOAT16;
	const float *xin;
	const void *cx, *cdy;
	void *cdw;
	struct conv_entry *e;

	DT_CUDA_ASSERT(p->base.kind == PLAN_CONV);
	DT_CUDA_ASSERT(t_count(w) == rows * cols && t_count(dw) == rows * cols);
	DT_CUDA_ASSERT(!db || t_count(db) == c->out_c);
	DT_CUDA_ASSERT(!dx || t_count(dx) == t_count(x));
	if (n == 0) {
		dt_cuda_backend.fill(dw, 0);
		if (db)
			dt_cuda_backend.fill(db, 0);
		return;
	}
	e = conv_entry(p, n);
	xin = conv_input(p, g, x->data, n);
	cx = xin;
	cdy = dy->data;
	cdw = p->dw_t;
	if (bf16) {
		cx = to_bf16(g, xin, p->xb, (int64_t)n * p->in_h * p->in_w * c->in_c);
		cdy = to_bf16(g, dy->data, p->yb, t_count(dy));
		cdw = p->dwb;
	}
	if (!e->have_filter)
		choose_filter(p, g, e, cx, cdy, cdw);
	DT_CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, e->filter_math));
	DT_CUDNN_CHECK(cudnnConvolutionBackwardFilter(g->dnn, &one, e->x, cx, e->y, cdy, p->conv, e->bwd_filter,
						   dt_gpu_workspace(g, p->ws_bytes), p->ws_bytes, &zero, p->w, cdw));
	if (bf16)
		from_bf16(g, p->dwb, p->dw_t, rows * cols);
	/* (out, kh*kw*in) back to Keras' (kh*kw*in, out) */
	k_transpose LAUNCH(g, rows * cols)(p->dw_t, dw->data, cols, rows);
	DT_CUDA_LAUNCH_CHECK();
	if (db)
		dt_cuda_col_reduce(g, COL_SUM, dy->data, NULL, NULL, NULL, (int64_t)n * c->out_h * c->out_w, c->out_c, 0,
				   1.0f, db->data);
	if (dx) {
		float *dxin = p->padded ? p->dxp : dx->data;
		const void *cw = p->w_t;
		void *cdx = dxin;
		weights_to_cudnn(p, g, w->data);
		if (bf16) {
			cw = to_bf16(g, p->w_t, p->wb, rows * cols);
			cdx = p->xb; /* x's copy is spent: the filter gradient has read it */
		}
		if (!e->have_data)
			choose_data(p, g, e, cw, cdy, cdx);
		DT_CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, e->data_math));
		DT_CUDNN_CHECK(cudnnConvolutionBackwardData(g->dnn, &one, p->w, cw, e->y, cdy, p->conv, e->bwd_data,
							 dt_gpu_workspace(g, p->ws_bytes), p->ws_bytes, &zero, e->x, cdx));
		if (bf16)
			from_bf16(g, p->xb, dxin, (int64_t)n * p->in_h * p->in_w * c->in_c);
		if (p->padded) {
			int64_t total = t_count(dx);
			k_crop LAUNCH(g, total)(p->dxp, dx->data, total, c->in_h, c->in_w, c->in_c, p->in_h, p->in_w,
						c->pad_top, c->pad_left);
			DT_CUDA_LAUNCH_CHECK();
		}
	}
}

static void conv_plan_free(struct conv_plan *p)
{
	int dev = p->base.dev.index;
	for (int i = 0; i < CACHE_SIZE; i++)
		if (p->cache[i].x) {
			DT_CUDNN_CHECK(cudnnDestroyTensorDescriptor(p->cache[i].x));
			DT_CUDNN_CHECK(cudnnDestroyTensorDescriptor(p->cache[i].y));
		}
	DT_CUDNN_CHECK(cudnnDestroyFilterDescriptor(p->w));
	DT_CUDNN_CHECK(cudnnDestroyConvolutionDescriptor(p->conv));
	dt_cuda_free(dev, p->w_t);
	dt_cuda_free(dev, p->dw_t);
	dt_cuda_free(dev, p->xp);
	dt_cuda_free(dev, p->dxp);
	dt_cuda_free(dev, (float *)p->xb);
	dt_cuda_free(dev, (float *)p->yb);
	dt_cuda_free(dev, (float *)p->wb);
	dt_cuda_free(dev, (float *)p->dwb);
}

/* ---- pooling ---- */

struct pool_plan {
	struct cuda_plan base;
	struct dt_pool_geom g;
	uint16_t *argmax; /* (max_batch, out_h, out_w, c) window positions, max pooling only */
	int trained_n;
};

struct dt_plan *dt_cuda_plan_pool(struct dt_device dev, const struct dt_pool_geom *c, int max_batch)
{
	struct pool_plan *p = (struct pool_plan *)calloc(1, sizeof(*p));
	DT_CUDA_ASSERT(p);
	DT_CUDA_ASSERT(c->kind == DT_POOL_MAX || c->kind == DT_POOL_AVG);
	DT_CUDA_ASSERT(c->c > 0 && c->kh > 0 && c->kw > 0 && c->stride_h > 0 && c->stride_w > 0);
	DT_CUDA_ASSERT(c->kind == DT_POOL_AVG || (int64_t)c->kh * c->kw <= DT_POOL_MAX_WINDOW);
	DT_CUDA_ASSERT(c->pad_top >= 0 && c->pad_top < c->kh && c->pad_bottom >= 0 && c->pad_bottom < c->kh);
	DT_CUDA_ASSERT(c->pad_left >= 0 && c->pad_left < c->kw && c->pad_right >= 0 && c->pad_right < c->kw);
	DT_CUDA_ASSERT(c->out_h > 0 && c->out_h == out_size(c->in_h, c->kh, c->stride_h, 1, c->pad_top, c->pad_bottom));
	DT_CUDA_ASSERT(c->out_w > 0 && c->out_w == out_size(c->in_w, c->kw, c->stride_w, 1, c->pad_left, c->pad_right));
	plan_init(&p->base, PLAN_POOL, dev, max_batch);
	dt_gpu_use(dev);
	p->g = *c;
	if (c->kind == DT_POOL_MAX) {
		int64_t n = (int64_t)max_batch * c->out_h * c->out_w * c->c;
		p->argmax = (uint16_t *)dt_cuda_alloc(dev.index, (n + 1) / 2);
	}
	return &p->base.head;
}

static int pool_batch(const struct pool_plan *p, const struct dt_tensor *x, const struct dt_tensor *y)
{
	const struct dt_pool_geom *c = &p->g;
	int n = x->shape.dim[0];
	DT_CUDA_ASSERT(x->shape.ndim >= 1 && y->shape.ndim >= 1 && y->shape.dim[0] == n);
	DT_CUDA_ASSERT(n >= 0 && n <= p->base.max_batch);
	DT_CUDA_ASSERT(t_count(x) == (int64_t)n * c->in_h * c->in_w * c->c);
	DT_CUDA_ASSERT(t_count(y) == (int64_t)n * c->out_h * c->out_w * c->c);
	return n;
}

__device__ void pool_window(int o, int stride, int pad, int k, int in, int *lo, int *hi)
{
	int start = o * stride - pad;
	*lo = start < 0 ? -start : 0;
	*hi = start + k > in ? in - start : k;
}

__device__ void pool_covering(int i, int stride, int pad, int k, int out, int *lo, int *hi)
{
	int a = i + pad - k + 1;
	*lo = a <= 0 ? 0 : (a + stride - 1) / stride;
	*hi = (i + pad) / stride + 1;
	*hi = *hi < out ? *hi : out;
}

/* One thread per output element; the window in the CPU's order, so ties pick the same position. */
__global__ void k_pool_forward(struct dt_pool_geom g, const float *x, float *y, uint16_t *argmax, int64_t total)
{
	const int max = g.kind == DT_POOL_MAX;
	GRID_LOOP(o, total)
	{
		int ch = (int)(o % g.c);
		int64_t rest = o / g.c;
		int ow = (int)(rest % g.out_w);
		rest /= g.out_w;
		int oh = (int)(rest % g.out_h);
		int64_t b = rest / g.out_h;
		int i0, i1, j0, j1, first = 1;
		float acc = 0;
		uint16_t arg = 0;
		pool_window(oh, g.stride_h, g.pad_top, g.kh, g.in_h, &i0, &i1);
		pool_window(ow, g.stride_w, g.pad_left, g.kw, g.in_w, &j0, &j1);
		for (int i = i0; i < i1; i++)
			for (int j = j0; j < j1; j++) {
				int ih = oh * g.stride_h - g.pad_top + i, iw = ow * g.stride_w - g.pad_left + j;
				float v = x[((b * g.in_h + ih) * g.in_w + iw) * g.c + ch];
				uint16_t k = max ? (uint16_t)(i * g.kw + j) : 0;
				if (first) {
					acc = v;
					arg = k;
					first = 0;
				} else if (!max) {
					acc += v;
				} else if (v > acc) {
					acc = v;
					arg = k;
				}
			}
		if (!max)
			acc *= 1.0f / (float)((i1 - i0) * (j1 - j0));
		y[o] = acc;
		if (argmax)
			argmax[o] = g.after_relu && !(acc > 0) ? (uint16_t)DT_POOL_NONE : arg;
	}
}

/* One thread per input element, gathering from the outputs whose windows hold it. */
__global__ void k_pool_backward(struct dt_pool_geom g, const float *dy, const uint16_t *argmax, float *dx,
				int64_t total)
{
	const int max = g.kind == DT_POOL_MAX;
	GRID_LOOP(idx, total)
	{
		int ch = (int)(idx % g.c);
		int64_t rest = idx / g.c;
		int iw = (int)(rest % g.in_w);
		rest /= g.in_w;
		int ih = (int)(rest % g.in_h);
		int64_t b = rest / g.in_h;
		int oh0, oh1, ow0, ow1;
		float acc = 0;
		pool_covering(ih, g.stride_h, g.pad_top, g.kh, g.out_h, &oh0, &oh1);
		pool_covering(iw, g.stride_w, g.pad_left, g.kw, g.out_w, &ow0, &ow1);
		for (int oh = oh0; oh < oh1; oh++)
			for (int ow = ow0; ow < ow1; ow++) {
				int64_t o = ((b * g.out_h + oh) * g.out_w + ow) * g.c + ch;
				int i = ih - (oh * g.stride_h - g.pad_top), j = iw - (ow * g.stride_w - g.pad_left);
				if (max) {
					acc += argmax[o] == (uint16_t)(i * g.kw + j) ? dy[o] : 0.0f;
				} else {
					int i0, i1, j0, j1;
					pool_window(oh, g.stride_h, g.pad_top, g.kh, g.in_h, &i0, &i1);
					pool_window(ow, g.stride_w, g.pad_left, g.kw, g.in_w, &j0, &j1);
					acc += dy[o] * (1.0f / (float)((i1 - i0) * (j1 - j0)));
				}
			}
		dx[idx] = acc;
	}
}

void dt_cuda_pool_forward(struct dt_plan *pl, const struct dt_tensor *x, struct dt_tensor *y, int training)
{
	struct pool_plan *p = (struct pool_plan *)pl;
	struct dt_gpu *g = dt_gpu_use(p->base.dev);
	int n = pool_batch(p, x, y);
	int64_t total = t_count(y);
	DT_CUDA_ASSERT(p->base.kind == PLAN_POOL);
	if (total > 0) {
		k_pool_forward LAUNCH(g, total)(p->g, x->data, y->data,
						p->g.kind == DT_POOL_MAX && training ? p->argmax : NULL, total);
		DT_CUDA_LAUNCH_CHECK();
	}
	if (training)
		p->trained_n = n;
}

void dt_cuda_pool_backward(struct dt_plan *pl, const struct dt_tensor *dy, struct dt_tensor *dx)
{
	struct pool_plan *p = (struct pool_plan *)pl;
	struct dt_gpu *g = dt_gpu_use(p->base.dev);
	int n = pool_batch(p, dx, dy);
	int64_t total = t_count(dx);
	DT_CUDA_ASSERT(p->base.kind == PLAN_POOL);
	DT_CUDA_ASSERT(p->g.kind != DT_POOL_MAX || n == 0 || p->trained_n == n);
	if (total == 0)
		return;
	k_pool_backward LAUNCH(g, total)(p->g, dy->data, p->argmax, dx->data, total);
	DT_CUDA_LAUNCH_CHECK();
}

/* ---- batch normalization ---- */

struct bn_plan {
	struct cuda_plan base;
	int c;
	int64_t spatial;
	float epsilon;
	float *mean, *var, *invstd;     /* (C) of the last training forward */
	float *dgamma, *dbeta;          /* (C) when the caller passes NULL */
	int trained_n;
};

struct dt_plan *dt_cuda_plan_batchnorm(struct dt_device dev, int channels, int64_t spatial, float epsilon,
				       int max_batch)
{
	struct bn_plan *p = (struct bn_plan *)calloc(1, sizeof(*p));
	DT_CUDA_ASSERT(p);
	DT_CUDA_ASSERT(channels > 0 && spatial > 0 && epsilon > 0);
	plan_init(&p->base, PLAN_BATCHNORM, dev, max_batch);
	dt_gpu_use(dev);
	p->c = channels;
	p->spatial = spatial;
	p->epsilon = epsilon;
	p->mean = dt_cuda_alloc(dev.index, channels);
	p->var = dt_cuda_alloc(dev.index, channels);
	p->invstd = dt_cuda_alloc(dev.index, channels);
	p->dgamma = dt_cuda_alloc(dev.index, channels);
	p->dbeta = dt_cuda_alloc(dev.index, channels);
	return &p->base.head;
}

static int bn_batch(const struct bn_plan *p, const struct dt_tensor *x)
{
	int n = x->shape.dim[0];
	DT_CUDA_ASSERT(x->shape.ndim >= 1 && t_count(x) == (int64_t)n * p->spatial * p->c);
	return n;
}

/* invstd = 1/sqrt(var + eps); with momentum >= 0 also the moving averages. */
__global__ void k_bn_stats(const float *mean, const float *var, float *invstd, float eps, float momentum,
			   float *moving_mean, float *moving_var, int c)
{
	GRID_LOOP(j, c)
	{
		invstd[j] = 1.0f / sqrtf(var[j] + eps);
		if (moving_mean) {
			moving_mean[j] = momentum * moving_mean[j] + (1 - momentum) * mean[j];
			moving_var[j] = momentum * moving_var[j] + (1 - momentum) * var[j];
		}
	}
}

/* y = gamma * (x - mean) / sqrt(var + eps) + beta, per channel (the last dimension). */
__global__ void k_bn_apply(const float *x, float *y, const float *mean, const float *var, const float *invstd,
			   float eps, const float *gamma, const float *beta, int64_t n, int c)
{
	GRID_LOOP(i, n)
	{
		int j = (int)(i % c);
		float is = invstd ? invstd[j] : 1.0f / sqrtf(var[j] + eps);
		y[i] = (gamma ? gamma[j] : 1.0f) * (x[i] - mean[j]) * is + (beta ? beta[j] : 0.0f);
	}
}

void dt_cuda_batchnorm_forward(struct dt_plan *pl, int training, float momentum, const struct dt_tensor *x,
			       const struct dt_tensor *gamma, const struct dt_tensor *beta,
			       struct dt_tensor *moving_mean, struct dt_tensor *moving_var, struct dt_tensor *y)
{
	struct bn_plan *p = (struct bn_plan *)pl;
	struct dt_gpu *g = dt_gpu_use(p->base.dev);
	int n = bn_batch(p, x);
	int64_t rows = (int64_t)n * p->spatial, total = rows * p->c;

	DT_CUDA_ASSERT(p->base.kind == PLAN_BATCHNORM);
	DT_CUDA_ASSERT(t_count(moving_mean) == p->c && t_count(moving_var) == p->c);
	DT_CUDA_ASSERT(!gamma || t_count(gamma) == p->c);
	DT_CUDA_ASSERT(!beta || t_count(beta) == p->c);
	if (n == 0)
		return;
	if (training) {
		dt_cuda_col_reduce(g, COL_SUM, x->data, NULL, NULL, NULL, rows, p->c, 0, 1.0f / (float)rows, p->mean);
		dt_cuda_col_reduce(g, COL_SQDEV, x->data, NULL, p->mean, NULL, rows, p->c, 0, 1.0f / (float)rows,
				   p->var);
		k_bn_stats LAUNCH(g, p->c)(p->mean, p->var, p->invstd, p->epsilon, momentum, moving_mean->data,
					   moving_var->data, p->c);
		DT_CUDA_LAUNCH_CHECK();
		k_bn_apply LAUNCH(g, total)(x->data, y->data, p->mean, p->var, p->invstd, p->epsilon,
					    gamma ? gamma->data : NULL, beta ? beta->data : NULL, total, p->c);
		p->trained_n = n;
	} else {
		k_bn_apply LAUNCH(g, total)(x->data, y->data, moving_mean->data, moving_var->data, NULL, p->epsilon,
					    gamma ? gamma->data : NULL, beta ? beta->data : NULL, total, p->c);
	}
	DT_CUDA_LAUNCH_CHECK();
}

/* dx = gamma * invstd / m * (m * dy - dbeta - xhat * dgamma), xhat = (x - mean) * invstd */
__global__ void k_bn_backward(const float *x, const float *dy, const float *mean, const float *invstd,
			      const float *gamma, const float *dgamma, const float *dbeta, float *dx, int64_t n, int c,
			      float m)
{
	GRID_LOOP(i, n)
	{
		int j = (int)(i % c);
		float xhat = (x[i] - mean[j]) * invstd[j];
		dx[i] = (gamma ? gamma[j] : 1.0f) * invstd[j] / m * (m * dy[i] - dbeta[j] - xhat * dgamma[j]);
	}
}

void dt_cuda_batchnorm_backward(struct dt_plan *pl, const struct dt_tensor *x, const struct dt_tensor *dy,
				const struct dt_tensor *gamma, struct dt_tensor *dgamma, struct dt_tensor *dbeta,
				struct dt_tensor *dx)
{
	struct bn_plan *p = (struct bn_plan *)pl;
	struct dt_gpu *g = dt_gpu_use(p->base.dev);
	int n = bn_batch(p, x);
	int64_t rows = (int64_t)n * p->spatial, total = rows * p->c;
	float *dg = dgamma ? dgamma->data : p->dgamma, *db = dbeta ? dbeta->data : p->dbeta;

	DT_CUDA_ASSERT(p->base.kind == PLAN_BATCHNORM);
	DT_CUDA_ASSERT(t_count(dy) == t_count(x));
	DT_CUDA_ASSERT(!gamma || t_count(gamma) == p->c);
	DT_CUDA_ASSERT(!dgamma || t_count(dgamma) == p->c);
	DT_CUDA_ASSERT(!dbeta || t_count(dbeta) == p->c);
	if (n == 0) {
		if (dgamma)
			dt_cuda_backend.fill(dgamma, 0);
		if (dbeta)
			dt_cuda_backend.fill(dbeta, 0);
		return;
	}
	DT_CUDA_ASSERT(p->trained_n == n);
	dt_cuda_col_reduce(g, COL_SUM, dy->data, NULL, NULL, NULL, rows, p->c, 0, 1.0f, db);
	dt_cuda_col_reduce(g, COL_DOT_NORM, dy->data, x->data, p->mean, p->invstd, rows, p->c, 0, 1.0f, dg);
	k_bn_backward LAUNCH(g, total)(x->data, dy->data, p->mean, p->invstd, gamma ? gamma->data : NULL, dg, db,
				       dx->data, total, p->c, (float)rows);
	DT_CUDA_LAUNCH_CHECK();
}

static void bn_plan_free(struct bn_plan *p)
{
	int dev = p->base.dev.index;
	dt_cuda_free(dev, p->mean);
	dt_cuda_free(dev, p->var);
	dt_cuda_free(dev, p->invstd);
	dt_cuda_free(dev, p->dgamma);
	dt_cuda_free(dev, p->dbeta);
}

void dt_cuda_plan_free(struct dt_plan *pl)
{
	struct cuda_plan *p = (struct cuda_plan *)pl;
	if (!p)
		return;
	if ((int)p->kind == DT_CUDA_PLAN_LAYERNORM) { /* layernorm.cu's plan: same head, its own free */
		dt_cuda_layernorm_plan_free(pl);
		return;
	}
	if ((int)p->kind == DT_CUDA_PLAN_RNN) { /* rnn.cu's */
		dt_cuda_rnn_plan_free(pl);
		return;
	}
	dt_gpu_use(p->dev);
	switch (p->kind) {
	case PLAN_CONV:
		conv_plan_free((struct conv_plan *)p);
		break;
	case PLAN_POOL:
		dt_cuda_free(p->dev.index, (float *)((struct pool_plan *)p)->argmax);
		break;
	case PLAN_BATCHNORM:
		bn_plan_free((struct bn_plan *)p);
		break;
	}
	free(p);
}
