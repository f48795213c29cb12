/*
 * The CUDA backend's transposed-convolution plans (conv2d_transpose) on
 * cuDNN. A transposed convolution is the data gradient of the convolution
 * that maps its output back to its input: cuDNN's backward-data runs the
 * forward, its forward convolution the data gradient and its
 * backward-filter (with the roles of x and dy exchanged) the weight
 * gradient. That convolution reads the full, uncropped result z (N, FH,
 * FW, filters), FH = (in_h - 1) * stride + span: y is z cropped by the
 * plan's padding (dt_op_shift2d's kernel), and dy is padded into z for the
 * backward passes. Rows of y past z (a negative end padding: rows that no
 * tap reaches, only the bias) are zeros from shift2d, and their gradient
 * reaches the bias alone; cuDNN is never asked for a frame larger than the
 * convolution reads.
 *
 * cuDNN's NHWC filter is (out, kh, kw, in) of the convolution, here (in,
 * kh, kw, filters), where Keras keeps (kh, kw, filters, in): the kernel is
 * transposed into the plan at each step and the gradient back. Float32
 * only: under fp32 FMA algorithms (no TF32), as dnn.cu; tensor-op ones
 * under tf32 and bf16. Algorithms come from cuDNN's heuristics
 * (cudnnGet*Algorithm_v7), chosen per batch size on its first step, the
 * GPU's shared workspace grown to theirs then (dt_gpu_workspace). The
 * plan's head points at this file's table (plan_free and the
 * deconvolution ops), so dnn.cu needs no case for it.
 */
#include <stdlib.h>

#include "core/cuda/ops_cuda.h"

#define CACHE_SIZE 8
#define MAX_WORKSPACE ((size_t)1 << 30)

struct entry {
	int n;
	uint64_t used;
	cudnnTensorDescriptor_t z, x;
	int have_fwd, have_data, have_filter;
	cudnnConvolutionBwdDataAlgo_t fwd;     /* y = backward data of the convolution */
	cudnnConvolutionFwdAlgo_t data;        /* dx = its forward */
	cudnnConvolutionBwdFilterAlgo_t filter;
	cudnnMathType_t fwd_math, data_math, filter_math;
};

struct deconv_plan {
	struct dt_plan head;
	struct dt_device dev;
	struct dt_conv_geom g;
	int max_batch, fh, fw;
	uint64_t clock;
	cudnnFilterDescriptor_t w;
	cudnnConvolutionDescriptor_t conv;
	float *w_t, *dw_t, *z; /* (in, kh, kw, filters) twice; (max_batch, fh, fw, filters) */
	size_t ws_bytes; /* the workspace its algorithms need (dt_gpu_workspace) */
	struct entry cache[CACHE_SIZE];
};

static struct dt_backend deconv_backend;

static int math_ok(cudnnMathType_t m)
{
	return dt_cuda_precision() != DT_PRECISION_FP32 ||
	       (m != CUDNN_TENSOR_OP_MATH && m != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION);
}

static cudnnMathType_t math_asked(void)
{
	return dt_cuda_precision() == DT_PRECISION_FP32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
}

static void ws_reserve(struct deconv_plan *p, size_t bytes)
{
	if (bytes > p->ws_bytes)
		p->ws_bytes = bytes;
}

/* The first proposal (cuDNN's order) the precision allows whose workspace fits; DT_CUDA_BUG if none. */
template <typename Perf, typename Size>
static int pick(struct deconv_plan *p, const Perf *perf, int got, Size size, const char *what, int n)
{
	for (int i = 0; i < got; i++) {
		size_t bytes = 0;
		if (perf[i].status != CUDNN_STATUS_SUCCESS || !math_ok(perf[i].mathType))
			continue;
		DT_CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, perf[i].mathType));
		if (!size(perf[i].algo, &bytes) || bytes > MAX_WORKSPACE)
			continue;
		ws_reserve(p, bytes);
		return i;
	}
	DT_CUDA_BUG("cuDNN has no %s algorithm for this transposed convolution at batch %d", what, n);
}

