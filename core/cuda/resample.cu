/*
 * The CUDA backend's spatial copies and resampling (core/ops.h, cnnparts
 * block): one thread per output element with core/resample.h's formulas,
 * the CPU loops' arithmetic. The gradient of upsampling gathers (each dx
 * element sums the dy elements that read it), so no two threads write one
 * element and the result is the same every run. Spatial dropout's
 * per-channel scaling is here too.
 */
#include "core/cuda/ops_cuda.h"
#include "core/resample.h"

__global__ void k_shift2d(const float *x, float *y, int64_t total, int oh, int ow, int c, int h, int w, int top,
			  int left)
{
	GRID_LOOP(k, total)
	{
		int ch = (int)(k % c), j = (int)(k / c % ow), i = (int)(k / c / ow % oh);
		int64_t b = k / c / ow / oh;
		y[k] = dt_shift_value(x, b, i, j, ch, h, w, c, top, left);
	}
}

__global__ void k_upsample2d(enum dt_interp mode, const float *x, float *y, int64_t total, int oh, int ow, int c,
			     int h, int w)
{
	GRID_LOOP(k, total)
	{
		int ch = (int)(k % c), j = (int)(k / c % ow), i = (int)(k / c / ow % oh);
		int64_t b = k / c / ow / oh;
		y[k] = dt_upsample_value(mode, x, b, i, j, ch, h, w, c, oh / h, ow / w);
	}
}

__global__ void k_upsample2d_backward(enum dt_interp mode, const float *dy, float *dx, int64_t total, int h, int w,
				      int c, int sh, int sw)
{
	GRID_LOOP(k, total)
	{
		int ch = (int)(k % c), e = (int)(k / c % w), a = (int)(k / c / w % h);
		int64_t b = k / c / w / h;
		dx[k] = dt_upsample_grad(mode, dy, b, a, e, ch, h, w, c, sh, sw);
	}
}

static void cuda_shift2d(const struct dt_tensor *x, struct dt_tensor *y, int top, int left)
{
	struct dt_gpu *g = dt_gpu_use(y->dev);
	int64_t total = t_count(y);
	if (total == 0)
		return;
	k_shift2d LAUNCH(g, total)(x->data, y->data, total, y->shape.dim[1], y->shape.dim[2], y->shape.dim[3],
				   x->shape.dim[1], x->shape.dim[2], top, left);
	DT_CUDA_LAUNCH_CHECK();
}

static void cuda_upsample2d(enum dt_interp mode, const struct dt_tensor *x, struct dt_tensor *y)
{
	struct dt_gpu *g = dt_gpu_use(y->dev);
	int64_t total = t_count(y);
	if (total == 0)
		return;
	k_upsample2d LAUNCH(g, total)(mode, x->data, y->data, total, y->shape.dim[1], y->shape.dim[2],
				      y->shape.dim[3], x->shape.dim[1], x->shape.dim[2]);
	DT_CUDA_LAUNCH_CHECK();
}

static void cuda_upsample2d_backward(enum dt_interp mode, const struct dt_tensor *dy, struct dt_tensor *dx)
{
	struct dt_gpu *g = dt_gpu_use(dx->dev);
	int64_t total = t_count(dx);
	int h = dx->shape.dim[1], w = dx->shape.dim[2];
	if (total == 0)
		return;
	k_upsample2d_backward LAUNCH(g, total)(mode, dy->data, dx->data, total, h, w, dx->shape.dim[3],
					       dy->shape.dim[1] / h, dy->shape.dim[2] / w);
	DT_CUDA_LAUNCH_CHECK();
}

__global__ void k_mul_channels(const float *x, const float *m, float *y, int64_t total, int64_t s, int64_t c)
{
	GRID_LOOP(k, total) y[k] = x[k] * m[k / (s * c) * c + k % c];
}

static void cuda_mul_channels(const struct dt_tensor *x, const struct dt_tensor *m, struct dt_tensor *y)
{
	struct dt_gpu *g = dt_gpu_use(y->dev);
	int64_t total = t_count(y), n = m->shape.dim[0], c = m->shape.dim[1];
	if (total == 0)
		return;
	k_mul_channels LAUNCH(g, total)(x->data, m->data, y->data, total, total / (n * c), c);
	DT_CUDA_LAUNCH_CHECK();
}

void dt_cuda_resample_init(struct dt_backend *b)
{
	b->shift2d = cuda_shift2d;
	b->upsample2d = cuda_upsample2d;
	b->upsample2d_backward = cuda_upsample2d_backward;
	b->mul_channels = cuda_mul_channels;
}
