/*
 * `format: npy`: NumPy arrays as np.save writes them, raw or gzipped, or
 * standard input ("-", read whole).
 *
 *   x: features.npy    (N, ...) the samples; the first dimension is records
 *   y: labels.npy      (N,) class indices (or values), or (N, K) vectors
 *   sample_weight: w.npy  optional (N,) per-record weights, finite and >= 0
 *                      (Keras' sample_weight)
 *
 * A .npy file: the magic "\x93NUMPY", version 1.0, 2.0 or 3.0, the header
 * length (2 bytes in 1.0, 4 after), a Python dict literal such as
 * {'descr': '<f4', 'fortran_order': False, 'shape': (60000, 28, 28), }
 * padded with spaces and a newline, then the data in C order. dtypes: <f4
 * <f8 |u1 |i1 <i2 <u2 <i4 <u4 <i8 <u8 |b1; big-endian data and Fortran
 * order are refused. Data stays in its dtype in memory; read() converts, and
 * a record whose features hold a NaN or an infinity is unreadable (an error,
 * or skipped under data.on_error: skip).
 *
 * The stream reader (dt_npy_reader, for dtrain predict) reads the x array a
 * chunk of records at a time.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/pipeline/source.h"
#include "reader.h"
#include "sources.h"

#define NPY_MAX_HEADER (1 << 20)
#define NPY_CHUNK (1 << 16) /* first allocation, before the data proves larger */

enum npy_kind { NPY_F4, NPY_F8, NPY_U1, NPY_I1, NPY_I2, NPY_U2, NPY_I4, NPY_U4, NPY_I8, NPY_U8, NPY_B1 };

static const struct {
	const char *code; /* without the byte-order character */
	int size;
} npy_dtypes[] = {
	[NPY_F4] = { "f4", 4 }, [NPY_F8] = { "f8", 8 }, [NPY_U1] = { "u1", 1 }, [NPY_I1] = { "i1", 1 },
	[NPY_I2] = { "i2", 2 }, [NPY_U2] = { "u2", 2 }, [NPY_I4] = { "i4", 4 }, [NPY_U4] = { "u4", 4 },
	[NPY_I8] = { "i8", 8 }, [NPY_U8] = { "u8", 8 }, [NPY_B1] = { "b1", 1 },
};

struct npy_array {
	enum npy_kind kind;
	int itemsize;
	int ndim;
	int64_t dim[8];
	int64_t record; /* elements per record (product of dim[1..]) */
	int64_t count;  /* dim[0] */
	int64_t offset; /* bytes before the data */
};

/* Element i of raw little-endian data of kind k, as a float. */
static float npy_value(enum npy_kind k, const uint8_t *p)
{
	union {
		float f;
		double d;
		uint16_t u16;
		int16_t i16;
		uint32_t u32;
		int32_t i32;
		uint64_t u64;
		int64_t i64;
	} v;
	switch (k) {
	case NPY_F4: memcpy(&v.f, p, 4); return v.f;
	case NPY_F8: memcpy(&v.d, p, 8); return (float)v.d;
	case NPY_U1: return p[0];
	case NPY_I1: return (int8_t)p[0];
	case NPY_I2: memcpy(&v.i16, p, 2); return v.i16;
	case NPY_U2: memcpy(&v.u16, p, 2); return v.u16;
	case NPY_I4: memcpy(&v.i32, p, 4); return (float)v.i32;
	case NPY_U4: memcpy(&v.u32, p, 4); return (float)v.u32;
	case NPY_I8: memcpy(&v.i64, p, 8); return (float)v.i64;
	case NPY_U8: memcpy(&v.u64, p, 8); return (float)v.u64;
	case NPY_B1: return p[0] != 0;
	}
	return 0;
}

static void npy_convert(const struct npy_array *a, const uint8_t *src, int64_t n, float *dst)
{
	if (a->kind == NPY_F4) {
		memcpy(dst, src, (size_t)n * 4);
		return;
	}
	for (int64_t i = 0; i < n; i++)
		dst[i] = npy_value(a->kind, src + i * a->itemsize);
}

static const char *skip_space(const char *p)
{
	while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
		p++;
	return p;
}

/* The value after 'key': in a dict literal, or NULL. */
static const char *npy_key(const char *h, const char *key)
{
	char q1[32], q2[32];
	const char *p;
	snprintf(q1, sizeof(q1), "'%s'", key);
	snprintf(q2, sizeof(q2), "\"%s\"", key);
	p = strstr(h, q1);
	if (!p)
		p = strstr(h, q2);
	if (!p)
		return NULL;
	p = skip_space(p + strlen(q1));
	if (*p != ':')
		return NULL;
	return skip_space(p + 1);
}