static struct entry *entry_for(struct deconv_plan *p, int n)
{
	const struct dt_conv_geom *c = &p->g;
	struct entry *e = NULL;
	DT_CUDA_ASSERT(n > 0 && n <= p->max_batch);
	for (int i = 0; i < CACHE_SIZE; i++) {
		struct entry *f = &p->cache[i];
		if (f->n == n) {
			f->used = ++p->clock;
			return f;
		}
		if (!e || (e->n && (!f->n || f->used < e->used)))
			e = f;
	}
	if (!e->z) {
		DT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&e->z));
		DT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&e->x));
	}
	e->n = n;
	e->used = ++p->clock;
	e->have_fwd = e->have_data = e->have_filter = 0;
	DT_CUDNN_CHECK(cudnnSetTensor4dDescriptor(e->z, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, n, c->out_c, p->fh, p->fw));
	DT_CUDNN_CHECK(cudnnSetTensor4dDescriptor(e->x, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, n, c->in_c, c->in_h, c->in_w));
	return e;
}

static struct dt_plan *plan_deconv(struct dt_device dev, const struct dt_conv_geom *c, int max_batch)
{
	struct deconv_plan *p = (struct deconv_plan *)calloc(1, sizeof(*p));
	int64_t wn = (int64_t)c->kh * c->kw * c->in_c * c->out_c;
	int full_h = (c->in_h - 1) * c->stride_h + (c->kh - 1) * c->dil_h + 1;
	int full_w = (c->in_w - 1) * c->stride_w + (c->kw - 1) * c->dil_w + 1;

	DT_CUDA_ASSERT(p && dev.kind == DT_DEVICE_CUDA && max_batch > 0 && dt_conv_groups(c) == 1);
	DT_CUDA_ASSERT(c->out_h == full_h - c->pad_top - c->pad_bottom && c->out_w == full_w - c->pad_left - c->pad_right);
	DT_CUDA_ASSERT(c->pad_top >= 0 && c->pad_left >= 0 && -c->pad_bottom < c->stride_h && -c->pad_right < c->stride_w);
	dt_gpu_use(dev);
	p->head.backend = &deconv_backend;
	p->dev = dev;
	p->g = *c;
	p->max_batch = max_batch;
	p->fh = full_h;
	p->fw = full_w;
	DT_CUDNN_CHECK(cudnnCreateFilterDescriptor(&p->w));
	DT_CUDNN_CHECK(cudnnSetFilter4dDescriptor(p->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, c->in_c, c->out_c, c->kh,
					       c->kw));
	DT_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&p->conv));
	DT_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(p->conv, 0, 0, c->stride_h, c->stride_w, c->dil_h, c->dil_w,
						    CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
	p->w_t = dt_cuda_alloc(dev.index, wn);
	p->dw_t = dt_cuda_alloc(dev.index, wn);
	p->z = dt_cuda_alloc(dev.index, (int64_t)max_batch * p->fh * p->fw * c->out_c);
	entry_for(p, max_batch);
	return &p->head;
}

static int batch_of(const struct deconv_plan *p, const struct dt_tensor *x, const struct dt_tensor *y)
{
	const struct dt_conv_geom *c = &p->g;
	int n = x->shape.dim[0];
	DT_CUDA_ASSERT(x->shape.ndim >= 1 && y->shape.ndim >= 1 && y->shape.dim[0] == n);
	DT_CUDA_ASSERT(t_count(x) == (int64_t)n * c->in_h * c->in_w * c->in_c);
	DT_CUDA_ASSERT(t_count(y) == (int64_t)n * c->out_h * c->out_w * c->out_c);
	return n;
}

/* out (cols, rows) = in (rows, cols)^T */
__global__ void k_deconv_transpose(const float *in, float *out, int64_t rows, int64_t cols)
{
	GRID_LOOP(i, rows * cols)
	{
		int64_t r = i / cols, c = i % cols;
		out[c * rows + r] = in[i];
	}
}

