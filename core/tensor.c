#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cuda/cuda.h"
#include "core/error.h"
#include "core/tensor.h"

int64_t dt_shape_count(const struct dt_shape *s)
{
	int64_t n = 1;
	for (int i = 0; i < s->ndim; i++)
		n *= s->dim[i];
	return n;
}

int dt_shape_equal(const struct dt_shape *a, const struct dt_shape *b)
{
	if (a->ndim != b->ndim)
		return 0;
	for (int i = 0; i < a->ndim; i++)
		if (a->dim[i] != b->dim[i])
			return 0;
	return 1;
}

struct dt_shape dt_shape_make(int ndim, const int *dim)
{
	struct dt_shape s = { 0 };
	DT_ASSERT(ndim >= 0 && ndim <= DT_MAX_DIMS);
	s.ndim = ndim;
	for (int i = 0; i < ndim; i++)
		s.dim[i] = dim[i];
	return s;
}

struct dt_shape dt_shape_batch(int n, const struct dt_shape *sample)
{
	struct dt_shape s = { 0 };
	DT_ASSERT(sample->ndim < DT_MAX_DIMS);
	s.ndim = sample->ndim + 1;
	s.dim[0] = n;
	for (int i = 0; i < sample->ndim; i++)
		s.dim[i + 1] = sample->dim[i];
	return s;
}

char *dt_shape_format(const struct dt_shape *s, int with_batch, char *buf, size_t size)
{
	size_t k = 0;
	k += snprintf(buf + k, size - k, "(%s", with_batch ? "None" : "");
	for (int i = 0; i < s->ndim && k < size; i++)
		k += snprintf(buf + k, size - k, "%s%d", (i || with_batch) ? ", " : "", s->dim[i]);
	if (k < size)
		snprintf(buf + k, size - k, "%s)", (s->ndim == 1 && !with_batch) ? "," : "");
	return buf;
}

struct dt_tensor dt_tensor_batch(float *data, struct dt_device dev, int n, const struct dt_shape *sample)
{
	struct dt_tensor t = { data, dt_shape_batch(n, sample), dev };
	return t;
}

struct dt_tensor dt_tensor_flat(float *data, struct dt_device dev, int64_t n)
{
	struct dt_tensor t = { data, { 1, { (int)n } }, dev };
	DT_ASSERT(n <= INT32_MAX);
	return t;
}

int64_t dt_tensor_count(const struct dt_tensor *t) { return dt_shape_count(&t->shape); }

int64_t dt_tensor_rows(const struct dt_tensor *t) { return t->shape.ndim ? t->shape.dim[0] : 1; }

int64_t dt_tensor_cols(const struct dt_tensor *t)
{
	int64_t n = 1;
	for (int i = 1; i < t->shape.ndim; i++)
		n *= t->shape.dim[i];
	return n;
}

float *dt_device_alloc(struct dt_device dev, int64_t n)
{
	size_t bytes = ((size_t)(n > 0 ? n : 1) * sizeof(float) + 63) & ~(size_t)63;
	float *p;
	if (dev.kind == DT_DEVICE_CUDA) {
		/* The strategy checked the GPU (dt_cuda_check_device) before any allocation. */
		if (!dt_cuda())
			DT_BUG("allocation on gpu:%d without the CUDA backend: %s", dev.index, dt_cuda_why());
		return dt_cuda()->alloc(dev.index, n);
	}
	DT_ASSERT(dev.kind == DT_DEVICE_CPU);
	p = aligned_alloc(64, bytes);
	if (!p)
		DT_BUG("out of memory allocating %zu bytes", bytes);
	memset(p, 0, bytes);
	return p;
}

void dt_device_free(struct dt_device dev, float *p)
{
	if (dev.kind == DT_DEVICE_CUDA) {
		if (p)
			dt_cuda()->free(dev.index, p);
		return;
	}
	free(p);
}

void dt_device_synchronize(struct dt_device dev)
{
	if (dev.kind == DT_DEVICE_CUDA)
		dt_cuda()->synchronize(dev.index);
}

char *dt_device_format(struct dt_device dev, char *buf, size_t size)
{
	snprintf(buf, size, "%s:%d", dev.kind == DT_DEVICE_CPU ? "cpu" : "gpu", dev.index);
	return buf;
}
