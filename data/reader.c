#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "reader.h"

const struct dt_reader_type *const dt_reader_types[] = {
	&dt_csv_reader,
	&dt_npy_reader,
	&dt_idx_reader,
	&dt_png_reader,
	NULL,
};

const struct dt_reader_type *dt_reader_find(const char *format)
{
	for (int i = 0; format && dt_reader_types[i]; i++)
		if (!strcmp(dt_reader_types[i]->name, format))
			return dt_reader_types[i];
	return NULL;
}

static int ends_with(const char *s, size_t n, const char *suffix)
{
	size_t k = strlen(suffix);
	return n >= k && !strncasecmp(s + n - k, suffix, k);
}

const char *dt_reader_guess(const char *path)
{
	size_t n = strlen(path);
	if (ends_with(path, n, ".gz"))
		n -= 3;
	if (ends_with(path, n, ".csv") || ends_with(path, n, ".tsv") || ends_with(path, n, ".txt"))
		return "csv";
	if (ends_with(path, n, ".npy"))
		return "npy";
	if (ends_with(path, n, "-ubyte") || ends_with(path, n, ".idx"))
		return "idx";
	if (ends_with(path, n, ".lst"))
		return "png";
	return NULL;
}

int dt_reader_open(struct dt_reader *r, const struct dt_reader_type *type, const char *path,
		   const struct dt_reader_opts *o)
{
	memset(r, 0, sizeof(*r));
	r->type = type;
	snprintf(r->name, sizeof(r->name), "%s", dt_data_name(path));
	if (type->needs_shape && !o->sample.ndim)
		return dt_error("reading '%s' as %s needs the model's input shape", r->name, type->name);
	if (type->open(r, path, o) < 0) {
		dt_reader_close(r);
		return -1;
	}
	return 0;
}

void dt_reader_close(struct dt_reader *r)
{
	if (r->type && r->type->close)
		r->type->close(r);
	memset(r, 0, sizeof(*r));
}

const char *dt_data_name(const char *path) { return strcmp(path, "-") ? path : "<stdin>"; }

gzFile dt_gz_open(const char *path)
{
	gzFile gz;
	errno = 0;
	if (!strcmp(path, "-")) {
		int fd = dup(STDIN_FILENO);
		if (fd < 0)
			return dt_error("cannot read standard input: %s", strerror(errno)), NULL;
		gz = gzdopen(fd, "rb");
		if (!gz)
			close(fd);
	} else {
		gz = gzopen(path, "rb");
	}
	if (!gz) {
		dt_error("cannot open '%s': %s", dt_data_name(path), errno ? strerror(errno) : "out of memory");
		return NULL;
	}
	gzbuffer(gz, 1 << 17);
	return gz;
}

int64_t dt_gz_read(gzFile gz, const char *name, void *buf, int64_t n)
{
	int64_t got = 0;
	int code;
	while (got < n) {
		unsigned chunk = n - got > (1 << 30) ? 1u << 30 : (unsigned)(n - got);
		int k = gzread(gz, (uint8_t *)buf + got, chunk);
		if (k < 0) {
			const char *msg = gzerror(gz, &code);
			const char *colon = strstr(msg, ": ");
			if (code == Z_ERRNO)
				return dt_error("cannot read '%s': %s", name, strerror(errno));
			if (colon && code != Z_MEM_ERROR)
				msg = colon + 2; /* zlib prefixes the path */
			return dt_error("cannot read '%s': corrupt gzip stream: %s", name, msg);
		}
		if (k == 0)
			break;
		got += k;
	}
	if (got < n) {
		gzerror(gz, &code);
		if (code == Z_BUF_ERROR)
			return dt_error("'%s' is truncated: its gzip stream ends before the gzip trailer", name);
	}
	return got;
}

int dt_record_stream_fit(struct dt_reader *r, const struct dt_reader_opts *o, int64_t values, const char *noun)
{
	char buf[64];
	if (dt_shape_count(&o->sample) != values)
		return dt_error("the %ss of '%s' hold %lld values but the model's input %s holds %lld", noun, r->name,
				(long long)values, dt_shape_format(&o->sample, 0, buf, sizeof(buf)),
				(long long)dt_shape_count(&o->sample));
	r->sample = o->sample;
	return 0;
}

const uint8_t *dt_record_stream_read(struct dt_record_stream *s, const struct dt_reader *r, int n, int64_t size,
				     int64_t count, const char *noun)
{
	int64_t k;
	if (n > s->cap) {
		s->buf = dt_realloc(s->buf, (size_t)(n * size));
		s->cap = n;
	}
	k = dt_gz_read(s->gz, r->name, s->buf, n * size);
	if (k < 0)
		return NULL;
	if (k < n * size) {
		dt_error("'%s' is truncated: its header promises %lld %ss but %s %lld is cut short", r->name,
			 (long long)count, noun, noun, (long long)(r->records + k / size));
		return NULL;
	}
	return s->buf;
}

void dt_record_stream_close(struct dt_record_stream *s)
{
	if (s->gz)
		gzclose(s->gz);
	free(s->buf);
	s->gz = NULL;
	s->buf = NULL;
	s->cap = 0;
}