/* Keras' (kh*kw*filters, in) kernel into cuDNN's (in, kh*kw*filters). */
static void weights_to_cudnn(struct deconv_plan *p, struct dt_gpu *g, const float *w)
{
	int64_t rows = (int64_t)p->g.kh * p->g.kw * p->g.out_c, cols = p->g.in_c;
	k_deconv_transpose LAUNCH(g, rows * cols)(w, p->w_t, rows, cols);
	DT_CUDA_LAUNCH_CHECK();
}

static struct dt_tensor z_view(const struct deconv_plan *p, int n)
{
	struct dt_tensor t;
	int d[4] = { n, p->fh, p->fw, p->g.out_c };
	t.data = p->z;
	t.shape.ndim = 4;
	for (int i = 0; i < 4; i++)
		t.shape.dim[i] = d[i];
	t.dev = p->dev;
	return t;
}

/* y as (n, out_h, out_w, filters). */
static struct dt_tensor image_view(const struct dt_tensor *y, int n, int h, int w, int c)
{
	struct dt_tensor t = *y;
	int d[4] = { n, h, w, c };
	t.shape.ndim = 4;
	for (int i = 0; i < 4; i++)
		t.shape.dim[i] = d[i];
	return t;
}

static void deconv_forward(struct dt_plan *pl, const struct dt_tensor *x, const struct dt_tensor *w,
			   const struct dt_tensor *b, struct dt_tensor *y)
{
	struct deconv_plan *p = (struct deconv_plan *)pl;
	const struct dt_conv_geom *c = &p->g;
	struct dt_gpu *g = dt_gpu_use(p->dev);
	int n = batch_of(p, x, y);
	const float one = 1, zero = 0;
	struct entry *e;
	struct dt_tensor zt, yt;

	DT_CUDA_ASSERT(t_count(w) == (int64_t)c->kh * c->kw * c->in_c * c->out_c);
	if (n == 0)
		return;
	e = entry_for(p, n);
	weights_to_cudnn(p, g, w->data);
	if (!e->have_fwd) {
		cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
		int got = 0, i;
		auto size = [&](cudnnConvolutionBwdDataAlgo_t a, size_t *bytes) {
			return cudnnGetConvolutionBackwardDataWorkspaceSize(g->dnn, p->w, e->x, p->conv, e->z, a, bytes) ==
			       CUDNN_STATUS_SUCCESS;
		};
		DT_CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, math_asked()));
		DT_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(g->dnn, p->w, e->x, p->conv, e->z,
									CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, perf));
		i = pick(p, perf, got, size, "backward-data", n);
		e->fwd = perf[i].algo;
		e->fwd_math = perf[i].mathType;
		e->have_fwd = 1;
	}
	DT_CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, e->fwd_math));
	DT_CUDNN_CHECK(cudnnConvolutionBackwardData(g->dnn, &one, p->w, p->w_t, e->x, x->data, p->conv, e->fwd,
						 dt_gpu_workspace(g, p->ws_bytes), p->ws_bytes, &zero, e->z, p->z));
	zt = z_view(p, n);
	yt = image_view(y, n, c->out_h, c->out_w, c->out_c);
	dt_cuda_backend.shift2d(&zt, &yt, c->pad_top, c->pad_left);
	if (b)
		dt_cuda_backend.bias_add(y, b);
}