/* Parses the header dict into a. 0, or -1 after an error naming the file. */
static int npy_parse_header(const char *name, const char *h, struct npy_array *a)
{
	const char *p = npy_key(h, "descr"), *code;
	char descr[32];
	int n = 0;

	if (!p || (*p != '\'' && *p != '"')) {
		if (p && *p == '[')
			return dt_error("'%s' holds a structured array (descr %.40s); only plain numeric arrays are supported",
					name, p);
		return dt_error("'%s' has no dtype ('descr') in its .npy header", name);
	}
	while (p[1 + n] && p[1 + n] != *p && n < (int)sizeof(descr) - 1) {
		descr[n] = p[1 + n];
		n++;
	}
	descr[n] = 0;
	if (descr[0] == '>' && strcmp(descr + 1, "u1") && strcmp(descr + 1, "i1") && strcmp(descr + 1, "b1"))
		return dt_error("'%s' holds big-endian data (dtype '%s'); save it little-endian, e.g. with "
				"a.astype('<%s')",
				name, descr, descr + 1);
	code = descr[0] == '<' || descr[0] == '|' || descr[0] == '=' || descr[0] == '>' ? descr + 1 : descr;
	for (n = 0; n < (int)(sizeof(npy_dtypes) / sizeof(npy_dtypes[0])); n++)
		if (!strcmp(code, npy_dtypes[n].code))
			break;
	if (n == (int)(sizeof(npy_dtypes) / sizeof(npy_dtypes[0])))
		return dt_error("'%s' has dtype '%s'; supported: <f4 <f8 |u1 |i1 <i2 <u2 <i4 <u4 <i8 <u8 |b1", name,
				descr);
	a->kind = n;
	a->itemsize = npy_dtypes[n].size;

	p = npy_key(h, "fortran_order");
	if (!p || (strncmp(p, "False", 5) && strncmp(p, "True", 4)))
		return dt_error("'%s' has no fortran_order in its .npy header", name);
	if (!strncmp(p, "True", 4))
		return dt_error("'%s' is in Fortran order; save it in C order (np.ascontiguousarray)", name);

	p = npy_key(h, "shape");
	if (!p || *p != '(')
		return dt_error("'%s' has no shape in its .npy header", name);
	p = skip_space(p + 1);
	a->ndim = 0;
	while (*p != ')') {
		char *end;
		long long v = strtoll(p, &end, 10);
		if (end == p || v < 0)
			return dt_error("'%s' has a bad shape in its .npy header", name);
		if (a->ndim == 8)
			return dt_error("'%s' has more than 8 dimensions", name);
		a->dim[a->ndim++] = v;
		p = skip_space(end);
		if (*p == 'L')
			p = skip_space(p + 1);
		if (*p == ',')
			p = skip_space(p + 1);
		else if (*p != ')')
			return dt_error("'%s' has a bad shape in its .npy header", name);
	}
	if (a->ndim == 0)
		return dt_error("'%s' holds a single value (shape ()); expected an array with one record per row", name);
	a->count = a->dim[0];
	a->record = 1;
	for (int i = 1; i < a->ndim; i++) {
		if (a->dim[i] == 0)
			return dt_error("'%s' has records of no values (dimension %d of its shape is 0)", name, i);
		if (a->dim[i] > INT32_MAX / a->record)
			return dt_error("'%s' has records of more than %d elements (dimension %d is %lld)", name, INT32_MAX,
					i, (long long)a->dim[i]);
		a->record *= a->dim[i];
	}
	if (a->record * a->itemsize > INT32_MAX)
		return dt_error("'%s' has records of more than %d bytes", name, INT32_MAX);
	return 0;
}

