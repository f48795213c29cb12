/*
 * The pipeline's order and batches: init and options, one permutation per
 * epoch from (seed, epoch), global batch `step` = perm[step*B .. step*B+B)
 * read, cleaned of unreadable records, augmented, preprocessed and one-hot
 * encoded (dt_pipeline_fill_batch), the synchronous reads and the replica
 * slices. The other steps live beside it (internal.h names them).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cuda/cuda.h"
#include "core/pipeline/internal.h"
#include "core/pipeline/pipeline.h"
#include "core/rng.h"

/* ---- configuration ---- */

static const char *const on_error_names[] = { "error", "skip", NULL };

int dt_pipeline_config_read(struct dt_pipeline_config *c, const struct dt_node *data)
{
	int64_t prefetch;
	int on_error;
	const struct dt_node *n;

	memset(c, 0, sizeof(*c));
	if (dt_cfg_int(data, "prefetch", 2, 0, 64, &prefetch) < 0 || dt_cfg_bool(data, "cache", 0, &c->cache) < 0 ||
	    dt_cfg_enum(data, "on_error", on_error_names, DT_ON_ERROR_ERROR, &on_error) < 0)
		return -1;
	c->prefetch = (int)prefetch;
	c->on_error = (enum dt_on_error)on_error;
	if ((n = dt_node_get(data, "normalize")) && dt_pipeline_normalize_read(c, n) < 0)
		return -1;
	if ((n = dt_node_get(data, "augment"))) {
		c->augment_node = n;
		if (dt_augment_read(&c->augment, n) < 0)
			return -1;
		c->has_augment = 1;
	}
	return dt_split_config_read(&c->split, data);
}

void dt_pipeline_config_release(struct dt_pipeline_config *c)
{
	free(c->mean);
	free(c->std);
	memset(c, 0, sizeof(*c));
}

/* ---- workers ---- */

struct dt_pipeline_worker *dt_pipeline_worker_new(const struct dt_pipeline *p)
{
	struct dt_pipeline_worker *w = dt_calloc(1, sizeof(*w));
	int B = p->batch_size;
	w->epoch = -1;
	w->perm = dt_malloc((size_t)dt_pipeline_size(p) * sizeof(*w->perm));
	w->idx = dt_malloc((size_t)B * sizeof(*w->idx));
	w->bad = dt_calloc(B, 1);
	w->skipped = dt_malloc((size_t)B * sizeof(*w->skipped));
	w->tmp = dt_malloc((size_t)dt_shape_count(&p->sample) * sizeof(float));
	if (p->one_hot > 0)
		w->yraw = dt_malloc((size_t)B * sizeof(float));
	if (p->cache) {
		w->mpos = dt_malloc((size_t)B * sizeof(*w->mpos));
		w->midx = dt_malloc((size_t)B * sizeof(*w->midx));
		w->mx = dt_malloc((size_t)B * dt_shape_count(&p->sample) * sizeof(float));
		w->my = dt_malloc((size_t)B * dt_shape_count(&p->src->label) * sizeof(float));
		w->mbad = dt_calloc(B, 1);
	}
	return w;
}

void dt_pipeline_worker_free(struct dt_pipeline_worker *w)
{
	if (!w)
		return;
	free(w->perm);
	free(w->idx);
	free(w->bad);
	free(w->skipped);
	free(w->tmp);
	free(w->yraw);
	free(w->mpos);
	free(w->midx);
	free(w->mx);
	free(w->my);
	free(w->mbad);
	free(w);
}

/* ---- reading one batch ---- */

