/*
 * The CPU side of the embedding ops (core/ops.h): a gather of table rows by
 * index and its adjoint, a scatter-add of gradient rows into the table's
 * gradient. Rows are copied or added in index order on one thread, so the
 * sums are the same every run (tokens repeat: two threads could race on a
 * row); the rows are short and this is memory-bound.
 */
#include <string.h>

#include "core/gather.h"
#include "ops_cpu.h"

void dt_cpu_gather(const struct dt_tensor *idx, const struct dt_tensor *table, struct dt_tensor *y)
{
	int64_t n = dt_tensor_count(idx), rows = table->shape.dim[0], d = dt_tensor_count(table) / (rows ? rows : 1);

	for (int64_t i = 0; i < n; i++) {
		int64_t r = dt_gather_row(idx->data[i], rows);
		if (r < 0)
			memset(y->data + i * d, 0, (size_t)d * sizeof(float));
		else
			memcpy(y->data + i * d, table->data + r * d, (size_t)d * sizeof(float));
	}
}

void dt_cpu_scatter_add(const struct dt_tensor *idx, const struct dt_tensor *dy, struct dt_tensor *dtable)
{
	int64_t n = dt_tensor_count(idx), rows = dtable->shape.dim[0], d = dt_tensor_count(dtable) / (rows ? rows : 1);

	for (int64_t i = 0; i < n; i++) {
		int64_t r = dt_gather_row(idx->data[i], rows);
		const float *src = dy->data + i * d;
		float *dst;
		if (r < 0)
			continue;
		dst = dtable->data + r * d;
		for (int64_t j = 0; j < d; j++)
			dst[j] += src[j];
	}
}
