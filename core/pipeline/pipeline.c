#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/cuda/cuda.h"
#include "core/pipeline/pipeline.h"
#include "core/rng.h"

/* One source read at a time, over all pipelines and threads (see source.h). */
static pthread_mutex_t source_lock = PTHREAD_MUTEX_INITIALIZER;

/* The order of one epoch and the scratch of one reading thread. */
struct dt_pipeline_worker {
	int64_t *perm;    /* (end - begin) record indices of `epoch` */
	int epoch;        /* -1 before the first */
	int64_t *idx;     /* (B) records of the batch */
	float *yraw;      /* (B) class indices before one-hot, or NULL */
	uint8_t *bad;     /* (B) */
	int64_t *skipped; /* (B) records dropped from the batch */
	float *tmp;       /* (sample) augmentation scratch */
	/* cache misses: their positions in the batch, records, and read buffers */
	int *mpos;
	int64_t *midx;
	float *mx, *my;
	uint8_t *mbad;
};

/* Decoded records [begin, end): raw values as the source gives them. */
struct dt_cache {
	float *x, *y;     /* (end - begin, sample), (end - begin, src label) */
	uint8_t *state;   /* 0 not read yet, 1 cached, 2 unreadable */
};

/* A batch in the ring and what the thread reports with it. */
struct pl_slot {
	struct dt_batch b;
	int epoch;
	int64_t step;
	int rc;
	struct dt_error_capture err;
	int nskipped;
	int64_t *skipped; /* (B) */
};

struct dt_prefetch {
	struct dt_pipeline *p;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int nslots;
	struct pl_slot *slots;
	int head, count;           /* filled slots, in order */
	int next_epoch;            /* the position the thread produces next */
	int64_t next_step;
	uint64_t gen;              /* bumped by every restart */
	int stop, failed;
	struct dt_pipeline_worker *w;
};

/* ---- configuration ---- */

static const char *const on_error_names[] = { "error", "skip", NULL };
static const char *const fill_mode_names[] = { "reflect", "wrap", "nearest", "constant", NULL };
static const char *const flip_names[] = { "horizontal", "vertical", "horizontal_and_vertical", NULL };

/* A float list of one channel count, or one float for every channel. */
static int read_floats(const struct dt_node *n, const char *what, double min, int open, float **out, int *count)
{
	double v;
	if (n->kind == DT_NODE_SCALAR) {
		if (dt_node_float_range(n, min, INFINITY, open, &v) < 0)
			return -1;
		*out = dt_malloc(sizeof(float));
		(*out)[0] = (float)v;
		*count = 1;
		return 0;
	}
	if (dt_node_expect(n, DT_NODE_SEQ, what) < 0)
		return -1;
	if (n->n == 0)
		return dt_node_error(n, "'%s' needs at least one value", what);
	*out = dt_malloc((size_t)n->n * sizeof(float));
	*count = n->n;
	for (int i = 0; i < n->n; i++) {
		if (dt_node_float_range(n->items[i], min, INFINITY, open, &v) < 0)
			return -1;
		(*out)[i] = (float)v;
	}
	return 0;
}

static int read_normalize(struct dt_pipeline_config *c, const struct dt_node *n)
{
	static const char *const normalize_keys[] = { "mean", "std", NULL };
	const struct dt_node *mean, *std;
	int nm = 0, ns = 0;

	c->normalize_node = n;
	if (n->kind == DT_NODE_SCALAR) {
		if (strcmp(n->value, "auto"))
			return dt_node_error(n, "'normalize' is 'auto' or a mapping {mean: [...], std: [...]}, got '%s'",
					     n->value);
		c->normalize = DT_NORMALIZE_AUTO;
		return 0;
	}
	if (dt_node_expect(n, DT_NODE_MAP, "normalize") < 0 || dt_cfg_check_keys(n, "normalize", normalize_keys) < 0 ||
	    dt_cfg_require(n, "mean", "normalize") < 0 || dt_cfg_require(n, "std", "normalize") < 0)
		return -1;
	mean = dt_node_get(n, "mean");
	std = dt_node_get(n, "std");
	if (read_floats(mean, "mean", -INFINITY, 0, &c->mean, &nm) < 0 ||
	    read_floats(std, "std", 0, DT_OPEN_MIN, &c->std, &ns) < 0)
		return -1;
	if (nm != ns)
		return dt_node_error(std, "'std' has %d values but 'mean' has %d", ns, nm);
	c->nnorm = nm;
	c->normalize = DT_NORMALIZE_GIVEN;
	return 0;
}