/* The order of `epoch`: Fisher-Yates from (seed, stream = epoch), or the identity. */
static void permute(const struct dt_pipeline *p, struct dt_pipeline_worker *w, int epoch)
{
	int64_t n = dt_pipeline_size(p);
	struct dt_rng r;

	for (int64_t i = 0; i < n; i++)
		w->perm[i] = dt_pipeline_record(p, i);
	if (p->shuffle) {
		dt_rng_seed(&r, p->seed, (uint64_t)epoch);
		for (int64_t i = n - 1; i > 0; i--) {
			int64_t j = (int64_t)dt_rng_below(&r, (uint64_t)i + 1);
			int64_t t = w->perm[i];
			w->perm[i] = w->perm[j];
			w->perm[j] = t;
		}
	}
	w->epoch = epoch;
}

int dt_pipeline_fill_batch(struct dt_pipeline *p, struct dt_pipeline_worker *w, int epoch, int64_t step,
			   struct dt_batch *b, int64_t *skipped, int *nskipped)
{
	int64_t first = step * p->batch_size, xs = dt_shape_count(&p->sample), ys = dt_shape_count(&p->src->label);
	float *y;
	int n, k = 0, all, lo = 0, hi;

	*nskipped = 0;
	if (epoch != w->epoch)
		permute(p, w, epoch);
	all = (int)(dt_pipeline_size(p) - first < p->batch_size ? dt_pipeline_size(p) - first : p->batch_size);
	hi = all;
	if (p->part_total > 0) {
		int unused;
		dt_batch_slice(all, p->part_first, p->part_total, &lo, &unused);
		dt_batch_slice(all, p->part_first + p->part_count - 1, p->part_total, &unused, &hi);
	}
	n = hi - lo;
	memcpy(w->idx, w->perm + first + lo, (size_t)n * sizeof(*w->idx));
	y = p->one_hot > 0 ? w->yraw : b->y;
	if (dt_pipeline_read_records(p, w, w->idx, n, b->x, y, w->bad) < 0)
		return -1;
	for (int i = 0; i < n; i++) {
		if (w->bad[i]) {
			skipped[(*nskipped)++] = w->idx[i];
			continue;
		}
		if (k != i) {
			memcpy(b->x + k * xs, b->x + i * xs, (size_t)xs * sizeof(float));
			memcpy(y + k * ys, y + i * ys, (size_t)ys * sizeof(float));
			w->idx[k] = w->idx[i];
		}
		k++;
	}
	if (p->index_limit && dt_index_check(b->x, k, xs, p->index_limit, p->src->name, w->idx, 0, p->index_layer) < 0)
		return -1;
	if (p->augment_on)
		for (int i = 0; i < k; i++)
			dt_augment_image(p, b->x + i * xs, w->tmp, epoch, w->idx[i]);
	dt_preprocess_apply(&p->pre, b->x, k, xs);
	if (p->one_hot > 0 && dt_pipeline_one_hot(p, w, k, b->y) < 0)
		return -1;
	if (p->class_limit > 0 && dt_pipeline_check_classes(p, w, k, b->y, p->class_limit) < 0)
		return -1;
	if (p->binary_labels && dt_pipeline_check_binary(p, w, k, p->one_hot > 0 ? p->one_hot : ys, b->y) < 0)
		return -1;
	memcpy(b->records, w->idx, (size_t)k * sizeof(*b->records));
	b->n = k;
	b->offset = lo;
	b->total = all - (n - k);
	return 0;
}

/* Batches of pipelines without shuffle or augmentation do not depend on the epoch. */
int dt_pipeline_pos_epoch(const struct dt_pipeline *p, int epoch)
{
	return p->shuffle || p->augment_on ? epoch : 0;
}

void dt_pipeline_count_skipped(struct dt_pipeline *p, const int64_t *skipped, int n)
{
	/* skipped_list: the lowest DT_SKIP_LIST records so far, in order, whatever order the shuffle met them in. */
	for (int i = 0; i < n; i++) {
		int64_t r = skipped[i];
		int k = p->skipped < DT_SKIP_LIST ? (int)p->skipped : DT_SKIP_LIST;
		p->skipped++;
		if (k == DT_SKIP_LIST) {
			if (r >= p->skipped_list[k - 1])
				continue;
			k--; /* the highest makes room */
		}
		for (; k > 0 && p->skipped_list[k - 1] > r; k--)
			p->skipped_list[k] = p->skipped_list[k - 1];
		p->skipped_list[k] = r;
	}
}