/* Reads the magic, version and header dict from gz. 0 or -1. */
static int npy_read_header(struct dt_gz *gz, const char *name, struct npy_array *a)
{
	uint8_t head[12];
	uint32_t hlen;
	int lenbytes;
	int64_t k;
	char *h;
	int rc;

	memset(a, 0, sizeof(*a));
	k = dt_gz_read(gz, name, head, 8);
	if (k < 0)
		return -1;
	if (k == 0)
		return dt_error("'%s' is empty", name);
	if (k < 6 || memcmp(head, "\x93NUMPY", 6))
		return dt_error("'%s' is not a .npy file (no \\x93NUMPY magic)", name);
	if (k < 8)
		return dt_error("'%s' is truncated: its .npy header is cut short", name);
	if (head[6] < 1 || head[6] > 3)
		return dt_error("'%s' has .npy version %d.%d; dtrain reads 1.0, 2.0 and 3.0", name, head[6], head[7]);
	lenbytes = head[6] == 1 ? 2 : 4;
	if (dt_gz_read(gz, name, head + 8, lenbytes) != lenbytes)
		return dt_error("'%s' is truncated: its .npy header is cut short", name);
	hlen = head[8] | head[9] << 8;
	if (lenbytes == 4)
		hlen |= (uint32_t)head[10] << 16 | (uint32_t)head[11] << 24;
	if (hlen == 0 || hlen > NPY_MAX_HEADER)
		return dt_error("'%s' has a .npy header of %u bytes; is the file damaged?", name, hlen);
	h = dt_malloc(hlen + 1);
	k = dt_gz_read(gz, name, h, hlen);
	if (k != (int64_t)hlen) {
		free(h);
		return k < 0 ? -1 : dt_error("'%s' is truncated: its .npy header is cut short", name);
	}
	h[hlen] = 0;
	if (memchr(h, 0, hlen)) {
		free(h);
		return dt_error("'%s' has a damaged .npy header (a NUL byte in it)", name);
	}
	rc = npy_parse_header(name, h, a);
	a->offset = 8 + lenbytes + hlen;
	free(h);
	return rc;
}

/* ---- the source ---- */

struct npy_file {
	struct npy_array a;
	uint8_t *data; /* (count, record) elements of a.kind */
	char name[512];
};

struct npy {
	struct npy_file x, y;
};

/* Loads a whole file, growing memory with the data actually there. 0 or -1. */
static int npy_load(struct npy_file *f, const char *path)
{
	int64_t want, got = 0, cap, k;
	uint8_t extra;
	struct dt_gz *gz = dt_gz_open(path);

	snprintf(f->name, sizeof(f->name), "%s", dt_data_name(path));
	if (!gz)
		return -1;
	if (npy_read_header(gz, f->name, &f->a) < 0)
		goto fail;
	if (f->a.count == 0) {
		dt_error("'%s' holds no records (shape starts with 0)", f->name);
		goto fail;
	}
	if (f->a.count > INT64_MAX / (f->a.record * f->a.itemsize)) {
		dt_error("'%s' has an absurd shape in its .npy header", f->name);
		goto fail;
	}
	want = f->a.count * f->a.record * f->a.itemsize;
	cap = want < NPY_CHUNK ? want : NPY_CHUNK;
	f->data = dt_malloc(cap);
	for (;;) {
		k = dt_gz_read(gz, f->name, f->data + got, cap - got);
		if (k < 0)
			goto fail;
		got += k;
		if (got < cap || cap == want)
			break;
		cap = cap > want / 2 ? want : 2 * cap;
		f->data = dt_realloc(f->data, cap);
	}
	if (got < want) {
		int64_t rec = f->a.record * f->a.itemsize;
		dt_error("'%s' is truncated: its header promises %lld records (%lld bytes of data) but only %lld bytes "
			 "follow, %lld whole records",
			 f->name, (long long)f->a.count, (long long)want, (long long)got, (long long)(got / rec));
		goto fail;
	}
	k = dt_gz_read(gz, f->name, &extra, 1);
	if (k < 0)
		goto fail;
	if (k > 0) {
		dt_error("'%s' has trailing data after the %lld records its header promises", f->name,
			 (long long)f->a.count);
		goto fail;
	}
	dt_gz_close(gz);
	return 0;
fail:
	free(f->data);
	f->data = NULL;
	dt_gz_close(gz);
	return -1;
}

static void npy_close(struct dt_source *s)
{
	struct npy *d = s->priv;
	if (!d)
		return;
	free(d->x.data);
	free(d->y.data);
	free(d);
	s->priv = NULL;
}

/* path of key, "-" kept as it is. 0 or -1. */
static int npy_path(const struct dt_node *args, const char *key, char **out)
{
	const char *given;
	if (dt_cfg_string(args, key, NULL, &given) < 0)
		return -1;
	if (!strcmp(given, "-")) {
		*out = dt_strdup("-");
		return 0;
	}
	return dt_cfg_path(args, key, out);
}

/*
 * Loads the sample_weight file at path into s->sample_weight: one finite
 * weight >= 0 for each of s->count records. 0 or -1.
 */
