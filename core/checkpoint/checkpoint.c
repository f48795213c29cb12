/*
 * safetensors files: see checkpoint.h for the format and the promises.
 *
 * The loader trusts nothing in the file: every size is checked against the
 * file's own size before anything is allocated, and the tensors must tile the
 * data buffer exactly (as safetensors itself requires), which also makes every
 * tensor 4-byte aligned inside the one 64-byte aligned buffer that holds them.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <zlib.h>

#include "core/checkpoint/checkpoint.h"
#include "core/error.h"
#include "core/testhook.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "checkpoint.c stores float32 as it is in memory: it needs a little-endian machine"
#endif

#define META_KEY "__metadata__"
/*
 * The metadata key dtrain adds to every file it writes: a JSON object mapping
 * each tensor name to the CRC-32 (zlib's) of its bytes, as 8 hex digits, and
 * "__metadata__" to the CRC-32 of the other metadata entries (key, NUL, value,
 * NUL, in file order). Files without it (other tools') load unchecked.
 */
#define CRC_KEY "crc32"
#define HEADER_MAX 100000000 /* bytes; safetensors' own limit */
/* Offsets above this would print in exponent form (cJSON uses %1.15g). */
#define DATA_MAX ((uint64_t)1 << 49)
/* Largest integer a JSON number (a double in cJSON) holds exactly. */
#define EXACT_MAX 9007199254740992.0

struct dt_ckpt {
	char *path;
	int n;
	struct dt_ckpt_tensor *t;                /* header order; names owned */
	const struct dt_ckpt_tensor **by_name;   /* t sorted by name, for find */
	int nmeta;
	struct dt_ckpt_meta *meta;               /* keys and values owned */
	float *data;                             /* the data buffer, 64-byte aligned */
};

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The first name that occurs twice in names[0..n) (sorted in place), or NULL. */
static const char *find_duplicate(const char **names, int n)
{
	qsort(names, n, sizeof(*names), cmp_str);
	for (int i = 1; i < n; i++)
		if (!strcmp(names[i - 1], names[i]))
			return names[i];
	return NULL;
}

static void *xjson(void *p)
{
	if (!p)
		DT_BUG("out of memory in cJSON");
	return p;
}

static uint32_t crc_bytes(uint32_t crc, const void *p, uint64_t n)
{
	const unsigned char *b = p;
	while (n > 0) {
		uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
		crc = (uint32_t)crc32(crc, b, k);
		b += k;
		n -= k;
	}
	return crc;
}

/* The CRC-32 of metadata entries other than CRC_KEY: key, NUL, value, NUL each. */
static uint32_t crc_meta(const struct dt_ckpt_meta *meta, int nmeta)
{
	uint32_t crc = (uint32_t)crc32(0, NULL, 0);
	for (int i = 0; i < nmeta; i++) {
		if (!strcmp(meta[i].key, CRC_KEY))
			continue;
		crc = crc_bytes(crc, meta[i].key, strlen(meta[i].key) + 1);
		crc = crc_bytes(crc, meta[i].value, strlen(meta[i].value) + 1);
	}
	return crc;
}

/* ---- saving ---- */