int64_t dt_pipeline_record(const struct dt_pipeline *p, int64_t i)
{
	return p->records ? p->records[i] : p->begin + i;
}

int64_t dt_pipeline_position(const struct dt_pipeline *p, int64_t r)
{
	int64_t lo = 0, hi = dt_pipeline_size(p) - 1;
	if (!p->records)
		return r - p->begin;
	while (lo < hi) { /* the list is increasing */
		int64_t mid = lo + (hi - lo) / 2;
		if (p->records[mid] < r)
			lo = mid + 1;
		else
			hi = mid;
	}
	DT_ASSERT(p->records[lo] == r);
	return lo;
}

/* ---- the pipeline ---- */

int dt_pipeline_init(struct dt_pipeline *p, struct dt_source *src, int64_t begin, int64_t end,
		     int batch_size, int shuffle, uint64_t seed, float rescale, int one_hot)
{
	static const struct dt_shape scalar = { 1, { 1 } };

	memset(p, 0, sizeof(*p));
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
	p->pre.rescale = rescale;
	p->one_hot = one_hot;
	p->sample = src->sample;
	p->label = one_hot > 0 ? dt_shape_make(1, &one_hot) : src->label;
	return 0;
}

int dt_pipeline_check_known_bad(struct dt_pipeline *p)
{
	const struct dt_source *s = p->src;
	if (p->on_error != DT_ON_ERROR_ERROR || !s->type->known_bad)
		return 0;
	for (int64_t i = 0; i < dt_pipeline_size(p); i++) {
		int64_t r = dt_pipeline_record(p, i);
		if (s->type->known_bad(p->src, r)) {
			float *x = dt_malloc((size_t)dt_shape_count(&s->sample) * sizeof(float));
			float *y = dt_malloc((size_t)dt_shape_count(&s->label) * sizeof(float));
			int rc = s->type->read(p->src, &r, 1, x, y, NULL);
			free(x);
			free(y);
			DT_ASSERT(rc < 0); /* a known bad record is an error to read */
			return -1;
		}
	}
	return 0;
}

int dt_pipeline_configure(struct dt_pipeline *p, const struct dt_pipeline_options *o)
{
	char shape[64];
	DT_ASSERT(!p->sync && !p->pf);
	p->prefetch = o->prefetch;
	p->on_error = o->on_error;
	p->steps_per_epoch = o->steps_per_epoch;
	if (o->augment && (o->augment->flip_h || o->augment->flip_v || o->augment->crop_padding || o->augment->translate)) {
		if (p->sample.ndim != 3)
			return dt_error("data.augment works on images (height, width, channels), but the samples of '%s' are %s",
					p->src->name, dt_shape_format(&p->sample, 0, shape, sizeof(shape)));
		p->augment = *o->augment;
		p->augment_on = 1;
	}
	if (o->cache && !p->cache && dt_pipeline_cache_init(p) < 0)
		return -1;
	return 0;
}

int dt_pipeline_init_list(struct dt_pipeline *p, struct dt_source *src, const int64_t *records, int64_t n,
			  int batch_size, int shuffle, uint64_t seed, float rescale, int one_hot)
{
	if (n < 1)
		return dt_error("a part of '%s' holds no records", src->name);
	for (int64_t i = 0; i < n; i++)
		if (records[i] < 0 || records[i] >= src->count || (i > 0 && records[i] <= records[i - 1]))
			return dt_error("record list of '%s' is not increasing within its %lld records (record %lld at %lld)",
					src->name, (long long)src->count, (long long)records[i], (long long)i);
	if (dt_pipeline_init(p, src, 0, n, batch_size, shuffle, seed, rescale, one_hot) < 0)
		return -1;
	p->records = dt_malloc((size_t)n * sizeof(*p->records));
	memcpy(p->records, records, (size_t)n * sizeof(*p->records));
	return 0;
}

