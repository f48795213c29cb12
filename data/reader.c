#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

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
	/* One image, not a list: the png reader takes a path ending in .png as the image itself. */
	if (n == strlen(path) && ends_with(path, n, ".png"))
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

/* ---- the byte stream: gzip members or plain bytes ---- */

#define GZ_BUF (1 << 17) /* bytes read from the file, and made for line reads, at a time */

struct dt_gz {
	int fd;
	int gzip;      /* 1: gzip members are inflated; 0: plain bytes */
	int in_eof;    /* read() found the end of the file */
	int end;       /* no more bytes to hand out */
	z_stream z;    /* next_in/avail_in: the unread bytes of in, in both modes */
	uint8_t *in;   /* (in_cap) bytes read from fd */
	uInt in_cap;   /* GZ_BUF, or less for a smaller regular file */
	uint8_t *out;  /* (GZ_BUF) bytes made ahead for dt_gz_gets: out[pos .. have) */
	int64_t pos, have;
	int cut;       /* the gzip stream ended before its trailer */
};

#define GZ_CUT (-2)

/*
 * The bytes before a cut are handed out first, so that a reader can say what
 * they hold ("promises 100 images ... 75 whole images"); the next read is
 * the error.
 */
static int gz_cut_error(const char *name)
{
	return dt_error("'%s' is truncated: its gzip stream ends before the gzip trailer", name);
}

/* What a file of this mode is, for the refusal; NULL for a regular file or a pipe. */
static const char *special_kind(mode_t mode)
{
	if (S_ISDIR(mode))
		return "a directory";
	if (S_ISCHR(mode))
		return "a character device";
	if (S_ISBLK(mode))
		return "a block device";
	if (S_ISSOCK(mode))
		return "a socket";
	return NULL;
}

/* Reads more of the file into in, after the unread bytes. 0, or -1 after an error naming the file. */
static int gz_fill(struct dt_gz *g, const char *name)
{
	ssize_t k;
	if (g->in_eof || g->z.avail_in == g->in_cap)
		return 0;
	if (g->z.avail_in)
		memmove(g->in, g->z.next_in, g->z.avail_in);
	g->z.next_in = g->in;
	do
		k = read(g->fd, g->in + g->z.avail_in, g->in_cap - g->z.avail_in);
	while (k < 0 && errno == EINTR);
	if (k < 0)
		return dt_error("cannot read '%s': %s", name, strerror(errno));
	if (k == 0)
		g->in_eof = 1;
	g->z.avail_in += (uInt)k;
	return 0;
}

struct dt_gz *dt_gz_open(const char *path)
{
	const char *name = dt_data_name(path), *kind;
	struct dt_gz *g = dt_calloc(1, sizeof(*g));
	struct stat st;

	g->fd = strcmp(path, "-") ? open(path, O_RDONLY | O_CLOEXEC) : dup(STDIN_FILENO);
	if (g->fd < 0) {
		if (strcmp(path, "-"))
			dt_error("cannot open '%s': %s", name, strerror(errno));
		else
			dt_error("cannot read standard input: %s", strerror(errno));
		free(g);
		return NULL;
	}
	if (fstat(g->fd, &st) < 0) {
		dt_error("cannot read '%s': %s", name, strerror(errno));
		goto fail;
	}
	/* A small file gets a small buffer (at least 2 bytes: the look at the magic below). */
	g->in_cap = S_ISREG(st.st_mode) && st.st_size < GZ_BUF ? (uInt)st.st_size + 2 : GZ_BUF;
	g->in = dt_malloc(g->in_cap);
	g->z.next_in = g->in;
	kind = special_kind(st.st_mode);
	/* Standard input is what the user redirected: a terminal or /dev/null is fine. */
	if (kind && !(S_ISCHR(st.st_mode) && !strcmp(path, "-"))) {
		dt_error("cannot read '%s': it is %s, not a data file (dtrain reads regular files and pipes)", name, kind);
		goto fail;
	}
	/* The gzip magic decides, as for gzread; two bytes are enough to look. */
	while (g->z.avail_in < 2 && !g->in_eof)
		if (gz_fill(g, name) < 0)
			goto fail;
	g->gzip = g->z.avail_in >= 2 && g->in[0] == 0x1f && g->in[1] == 0x8b;
	if (g->gzip && inflateInit2(&g->z, 15 + 16) != Z_OK) {
		dt_error("cannot read '%s': out of memory", name);
		g->gzip = 0;
		goto fail;
	}
	return g;
fail:
	dt_gz_close(g);
	return NULL;
}

