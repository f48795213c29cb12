/*
 * The CPU backend's spatial copies and resampling (core/ops.h, cnnparts
 * block): loops over the output's elements with core/resample.h's
 * formulas, rows of (sample, output row) spread over the threads above
 * RESAMPLE_PAR_MIN elements; and spatial dropout's per-channel scaling.
 */
#include "core/cpu/ops_cpu.h"
#include "core/resample.h"

#define RESAMPLE_PAR_MIN 32768

void dt_cpu_shift2d(const struct dt_tensor *xt, struct dt_tensor *yt, int top, int left)
{
	const int n = yt->shape.dim[0], oh = yt->shape.dim[1], ow = yt->shape.dim[2], c = yt->shape.dim[3];
	const int h = xt->shape.dim[1], w = xt->shape.dim[2];
	const float *x = xt->data;
	float *y = yt->data;
#pragma omp parallel for collapse(2) if (dt_tensor_count(yt) > RESAMPLE_PAR_MIN)
	for (int b = 0; b < n; b++)
		for (int i = 0; i < oh; i++)
			for (int j = 0; j < ow; j++)
				for (int ch = 0; ch < c; ch++)
					y[(((int64_t)b * oh + i) * ow + j) * c + ch] =
						dt_shift_value(x, b, i, j, ch, h, w, c, top, left);
}

void dt_cpu_upsample2d(enum dt_interp mode, const struct dt_tensor *xt, struct dt_tensor *yt)
{
	const int n = yt->shape.dim[0], oh = yt->shape.dim[1], ow = yt->shape.dim[2], c = yt->shape.dim[3];
	const int h = xt->shape.dim[1], w = xt->shape.dim[2], sh = oh / h, sw = ow / w;
	const float *x = xt->data;
	float *y = yt->data;
#pragma omp parallel for collapse(2) if (dt_tensor_count(yt) > RESAMPLE_PAR_MIN)
	for (int b = 0; b < n; b++)
		for (int i = 0; i < oh; i++)
			for (int j = 0; j < ow; j++)
				for (int ch = 0; ch < c; ch++)
					y[(((int64_t)b * oh + i) * ow + j) * c + ch] =
						dt_upsample_value(mode, x, b, i, j, ch, h, w, c, sh, sw);
}

void dt_cpu_upsample2d_backward(enum dt_interp mode, const struct dt_tensor *dyt, struct dt_tensor *dxt)
{
	const int n = dxt->shape.dim[0], h = dxt->shape.dim[1], w = dxt->shape.dim[2], c = dxt->shape.dim[3];
	const int sh = dyt->shape.dim[1] / h, sw = dyt->shape.dim[2] / w;
	const float *dy = dyt->data;
	float *dx = dxt->data;
#pragma omp parallel for collapse(2) if (dt_tensor_count(dyt) > RESAMPLE_PAR_MIN)
	for (int b = 0; b < n; b++)
		for (int a = 0; a < h; a++)
			for (int e = 0; e < w; e++)
				for (int ch = 0; ch < c; ch++)
					dx[(((int64_t)b * h + a) * w + e) * c + ch] =
						dt_upsample_grad(mode, dy, b, a, e, ch, h, w, c, sh, sw);
}

void dt_cpu_mul_channels(const struct dt_tensor *xt, const struct dt_tensor *mt, struct dt_tensor *yt)
{
	const int64_t n = mt->shape.dim[0], c = mt->shape.dim[1], s = dt_tensor_count(yt) / (n ? n * c : 1);
	const float *x = xt->data, *m = mt->data;
	float *y = yt->data;
#pragma omp parallel for collapse(2) if (dt_tensor_count(yt) > RESAMPLE_PAR_MIN)
	for (int64_t b = 0; b < n; b++)
		for (int64_t i = 0; i < s; i++)
			for (int64_t ch = 0; ch < c; ch++)
				y[(b * s + i) * c + ch] = x[(b * s + i) * c + ch] * m[b * c + ch];
}