static int check_save_args(const char *path, const struct dt_ckpt_tensor *t, int nt,
			   const struct dt_ckpt_meta *meta, int nmeta, uint64_t *total)
{
	const char **names;
	const char *dup;
	int i, d;

	DT_ASSERT(nt >= 0 && nmeta >= 0 && (nt == 0 || t) && (nmeta == 0 || meta));
	*total = 0;
	for (i = 0; i < nt; i++) {
		const struct dt_shape *s = &t[i].shape;
		uint64_t bytes = sizeof(float);
		if (!t[i].name || !t[i].name[0])
			return dt_error("cannot write '%s': tensor %d has no name", path, i);
		if (!strcmp(t[i].name, META_KEY))
			return dt_error("cannot write '%s': tensor name '%s' is reserved", path, META_KEY);
		if (s->ndim < 0 || s->ndim > DT_MAX_DIMS)
			return dt_error("cannot write '%s': tensor '%s' has %d dimensions", path, t[i].name, s->ndim);
		for (d = 0; d < s->ndim; d++) {
			if (s->dim[d] < 0)
				return dt_error("cannot write '%s': tensor '%s' has a negative dimension", path, t[i].name);
			bytes *= (uint64_t)s->dim[d];
			if (bytes > DATA_MAX)
				break;
		}
		*total += bytes;
		if (bytes > DATA_MAX || *total > DATA_MAX)
			return dt_error("cannot write '%s': more than %" PRIu64 " bytes of tensors", path, DATA_MAX);
		if (bytes && !t[i].data)
			return dt_error("cannot write '%s': tensor '%s' has no data", path, t[i].name);
	}
	for (i = 0; i < nmeta; i++)
		if (!meta[i].key || !meta[i].value)
			return dt_error("cannot write '%s': metadata entry %d lacks a key or value", path, i);
		else if (!strcmp(meta[i].key, CRC_KEY))
			return dt_error("cannot write '%s': metadata key '%s' is reserved", path, CRC_KEY);

	names = dt_malloc(sizeof(*names) * (size_t)(nt > nmeta ? nt : nmeta));
	for (i = 0; i < nt; i++)
		names[i] = t[i].name;
	dup = find_duplicate(names, nt);
	if (dup) {
		dt_error("cannot write '%s': duplicate tensor '%s'", path, dup);
		free(names);
		return -1;
	}
	for (i = 0; i < nmeta; i++)
		names[i] = meta[i].key;
	dup = find_duplicate(names, nmeta);
	if (dup) {
		dt_error("cannot write '%s': duplicate metadata key '%s'", path, dup);
		free(names);
		return -1;
	}
	free(names);
	return 0;
}

/* The JSON header, padded with spaces to a multiple of 8 bytes; *len is that size. */
static char *make_header(const struct dt_ckpt_tensor *t, int nt,
			 const struct dt_ckpt_meta *meta, int nmeta, size_t *len)
{
	cJSON *root = xjson(cJSON_CreateObject());
	uint64_t offset = 0;
	size_t n, padded;
	char *json, *out;

	{
		cJSON *m = xjson(cJSON_AddObjectToObject(root, META_KEY));
		cJSON *crcs = xjson(cJSON_CreateObject());
		char hex[16], *text;
		for (int i = 0; i < nmeta; i++)
			xjson(cJSON_AddStringToObject(m, meta[i].key, meta[i].value));
		snprintf(hex, sizeof(hex), "%08x", (unsigned)crc_meta(meta, nmeta));
		xjson(cJSON_AddStringToObject(crcs, META_KEY, hex));
		for (int i = 0; i < nt; i++) {
			uint64_t bytes = (uint64_t)dt_shape_count(&t[i].shape) * sizeof(float);
			snprintf(hex, sizeof(hex), "%08x",
				 (unsigned)crc_bytes((uint32_t)crc32(0, NULL, 0), bytes ? t[i].data : NULL, bytes));
			xjson(cJSON_AddStringToObject(crcs, t[i].name, hex));
		}
		text = xjson(cJSON_PrintUnformatted(crcs));
		cJSON_Delete(crcs);
		xjson(cJSON_AddStringToObject(m, CRC_KEY, text));
		cJSON_free(text);
	}
	for (int i = 0; i < nt; i++) {
		uint64_t bytes = (uint64_t)dt_shape_count(&t[i].shape) * sizeof(float);
		cJSON *o = xjson(cJSON_AddObjectToObject(root, t[i].name));
		cJSON *offsets = xjson(cJSON_CreateArray());
		xjson(cJSON_AddStringToObject(o, "dtype", "F32"));
		cJSON_AddItemToObject(o, "shape", xjson(cJSON_CreateIntArray(t[i].shape.dim, t[i].shape.ndim)));
		cJSON_AddItemToArray(offsets, xjson(cJSON_CreateNumber((double)offset)));
		cJSON_AddItemToArray(offsets, xjson(cJSON_CreateNumber((double)(offset + bytes))));
		cJSON_AddItemToObject(o, "data_offsets", offsets);
		offset += bytes;
	}
	json = xjson(cJSON_PrintUnformatted(root));
	cJSON_Delete(root);

	n = strlen(json);
	padded = (n + 7) & ~(size_t)7;
	out = dt_malloc(padded);
	memcpy(out, json, n);
	memset(out + n, ' ', padded - n);
	cJSON_free(json);
	*len = padded;
	return out;
}

