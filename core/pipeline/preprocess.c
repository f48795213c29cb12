/*
 * Value preprocessing and labels: data.normalize read from the config,
 * x = (x * rescale - mean[c]) / std[c] (dt_preprocess, also saved as JSON in
 * checkpoints for evaluate and predict), the statistics of normalize: auto
 * computed over a pipeline's records, and class indices expanded to one-hot
 * rows.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/pipeline/internal.h"
#include "core/pipeline/pipeline.h"

/* ---- data.normalize ---- */

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

const char *const dt_normalize_keys[] = { "mean", "std", NULL };

int dt_pipeline_normalize_read(struct dt_pipeline_config *c, const struct dt_node *n)
{
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
	if (dt_node_expect(n, DT_NODE_MAP, "normalize") < 0 ||
	    dt_cfg_check_keys(n, "normalize", dt_normalize_keys) < 0 ||
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

/* ---- dt_preprocess ---- */

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

/* ---- a pipeline's normalization ---- */

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

int64_t dt_pipeline_normalize_auto(struct dt_pipeline *p)
{
	int64_t xs = dt_shape_count(&p->sample), ys = dt_shape_count(&p->src->label), n = dt_pipeline_size(p);
	int C = dt_preprocess_channels(&p->sample), B = p->batch_size;
	int64_t rc = -1;
	double *sum = dt_calloc(C, sizeof(double)), *sq = dt_calloc(C, sizeof(double));
	double *shift = dt_calloc(C, sizeof(double));
	float *x = dt_malloc((size_t)B * xs * sizeof(float)), *y = dt_malloc((size_t)B * ys * sizeof(float));
	float *mean = dt_malloc((size_t)C * sizeof(float)), *std = dt_malloc((size_t)C * sizeof(float));
	int64_t *idx = dt_malloc((size_t)B * sizeof(int64_t)), used = 0;
	uint8_t *bad = dt_calloc(B, 1);
	struct dt_pipeline_worker *w = p->cache ? dt_pipeline_worker_new(p) : NULL;

	DT_ASSERT(!p->pf);
	for (int64_t first = 0; first < n; first += B) {
		int m = (int)(n - first < B ? n - first : B);
		for (int i = 0; i < m; i++)
			idx[i] = dt_pipeline_record(p, first + i);
		if (dt_pipeline_read_records(p, w, idx, m, x, y, bad) < 0)
			goto out;
		for (int i = 0; i < m; i++) {
			if (bad[i])
				continue;
			/* Sums about the first record's values: E[x^2] - E[x]^2 of raw values cancels (1e7 +- 0.5). */
			if (used++ == 0)
				for (int c = 0; c < C; c++)
					shift[c] = (double)(x[i * xs + c] * p->pre.rescale);
			for (int64_t j = 0; j < xs; j++) {
				double v = (double)(x[i * xs + j] * p->pre.rescale) - shift[j % C];
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
		mean[c] = (float)(shift[c] + mu);
		std[c] = (float)fmax(sqrt(var > 0 ? var : 0), 1e-7);
	}
	dt_preprocess_set(&p->pre, C, mean, std);
	rc = used;
out:
	dt_pipeline_worker_free(w);
	free(sum);
	free(sq);
	free(shift);
	free(x);
	free(y);
	free(mean);
	free(std);
	free(idx);
	free(bad);
	return rc;
}

/* ---- labels ---- */

void dt_pipeline_set_class_limit(struct dt_pipeline *p, int limit) { p->class_limit = limit; }

int dt_pipeline_check_classes(const struct dt_pipeline *p, const struct dt_pipeline_worker *w, int n, const float *y,
			      int limit)
{
	for (int i = 0; i < n; i++) {
		float c = y[i];
		if (!(c >= 0 && c < limit && c == floorf(c)))
			return dt_error("label %g of record %lld in '%s' is not a class index below %d", c,
					(long long)w->idx[i], p->src->label_file[0] ? p->src->label_file : p->src->name,
					limit);
	}
	return 0;
}

void dt_pipeline_set_binary_labels(struct dt_pipeline *p) { p->binary_labels = 1; }

int dt_pipeline_check_binary(const struct dt_pipeline *p, const struct dt_pipeline_worker *w, int n, int64_t per,
			     const float *y)
{
	for (int64_t i = 0; i < n * per; i++)
		if (!(y[i] >= 0 && y[i] <= 1))
			return dt_error("label %g of record %lld in '%s' is not in [0, 1], as a binary crossentropy's labels "
					"must be (classes numbered from 1? number them from 0)",
					y[i], (long long)w->idx[i / per],
					p->src->label_file[0] ? p->src->label_file : p->src->name);
	return 0;
}

int dt_pipeline_one_hot(const struct dt_pipeline *p, const struct dt_pipeline_worker *w, int n, float *y)
{
	if (dt_pipeline_check_classes(p, w, n, w->yraw, p->one_hot) < 0)
		return -1;
	memset(y, 0, (size_t)n * p->one_hot * sizeof(*y));
	for (int i = 0; i < n; i++)
		y[(int64_t)i * p->one_hot + (int)w->yraw[i]] = 1;
	return 0;
}