static void deconv_backward(struct dt_plan *pl, const struct dt_tensor *x, const struct dt_tensor *w,
			    const struct dt_tensor *dy, struct dt_tensor *dw, struct dt_tensor *db, struct dt_tensor *dx)
{
	struct deconv_plan *p = (struct deconv_plan *)pl;
	const struct dt_conv_geom *c = &p->g;
	struct dt_gpu *g = dt_gpu_use(p->dev);
	int n = batch_of(p, x, dy);
	const float one = 1, zero = 0;
	int64_t rows = (int64_t)c->kh * c->kw * c->out_c, cols = c->in_c;
	struct entry *e;
	struct dt_tensor zt, dyt;

	DT_CUDA_ASSERT(t_count(w) == rows * cols && t_count(dw) == rows * cols);
	DT_CUDA_ASSERT(!db || t_count(db) == c->out_c);
	DT_CUDA_ASSERT(!dx || t_count(dx) == t_count(x));
	if (n == 0) {
		dt_cuda_backend.fill(dw, 0);
		if (db)
			dt_cuda_backend.fill(db, 0);
		return;
	}
	e = entry_for(p, n);
	zt = z_view(p, n);
	dyt = image_view(dy, n, c->out_h, c->out_w, c->out_c);
	dt_cuda_backend.shift2d(&dyt, &zt, -c->pad_top, -c->pad_left); /* dy into the full frame, zeros around */
	if (!e->have_filter) {
		cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
		int got = 0, i;
		auto size = [&](cudnnConvolutionBwdFilterAlgo_t a, size_t *bytes) {
			return cudnnGetConvolutionBackwardFilterWorkspaceSize(g->dnn, e->z, e->x, p->conv, p->w, a, bytes) ==
			       CUDNN_STATUS_SUCCESS;
		};
		DT_CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, math_asked()));
		DT_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(g->dnn, e->z, e->x, p->conv, p->w,
									  CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got,
									  perf));
		i = pick(p, perf, got, size, "backward-filter", n);
		e->filter = perf[i].algo;
		e->filter_math = perf[i].mathType;
		e->have_filter = 1;
	}
	DT_CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, e->filter_math));
	DT_CUDNN_CHECK(cudnnConvolutionBackwardFilter(g->dnn, &one, e->z, p->z, e->x, x->data, p->conv, e->filter,
						   dt_gpu_workspace(g, p->ws_bytes), p->ws_bytes, &zero, p->w, p->dw_t));
	k_deconv_transpose LAUNCH(g, rows * cols)(p->dw_t, dw->data, cols, rows);
	DT_CUDA_LAUNCH_CHECK();
	if (db)
		dt_cuda_backend.bias_grad(dy, 0, db);
	if (dx) {
		weights_to_cudnn(p, g, w->data);
		if (!e->have_data) {
			cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
			int got = 0, i;
			auto size = [&](cudnnConvolutionFwdAlgo_t a, size_t *bytes) {
				return cudnnGetConvolutionForwardWorkspaceSize(g->dnn, e->z, p->w, p->conv, e->x, a, bytes) ==
				       CUDNN_STATUS_SUCCESS;
			};
			DT_CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, math_asked()));
			DT_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(g->dnn, e->z, p->w, p->conv, e->x,
									   CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf));
			i = pick(p, perf, got, size, "forward", n);
			e->data = perf[i].algo;
			e->data_math = perf[i].mathType;
			e->have_data = 1;
		}
		DT_CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, e->data_math));
		DT_CUDNN_CHECK(cudnnConvolutionForward(g->dnn, &one, e->z, p->z, p->w, p->w_t, p->conv, e->data,
						    dt_gpu_workspace(g, p->ws_bytes), p->ws_bytes, &zero, e->x, dx->data));
	}
}

static void deconv_plan_free(struct dt_plan *pl)
{
	struct deconv_plan *p = (struct deconv_plan *)pl;
	if (!p)
		return;
	dt_gpu_use(p->dev);
	for (int i = 0; i < CACHE_SIZE; i++)
		if (p->cache[i].z) {
			DT_CUDNN_CHECK(cudnnDestroyTensorDescriptor(p->cache[i].z));
			DT_CUDNN_CHECK(cudnnDestroyTensorDescriptor(p->cache[i].x));
		}
	DT_CUDNN_CHECK(cudnnDestroyFilterDescriptor(p->w));
	DT_CUDNN_CHECK(cudnnDestroyConvolutionDescriptor(p->conv));
	dt_cuda_free(p->dev.index, p->w_t);
	dt_cuda_free(p->dev.index, p->dw_t);
	dt_cuda_free(p->dev.index, p->z);
	free(p);
}

void dt_cuda_deconv_init(struct dt_backend *b)
{
	b->plan_deconv = plan_deconv;
	deconv_backend.name = "cuda";
	deconv_backend.plan_free = deconv_plan_free;
	deconv_backend.deconv_forward = deconv_forward;
	deconv_backend.deconv_backward = deconv_backward;
}