/* fsync of the directory that holds path, so that the rename is durable. */
static int sync_dir(const char *path)
{
	char *dir = dt_strdup(path);
	char *slash = strrchr(dir, '/');
	int fd, err = 0;

	if (!slash)
		strcpy(dir, ".");
	else if (slash == dir)
		slash[1] = '\0';
	else
		*slash = '\0';
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || (fsync(fd) && errno != EINVAL))
		err = errno;
	if (fd >= 0)
		close(fd);
	free(dir);
	if (err)
		return dt_error("cannot sync the directory of '%s': %s", path, strerror(err));
	return 0;
}

int dt_checkpoint_save(const char *path, const struct dt_ckpt_tensor *t, int nt,
		       const struct dt_ckpt_meta *meta, int nmeta)
{
	unsigned char len8[8];
	uint64_t total;
	size_t hlen, tmp_size;
	char *header, *tmp;
	FILE *f;
	int err = 0;

	if (check_save_args(path, t, nt, meta, nmeta, &total))
		return -1;
	header = make_header(t, nt, meta, nmeta, &hlen);
	for (int i = 0; i < 8; i++)
		len8[i] = (unsigned char)((uint64_t)hlen >> (8 * i));

	tmp_size = strlen(path) + 32;
	tmp = dt_malloc(tmp_size);
	snprintf(tmp, tmp_size, "%s.tmp.%ld", path, (long)getpid());

	errno = 0;
	f = fopen(tmp, "wbe");
	if (!f) {
		err = errno;
		free(header);
		free(tmp);
		return dt_error("cannot write '%s': %s", path, strerror(err));
	}
	if (fwrite(len8, 1, 8, f) != 8 || fwrite(header, 1, hlen, f) != hlen)
		err = errno ? errno : EIO;
	for (int i = 0; i < nt && !err; i++) {
		size_t bytes = (size_t)dt_shape_count(&t[i].shape) * sizeof(float);
		if (bytes && fwrite(t[i].data, 1, bytes, f) != bytes)
			err = errno ? errno : EIO;
		if (i == nt / 2) {
			fflush(f);
			dt_test_crash_point("checkpoint-write");
		}
	}
	if (!err && (fflush(f) || fsync(fileno(f))))
		err = errno ? errno : EIO;
	if (fclose(f) && !err)
		err = errno ? errno : EIO;
	if (!err && rename(tmp, path))
		err = errno ? errno : EIO;
	free(header);
	if (err) {
		unlink(tmp);
		free(tmp);
		return dt_error("cannot write '%s': %s", path, strerror(err));
	}
	free(tmp);
	return sync_dir(path);
}

/* ---- loading ---- */

/* Valid UTF-8 (no overlong forms or surrogates) and no control bytes but JSON whitespace. */
static int header_text_ok(const unsigned char *s, size_t n, size_t *bad)
{
	size_t i = 0;
	while (i < n) {
		uint32_t c = s[i], min;
		size_t len;
		*bad = i;
		if (c < 0x80) {
			if (c < 0x20 && c != ' ' && c != '\t' && c != '\n' && c != '\r')
				return 0;
			i++;
			continue;
		}
		if ((c & 0xe0) == 0xc0)
			len = 2, min = 0x80, c &= 0x1f;
		else if ((c & 0xf0) == 0xe0)
			len = 3, min = 0x800, c &= 0x0f;
		else if ((c & 0xf8) == 0xf0)
			len = 4, min = 0x10000, c &= 0x07;
		else
			return 0;
		if (n - i < len)
			return 0;
		for (size_t k = 1; k < len; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return 0;
			c = (c << 6) | (s[i + k] & 0x3f);
		}
		if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
			return 0;
		i += len;
	}
	return 1;
}

/* A JSON number that is an integer in [0, max]. */
static int json_uint(const cJSON *j, double max, uint64_t *v)
{
	double d;
	if (!cJSON_IsNumber(j))
		return 0;
	d = j->valuedouble;
	if (!(d >= 0 && d <= max) || d != floor(d))
		return 0;
	*v = (uint64_t)d;
	return 1;
}