void dt_gz_close(struct dt_gz *g)
{
	if (!g)
		return;
	if (g->gzip)
		inflateEnd(&g->z);
	close(g->fd);
	free(g->in);
	free(g->out);
	free(g);
}

/*
 * The end of a gzip member: another member may follow (its magic), else
 * the stream must end here. 0, or -1 after an error naming the file.
 */
static int gz_member_end(struct dt_gz *g, const char *name)
{
	while (g->z.avail_in < 2 && !g->in_eof)
		if (gz_fill(g, name) < 0)
			return -1;
	if (g->z.avail_in == 0) {
		g->end = 1;
		return 0;
	}
	if (g->z.avail_in >= 2 && g->z.next_in[0] == 0x1f && g->z.next_in[1] == 0x8b) {
		inflateReset(&g->z);
		return 0;
	}
	return dt_error("'%s' has trailing bytes after its gzip stream (bytes that start no gzip member)", name);
}

/*
 * Makes up to cap bytes into dst: how many, 0 at the end, -1 after an error
 * naming the file, or GZ_CUT (nothing printed) where the gzip stream ends
 * before its trailer.
 */
static int64_t gz_make(struct dt_gz *g, const char *name, uint8_t *dst, int64_t cap)
{
	unsigned room = cap > GZ_BUF ? GZ_BUF : (unsigned)cap;
	while (!g->end) {
		unsigned made;
		int rc;
		if (!g->z.avail_in && gz_fill(g, name) < 0)
			return -1;
		if (!g->gzip) {
			made = g->z.avail_in < room ? g->z.avail_in : room;
			if (!made) {
				g->end = 1;
				break;
			}
			memcpy(dst, g->z.next_in, made);
			g->z.next_in += made;
			g->z.avail_in -= made;
			return made;
		}
		g->z.next_out = dst;
		g->z.avail_out = room;
		rc = inflate(&g->z, Z_NO_FLUSH);
		made = room - g->z.avail_out;
		if (rc == Z_STREAM_END) {
			if (gz_member_end(g, name) < 0)
				return -1;
		} else if (rc == Z_MEM_ERROR) {
			return dt_error("cannot read '%s': out of memory", name);
		} else if (rc != Z_OK && rc != Z_BUF_ERROR) {
			return dt_error("cannot read '%s': corrupt gzip stream: %s", name,
					g->z.msg ? g->z.msg : "compressed data error");
		} else if (!made && !g->z.avail_in && g->in_eof) {
			g->cut = 1;
			return GZ_CUT;
		}
		if (made)
			return made;
	}
	return 0;
}

int64_t dt_gz_read(struct dt_gz *g, const char *name, void *buf, int64_t n)
{
	uint8_t *p = buf;
	int64_t got = 0;
	if (g->cut && g->pos == g->have)
		return gz_cut_error(name);
	if (g->pos < g->have) { /* bytes a line read made ahead */
		got = g->have - g->pos < n ? g->have - g->pos : n;
		memcpy(p, g->out + g->pos, (size_t)got);
		g->pos += got;
	}
	while (got < n) {
		int64_t k = g->cut ? GZ_CUT : gz_make(g, name, p + got, n - got);
		if (k == GZ_CUT)
			return got ? got : gz_cut_error(name);
		if (k < 0)
			return -1;
		if (k == 0)
			break;
		got += k;
	}
	return got;
}

int64_t dt_gz_read_some(struct dt_gz *g, const char *name, void *buf, int64_t n)
{
	int64_t k;
	if (g->pos < g->have) { /* bytes a line read made ahead */
		k = g->have - g->pos < n ? g->have - g->pos : n;
		memcpy(buf, g->out + g->pos, (size_t)k);
		g->pos += k;
		return k;
	}
	k = g->cut ? GZ_CUT : gz_make(g, name, buf, n);
	return k == GZ_CUT ? gz_cut_error(name) : k;
}