void dt_pipeline_release(struct dt_pipeline *p)
{
	dt_prefetch_stop(p);
	dt_pipeline_worker_free(p->sync);
	dt_pipeline_cache_free(p);
	dt_preprocess_release(&p->pre);
	free(p->records);
	memset(p, 0, sizeof(*p));
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
	b->records = dt_malloc((size_t)p->batch_size * sizeof(*b->records));
	b->capacity = p->batch_size;
}

void dt_batch_free(struct dt_batch *b)
{
	dt_host_free_pinned(b->x);
	dt_host_free_pinned(b->y);
	free(b->records);
	b->records = NULL;
	b->x = b->y = NULL;
	b->n = 0;
}

int dt_pipeline_read(struct dt_pipeline *p, int epoch, int64_t step, struct dt_batch *b)
{
	int nskipped;

	DT_ASSERT(b->capacity >= p->batch_size); /* a batch allocated for this pipeline's batch size */
	if (epoch < 0 || step < 0 || step >= dt_pipeline_steps(p))
		return dt_error("batch %lld of epoch %d is out of range (%lld batches per epoch)", (long long)step,
				epoch, (long long)dt_pipeline_steps(p));
	if (p->prefetch > 0) {
		if (!p->pf && dt_prefetch_start(p, dt_pipeline_pos_epoch(p, epoch), step) < 0)
			return -1;
		return dt_prefetch_take(p, epoch, step, b);
	}
	if (!p->sync)
		p->sync = dt_pipeline_worker_new(p);
	if (dt_pipeline_fill_batch(p, p->sync, epoch, step, b, p->sync->skipped, &nskipped) < 0)
		return -1;
	dt_pipeline_count_skipped(p, p->sync->skipped, nskipped);
	return 0;
}

int64_t dt_pipeline_report_skipped(struct dt_pipeline *p, int epoch)
{
	int64_t n = p->skipped, shown = n < DT_SKIP_LIST ? n : DT_SKIP_LIST;
	char list[2048];
	size_t len = 0;

	if (!n)
		return 0;
	list[0] = '\0';
	for (int64_t i = 0; i < shown && len < sizeof(list); i++) {
		int64_t r = p->skipped_list[i];
		char what[512];
		int has = p->src->type->record_what && p->src->type->record_what(p->src, r, what, sizeof(what));
		len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%lld", i ? ", " : "", (long long)r);
		if (has && len < sizeof(list))
			len += (size_t)snprintf(list + len, sizeof(list) - len, " (%s)", what);
	}
	if (p->quiet_skips)
		; /* the chief warns */
	else if (epoch >= 0)
		dt_warn("skipped %lld unreadable record%s in epoch %d of '%s': record%s %s%s", (long long)n,
			n == 1 ? "" : "s", epoch + 1, p->src->name, n == 1 ? "" : "s", list, n > shown ? ", ..." : "");
	else
		dt_warn("skipped %lld unreadable record%s of '%s': record%s %s%s", (long long)n, n == 1 ? "" : "s",
			p->src->name, n == 1 ? "" : "s", list, n > shown ? ", ..." : "");
	p->skipped = 0;
	return n;
}

void dt_pipeline_set_part(struct dt_pipeline *p, int first, int count, int total)
{
	DT_ASSERT(!p->sync && !p->pf && total > 0 && count > 0 && first >= 0 && first + count <= total);
	p->part_first = first;
	p->part_count = count;
	p->part_total = total;
}

void dt_batch_slice(int n, int r, int R, int *begin, int *end)
{
	*begin = (int)((int64_t)n * r / R);
	*end = (int)((int64_t)n * (r + 1) / R);
}