/* json as compact text for a message; caller frees with cJSON_free. */
static char *json_text(const cJSON *j)
{
	return xjson(cJSON_PrintUnformatted(j));
}

struct span {
	uint64_t begin, end;
	int index;
};

static int cmp_span(const void *a, const void *b)
{
	const struct span *x = a, *y = b;
	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	if (x->end != y->end)
		return x->end < y->end ? -1 : 1;
	return x->index - y->index;
}

/* Checks one tensor entry; fills c->t[i] (name not yet owned) and its span. */
static int parse_tensor(const char *path, const cJSON *e, uint64_t data_size,
			struct dt_ckpt_tensor *t, struct span *sp)
{
	static const char *const need[] = { "dtype", "shape", "data_offsets" };
	const char *name = e->string;
	const cJSON *dtype, *shape, *offsets, *dim;
	uint64_t bytes = sizeof(float), v;
	char buf[160];
	int d = 0;

	if (!cJSON_IsObject(e))
		return dt_error("'%s': tensor '%s' is not an object", path, name);
	for (int k = 0; k < 3; k++)
		if (!cJSON_GetObjectItemCaseSensitive(e, need[k]))
			return dt_error("'%s': tensor '%s' lacks '%s'", path, name, need[k]);
	dtype = cJSON_GetObjectItemCaseSensitive(e, "dtype");
	shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
	offsets = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");

	if (!cJSON_IsString(dtype))
		return dt_error("'%s': tensor '%s' has a dtype that is not a string", path, name);
	if (strcmp(dtype->valuestring, "F32"))
		return dt_error("'%s': tensor '%s' has dtype '%s'; only F32 is supported", path, name,
				dtype->valuestring);

	if (!cJSON_IsArray(shape))
		return dt_error("'%s': tensor '%s' has a shape that is not a list", path, name);
	if (cJSON_GetArraySize(shape) > DT_MAX_DIMS)
		return dt_error("'%s': tensor '%s' has %d dimensions; at most %d are supported", path, name,
				cJSON_GetArraySize(shape), DT_MAX_DIMS);
	t->shape.ndim = cJSON_GetArraySize(shape);
	cJSON_ArrayForEach(dim, shape) {
		if (!json_uint(dim, INT32_MAX, &v)) {
			char *s = json_text(shape);
			dt_error("'%s': tensor '%s' has shape %s; dimensions must be integers from 0 to %d",
				 path, name, s, INT32_MAX);
			cJSON_free(s);
			return -1;
		}
		t->shape.dim[d++] = (int)v;
		if (bytes && __builtin_mul_overflow(bytes, v, &bytes))
			bytes = UINT64_MAX;
	}

	if (!cJSON_IsArray(offsets) || cJSON_GetArraySize(offsets) != 2 ||
	    !json_uint(cJSON_GetArrayItem(offsets, 0), EXACT_MAX, &sp->begin) ||
	    !json_uint(cJSON_GetArrayItem(offsets, 1), EXACT_MAX, &sp->end)) {
		char *s = json_text(offsets);
		dt_error("'%s': tensor '%s' has data_offsets %s; they must be [begin, end] in bytes",
			 path, name, s);
		cJSON_free(s);
		return -1;
	}
	if (sp->end < sp->begin)
		return dt_error("'%s': tensor '%s' has data_offsets [%" PRIu64 ", %" PRIu64 "] that end before they begin",
				path, name, sp->begin, sp->end);
	if (sp->end > data_size)
		return dt_error("'%s': tensor '%s' has data_offsets [%" PRIu64 ", %" PRIu64 "] beyond the %" PRIu64
				"-byte data buffer", path, name, sp->begin, sp->end, data_size);
	dt_shape_format(&t->shape, 0, buf, sizeof(buf));
	if (bytes == UINT64_MAX)
		return dt_error("'%s': tensor '%s' has shape %s, too large", path, name, buf);
	if (sp->end - sp->begin != bytes)
		return dt_error("'%s': tensor '%s' has data_offsets [%" PRIu64 ", %" PRIu64 "] but shape %s needs %"
				PRIu64 " bytes", path, name, sp->begin, sp->end, buf, bytes);
	return 0;
}