/* height_factor: 0.1 is [-0.1, 0.1]; [lo, hi] a range, as Keras. */
static int read_factor(const struct dt_node *map, const char *key, double *lo, double *hi)
{
	const struct dt_node *n = dt_node_get(map, key);
	double v;
	*lo = *hi = 0;
	if (!n)
		return 0;
	if (n->kind == DT_NODE_SCALAR) {
		if (dt_node_float(n, 0, 1, &v) < 0)
			return -1;
		*lo = -v;
		*hi = v;
		return 0;
	}
	if (dt_node_expect(n, DT_NODE_SEQ, key) < 0)
		return -1;
	if (n->n != 2)
		return dt_node_error(n, "'%s' is one factor or a [lower, upper] pair, got %d values", key, n->n);
	if (dt_node_float(n->items[0], -1, 1, lo) < 0 || dt_node_float(n->items[1], -1, 1, hi) < 0)
		return -1;
	if (*lo > *hi)
		return dt_node_error(n, "'%s' lower bound %g is above its upper bound %g", key, *lo, *hi);
	return 0;
}

static int read_augment(struct dt_augment *a, const struct dt_node *n)
{
	static const char *const augment_keys[] = { "random_flip", "random_crop", "random_translation", NULL };
	static const char *const crop_keys[] = { "padding", NULL };
	static const char *const translation_keys[] = { "height_factor", "width_factor", "fill_mode", "fill_value", NULL };
	const struct dt_node *flip, *crop, *tr;
	int mode;
	int64_t pad;
	double fill;

	memset(a, 0, sizeof(*a));
	if (dt_node_expect(n, DT_NODE_MAP, "augment") < 0 || dt_cfg_check_keys(n, "augment", augment_keys) < 0)
		return -1;
	if ((flip = dt_node_get(n, "random_flip"))) {
		if (dt_cfg_enum(n, "random_flip", flip_names, 0, &mode) < 0)
			return -1;
		a->flip_h = mode != 1;
		a->flip_v = mode != 0;
	}
	if ((crop = dt_node_get(n, "random_crop"))) {
		if (dt_node_expect(crop, DT_NODE_MAP, "random_crop") < 0 ||
		    dt_cfg_check_keys(crop, "random_crop", crop_keys) < 0 ||
		    dt_cfg_require(crop, "padding", "random_crop") < 0 ||
		    dt_cfg_int(crop, "padding", 0, 1, 4096, &pad) < 0)
			return -1;
		a->crop_padding = (int)pad;
	}
	if ((tr = dt_node_get(n, "random_translation"))) {
		if (dt_node_expect(tr, DT_NODE_MAP, "random_translation") < 0 ||
		    dt_cfg_check_keys(tr, "random_translation", translation_keys) < 0 ||
		    dt_cfg_require(tr, "height_factor", "random_translation") < 0 ||
		    read_factor(tr, "height_factor", &a->height_lo, &a->height_hi) < 0 ||
		    read_factor(tr, "width_factor", &a->width_lo, &a->width_hi) < 0 ||
		    dt_cfg_enum(tr, "fill_mode", fill_mode_names, DT_FILL_REFLECT, &mode) < 0 ||
		    dt_cfg_float(tr, "fill_value", 0, -INFINITY, INFINITY, &fill) < 0)
			return -1;
		a->translate = 1;
		a->fill_mode = (enum dt_fill_mode)mode;
		a->fill_value = (float)fill;
	}
	return 0;
}

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
	if ((n = dt_node_get(data, "normalize")) && read_normalize(c, n) < 0)
		return -1;
	if ((n = dt_node_get(data, "augment"))) {
		c->augment_node = n;
		if (read_augment(&c->augment, n) < 0)
			return -1;
		c->has_augment = 1;
	}
	return 0;
}

void dt_pipeline_config_release(struct dt_pipeline_config *c)
{
	free(c->mean);
	free(c->std);
	memset(c, 0, sizeof(*c));
}

/* ---- preprocessing ---- */

int dt_preprocess_channels(const struct dt_shape *sample)
{
	if (sample->ndim == 3)
		return sample->dim[2];
	if (sample->ndim == 1)
		return sample->dim[0];
	return 1;
}