int64_t dt_gz_gets(struct dt_gz *g, const char *name, char *buf, int64_t size)
{
	int64_t len = 0;
	if (!g->out)
		g->out = dt_malloc(GZ_BUF);
	while (len < size - 1) {
		const uint8_t *nl;
		int64_t take;
		if (g->pos == g->have) {
			int64_t k = g->cut ? GZ_CUT : gz_make(g, name, g->out, GZ_BUF);
			g->pos = g->have = 0;
			if (k == GZ_CUT && len)
				break;
			if (k == GZ_CUT)
				return gz_cut_error(name);
			if (k < 0)
				return -1;
			if (k == 0)
				break;
			g->have = k;
		}
		take = g->have - g->pos < size - 1 - len ? g->have - g->pos : size - 1 - len;
		nl = memchr(g->out + g->pos, '\n', (size_t)take);
		if (nl)
			take = nl - (g->out + g->pos) + 1;
		memcpy(buf + len, g->out + g->pos, (size_t)take);
		g->pos += take;
		len += take;
		if (nl)
			break;
	}
	buf[len] = 0;
	return len;
}

/* ---- fixed-size binary records ---- */

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

/*
 * Reads n records into buf after the `from` bytes already there, growing buf
 * as the bytes arrive. 0, or -1 after an error naming the first record cut
 * short (`first`: its number).
 */
static int record_fill(struct dt_record_stream *s, const struct dt_reader *r, int64_t from, int n, int64_t first)
{
	int64_t want = from + n * s->size, have = from;
	while (have < want) {
		int64_t room, k;
		if (have == s->cap) {
			s->cap = s->cap ? 2 * s->cap : 1 << 16;
			if (s->cap > want)
				s->cap = want;
			s->buf = dt_realloc(s->buf, (size_t)s->cap);
		}
		room = (s->cap < want ? s->cap : want) - have;
		k = dt_gz_read(s->gz, r->name, s->buf + have, room);
		if (k < 0)
			return -1;
		have += k;
		if (k < room)
			break; /* the end of the stream */
	}
	if (have < want)
		return dt_error("'%s' is truncated: its header promises %lld %s%s but %s %lld is cut short", r->name,
				(long long)s->count, s->noun, s->count == 1 ? "" : "s", s->noun,
				(long long)(first + (have - from) / s->size));
	return 0;
}

int dt_record_stream_first(struct dt_record_stream *s, const struct dt_reader *r)
{
	if (s->count == 0)
		return dt_error("'%s' holds no %ss (its header promises 0), so it cannot tell the model's input shape",
				r->name, s->noun);
	if (record_fill(s, r, 0, 1, 0) < 0)
		return -1;
	s->ahead = 1;
	return 0;
}

int dt_record_stream_next(struct dt_record_stream *s, struct dt_reader *r, int n, const uint8_t **out)
{
	int64_t left = s->count - r->records;
	uint8_t extra;
	int64_t k;
	if (n > left)
		n = left > 0 ? (int)left : 0;
	if (n > 0) {
		if (n > s->ahead && record_fill(s, r, s->ahead * s->size, n - s->ahead, r->records + s->ahead) < 0)
			return -1;
		s->ahead = 0;
		r->records += n;
		*out = s->buf;
	}
	if (r->records < s->count)
		return n;
	/* The last record (or none promised): the stream must end with it (zlib checks the gzip trailer). */
	k = dt_gz_read(s->gz, r->name, &extra, 1);
	if (k < 0)
		return -1;
	if (k > 0)
		return dt_error("'%s' has trailing data after the %lld %s%s its header promises", r->name,
				(long long)s->count, s->noun, s->count == 1 ? "" : "s");
	return n;
}

void dt_record_stream_close(struct dt_record_stream *s)
{
	dt_gz_close(s->gz);
	free(s->buf);
	memset(s, 0, sizeof(*s));
}