/* The tensors must tile [0, data_size) exactly: no overlap, no gap, nothing left over. */
static int check_coverage(const char *path, const struct dt_ckpt *c, struct span *sp, uint64_t data_size)
{
	uint64_t pos = 0;
	int last = -1; /* the last non-empty tensor, in offset order */

	qsort(sp, c->n, sizeof(*sp), cmp_span);
	for (int i = 0; i < c->n; i++) {
		if (sp[i].begin < pos)
			return dt_error("'%s': tensors '%s' and '%s' overlap in the data buffer", path,
					c->t[last].name, c->t[sp[i].index].name);
		if (sp[i].begin > pos)
			return dt_error("'%s': bytes [%" PRIu64 ", %" PRIu64 ") of the data buffer belong to no tensor",
					path, pos, sp[i].begin);
		if (sp[i].end > sp[i].begin)
			last = sp[i].index;
		pos = sp[i].end;
	}
	if (pos != data_size)
		return dt_error("'%s': the data buffer has %" PRIu64 " bytes but the tensors cover only %" PRIu64,
				path, data_size, pos);
	return 0;
}

static int parse_meta(const char *path, struct dt_ckpt *c, const cJSON *m)
{
	const cJSON *e;
	int i = 0;

	if (!cJSON_IsObject(m))
		return dt_error("'%s': '%s' is not an object", path, META_KEY);
	cJSON_ArrayForEach(e, m)
		if (!cJSON_IsString(e))
			return dt_error("'%s': metadata '%s' is not a string", path, e->string);
	c->nmeta = cJSON_GetArraySize(m);
	c->meta = dt_calloc((size_t)c->nmeta + 1, sizeof(*c->meta));
	cJSON_ArrayForEach(e, m) {
		c->meta[i].key = dt_strdup(e->string);
		c->meta[i].value = dt_strdup(e->valuestring);
		i++;
	}
	return 0;
}

/*
 * Fills c from the header text (tensor names and shapes, metadata) and sets
 * (*begin)[i], owned by the caller, to the offset of tensor i in the data buffer.
 */
static int parse_header(const char *path, struct dt_ckpt *c, const char *text, size_t len,
			uint64_t data_size, uint64_t **begin)
{
	const char *end = NULL;
	const cJSON *e, *m = NULL;
	const char **keys = NULL, *dup;
	struct span *sp = NULL;
	cJSON *root;
	size_t bad = 0;
	int nkeys, i, ret = -1;

	if (!header_text_ok((const unsigned char *)text, len, &bad))
		return dt_error("'%s': header is not valid UTF-8 JSON text: bad byte at file offset %zu", path,
				8 + bad);
	root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
	if (!root)
		return dt_error("'%s': header is not valid JSON: error near file offset %zu", path,
				8 + (end ? (size_t)(end - text) : (size_t)0));
	if (!cJSON_IsObject(root)) {
		dt_error("'%s': header is not a JSON object", path);
		goto out;
	}
	for (const char *p = end; p < text + len; p++)
		if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
			dt_error("'%s': header has text after its JSON object", path);
			goto out;
		}

	nkeys = cJSON_GetArraySize(root);
	keys = dt_malloc(sizeof(*keys) * (size_t)(nkeys + 1));
	i = 0;
	cJSON_ArrayForEach(e, root)
		keys[i++] = e->string;
	dup = find_duplicate(keys, nkeys);
	if (dup) {
		if (!strcmp(dup, META_KEY))
			dt_error("'%s': header has '%s' twice", path, META_KEY);
		else
			dt_error("'%s': duplicate tensor '%s'", path, dup);
		goto out;
	}

	m = cJSON_GetObjectItemCaseSensitive(root, META_KEY);
	c->n = nkeys - (m != NULL);
	c->t = dt_calloc((size_t)c->n + 1, sizeof(*c->t));
	sp = dt_calloc((size_t)c->n + 1, sizeof(*sp));
	i = 0;
	cJSON_ArrayForEach(e, root) {
		if (e == m)
			continue;
		c->t[i].name = dt_strdup(e->string);
		sp[i].index = i;
		if (parse_tensor(path, e, data_size, &c->t[i], &sp[i]))
			goto out;
		i++;
	}
	if (check_coverage(path, c, sp, data_size))
		goto out;
	if (m && parse_meta(path, c, m))
		goto out;
	*begin = dt_malloc(sizeof(**begin) * ((size_t)c->n + 1));
	for (i = 0; i < c->n; i++)
		(*begin)[sp[i].index] = sp[i].begin;
	ret = 0;
