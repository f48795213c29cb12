/*
 * The CUDA side of the embedding ops (core/ops.h): one thread per output
 * value for the gather; the scatter-add adds each gradient value into its
 * table row with atomicAdd (tokens repeat), so the order of a row's sums,
 * and its last bits, vary between runs, as with cuDNN's non-deterministic
 * algorithms. Indices map to rows by core/gather.h, as on the CPU.
 */
#include "core/cuda/ops_cuda.h"
#include "core/gather.h"

__global__ void k_gather(const float *idx, const float *table, float *y, int64_t rows, int64_t d, int64_t n)
{
	GRID_LOOP(e, n)
	{
		int64_t r = dt_gather_row(idx[e / d], rows);
		y[e] = r < 0 ? 0.0f : table[r * d + e % d];
	}
}

__global__ void k_scatter_add(const float *idx, const float *dy, float *dtable, int64_t rows, int64_t d, int64_t n)
{
	GRID_LOOP(e, n)
	{
		int64_t r = dt_gather_row(idx[e / d], rows);
		if (r >= 0)
			atomicAdd(dtable + r * d + e % d, dy[e]);
	}
}

void dt_cuda_gather(const struct dt_tensor *idx, const struct dt_tensor *table, struct dt_tensor *y)
{
	struct dt_gpu *g = dt_gpu_use(y->dev);
	int64_t rows = table->shape.dim[0], d = table->shape.dim[1], n = t_count(y);
	k_gather LAUNCH(g, n)(idx->data, table->data, y->data, rows, d, n);
	DT_CUDA_LAUNCH_CHECK();
}

void dt_cuda_scatter_add(const struct dt_tensor *idx, const struct dt_tensor *dy, struct dt_tensor *dtable)
{
	struct dt_gpu *g = dt_gpu_use(dtable->dev);
	int64_t rows = dtable->shape.dim[0], d = dtable->shape.dim[1], n = t_count(dy);
	k_scatter_add LAUNCH(g, n)(idx->data, dy->data, dtable->data, rows, d, n);
	DT_CUDA_LAUNCH_CHECK();
}
