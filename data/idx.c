/*
 * `format: idx`: the IDX files of MNIST and Fashion-MNIST, raw or gzipped.
 *
 *   images: train-images-idx3-ubyte.gz   uint8, N×H×W (also N×D and N×H×W×C)
 *   labels: train-labels-idx1-ubyte.gz   uint8, N
 *
 * Both files are read into memory once, as uint8; read() converts to float.
 * A file must hold exactly what its header promises: fewer bytes is a
 * truncated file, more is trailing data, both are errors.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/pipeline/source.h"
#include "reader.h"
#include "sources.h"

#define IDX_UBYTE 0x08
#define IDX_MAX_RECORD INT32_MAX   /* bytes of one record */
#define IDX_CHUNK (1 << 16)        /* first allocation, before the data proves larger */

struct idx {
	uint8_t *images; /* (count, record) */
	uint8_t *labels; /* (count) */
	int64_t record;  /* bytes of one image */
};

struct idx_file {
	const char *path;
	const char *what;   /* "images" or "labels" */
	int ndim;
	uint32_t dim[4];    /* dim[0] = records */
	int64_t record;     /* bytes per record */
	uint8_t *data;      /* (dim[0], record), malloc'd */
};

static const char *idx_type_name(int code)
{
	switch (code) {
	case 0x08: return "uint8";
	case 0x09: return "int8";
	case 0x0b: return "int16";
	case 0x0c: return "int32";
	case 0x0d: return "float32";
	case 0x0e: return "float64";
	}
	return NULL;
}

/*
 * Reads the header and the data of one IDX file. Memory grows with the data
 * actually present, so a corrupt header that promises terabytes ends as a
 * truncation error, not as a huge allocation.
 */
