#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda.h"
#include "pipeline.h"
#include "rng.h"

int dt_pipeline_init(struct dt_pipeline *p, struct dt_source *src, int64_t begin, int64_t end,
		     int batch_size, int shuffle, uint64_t seed, float rescale, int one_hot)
{
	static const struct dt_shape scalar = { 1, { 1 } };

	memset(p, 0, sizeof(*p));
	p->epoch = -1;
	if (begin < 0 || end > src->count || begin >= end)
		return dt_error("records [%lld, %lld) of '%s' are empty or out of range (%lld records)",
				(long long)begin, (long long)end, src->name, (long long)src->count);
	if (batch_size < 1)
		return dt_error("batch size %d must be at least 1", batch_size);
	if (one_hot < 0)
		return dt_error("one-hot size %d must not be negative", one_hot);
	if (one_hot > 0 && !dt_shape_equal(&src->label, &scalar))
		return dt_error("labels of '%s' are not class indices; they cannot be one-hot encoded", src->name);
	if (one_hot > 0 && src->num_classes > one_hot)
		return dt_error("'%s' has %d classes, more than the %d of its one-hot labels", src->name,
				src->num_classes, one_hot);

	p->src = src;
	p->begin = begin;
	p->end = end;
	p->batch_size = batch_size;
	p->shuffle = shuffle;
	p->seed = seed;
	p->rescale = rescale;
	p->one_hot = one_hot;
	p->sample = src->sample;
	p->label = one_hot > 0 ? dt_shape_make(1, &one_hot) : src->label;
	p->perm = dt_malloc((size_t)(end - begin) * sizeof(*p->perm));
	p->idx = dt_malloc((size_t)batch_size * sizeof(*p->idx));
	if (one_hot > 0)
		p->ylabel = dt_malloc((size_t)batch_size * sizeof(*p->ylabel));
	return 0;
}

void dt_pipeline_release(struct dt_pipeline *p)
{
	free(p->perm);
	free(p->idx);
	free(p->ylabel);
	memset(p, 0, sizeof(*p));
	p->epoch = -1;
}

int64_t dt_pipeline_size(const struct dt_pipeline *p) { return p->end - p->begin; }

int64_t dt_pipeline_steps(const struct dt_pipeline *p)
{
	return (dt_pipeline_size(p) + p->batch_size - 1) / p->batch_size;
}

void dt_batch_alloc(struct dt_batch *b, const struct dt_pipeline *p)
{
	b->n = 0;
	b->x = dt_host_alloc_pinned(p->batch_size * dt_shape_count(&p->sample));
	b->y = dt_host_alloc_pinned(p->batch_size * dt_shape_count(&p->label));
}

void dt_batch_free(struct dt_batch *b)
{
	dt_host_free_pinned(b->x);
	dt_host_free_pinned(b->y);
	b->x = b->y = NULL;
	b->n = 0;
}

/* The order of `epoch`: Fisher-Yates from (seed, stream = epoch), or the identity. */
static void pipeline_permute(struct dt_pipeline *p, int epoch)
{
	int64_t n = dt_pipeline_size(p);
	struct dt_rng r;

	for (int64_t i = 0; i < n; i++)
		p->perm[i] = p->begin + i;
	if (p->shuffle) {
		dt_rng_seed(&r, p->seed, (uint64_t)epoch);
		for (int64_t i = n - 1; i > 0; i--) {
			int64_t j = (int64_t)dt_rng_below(&r, (uint64_t)i + 1);
			int64_t t = p->perm[i];
			p->perm[i] = p->perm[j];
			p->perm[j] = t;
		}
	}
	p->epoch = epoch;
}

/* Turns the class indices in p->ylabel into one-hot rows of y (n, one_hot). */
static int pipeline_one_hot(struct dt_pipeline *p, int n, float *y)
{
	memset(y, 0, (size_t)n * p->one_hot * sizeof(*y));
	for (int i = 0; i < n; i++) {
		float c = p->ylabel[i];
		if (!(c >= 0 && c < p->one_hot && c == floorf(c)))
			return dt_error("label %g of record %lld in '%s' is not a class index below %d", c,
					(long long)p->idx[i], p->src->name, p->one_hot);
		y[(int64_t)i * p->one_hot + (int)c] = 1;
	}
	return 0;
}

int dt_pipeline_read(struct dt_pipeline *p, int epoch, int64_t step, struct dt_batch *b)
{
	int64_t first = step * p->batch_size, sample = dt_shape_count(&p->sample);
	int n;

	if (epoch < 0 || step < 0 || step >= dt_pipeline_steps(p))
		return dt_error("batch %lld of epoch %d is out of range (%lld batches per epoch)", (long long)step,
				epoch, (long long)dt_pipeline_steps(p));
	if (epoch != p->epoch)
		pipeline_permute(p, epoch);

	n = (int)(dt_pipeline_size(p) - first < p->batch_size ? dt_pipeline_size(p) - first : p->batch_size);
	memcpy(p->idx, p->perm + first, (size_t)n * sizeof(*p->idx));
	if (p->src->type->read(p->src, p->idx, n, b->x, p->one_hot > 0 ? p->ylabel : b->y, NULL) < 0)
		return -1;
	if (p->rescale != 1)
		for (int64_t i = 0; i < n * sample; i++)
			b->x[i] *= p->rescale;
	if (p->one_hot > 0 && pipeline_one_hot(p, n, b->y) < 0)
		return -1;
	b->n = n;
	return 0;
}