static int npy_weights(struct dt_source *s, const char *path)
{
	struct npy_file w = { 0 };
	int rc = -1;
	if (npy_load(&w, path) < 0)
		return -1;
	if (w.a.ndim != 1) {
		dt_error("'%s' has %d dimensions; sample_weight is a 1-D array (N,) of one weight per record", w.name,
			 w.a.ndim);
		goto out;
	}
	if (w.a.count != s->count) {
		dt_error("'%s' has %lld weights but '%s' has %lld records", w.name, (long long)w.a.count, s->name,
			 (long long)s->count);
		goto out;
	}
	s->sample_weight = dt_malloc((size_t)s->count * sizeof(float));
	npy_convert(&w.a, w.data, s->count, s->sample_weight);
	for (int64_t i = 0; i < s->count; i++) {
		float v = s->sample_weight[i];
		if (!(isfinite(v) && v >= 0)) {
			dt_error("'%s', record %lld: the sample_weight %g is not a finite number >= 0", w.name,
				 (long long)i, v);
			goto out;
		}
	}
	rc = 0;
out:
	free(w.data);
	return rc;
}

static const char *const npy_keys[] = { "format", "x", "y", "sample_weight", NULL };

/* The two paths (the caller frees them, also after an error). 0 or -1. */
static int npy_args(const struct dt_node *args, char **xpath, char **ypath)
{
	const char *weights;
	*xpath = *ypath = NULL;
	if (dt_cfg_check_keys(args, "npy", npy_keys) < 0 || dt_cfg_require(args, "x", "npy") < 0 ||
	    dt_cfg_require(args, "y", "npy") < 0 || npy_path(args, "x", xpath) < 0 || npy_path(args, "y", ypath) < 0)
		return -1;
	if (!strcmp(*xpath, "-") && !strcmp(*ypath, "-"))
		return dt_node_error(dt_node_get(args, "y"), "x and y cannot both be standard input ('-')");
	return dt_cfg_string(args, "sample_weight", NULL, &weights);
}

static int npy_check(const struct dt_node *args)
{
	char *xpath, *ypath;
	int rc = npy_args(args, &xpath, &ypath);
	free(xpath);
	free(ypath);
	return rc;
}

static int npy_open(struct dt_source *s, const struct dt_node *args)
{
	struct npy *d = dt_calloc(1, sizeof(*d));
	char *xpath = NULL, *ypath = NULL;
	int rc = -1, dims[DT_MAX_SAMPLE_DIMS];

	s->priv = d;
	if (npy_args(args, &xpath, &ypath) < 0)
		goto out;
	if (npy_load(&d->x, xpath) < 0 || npy_load(&d->y, ypath) < 0)
		goto out;
	if (d->x.a.count != d->y.a.count) {
		dt_error("'%s' has %lld records but '%s' has %lld labels", d->x.name, (long long)d->x.a.count,
			 d->y.name, (long long)d->y.a.count);
		goto out;
	}
	if (d->x.a.ndim - 1 > DT_MAX_SAMPLE_DIMS) {
		dt_error("'%s' has %d dimensions per sample; at most %d", d->x.name, d->x.a.ndim - 1, DT_MAX_SAMPLE_DIMS);
		goto out;
	}
	if (d->y.a.ndim > 2) {
		dt_error("'%s' has %d dimensions; labels are (N,) class indices or (N, K) vectors", d->y.name,
			 d->y.a.ndim);
		goto out;
	}
	snprintf(s->name, sizeof(s->name), "%s", d->x.name);
	s->count = d->x.a.count;
	for (int i = 1; i < d->x.a.ndim; i++)
		dims[i - 1] = (int)d->x.a.dim[i];
	s->sample = d->x.a.ndim == 1 ? dt_shape_make(1, (int[]){ 1 }) : dt_shape_make(d->x.a.ndim - 1, dims);
	s->label = dt_shape_make(1, (int[]){ d->y.a.ndim == 1 ? 1 : (int)d->y.a.dim[1] });
	s->num_classes = 0;
	if (d->y.a.ndim == 1) {
		double max = -1;
		int classes = 1;
		for (int64_t i = 0; i < s->count && classes; i++) {
			float v = npy_value(d->y.a.kind, d->y.data + i * d->y.a.itemsize);
			if (!(v >= 0 && v == floorf(v) && v < (1 << 24))) {
				classes = 0;
			} else if (v > max) {
				max = v;
				s->label_max_record = i;
			}
		}
		if (classes)
			s->num_classes = max + 1 < 2 ? 2 : (int)max + 1;
	}
	snprintf(s->label_file, sizeof(s->label_file), "%s", d->y.name);
	if (dt_node_get(args, "sample_weight")) {
		char *wpath = NULL;
		int bad = dt_cfg_path(args, "sample_weight", &wpath) < 0 || npy_weights(s, wpath) < 0;
		free(wpath);
		if (bad)
			goto out;
	}
	rc = 0;
out:
	free(xpath);
	free(ypath);
	return rc;
}