static int idx_load(struct idx_file *f, int min_ndim, int max_ndim, uint32_t expect)
{
	uint8_t head[4 + 4 * 4];
	int64_t want, got = 0, cap;
	uint32_t magic;
	uint8_t extra;
	int64_t k;
	struct dt_gz *gz;

	f->data = NULL;
	if (!(gz = dt_gz_open(f->path)))
		return -1;
	k = dt_gz_read(gz, f->path, head, 4);
	if (k < 0)
		goto fail;
	if (k < 4) {
		if (k == 0)
			dt_error("'%s' is empty", f->path);
		else
			dt_error("'%s' is truncated: %lld bytes, too short for an IDX header", f->path, (long long)k);
		goto fail;
	}
	magic = (uint32_t)head[0] << 24 | (uint32_t)head[1] << 16 | head[2] << 8 | head[3];
	f->ndim = head[3];
	if (head[0] || head[1] || head[2] != IDX_UBYTE || f->ndim < min_ndim || f->ndim > max_ndim) {
		const char *type = head[0] || head[1] ? NULL : idx_type_name(head[2]);
		char hint[64] = "";
		if (!type)
			snprintf(hint, sizeof(hint), "; is it an IDX file?");
		else if (head[2] != IDX_UBYTE)
			snprintf(hint, sizeof(hint), "; %s elements are not supported", type);
		else if (f->ndim == 1 || f->ndim == 3)
			snprintf(hint, sizeof(hint), "; it looks like %s file", f->ndim == 1 ? "a labels" : "an images");
		dt_error("'%s' has magic 0x%08x, expected 0x%08x (uint8 %s)%s", f->path, magic, expect, f->what, hint);
		goto fail;
	}

	k = dt_gz_read(gz, f->path, head + 4, 4 * f->ndim);
	if (k < 0)
		goto fail;
	if (k < 4 * f->ndim) {
		dt_error("'%s' is truncated: the header of %d dimensions is cut short", f->path, f->ndim);
		goto fail;
	}
	f->record = 1;
	for (int i = 0; i < f->ndim; i++) {
		const uint8_t *b = head + 4 + 4 * i;
		f->dim[i] = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
		if (i == 0)
			continue;
		if (f->dim[i] == 0 || f->dim[i] > IDX_MAX_RECORD / f->record) {
			dt_error("'%s' has absurd dimension %u in its header (dimension %d); one record must be 1 to %d bytes",
				 f->path, f->dim[i], i, IDX_MAX_RECORD);
			goto fail;
		}
		f->record *= f->dim[i];
	}
	if (f->dim[0] == 0) {
		dt_error("'%s' holds no records", f->path);
		goto fail;
	}

	want = (int64_t)f->dim[0] * f->record;
	cap = want < IDX_CHUNK ? want : IDX_CHUNK;
	f->data = malloc(cap);
	while (f->data) {
		k = dt_gz_read(gz, f->path, f->data + got, cap - got);
		if (k < 0)
			goto fail;
		got += k;
		if (got < cap || cap == want)
			break;
		cap = cap > want / 2 ? want : 2 * cap;
		uint8_t *p = realloc(f->data, cap);
		if (!p)
			free(f->data);
		f->data = p;
	}
	if (!f->data) {
		dt_error("out of memory reading '%s' (%lld bytes)", f->path, (long long)want);
		goto fail;
	}
	if (got < want) {
		dt_error("'%s' is truncated: its header promises %u %s (%lld bytes of data) but only %lld bytes follow, "
			 "%lld whole %s",
			 f->path, f->dim[0], f->what, (long long)want, (long long)got, (long long)(got / f->record),
			 f->what);
		goto fail;
	}
	/* One more byte: trailing data is an error; at the end, zlib checks the gzip CRC. */
	k = dt_gz_read(gz, f->path, &extra, 1);
	if (k < 0)
		goto fail;
	if (k > 0) {
		dt_error("'%s' has trailing data after the %u %s its header promises", f->path, f->dim[0], f->what);
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

static void idx_close(struct dt_source *s)
{
	struct idx *d = s->priv;
	if (!d)
		return;
	free(d->images);
	free(d->labels);
	free(d);
	s->priv = NULL;
}

static const char *const idx_keys[] = { "format", "images", "labels", NULL };

/* The two paths (the caller frees them, also after an error). 0 or -1. */
static int idx_args(const struct dt_node *args, char **images_path, char **labels_path)
{
	*images_path = *labels_path = NULL;
	if (dt_cfg_check_keys(args, "idx", idx_keys) < 0 || dt_cfg_require(args, "images", "idx") < 0 ||
	    dt_cfg_require(args, "labels", "idx") < 0 || dt_cfg_path(args, "images", images_path) < 0 ||
	    dt_cfg_path(args, "labels", labels_path) < 0)
		return -1;
	return 0;
}

static int idx_check(const struct dt_node *args)
{
	char *images_path, *labels_path;
	int rc = idx_args(args, &images_path, &labels_path);
	free(images_path);
	free(labels_path);
	return rc;
}

static int idx_open(struct dt_source *s, const struct dt_node *args)
{
	char *images_path = NULL, *labels_path = NULL;
	struct idx_file im = { .what = "images" }, lb = { .what = "labels" };
	struct idx *d;
	int max = 0, rc = -1;

	if (idx_args(args, &images_path, &labels_path) < 0)
		goto out;
	im.path = images_path;
	lb.path = labels_path;
	if (idx_load(&im, 2, 4, 0x00000803) < 0 || idx_load(&lb, 1, 1, 0x00000801) < 0)
		goto out;
	if (im.dim[0] != lb.dim[0]) {
		dt_error("'%s' has %u images but '%s' has %u labels", im.path, im.dim[0], lb.path, lb.dim[0]);
		goto out;
	}

	snprintf(s->name, sizeof(s->name), "%s", im.path);
	s->count = im.dim[0];
	if (im.ndim == 2)
		s->sample = dt_shape_make(1, (int[]){ (int)im.dim[1] });
	else if (im.ndim == 3)
		s->sample = dt_shape_make(3, (int[]){ (int)im.dim[1], (int)im.dim[2], 1 });
	else
		s->sample = dt_shape_make(3, (int[]){ (int)im.dim[1], (int)im.dim[2], (int)im.dim[3] });
	s->label = dt_shape_make(1, (int[]){ 1 });
	for (int64_t i = 0; i < s->count; i++) {
		if (lb.data[i] > max) {
			max = lb.data[i];
			s->label_max_record = i;
		}
	}
	s->num_classes = max + 1 < 2 ? 2 : max + 1;
	snprintf(s->label_file, sizeof(s->label_file), "%s", lb.path);

	d = dt_calloc(1, sizeof(*d));
	d->images = im.data;
	d->labels = lb.data;
	d->record = im.record;
	im.data = lb.data = NULL;
	s->priv = d;
	rc = 0;
out:
	free(im.data);
	free(lb.data);
	free(images_path);
	free(labels_path);
	return rc;
}

static int idx_read(struct dt_source *s, const int64_t *idx, int n, float *x, float *y, uint8_t *bad)
{
	const struct idx *d = s->priv;
	for (int i = 0; i < n; i++) {
		const uint8_t *im;
		if (idx[i] < 0 || idx[i] >= s->count)
			return dt_error("record %lld is out of range in '%s' (%lld records)", (long long)idx[i],
					s->name, (long long)s->count);
		im = d->images + idx[i] * d->record;
		for (int64_t j = 0; j < d->record; j++)
			x[i * d->record + j] = im[j];
		y[i] = d->labels[idx[i]];
		if (bad)
			bad[i] = 0;
	}
	return 0;
}

const struct dt_source_type dt_idx_source = {
	.name = "idx",
	.keys = idx_keys,
	.open = idx_open,
	.read = idx_read,
	.close = idx_close,
	.check = idx_check,
};

/* ---- the stream reader: an images file read a chunk at a time (dtrain predict) ---- */

static void idx_stream_close(struct dt_reader *r)
{
	struct dt_record_stream *c = r->priv;
	if (!c)
		return;
	dt_record_stream_close(c);
	free(c);
	r->priv = NULL;
}

static int idx_stream_open(struct dt_reader *r, const char *path, const struct dt_reader_opts *o)
{
	struct dt_record_stream *c = dt_calloc(1, sizeof(*c));
	uint8_t head[4 + 4 * 4];
	int dims[3], ndim;
	int64_t k;

	r->priv = c;
	c->noun = "image";
	if (!(c->gz = dt_gz_open(path)))
		return -1;
	k = dt_gz_read(c->gz, r->name, head, 4);
	if (k < 0)
		return -1;
	if (k == 0)
		return dt_error("'%s' is empty", r->name);
	ndim = head[3];
	if (k < 4 || head[0] || head[1] || head[2] != IDX_UBYTE || ndim < 2 || ndim > 4)
		return dt_error("'%s' is not an IDX images file (uint8, 2 to 4 dimensions)", r->name);
	if (dt_gz_read(c->gz, r->name, head + 4, 4 * ndim) != 4 * ndim)
		return dt_error("'%s' is truncated: the header of %d dimensions is cut short", r->name, ndim);
	c->size = 1;
	for (int i = 0; i < ndim; i++) {
		const uint8_t *b = head + 4 + 4 * i;
		uint32_t v = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
		if (i == 0) {
			c->count = v;
			continue;
		}
		if (v == 0 || v > IDX_MAX_RECORD / c->size)
			return dt_error("'%s' has absurd dimension %u in its header (dimension %d)", r->name, v, i);
		dims[i - 1] = (int)v;
		c->size *= v;
	}
	if (o->sample.ndim)
		return dt_record_stream_fit(r, o, c->size, "image");
	/* The shape comes from the header: believe it once an image of that size is there. */
	if (dt_record_stream_first(c, r) < 0)
		return -1;
	if (ndim == 3)
		r->sample = dt_shape_make(3, (int[]){ dims[0], dims[1], 1 });
	else
		r->sample = dt_shape_make(ndim - 1, dims);
	return 0;
}

static int idx_stream_next(struct dt_reader *r, int n, float *x)
{
	struct dt_record_stream *c = r->priv;
	const uint8_t *b;
	n = dt_record_stream_next(c, r, n, &b);
	for (int64_t i = 0; i < n * c->size; i++)
		x[i] = b[i];
	return n;
}

const struct dt_reader_type dt_idx_reader = {
	.name = "idx",
	.open = idx_stream_open,
	.next = idx_stream_next,
	.close = idx_stream_close,
};
