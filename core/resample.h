/*
 * Formulas written once for the spatial copies and resampling ops of
 * core/ops.h (dt_op_shift2d, dt_op_upsample2d and its backward): the value
 * of one output element, which the CPU loops (core/cpu/resample.c) and the
 * CUDA kernels (core/cuda/resample.cu) both compute, so both devices add the
 * same terms in the same order. DT_HOST_DEVICE (core/rng.h) makes them
 * __host__ __device__ under nvcc.
 *
 * Tensors are channels last, (N, H, W, C) floats on the caller's device.
 * Nothing here allocates or calls into dtrain.
 */
#ifndef DT_RESAMPLE_H
#define DT_RESAMPLE_H

#include <math.h>
#include <stdint.h>

#include "core/op_types.h"
#include "core/rng.h"

/* One axis of a resampling: y[o] draws (1 - t) * x[lo] + t * x[hi]. */
struct dt_lerp {
	int lo, hi;
	float t;
};

/*
 * Where output o of an axis upsampled by s from n values reads. nearest:
 * o / s (Keras' repeat). bilinear as tf.image.resize (Keras 3's
 * ops.image.resize, antialias off) computes it: the source coordinate
 * (o + 0.5) * (1/s) - 0.5 in float, its floor and the next index clamped to
 * [0, n - 1], t the fraction.
 */
static inline DT_HOST_DEVICE struct dt_lerp dt_upsample_src(enum dt_interp mode, int o, int s, int n)
{
	struct dt_lerp r;
	float src, f;
	int i;
	if (mode == DT_INTERP_NEAREST) {
		r.lo = r.hi = o / s;
		r.t = 0;
		return r;
	}
	src = ((float)o + 0.5f) * (1.0f / (float)s) - 0.5f;
	f = floorf(src);
	i = (int)f;
	r.t = src - f;
	r.lo = i < 0 ? 0 : i > n - 1 ? n - 1 : i;
	r.hi = i + 1 < 0 ? 0 : i + 1 > n - 1 ? n - 1 : i + 1;
	return r;
}

/* The weight of x[a] in y[o] on one axis. */
static inline DT_HOST_DEVICE float dt_upsample_weight(enum dt_interp mode, int o, int a, int s, int n)
{
	struct dt_lerp r = dt_upsample_src(mode, o, s, n);
	if (mode == DT_INTERP_NEAREST)
		return r.lo == a ? 1.0f : 0.0f;
	return (r.lo == a ? 1.0f - r.t : 0.0f) + (r.hi == a ? r.t : 0.0f);
}

/* y[b, i, j, ch] of y (N, h*sh, w*sw, C) from x (N, h, w, C). */
static inline DT_HOST_DEVICE float dt_upsample_value(enum dt_interp mode, const float *x, int64_t b, int i, int j,
						      int ch, int h, int w, int c, int sh, int sw)
{
	struct dt_lerp r = dt_upsample_src(mode, i, sh, h), q = dt_upsample_src(mode, j, sw, w);
	const float *img = x + b * h * w * (int64_t)c;
	float top, bottom;
	if (mode == DT_INTERP_NEAREST)
		return img[((int64_t)r.lo * w + q.lo) * c + ch];
	top = (1.0f - q.t) * img[((int64_t)r.lo * w + q.lo) * c + ch] + q.t * img[((int64_t)r.lo * w + q.hi) * c + ch];
	bottom = (1.0f - q.t) * img[((int64_t)r.hi * w + q.lo) * c + ch] + q.t * img[((int64_t)r.hi * w + q.hi) * c + ch];
	return (1.0f - r.t) * top + r.t * bottom;
}

/*
 * dx[b, a, e, ch] of dx (N, h, w, C): the sum of dy (N, h*sh, w*sw, C) over
 * the outputs that read x[b, a, e, ch], each times its weight. Gathered, not
 * scattered, so no two threads write one element: an output row o reads
 * rows floor((o + 0.5) / s - 0.5) and the next, so only rows in
 * [(a - 1) * sh, (a + 2) * sh) can read row a (the edges' clamping included).
 */
static inline DT_HOST_DEVICE float dt_upsample_grad(enum dt_interp mode, const float *dy, int64_t b, int a, int e,
						     int ch, int h, int w, int c, int sh, int sw)
{
	const int oh = h * sh, ow = w * sw;
	const int i0 = mode == DT_INTERP_NEAREST ? a * sh : (a - 1) * sh > 0 ? (a - 1) * sh : 0;
	const int i1 = mode == DT_INTERP_NEAREST ? (a + 1) * sh : (a + 2) * sh < oh ? (a + 2) * sh : oh;
	const int j0 = mode == DT_INTERP_NEAREST ? e * sw : (e - 1) * sw > 0 ? (e - 1) * sw : 0;
	const int j1 = mode == DT_INTERP_NEAREST ? (e + 1) * sw : (e + 2) * sw < ow ? (e + 2) * sw : ow;
	const float *img = dy + b * oh * ow * (int64_t)c;
	float s = 0;
	for (int i = i0; i < i1; i++) {
		float wi = dt_upsample_weight(mode, i, a, sh, h), row = 0;
		if (wi == 0.0f)
			continue;
		for (int j = j0; j < j1; j++) {
			float wj = dt_upsample_weight(mode, j, e, sw, w);
			if (wj != 0.0f)
				row += wj * img[((int64_t)i * ow + j) * c + ch];
		}
		s += wi * row;
	}
	return s;
}

/* y[b, i, j, ch] of y (N, oh, ow, C): x (N, h, w, C) at (i + top, j + left), 0 outside x. */
static inline DT_HOST_DEVICE float dt_shift_value(const float *x, int64_t b, int i, int j, int ch, int h, int w,
						   int c, int top, int left)
{
	int r = i + top, q = j + left;
	if (r < 0 || r >= h || q < 0 || q >= w)
		return 0.0f;
	return x[((b * h + r) * w + q) * (int64_t)c + ch];
}

#endif