/*
 * Whether the n values x of record `record` of `name` (of kind k) are all
 * finite: 0, or -1 (naming the first that is not when `report`). A NaN or
 * infinity in the features makes a bad record, as in a CSV file (training on
 * it went on silently). Integer kinds are finite.
 */
static int npy_finite(enum npy_kind k, const float *x, int64_t n, const char *name, int64_t record, int report)
{
	int64_t j = 0;
	if (k != NPY_F4 && k != NPY_F8)
		return 0;
	while (j < n && isfinite(x[j]))
		j++;
	if (j == n)
		return 0;
	return report ? dt_error("'%s', record %lld: value %lld of the sample is %g, not a finite number", name,
				 (long long)record, (long long)j, x[j])
		      : -1;
}

static int npy_read(struct dt_source *s, const int64_t *idx, int n, float *x, float *y, uint8_t *bad)
{
	const struct npy *d = s->priv;
	int64_t xr = d->x.a.record, yr = d->y.a.record;
	for (int i = 0; i < n; i++) {
		int64_t r = idx[i];
		if (r < 0 || r >= s->count)
			return dt_error("record %lld is out of range in '%s' (%lld records)", (long long)r, s->name,
					(long long)s->count);
		npy_convert(&d->x.a, d->x.data + r * xr * d->x.a.itemsize, xr, x + i * xr);
		npy_convert(&d->y.a, d->y.data + r * yr * d->y.a.itemsize, yr, y + i * yr);
		if (bad)
			bad[i] = 0;
		if (npy_finite(d->x.a.kind, x + i * xr, xr, s->name, r, !bad) < 0) {
			if (!bad)
				return -1;
			bad[i] = 1;
		}
	}
	return 0;
}

const struct dt_source_type dt_npy_source = {
	.name = "npy",
	.keys = npy_keys,
	.open = npy_open,
	.read = npy_read,
	.close = npy_close,
	.check = npy_check,
};

/* ---- the stream reader ---- */

struct npy_stream {
	struct dt_record_stream s;
	struct npy_array a;
};

static void npy_stream_close(struct dt_reader *r)
{
	struct npy_stream *c = r->priv;
	if (!c)
		return;
	dt_record_stream_close(&c->s);
	free(c);
	r->priv = NULL;
}

static int npy_stream_open(struct dt_reader *r, const char *path, const struct dt_reader_opts *o)
{
	struct npy_stream *c = dt_calloc(1, sizeof(*c));
	int dims[DT_MAX_SAMPLE_DIMS];

	r->priv = c;
	if (!(c->s.gz = dt_gz_open(path)) || npy_read_header(c->s.gz, r->name, &c->a) < 0)
		return -1;
	c->s.noun = "record";
	c->s.size = c->a.record * c->a.itemsize;
	c->s.count = c->a.count;
	if (o->sample.ndim)
		return dt_record_stream_fit(r, o, c->a.record, "sample");
	if (c->a.ndim - 1 > DT_MAX_SAMPLE_DIMS)
		return dt_error("'%s' has %d dimensions per sample; at most %d", r->name, c->a.ndim - 1,
				DT_MAX_SAMPLE_DIMS);
	/* The shape comes from the header: believe it once a record of that size is there. */
	if (dt_record_stream_first(&c->s, r) < 0)
		return -1;
	for (int i = 1; i < c->a.ndim; i++)
		dims[i - 1] = (int)c->a.dim[i];
	r->sample = c->a.ndim == 1 ? dt_shape_make(1, (int[]){ 1 }) : dt_shape_make(c->a.ndim - 1, dims);
	return 0;
}

static int npy_stream_next(struct dt_reader *r, int n, float *x)
{
	struct npy_stream *c = r->priv;
	const uint8_t *b;
	n = dt_record_stream_next(&c->s, r, n, &b);
	if (n > 0)
		npy_convert(&c->a, b, n * c->a.record, x);
	/* dt_record_stream_next counted the n records in r->records already */
	for (int i = 0; i < n; i++)
		if (npy_finite(c->a.kind, x + i * c->a.record, c->a.record, r->name, r->records - n + i, 1) < 0)
			return -1;
	return n;
}

const struct dt_reader_type dt_npy_reader = {
	.name = "npy",
	.open = npy_stream_open,
	.next = npy_stream_next,
	.close = npy_stream_close,
};
