#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/cuda/cuda.h"
#include "core/error.h"
#include "core/tensor.h"

int64_t dt_count_mul(int64_t a, int64_t b)
{
	int64_t r;
	DT_ASSERT(a >= 0 && b >= 0);
	return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

int64_t dt_count_add(int64_t a, int64_t b)
{
	int64_t r;
	DT_ASSERT(a >= 0 && b >= 0);
	return __builtin_add_overflow(a, b, &r) ? INT64_MAX : r;
}

int64_t dt_shape_count(const struct dt_shape *s)
{
	int64_t n = 1;
	for (int i = 0; i < s->ndim; i++)
		n = dt_count_mul(n, s->dim[i] > 0 ? s->dim[i] : 0);
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

char *dt_count_format(int64_t n, char *buf, size_t size)
{
	char digits[32];
	int len = snprintf(digits, sizeof(digits), "%lld", (long long)n), k = 0;
	if (n == INT64_MAX) {
		snprintf(buf, size, "more than 9.2 x 10^18");
		return buf;
	}
	for (int i = 0; i < len && k + 2 < (int)size; i++) {
		if (i && digits[i - 1] != '-' && (len - i) % 3 == 0)
			buf[k++] = ',';
		buf[k++] = digits[i];
	}
	buf[k] = '\0';
	return buf;
}

char *dt_bytes_format(double bytes, char *buf, size_t size)
{
	static const char *const units[] = { "B", "KB", "MB", "GB", "TB", "PB", "EB" };
	int u = 0;
	while (bytes >= 1024 && u < 6) {
		bytes /= 1024;
		u++;
	}
	snprintf(buf, size, "%.2f %s", bytes, units[u]);
	return buf;
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
		n = dt_count_mul(n, t->shape.dim[i]);
	return n;
}

float *dt_device_try_alloc(struct dt_device dev, int64_t n)
{
	char where[32];
	int64_t bytes = dt_count_mul(n > 0 ? n : 1, sizeof(float));
	float *p = NULL;

	if (dev.kind == DT_DEVICE_CUDA) {
		/* The strategy checked the GPU (dt_cuda_check_device) before any allocation. */
		if (!dt_cuda())
			DT_BUG("allocation on gpu:%d without the CUDA backend: %s", dev.index, dt_cuda_why());
		return dt_cuda()->alloc(dev.index, n);
	}
	DT_ASSERT(dev.kind == DT_DEVICE_CPU);
	/* aligned_alloc wants a multiple of the alignment; INT64_MAX bytes never fit anyway. */
	if (bytes < INT64_MAX - 63 && (uint64_t)bytes < SIZE_MAX - 63)
		p = aligned_alloc(64, ((size_t)bytes + 63) & ~(size_t)63);
	if (!p) {
		dt_error("out of memory: cannot allocate %lld bytes on %s", (long long)bytes,
			 dt_device_format(dev, where, sizeof(where)));
		return NULL;
	}
	memset(p, 0, ((size_t)bytes + 63) & ~(size_t)63);
	return p;
}

float *dt_device_alloc(struct dt_device dev, int64_t n)
{
	float *p = dt_device_try_alloc(dev, n);
	if (!p)
		dt_exit_out_of_memory();
	return p;
}

int64_t dt_device_memory(struct dt_device dev)
{
	long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
	if (dev.kind == DT_DEVICE_CUDA) {
		struct dt_gpu_info info;
		if (dt_cuda() && dt_cuda()->device_info(dev.index, &info) == 0 && info.memory > 0)
			return info.memory < INT64_MAX ? (int64_t)info.memory : INT64_MAX;
		return INT64_MAX;
	}
	return pages > 0 && size > 0 ? dt_count_mul(pages, size) : INT64_MAX;
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