out:
	free(sp);
	free(keys);
	cJSON_Delete(root);
	return ret;
}

static int cmp_tensor_name(const void *a, const void *b)
{
	return strcmp((*(const struct dt_ckpt_tensor *const *)a)->name,
		      (*(const struct dt_ckpt_tensor *const *)b)->name);
}

/* Reads n bytes or fails with a message naming path. */
static int read_all(const char *path, FILE *f, void *buf, size_t n)
{
	if (fread(buf, 1, n, f) == n)
		return 0;
	if (ferror(f))
		return dt_error("cannot read '%s': %s", path, strerror(errno ? errno : EIO));
	return dt_error("'%s': file ended early (did it change while being read?)", path);
}

/* An entry of the checksum object: 8 hex digits. */
static int crc_entry(const char *path, const cJSON *crcs, const char *name, uint32_t *crc)
{
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(crcs, name);
	char *end;
	if (!e)
		return dt_error("'%s': metadata '%s' has no checksum for '%s'", path, CRC_KEY, name);
	if (!cJSON_IsString(e) || strlen(e->valuestring) != 8 ||
	    strspn(e->valuestring, "0123456789abcdef") != 8)
		return dt_error("'%s': metadata '%s' has a bad checksum for '%s' (expected 8 hex digits)", path,
				CRC_KEY, name);
	*crc = (uint32_t)strtoul(e->valuestring, &end, 16);
	return 0;
}

/* Checks the tensors and metadata against the CRC_KEY entry, when the file has one. */
static int verify_checksums(const char *path, const struct dt_ckpt *c)
{
	const char *text = NULL;
	const cJSON *e;
	cJSON *crcs;
	uint32_t want;
	int ret = -1;

	for (int i = 0; i < c->nmeta; i++)
		if (!strcmp(c->meta[i].key, CRC_KEY))
			text = c->meta[i].value;
	if (!text)
		return 0;
	crcs = cJSON_Parse(text);
	if (!cJSON_IsObject(crcs)) {
		dt_error("'%s': metadata '%s' is not a JSON object", path, CRC_KEY);
		goto out;
	}
	if (crc_entry(path, crcs, META_KEY, &want))
		goto out;
	if (crc_meta(c->meta, c->nmeta) != want) {
		dt_error("'%s': the metadata fails its checksum: the file is corrupt", path);
		goto out;
	}
	for (int i = 0; i < c->n; i++) {
		uint64_t bytes = (uint64_t)dt_shape_count(&c->t[i].shape) * sizeof(float);
		if (crc_entry(path, crcs, c->t[i].name, &want))
			goto out;
		if (crc_bytes((uint32_t)crc32(0, NULL, 0), c->t[i].data, bytes) != want) {
			dt_error("'%s': tensor '%s' fails its checksum: the file is corrupt", path, c->t[i].name);
			goto out;
		}
	}
	cJSON_ArrayForEach(e, crcs)
		if (strcmp(e->string, META_KEY) && !dt_checkpoint_find(c, e->string)) {
			dt_error("'%s': metadata '%s' names tensor '%s', which the file does not hold", path, CRC_KEY,
				 e->string);
			goto out;
		}
	ret = 0;
out:
	cJSON_Delete(crcs);
	return ret;
}

struct dt_ckpt *dt_checkpoint_load(const char *path)
{
	struct dt_ckpt *c = NULL;
	unsigned char len8[8];
	uint64_t hlen = 0, data_size, *begin = NULL;
	char *header = NULL;
	struct stat st;
	FILE *f;
	size_t alloc;