void dt_preprocess_apply(const struct dt_preprocess *pp, float *x, int64_t n, int64_t sample_size)
{
	int64_t total = n * sample_size;
	if (pp->nchan == 0) {
		if (pp->rescale != 1)
			for (int64_t i = 0; i < total; i++)
				x[i] *= pp->rescale;
		return;
	}
	for (int64_t i = 0; i < total; i += pp->nchan)
		for (int c = 0; c < pp->nchan; c++)
			x[i + c] = (x[i + c] * pp->rescale - pp->mean[c]) / pp->std[c];
}

void dt_preprocess_set(struct dt_preprocess *pp, int nchan, const float *mean, const float *std)
{
	free(pp->mean);
	free(pp->std);
	pp->nchan = nchan;
	pp->mean = pp->std = NULL;
	if (!nchan)
		return;
	pp->mean = dt_malloc((size_t)nchan * sizeof(float));
	pp->std = dt_malloc((size_t)nchan * sizeof(float));
	memcpy(pp->mean, mean, (size_t)nchan * sizeof(float));
	memcpy(pp->std, std, (size_t)nchan * sizeof(float));
}

void dt_preprocess_release(struct dt_preprocess *pp)
{
	free(pp->mean);
	free(pp->std);
	pp->mean = pp->std = NULL;
	pp->nchan = 0;
}

char *dt_preprocess_to_json(const struct dt_preprocess *pp)
{
	cJSON *o = cJSON_CreateObject();
	char *s;
	cJSON_AddNumberToObject(o, "rescale", pp->rescale);
	if (pp->nchan) {
		cJSON *m = cJSON_AddArrayToObject(o, "mean"), *d = cJSON_AddArrayToObject(o, "std");
		for (int c = 0; c < pp->nchan; c++) {
			cJSON_AddItemToArray(m, cJSON_CreateNumber(pp->mean[c]));
			cJSON_AddItemToArray(d, cJSON_CreateNumber(pp->std[c]));
		}
	}
	s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return s;
}

int dt_preprocess_from_json(struct dt_preprocess *pp, const char *json, const char *what)
{
	cJSON *o = cJSON_Parse(json), *r, *m, *d;
	int n, rc = -1;

	if (!o || !cJSON_IsObject(o)) {
		dt_error("the preprocessing metadata of '%s' is not a JSON object", what);
		goto out;
	}
	r = cJSON_GetObjectItemCaseSensitive(o, "rescale");
	m = cJSON_GetObjectItemCaseSensitive(o, "mean");
	d = cJSON_GetObjectItemCaseSensitive(o, "std");
	if (!cJSON_IsNumber(r) || (m && !cJSON_IsArray(m)) || (d && !cJSON_IsArray(d)) || !m != !d ||
	    (m && cJSON_GetArraySize(m) != cJSON_GetArraySize(d))) {
		dt_error("the preprocessing metadata of '%s' lacks 'rescale' or has mismatched 'mean' and 'std'", what);
		goto out;
	}
	n = m ? cJSON_GetArraySize(m) : 0;
	{
		float *mean = dt_calloc(n, sizeof(float)), *std = dt_calloc(n, sizeof(float));
		for (int c = 0; c < n; c++) {
			cJSON *a = cJSON_GetArrayItem(m, c), *b = cJSON_GetArrayItem(d, c);
			if (!cJSON_IsNumber(a) || !cJSON_IsNumber(b) || !(b->valuedouble > 0)) {
				free(mean);
				free(std);
				dt_error("the preprocessing metadata of '%s' has a bad value at channel %d", what, c);
				goto out;
			}
			mean[c] = (float)a->valuedouble;
			std[c] = (float)b->valuedouble;
		}
		pp->rescale = (float)r->valuedouble;
		dt_preprocess_set(pp, n, mean, std);
		free(mean);
		free(std);
	}
	rc = 0;
out:
	cJSON_Delete(o);
	return rc;
}

/* ---- workers and cache ---- */

static struct dt_pipeline_worker *worker_new(const struct dt_pipeline *p)
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

static void worker_free(struct dt_pipeline_worker *w)
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

/*
 * Records idx[0..n) into x and y (raw values), through the cache when on;
 * bad[i] = 1 for unreadable records under on_error: skip.
 */
