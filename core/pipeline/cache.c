/*
 * Reading records. Every source read holds one lock, over all pipelines and
 * threads: one source may back a training and a validation pipeline, and a
 * source is used by one thread at a time (source.h). With data.cache the
 * reads go through the cache of decoded records (raw values, as the source
 * gives them): each record is read from its source once, and an unreadable
 * one is remembered as such.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/pipeline/internal.h"
#include "core/pipeline/pipeline.h"

/* One source read at a time, over all pipelines and threads (see source.h). */
static pthread_mutex_t source_lock = PTHREAD_MUTEX_INITIALIZER;

/* Decoded records of the pipeline, by position: raw values as the source gives them. */
struct dt_cache {
	float *x, *y;     /* (end - begin, sample), (end - begin, src label) */
	uint8_t *state;   /* 0 not read yet, 1 cached, 2 unreadable */
};

static int source_read(struct dt_pipeline *p, const int64_t *idx, int n, float *x, float *y, uint8_t *bad)
{
	int rc;
	if (bad)
		memset(bad, 0, (size_t)n);
	pthread_mutex_lock(&source_lock);
	rc = p->src->type->read(p->src, idx, n, x, y, bad);
	pthread_mutex_unlock(&source_lock);
	return rc;
}

int dt_pipeline_read_records(struct dt_pipeline *p, struct dt_pipeline_worker *w, const int64_t *idx, int n,
			     float *x, float *y, uint8_t *bad)
{
	int64_t xs = dt_shape_count(&p->sample), ys = dt_shape_count(&p->src->label);
	struct dt_cache *c = p->cache;
	uint8_t *want_bad = p->on_error == DT_ON_ERROR_SKIP ? bad : NULL;
	int m = 0;

	memset(bad, 0, (size_t)n);
	if (!c)
		return source_read(p, idx, n, x, y, want_bad);
	for (int i = 0; i < n; i++) {
		int64_t r = dt_pipeline_position(p, idx[i]);
		if (c->state[r] == 1) {
			memcpy(x + i * xs, c->x + r * xs, (size_t)xs * sizeof(float));
			memcpy(y + i * ys, c->y + r * ys, (size_t)ys * sizeof(float));
		} else if (c->state[r] == 2) {
			bad[i] = 1;
		} else {
			w->mpos[m] = i;
			w->midx[m++] = idx[i];
		}
	}
	if (!m)
		return 0;
	if (source_read(p, w->midx, m, w->mx, w->my, want_bad ? w->mbad : NULL) < 0)
		return -1;
	for (int k = 0; k < m; k++) {
		int64_t r = dt_pipeline_position(p, w->midx[k]);
		int i = w->mpos[k];
		if (want_bad && w->mbad[k]) {
			c->state[r] = 2;
			bad[i] = 1;
			continue;
		}
		memcpy(c->x + r * xs, w->mx + k * xs, (size_t)xs * sizeof(float));
		memcpy(c->y + r * ys, w->my + k * ys, (size_t)ys * sizeof(float));
		memcpy(x + i * xs, w->mx + k * xs, (size_t)xs * sizeof(float));
		memcpy(y + i * ys, w->my + k * ys, (size_t)ys * sizeof(float));
		c->state[r] = 1;
	}
	return 0;
}

static int64_t physical_memory(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
	return pages > 0 && size > 0 ? (int64_t)pages * size : INT64_MAX;
}

int dt_pipeline_cache_init(struct dt_pipeline *p)
{
	int64_t n = dt_pipeline_size(p);
	int64_t bytes = n * (dt_shape_count(&p->sample) + dt_shape_count(&p->src->label)) * (int64_t)sizeof(float);
	int64_t limit = physical_memory() / 2;
	if (bytes > limit)
		return dt_error("data.cache would hold %lld MiB of decoded records of '%s', more than half of the "
				"physical memory (%lld MiB); set data.cache: false",
				(long long)(bytes >> 20), p->src->name, (long long)(limit >> 20));
	p->cache = dt_calloc(1, sizeof(*p->cache));
	p->cache->x = dt_malloc((size_t)n * dt_shape_count(&p->sample) * sizeof(float));
	p->cache->y = dt_malloc((size_t)n * dt_shape_count(&p->src->label) * sizeof(float));
	p->cache->state = dt_calloc(n, 1);
	return 0;
}

void dt_pipeline_cache_free(struct dt_pipeline *p)
{
	if (!p->cache)
		return;
	free(p->cache->x);
	free(p->cache->y);
	free(p->cache->state);
	free(p->cache);
	p->cache = NULL;
}