	errno = 0;
	f = fopen(path, "rbe");
	if (!f) {
		dt_error("cannot open '%s': %s", path, strerror(errno));
		return NULL;
	}
	if (fstat(fileno(f), &st)) {
		dt_error("cannot read '%s': %s", path, strerror(errno));
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		dt_error("'%s': not a regular file", path);
		goto fail;
	}
	if (st.st_size < 8) {
		dt_error("'%s': file has %lld bytes, too few for a safetensors header", path, (long long)st.st_size);
		goto fail;
	}
	if (read_all(path, f, len8, 8))
		goto fail;
	for (int i = 0; i < 8; i++)
		hlen |= (uint64_t)len8[i] << (8 * i);
	if (hlen > (uint64_t)st.st_size - 8) {
		dt_error("'%s': header length %" PRIu64 " exceeds the file size of %lld bytes", path, hlen,
			 (long long)st.st_size);
		goto fail;
	}
	if (hlen > HEADER_MAX) {
		dt_error("'%s': header length %" PRIu64 " exceeds the limit of %d bytes", path, hlen, HEADER_MAX);
		goto fail;
	}
	data_size = (uint64_t)st.st_size - 8 - hlen;

	c = dt_calloc(1, sizeof(*c));
	c->path = dt_strdup(path);
	header = dt_malloc(hlen + 1);
	if (read_all(path, f, header, hlen))
		goto fail;
	header[hlen] = '\0';
	if (parse_header(path, c, header, hlen, data_size, &begin))
		goto fail;
	free(header);
	header = NULL;

	alloc = (data_size + 63) & ~(uint64_t)63;
	c->data = aligned_alloc(64, alloc ? alloc : 64);
	if (!c->data) {
		dt_error("'%s': cannot allocate %" PRIu64 " bytes for its tensors", path, data_size);
		goto fail;
	}
	if (read_all(path, f, c->data, data_size))
		goto fail;
	fclose(f);
	f = NULL;

	for (int i = 0; i < c->n; i++)
		c->t[i].data = (const float *)((const char *)c->data + begin[i]);
	free(begin);
	c->by_name = dt_malloc(sizeof(*c->by_name) * ((size_t)c->n + 1));
	for (int i = 0; i < c->n; i++)
		c->by_name[i] = &c->t[i];
	qsort(c->by_name, c->n, sizeof(*c->by_name), cmp_tensor_name);
	if (verify_checksums(path, c))
		goto fail_checked;
	return c;

fail:
	free(begin);
	free(header);
	if (f)
		fclose(f);
fail_checked:
	dt_checkpoint_free(c);
	return NULL;
}

void dt_checkpoint_free(struct dt_ckpt *c)
{
	if (!c)
		return;
	for (int i = 0; i < c->n && c->t; i++)
		free((char *)c->t[i].name);
	for (int i = 0; i < c->nmeta && c->meta; i++) {
		free((char *)c->meta[i].key);
		free((char *)c->meta[i].value);
	}
	free(c->t);
	free(c->by_name);
	free(c->meta);
	free(c->data);
	free(c->path);
	free(c);
}

const char *dt_checkpoint_path(const struct dt_ckpt *c) { return c->path; }

int dt_checkpoint_count(const struct dt_ckpt *c) { return c->n; }

struct dt_ckpt_tensor dt_checkpoint_at(const struct dt_ckpt *c, int i)
{
	DT_ASSERT(i >= 0 && i < c->n);
	return c->t[i];
}

static int cmp_name_key(const void *key, const void *elem)
{
	return strcmp(key, (*(const struct dt_ckpt_tensor *const *)elem)->name);
}

const struct dt_ckpt_tensor *dt_checkpoint_find(const struct dt_ckpt *c, const char *name)
{
	const struct dt_ckpt_tensor *const *p = bsearch(name, c->by_name, c->n, sizeof(*c->by_name), cmp_name_key);
	return p ? *p : NULL;
}

const char *dt_checkpoint_meta(const struct dt_ckpt *c, const char *key)
{
	for (int i = 0; i < c->nmeta; i++)
		if (!strcmp(c->meta[i].key, key))
			return c->meta[i].value;
	return NULL;
}