static int read_records(struct dt_pipeline *p, struct dt_pipeline_worker *w, const int64_t *idx, int n, float *x,
			float *y, uint8_t *bad)
{
	int64_t xs = dt_shape_count(&p->sample), ys = dt_shape_count(&p->src->label);
	struct dt_cache *c = p->cache;
	uint8_t *want_bad = p->on_error == DT_ON_ERROR_SKIP ? bad : NULL;
	int m = 0;

	memset(bad, 0, (size_t)n);
	if (!c)
		return source_read(p, idx, n, x, y, want_bad);
	for (int i = 0; i < n; i++) {
		int64_t r = idx[i] - p->begin;
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
		int64_t r = w->midx[k] - p->begin;
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

/* ---- augmentation ---- */

/* An index outside [0, n) brought inside by the fill mode; -1 for a constant fill. */
static int fill_index(int i, int n, enum dt_fill_mode mode)
{
	if (i >= 0 && i < n)
		return i;
	switch (mode) {
	case DT_FILL_REFLECT: { /* d c b a | a b c d | d c b a */
		int period = 2 * n;
		i %= period;
		if (i < 0)
			i += period;
		return i < n ? i : period - 1 - i;
	}
	case DT_FILL_WRAP:
		i %= n;
		return i < 0 ? i + n : i;
	case DT_FILL_NEAREST:
		return i < 0 ? 0 : n - 1;
	default:
		return -1;
	}
}

/* Transforms one image x (H, W, C) in place; tmp holds H*W*C floats. */
static void augment_image(const struct dt_pipeline *p, float *x, float *tmp, int epoch, int64_t record)
{
	const struct dt_augment *a = &p->augment;
	int H = p->sample.dim[0], W = p->sample.dim[1], C = p->sample.dim[2], P = a->crop_padding;
	int fh = 0, fv = 0, oy = P, ox = P, dy = 0, dx = 0;
	struct dt_rng r;

	/* Draws in a fixed order, from (seed, epoch, record) alone. */
	dt_rng_seed(&r, dt_hash64(dt_hash64(p->seed, 0x6175676d656e74ull), (uint64_t)epoch), (uint64_t)record);
	if (a->flip_h)
		fh = dt_rng_uniform(&r) < 0.5;
	if (a->flip_v)
		fv = dt_rng_uniform(&r) < 0.5;
	if (P) {
		oy = (int)dt_rng_below(&r, (uint64_t)(2 * P + 1));
		ox = (int)dt_rng_below(&r, (uint64_t)(2 * P + 1));
	}
	if (a->translate) {
		dy = (int)lround((a->height_lo + (a->height_hi - a->height_lo) * dt_rng_uniform(&r)) * H);
		dx = (int)lround((a->width_lo + (a->width_hi - a->width_lo) * dt_rng_uniform(&r)) * W);
	}
	if (!fh && !fv && oy == P && ox == P && dy == 0 && dx == 0)
		return;
	memcpy(tmp, x, (size_t)H * W * C * sizeof(float));
	for (int y = 0; y < H; y++) {
		for (int xo = 0; xo < W; xo++) {
			float *out = x + ((int64_t)y * W + xo) * C;
			/* translation: out(y, x) = in(y - dy, x - dx), filled outside */
			int ty = fill_index(y - dy, H, a->fill_mode), tx = fill_index(xo - dx, W, a->fill_mode);
			int cy, cx;
			if (ty < 0 || tx < 0) {
				for (int c = 0; c < C; c++)
					out[c] = a->fill_value;
				continue;
			}
			/* crop of the zero-padded image at (oy, ox) */
			cy = ty + oy - P;
			cx = tx + ox - P;
			if (cy < 0 || cy >= H || cx < 0 || cx >= W) {
				for (int c = 0; c < C; c++)
					out[c] = 0;
				continue;
			}
			if (fh)
				cx = W - 1 - cx;
			if (fv)
				cy = H - 1 - cy;
			memcpy(out, tmp + ((int64_t)cy * W + cx) * C, (size_t)C * sizeof(float));
		}
	}
}

/* ---- reading one batch ---- */

/* The order of `epoch`: Fisher-Yates from (seed, stream = epoch), or the identity. */
static void permute(const struct dt_pipeline *p, struct dt_pipeline_worker *w, int epoch)
{
	int64_t n = dt_pipeline_size(p);
	struct dt_rng r;

	for (int64_t i = 0; i < n; i++)
		w->perm[i] = p->begin + i;
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

/* Turns the class indices of w->yraw into one-hot rows of y (n, one_hot). */
static int one_hot(const struct dt_pipeline *p, const struct dt_pipeline_worker *w, int n, float *y)
{
	memset(y, 0, (size_t)n * p->one_hot * sizeof(*y));
	for (int i = 0; i < n; i++) {
		float c = w->yraw[i];
		if (!(c >= 0 && c < p->one_hot && c == floorf(c)))
			return dt_error("label %g of record %lld in '%s' is not a class index below %d", c,
					(long long)w->idx[i], p->src->name, p->one_hot);
		y[(int64_t)i * p->one_hot + (int)c] = 1;
	}
	return 0;
}

/* Global batch `step` of `epoch` into b; the records dropped as unreadable into skipped[0..*nskipped). */
static int fill_batch(struct dt_pipeline *p, struct dt_pipeline_worker *w, int epoch, int64_t step,
		      struct dt_batch *b, int64_t *skipped, int *nskipped)
{
	int64_t first = step * p->batch_size, xs = dt_shape_count(&p->sample), ys = dt_shape_count(&p->src->label);
	float *y;
	int n, k = 0;

	*nskipped = 0;
	if (epoch != w->epoch)
		permute(p, w, epoch);
	n = (int)(dt_pipeline_size(p) - first < p->batch_size ? dt_pipeline_size(p) - first : p->batch_size);
	memcpy(w->idx, w->perm + first, (size_t)n * sizeof(*w->idx));
	y = p->one_hot > 0 ? w->yraw : b->y;
	if (read_records(p, w, w->idx, n, b->x, y, w->bad) < 0)
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
	if (p->augment_on)
		for (int i = 0; i < k; i++)
			augment_image(p, b->x + i * xs, w->tmp, epoch, w->idx[i]);
	dt_preprocess_apply(&p->pre, b->x, k, xs);
	if (p->one_hot > 0 && one_hot(p, w, k, b->y) < 0)
		return -1;
	memcpy(b->records, w->idx, (size_t)k * sizeof(*b->records));
	b->n = k;
	return 0;
}

/* ---- the prefetch thread ---- */

/* Batches of pipelines without shuffle or augmentation do not depend on the epoch. */
static int pos_epoch(const struct dt_pipeline *p, int epoch)
{
	return p->shuffle || p->augment_on ? epoch : 0;
}

static void advance(const struct dt_pipeline *p, int *epoch, int64_t *step)
{
	int64_t steps = dt_pipeline_steps(p);
	if (p->steps_per_epoch > 0 && p->steps_per_epoch < steps)
		steps = p->steps_per_epoch;
	if (++*step >= steps) {
		*step = 0;
		*epoch = pos_epoch(p, *epoch + 1);
	}
}

static void *prefetch_main(void *arg)
{
	struct dt_prefetch *f = arg;
	struct dt_pipeline *p = f->p;

	pthread_mutex_lock(&f->mu);
	for (;;) {
		struct pl_slot *s;
		uint64_t gen;
		int epoch, rc;
		int64_t step;

		while (!f->stop && (f->count == f->nslots || f->failed))
			pthread_cond_wait(&f->cv, &f->mu);
		if (f->stop)
			break;
		s = &f->slots[(f->head + f->count) % f->nslots];
		gen = f->gen;
		epoch = f->next_epoch;
		step = f->next_step;
		pthread_mutex_unlock(&f->mu);

		dt_error_capture(&s->err);
		rc = fill_batch(p, f->w, epoch, step, &s->b, s->skipped, &s->nskipped);
		dt_error_capture(NULL);

		pthread_mutex_lock(&f->mu);
		if (gen == f->gen) {
			s->epoch = epoch;
			s->step = step;
			s->rc = rc;
			f->count++;
			if (rc < 0)
				f->failed = 1;
			else
				advance(p, &f->next_epoch, &f->next_step);
		}
		pthread_cond_broadcast(&f->cv);
	}
	pthread_mutex_unlock(&f->mu);
	return NULL;
}

static int prefetch_start(struct dt_pipeline *p, int epoch, int64_t step)
{
	struct dt_prefetch *f = dt_calloc(1, sizeof(*f));
	f->p = p;
	f->nslots = p->prefetch;
	f->slots = dt_calloc(f->nslots, sizeof(*f->slots));
	for (int i = 0; i < f->nslots; i++) {
		dt_batch_alloc(&f->slots[i].b, p);
		f->slots[i].skipped = dt_malloc((size_t)p->batch_size * sizeof(int64_t));
	}
	f->w = worker_new(p);
	f->next_epoch = epoch;
	f->next_step = step;
	pthread_mutex_init(&f->mu, NULL);
	pthread_cond_init(&f->cv, NULL);
	p->pf = f;
	if (pthread_create(&f->thread, NULL, prefetch_main, f)) {
		p->pf = NULL;
		for (int i = 0; i < f->nslots; i++) {
			dt_batch_free(&f->slots[i].b);
			free(f->slots[i].skipped);
		}
		free(f->slots);
		worker_free(f->w);
		pthread_mutex_destroy(&f->mu);
		pthread_cond_destroy(&f->cv);
		free(f);
		return dt_error("cannot start the prefetch thread of '%s' (set data.prefetch: 0)", p->src->name);
	}
	return 0;
}

static void prefetch_stop(struct dt_pipeline *p)
{
	struct dt_prefetch *f = p->pf;
	if (!f)
		return;
	pthread_mutex_lock(&f->mu);
	f->stop = 1;
	pthread_cond_broadcast(&f->cv);
	pthread_mutex_unlock(&f->mu);
	pthread_join(f->thread, NULL);
	for (int i = 0; i < f->nslots; i++) {
		dt_batch_free(&f->slots[i].b);
		free(f->slots[i].skipped);
	}
	free(f->slots);
	worker_free(f->w);
	pthread_mutex_destroy(&f->mu);
	pthread_cond_destroy(&f->cv);
	free(f);
	p->pf = NULL;
}

static void count_skipped(struct dt_pipeline *p, const int64_t *skipped, int n)
{
	for (int i = 0; i < n; i++, p->skipped++)
		if (p->skipped < DT_SKIP_LIST)
			p->skipped_list[p->skipped] = skipped[i];
}

static void copy_batch(const struct dt_pipeline *p, struct dt_batch *to, const struct dt_batch *from)
{
	to->n = from->n;
	memcpy(to->x, from->x, (size_t)from->n * dt_shape_count(&p->sample) * sizeof(float));
	memcpy(to->y, from->y, (size_t)from->n * dt_shape_count(&p->label) * sizeof(float));
	memcpy(to->records, from->records, (size_t)from->n * sizeof(*to->records));
}

/* Batch (epoch, step) from the ring: restarts the thread there unless it is next. */
static int prefetch_take(struct dt_pipeline *p, int epoch, int64_t step, struct dt_batch *b)
{
	struct dt_prefetch *f = p->pf;
	struct pl_slot *s;
	int e = pos_epoch(p, epoch), rc;

	pthread_mutex_lock(&f->mu);
	for (;;) {
		if (f->count > 0) {
			s = &f->slots[f->head];
			if (s->epoch == e && s->step == step)
				break;
		} else if (f->next_epoch == e && f->next_step == step) {
			/* Being filled, or next (the thread advances next only when it publishes). */
			pthread_cond_wait(&f->cv, &f->mu);
			continue;
		}
		/* Somewhere else: drop what is queued and restart at (e, step). */
		f->gen++;
		f->head = f->count = 0;
		f->failed = 0;
		f->next_epoch = e;
		f->next_step = step;
		pthread_cond_broadcast(&f->cv);
	}
	pthread_mutex_unlock(&f->mu);

	/* The thread never writes a filled slot, so the copy needs no lock. */
	rc = s->rc;
	if (rc < 0)
		dt_error_at(s->err.where, "%s", s->err.msg);
	else {
		copy_batch(p, b, &s->b);
		count_skipped(p, s->skipped, s->nskipped);
	}

	pthread_mutex_lock(&f->mu);
	if (rc == 0) {
		f->head = (f->head + 1) % f->nslots;
		f->count--;
		pthread_cond_broadcast(&f->cv);
	}
	pthread_mutex_unlock(&f->mu);
	return rc;
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

static int64_t physical_memory(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
	return pages > 0 && size > 0 ? (int64_t)pages * size : INT64_MAX;
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
	if (o->cache && !p->cache) {
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
	}
	return 0;
}

int dt_pipeline_set_normalize(struct dt_pipeline *p, int nchan, const float *mean, const float *std)
{
	char shape[64];
	int want = dt_preprocess_channels(&p->sample);
	if (nchan != want && nchan != 1)
		return dt_error("normalization has %d channels but the samples of '%s' (%s) have %d", nchan,
				p->src->name, dt_shape_format(&p->sample, 0, shape, sizeof(shape)), want);
	if (nchan == 1 && want > 1) { /* one value for every channel */
		float *m = dt_malloc((size_t)want * sizeof(float)), *s = dt_malloc((size_t)want * sizeof(float));
		for (int c = 0; c < want; c++) {
			m[c] = mean[0];
			s[c] = std[0];
		}
		dt_preprocess_set(&p->pre, want, m, s);
		free(m);
		free(s);
		return 0;
	}
	dt_preprocess_set(&p->pre, nchan, mean, std);
	return 0;
}

int dt_pipeline_normalize_auto(struct dt_pipeline *p)
{
	int64_t xs = dt_shape_count(&p->sample), ys = dt_shape_count(&p->src->label), n = dt_pipeline_size(p);
	int C = dt_preprocess_channels(&p->sample), B = p->batch_size, rc = -1;
	double *sum = dt_calloc(C, sizeof(double)), *sq = dt_calloc(C, sizeof(double));
	float *x = dt_malloc((size_t)B * xs * sizeof(float)), *y = dt_malloc((size_t)B * ys * sizeof(float));
	float *mean = dt_malloc((size_t)C * sizeof(float)), *std = dt_malloc((size_t)C * sizeof(float));
	int64_t *idx = dt_malloc((size_t)B * sizeof(int64_t)), used = 0;
	uint8_t *bad = dt_calloc(B, 1);
	struct dt_pipeline_worker *w = p->cache ? worker_new(p) : NULL;

	DT_ASSERT(!p->pf);
	for (int64_t first = 0; first < n; first += B) {
		int m = (int)(n - first < B ? n - first : B);
		for (int i = 0; i < m; i++)
			idx[i] = p->begin + first + i;
		if (read_records(p, w, idx, m, x, y, bad) < 0)
			goto out;
		for (int i = 0; i < m; i++) {
			if (bad[i])
				continue;
			used++;
			for (int64_t j = 0; j < xs; j++) {
				double v = (double)(x[i * xs + j] * p->pre.rescale);
				sum[j % C] += v;
				sq[j % C] += v * v;
			}
		}
	}
	if (!used) {
		dt_error("'%s' has no readable record to compute data.normalize: auto on", p->src->name);
		goto out;
	}
	for (int c = 0; c < C; c++) {
		double cnt = (double)used * (double)(xs / C), mu = sum[c] / cnt, var = sq[c] / cnt - mu * mu;
		mean[c] = (float)mu;
		std[c] = (float)fmax(sqrt(var > 0 ? var : 0), 1e-7);
	}
	dt_preprocess_set(&p->pre, C, mean, std);
	rc = 0;
out:
	worker_free(w);
	free(sum);
	free(sq);
	free(x);
	free(y);
	free(mean);
	free(std);
	free(idx);
	free(bad);
	return rc;
}

void dt_pipeline_release(struct dt_pipeline *p)
{
	prefetch_stop(p);
	worker_free(p->sync);
	if (p->cache) {
		free(p->cache->x);
		free(p->cache->y);
		free(p->cache->state);
		free(p->cache);
	}
	dt_preprocess_release(&p->pre);
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
		if (!p->pf && prefetch_start(p, pos_epoch(p, epoch), step) < 0)
			return -1;
		return prefetch_take(p, epoch, step, b);
	}
	if (!p->sync)
		p->sync = worker_new(p);
	if (fill_batch(p, p->sync, epoch, step, b, p->sync->skipped, &nskipped) < 0)
		return -1;
	count_skipped(p, p->sync->skipped, nskipped);
	return 0;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

int64_t dt_pipeline_report_skipped(struct dt_pipeline *p, int epoch)
{
	int64_t n = p->skipped, shown = n < DT_SKIP_LIST ? n : DT_SKIP_LIST;
	char list[256];
	size_t len = 0;

	if (!n)
		return 0;
	qsort(p->skipped_list, (size_t)shown, sizeof(int64_t), cmp_i64);
	list[0] = '\0';
	for (int64_t i = 0; i < shown && len < sizeof(list); i++)
		len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%lld", i ? ", " : "",
					(long long)p->skipped_list[i]);
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

void dt_batch_slice(int n, int r, int R, int *begin, int *end)
{
	*begin = (int)((int64_t)n * r / R);
	*end = (int)((int64_t)n * (r + 1) / R);
}
