/*
 * PNG images: the decoder of png.h, and `format: png_folder` (below).
 *
 * The decoder: the whole file is read into a buffer the decoder
 * keeps, libpng decodes it from memory with its expansions (palette to RGB,
 * low bit depths to 8, tRNS to alpha when alpha is wanted, interlace), and
 * one pass converts to float channels, resizing when the size differs.
 *
 * libpng reports errors by longjmp: every resource that must survive one is
 * either in the decoder (buffers) or freed by png_destroy_read_struct on the
 * setjmp path, so a corrupt file leaks nothing.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <png.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "core/config/config.h"
#include "core/error.h"
#include "core/rng.h"
#include "core/pipeline/source.h"
#include "png.h"
#include "reader.h"
#include "sources.h"

#define PNG_MAX_SIDE 65536              /* pixels per side */
#define PNG_MAX_DECODED (1LL << 30)     /* bytes of decoded pixels */
#define PNG_MAX_PIXELS (1LL << 26)      /* pixels of one image (its floats must fit too) */
#define PNG_MAX_FILE (1LL << 30)

struct dt_png_decoder {
	uint8_t *file;       /* the file's bytes */
	size_t file_cap;
	const uint8_t *at, *end; /* libpng's read position in file */
	uint8_t *pix;        /* decoded rows, (h0, rowbytes) */
	size_t pix_cap;
	png_bytep *rows;     /* (h0) pointers into pix */
	size_t rows_cap;
	float *tmp;          /* (h0, w0, c) before resizing */
	size_t tmp_cap;
	int *xi;             /* (2 * w) column indices for resizing */
	float *xl;           /* (w) column weights */
	size_t x_cap;
	z_stream z;          /* the fast path's inflater, reset per image */
	int z_ready;
	char err[256];
};

struct dt_png_decoder *dt_png_decoder_new(void)
{
	return dt_calloc(1, sizeof(struct dt_png_decoder));
}

void dt_png_decoder_free(struct dt_png_decoder *d)
{
	if (!d)
		return;
	free(d->file);
	free(d->pix);
	free(d->rows);
	free(d->tmp);
	free(d->xi);
	free(d->xl);
	if (d->z_ready)
		inflateEnd(&d->z);
	free(d);
}

const char *dt_png_decoder_error(const struct dt_png_decoder *d)
{
	return d->err;
}

static void *grow(void *p, size_t *cap, size_t need)
{
	if (need <= *cap)
		return p;
	free(p);
	*cap = need + need / 4;
	return dt_malloc(*cap);
}

static int fail(struct dt_png_decoder *d, const char *fmt, ...) DT_PRINTF(2, 3);
static int fail(struct dt_png_decoder *d, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(d->err, sizeof(d->err), fmt, ap);
	va_end(ap);
	return -1;
}

/* Reads the whole file into d->file; checks the PNG signature. */
static int read_file(struct dt_png_decoder *d, const char *path)
{
	struct stat st;
	size_t got = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return fail(d, "%s", strerror(errno));
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		return fail(d, "%s", strerror(e));
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return fail(d, "%s", S_ISDIR(st.st_mode) ? "it is a directory" : "not a regular file");
	}
	if (st.st_size > PNG_MAX_FILE) {
		close(fd);
		return fail(d, "the file is too large (%lld bytes)", (long long)st.st_size);
	}
	d->file = grow(d->file, &d->file_cap, (size_t)st.st_size + 1);
	while (got < (size_t)st.st_size) {
		ssize_t k = read(fd, d->file + got, (size_t)st.st_size - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			int e = errno;
			close(fd);
			return fail(d, "%s", k < 0 ? strerror(e) : "the file shrank while being read");
		}
		got += (size_t)k;
	}
	close(fd);
	if (got == 0)
		return fail(d, "the file is empty");
	if (got < 8 || png_sig_cmp(d->file, 0, 8))
		return fail(d, "not a PNG file (no PNG signature)");
	d->at = d->file;
	d->end = d->file + got;
	return 0;
}

static void on_error(png_structp png, png_const_charp msg)
{
	struct dt_png_decoder *d = png_get_error_ptr(png);
	fail(d, "%s", msg);
	png_longjmp(png, 1);
}

static void on_warning(png_structp png, png_const_charp msg)
{
	/* Ancillary-chunk complaints (iCCP profiles, text): nothing to do with the pixels. */
}

static void on_read(png_structp png, png_bytep out, size_t n)
{
	struct dt_png_decoder *d = png_get_io_ptr(png);
	if ((size_t)(d->end - d->at) < n)
		png_error(png, "the file ends early (truncated)");
	memcpy(out, d->at, n);
	d->at += n;
}

static inline float luma(float r, float g, float b)
{
	return 0.299f * r + 0.587f * g + 0.114f * b;
}

/* One sample of a decoded row as 0..255. */
static inline float sample8(const uint8_t *p, int i) { return p[i]; }
static inline float sample16(const uint8_t *p, int i) { return (float)(p[2 * i] << 8 | p[2 * i + 1]) / 257.0f; }

/*
 * Converts decoded rows (nch channels of 8 or 16 bits) to out (h0, w0, c).
 * One loop per (bits, nch, c) keeps the common 8-bit cases tight.
 */
#define CONVERT(SAMPLE) \
	for (int y = 0; y < h0; y++) { \
		const uint8_t *p = rows[y]; \
		float *o = out + (size_t)y * w0 * c; \
		for (int x = 0; x < w0; x++, o += c) { \
			int s = x * nch; \
			float v0 = SAMPLE(p, s), v1, v2; \
			if (nch >= 3) { \
				v1 = SAMPLE(p, s + 1); \
				v2 = SAMPLE(p, s + 2); \
			} else { \
				v1 = v2 = v0; \
			} \
			if (c == 1) { \
				o[0] = nch >= 3 ? luma(v0, v1, v2) : v0; \
				continue; \
			} \
			o[0] = v0, o[1] = v1, o[2] = v2; \
			if (c == 4) \
				o[3] = nch == 2 || nch == 4 ? SAMPLE(p, s + nch - 1) : 255.0f; \
		} \
	}

static void convert(png_bytep *rows, int h0, int w0, int nch, int bits, int c, float *out)
{
	if (bits == 8 && nch == 1 && c == 1) {
		for (int y = 0; y < h0; y++)
			for (int x = 0; x < w0; x++)
				out[(size_t)y * w0 + x] = rows[y][x];
	} else if (bits == 8) {
		CONVERT(sample8)
	} else {
		CONVERT(sample16)
	}
}

/* in (h0, w0, c) to out (h, w, c): TensorFlow's bilinear resize with half-pixel centres. */
static void resize(struct dt_png_decoder *d, const float *in, int h0, int w0, int c, float *out, int h, int w)
{
	float sy = (float)h0 / h, sx = (float)w0 / w;
	int *x0, *x1;

	if ((size_t)w > d->x_cap) {
		free(d->xi);
		free(d->xl);
		d->x_cap = w;
		d->xi = dt_malloc(2 * (size_t)w * sizeof(int));
		d->xl = dt_malloc((size_t)w * sizeof(float));
	}
	x0 = d->xi, x1 = d->xi + w;
	for (int x = 0; x < w; x++) {
		float f = ((float)x + 0.5f) * sx - 0.5f, fl = floorf(f);
		x0[x] = fl < 0 ? 0 : (int)fl;
		x1[x] = (int)ceilf(f) > w0 - 1 ? w0 - 1 : (int)ceilf(f);
		if (x1[x] < 0)
			x1[x] = 0;
		d->xl[x] = f - fl;
	}
	for (int y = 0; y < h; y++) {
		float f = ((float)y + 0.5f) * sy - 0.5f, fl = floorf(f), ly = f - fl;
		int y0 = fl < 0 ? 0 : (int)fl, y1 = (int)ceilf(f) > h0 - 1 ? h0 - 1 : (int)ceilf(f);
		if (y1 < 0)
			y1 = 0;
		const float *r0 = in + (size_t)y0 * w0 * c, *r1 = in + (size_t)y1 * w0 * c;
		float *o = out + (size_t)y * w * c;
		for (int x = 0; x < w; x++) {
			const float *a = r0 + x0[x] * c, *b = r0 + x1[x] * c;
			const float *e = r1 + x0[x] * c, *g = r1 + x1[x] * c;
			float lx = d->xl[x];
			for (int k = 0; k < c; k++) {
				float top = a[k] + (b[k] - a[k]) * lx;
				float bottom = e[k] + (g[k] - e[k]) * lx;
				o[x * c + k] = top + (bottom - top) * ly;
			}
		}
	}
}

/* d->rows (h0, w0, nch) to out (h, w, c): converted, and resized when the sizes differ. */
static void finish(struct dt_png_decoder *d, int h0, int w0, int nch, int bits, int c, float *out, int h, int w)
{
	if (h0 == h && w0 == w) {
		convert(d->rows, h, w, nch, bits, c, out);
		return;
	}
	d->tmp = grow(d->tmp, &d->tmp_cap, (size_t)h0 * w0 * c * sizeof(float));
	convert(d->rows, h0, w0, nch, bits, c, d->tmp);
	resize(d, d->tmp, h0, w0, c, out, h, w);
}

/*
 * Decodes d->file. With out == NULL reads only the header into *h0, *w0 and
 * *nch0 (channels of the colour type). Otherwise converts to c channels and
 * writes (h, w, c) floats.
 */
static int decode(struct dt_png_decoder *d, int *h0p, int *w0p, int *nch0, int h, int w, int c, float *out)
{
	png_structp png;
	png_infop info;
	png_uint_32 w0, h0;
	int bits, type, nch, obits;
	size_t rowbytes;

	png = png_create_read_struct(PNG_LIBPNG_VER_STRING, d, on_error, on_warning);
	if (!png)
		return fail(d, "out of memory");
	info = png_create_info_struct(png);
	if (!info) {
		png_destroy_read_struct(&png, NULL, NULL);
		return fail(d, "out of memory");
	}
	if (setjmp(png_jmpbuf(png))) {
		png_destroy_read_struct(&png, &info, NULL);
		return -1;
	}
	png_set_read_fn(png, d, on_read);
	png_set_user_limits(png, PNG_MAX_SIDE, PNG_MAX_SIDE);
	png_read_info(png, info);
	png_get_IHDR(png, info, &w0, &h0, &bits, &type, NULL, NULL, NULL);
	if (!out) {
		int has_trns = png_get_valid(png, info, PNG_INFO_tRNS) != 0;
		*h0p = (int)h0;
		*w0p = (int)w0;
		*nch0 = type == PNG_COLOR_TYPE_GRAY ? 1 : type == PNG_COLOR_TYPE_GRAY_ALPHA ? 2
			: type == PNG_COLOR_TYPE_RGB_ALPHA || (type == PNG_COLOR_TYPE_PALETTE && has_trns) ? 4 : 3;
		png_destroy_read_struct(&png, &info, NULL);
		return 0;
	}

	if (type == PNG_COLOR_TYPE_PALETTE)
		png_set_palette_to_rgb(png);
	if (type == PNG_COLOR_TYPE_GRAY && bits < 8)
		png_set_expand_gray_1_2_4_to_8(png);
	if (c == 4 && png_get_valid(png, info, PNG_INFO_tRNS))
		png_set_tRNS_to_alpha(png);
	png_set_interlace_handling(png);
	png_read_update_info(png, info);
	nch = png_get_channels(png, info);
	obits = png_get_bit_depth(png, info);
	rowbytes = png_get_rowbytes(png, info);
	if ((obits != 8 && obits != 16) || nch < 1 || nch > 4 || rowbytes < (size_t)w0 * nch * (obits / 8))
		png_error(png, "unexpected pixel layout after expansion");
	if ((long long)rowbytes * h0 > PNG_MAX_DECODED || (long long)w0 * h0 > PNG_MAX_PIXELS)
		png_error(png, "the image is too large to decode (more than 2^26 pixels)");

	d->pix = grow(d->pix, &d->pix_cap, rowbytes * h0);
	d->rows = grow(d->rows, &d->rows_cap, h0 * sizeof(png_bytep));
	for (png_uint_32 y = 0; y < h0; y++)
		d->rows[y] = d->pix + y * rowbytes;
	png_read_image(png, d->rows);
	png_read_end(png, NULL);
	png_destroy_read_struct(&png, &info, NULL);
	finish(d, (int)h0, (int)w0, nch, obits, c, out, h, w);
	return 0;
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline uint8_t paeth(int a, int b, int c)
{
	int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
	return (uint8_t)(pa <= pb && pa <= pc ? a : pb <= pc ? b : c);
}

/*
 * The fast path for the common files: 8-bit gray, gray + alpha, RGB or RGBA,
 * not interlaced, no tRNS or PLTE, every chunk CRC right. One inflate call
 * over the IDAT chunks into one buffer (zlib's fast loop, where libpng's
 * row-by-row calls keep it in the slow one), then the row filters undone in
 * place. Returns 1 when it decoded the image, 0 when libpng must (any other
 * kind of file, and every error, so that libpng's message is the one shown).
 */
static int decode_fast(struct dt_png_decoder *d, int h, int w, int c, float *out)
{
	const uint8_t *p = d->file + 8, *end = d->end;
	uint32_t w0, h0;
	int nch, seen_idat = 0, done = 0;
	size_t stride, total;
	static const int channels[7] = { 1, 0, 3, 0, 2, 0, 4 };

	if (end - p < 25 || be32(p) != 13 || memcmp(p + 4, "IHDR", 4))
		return 0;
	w0 = be32(p + 8), h0 = be32(p + 12);
	/* 8-bit; colour type 0, 2, 4 or 6; compression, filter and interlace methods 0 */
	if (p[16] != 8 || p[17] > 6 || !channels[p[17]] || p[18] || p[19] || p[20] || !w0 || !h0 ||
	    w0 > PNG_MAX_SIDE || h0 > PNG_MAX_SIDE)
		return 0;
	if (be32(p + 21) != (uint32_t)crc32(0, p + 4, 17))
		return 0;
	nch = channels[p[17]];
	stride = (size_t)w0 * nch + 1;
	total = stride * h0;
	if ((long long)total > PNG_MAX_DECODED || (long long)w0 * h0 > PNG_MAX_PIXELS)
		return 0;
	if (!d->z_ready) {
		memset(&d->z, 0, sizeof(d->z));
		if (inflateInit(&d->z) != Z_OK)
			return 0;
		d->z_ready = 1;
	} else if (inflateReset(&d->z) != Z_OK) {
		return 0;
	}
	d->pix = grow(d->pix, &d->pix_cap, total);
	d->z.next_out = d->pix;
	d->z.avail_out = (uInt)total;
	p += 25;
	for (;;) {
		uint32_t len;
		if (end - p < 12)
			return 0;
		len = be32(p);
		if (len > (size_t)(end - p) - 12)
			return 0;
		if (!(p[4] & 0x20)) { /* a critical chunk: IDAT or IEND, CRC checked */
			if (be32(p + 8 + len) != (uint32_t)crc32(0, p + 4, len + 4))
				return 0;
			if (!memcmp(p + 4, "IEND", 4))
				break;
			/* PLTE or another critical chunk; IDAT chunks not consecutive; data after the stream's end */
			if (memcmp(p + 4, "IDAT", 4) || seen_idat == 2 || (done && len))
				return 0;
			seen_idat = 1;
			if (!done) {
				int rc;
				d->z.next_in = (Bytef *)(p + 8);
				d->z.avail_in = len;
				rc = inflate(&d->z, Z_NO_FLUSH);
				if (rc == Z_STREAM_END)
					done = 1;
				else if (rc != Z_OK && !(rc == Z_BUF_ERROR && len == 0))
					return 0;
				if (!done && d->z.avail_out == 0 && d->z.avail_in)
					return 0; /* more data than the image holds */
			}
		} else {
			if (!memcmp(p + 4, "tRNS", 4))
				return 0;
			if (seen_idat)
				seen_idat = 2; /* the IDAT run is over */
		}
		p += 12 + len;
	}
	if (!done || d->z.total_out != total)
		return 0;

	d->rows = grow(d->rows, &d->rows_cap, h0 * sizeof(png_bytep));
	for (uint32_t y = 0; y < h0; y++) {
		uint8_t *r = d->pix + y * stride, *row = r + 1;
		const uint8_t *up = y ? d->pix + (y - 1) * stride + 1 : NULL;
		size_t n = stride - 1;
		switch (r[0]) {
		case 0:
			break;
		case 1:
			for (size_t i = nch; i < n; i++)
				row[i] += row[i - nch];
			break;
		case 2:
			if (up)
				for (size_t i = 0; i < n; i++)
					row[i] += up[i];
			break;
		case 3:
			for (size_t i = 0; i < n; i++)
				row[i] += (uint8_t)(((i >= (size_t)nch ? row[i - nch] : 0) + (up ? up[i] : 0)) >> 1);
			break;
		case 4:
			for (size_t i = 0; i < n; i++) {
				int a = i >= (size_t)nch ? row[i - nch] : 0, b = up ? up[i] : 0;
				int cc = up && i >= (size_t)nch ? up[i - nch] : 0;
				row[i] += paeth(a, b, cc);
			}
			break;
		default:
			return 0;
		}
		d->rows[y] = row;
	}
	finish(d, (int)h0, (int)w0, nch, 8, c, out, h, w);
	return 1;
}

int dt_png_decoder_decode(struct dt_png_decoder *d, const char *path, int h, int w, int c, float *out)
{
	DT_ASSERT(h > 0 && w > 0 && (c == 1 || c == 3 || c == 4));
	d->err[0] = 0;
	if (read_file(d, path) < 0)
		return -1;
	if (decode_fast(d, h, w, c, out))
		return 0;
	d->at = d->file;
	return decode(d, NULL, NULL, NULL, h, w, c, out);
}

int dt_png_decoder_info(struct dt_png_decoder *d, const char *path, int *h, int *w, int *c)
{
	d->err[0] = 0;
	if (read_file(d, path) < 0)
		return -1;
	return decode(d, h, w, c, 0, 0, 0, NULL);
}

int dt_png_decode(const char *path, int h, int w, int c, float *out)
{
	struct dt_png_decoder *d = dt_png_decoder_new();
	int rc = dt_png_decoder_decode(d, path, h, w, c, out);
	if (rc < 0)
		dt_error("cannot decode '%s': %s", path, d->err);
	dt_png_decoder_free(d);
	return rc;
}

/*
 * `format: png_folder`: a directory with one subfolder per class, as Keras'
 * image_dataset_from_directory reads it.
 *
 *   directory: flowers/train    flowers/train/daisy/a.png, flowers/train/rose/b.png, ...
 *   image_size: [180, 180]      default: the size of the first image
 *   color_mode: rgb             grayscale | rgb | rgba (channels 1, 3, 4)
 *   class_names: [rose, daisy]  optional: this order, or a subset of the folders
 *   shuffle: true               the records in a seeded order (Keras' shuffle)
 *   seed: 0
 *
 * Classes are the subfolders in byte order of their names (Python's
 * sorted()), or class_names. A class's records are the .png files (any case
 * of the extension) under its folder and its subfolders, directories in byte
 * order of their paths, files sorted within each (Keras' os.walk order).
 * Names that start with '.' are skipped, and so are files of other types and
 * files directly in `directory`. With shuffle (the default, as Keras) the
 * records are then put in one order drawn from seed, so that
 * data.validation_split, which takes the last records, holds every class,
 * as Keras' validation_split does. Only the file list is read at open; read()
 * decodes each record from its file.
 */

#define FOLDER_MAX_VALUES (1 << 26) /* floats in one sample */

struct png_folder {
	char *paths;       /* every record's path, NUL-terminated, one after another */
	int64_t *offset;   /* (count) where record i's path starts in paths */
	int32_t *labels;   /* (count) */
	int h, w, c;
	struct dt_png_decoder *dec;
};

struct strvec {
	char **v;
	int n, cap;
};

static void strvec_push(struct strvec *s, char *str)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 16;
		s->v = dt_realloc(s->v, (size_t)s->cap * sizeof(char *));
	}
	s->v[s->n++] = str;
}

static void strvec_free(struct strvec *s)
{
	for (int i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	memset(s, 0, sizeof(*s));
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *path_join(const char *dir, const char *name)
{
	size_t n = strlen(dir);
	char *p = dt_malloc(n + strlen(name) + 2);
	sprintf(p, "%s%s%s", dir, n && dir[n - 1] == '/' ? "" : "/", name);
	return p;
}

/* 1 if path is a directory (follow says whether a symbolic link to one counts). */
static int is_dir(const char *path, const struct dirent *e, int follow)
{
	struct stat st;
	if (e->d_type == DT_DIR)
		return 1;
	if (e->d_type != DT_UNKNOWN && (e->d_type != DT_LNK || !follow))
		return 0;
	if ((follow ? stat(path, &st) : lstat(path, &st)) < 0)
		return 0;
	return S_ISDIR(st.st_mode);
}

static int has_suffix(const char *name, const char *suffix)
{
	size_t n = strlen(name), k = strlen(suffix);
	return n > k && !strcasecmp(name + n - k, suffix);
}

/* Appends dir and every directory below it (symbolic links not followed, as os.walk) to out. */
static int walk(const char *dir, struct strvec *out)
{
	DIR *dp = opendir(dir);
	struct dirent *e;

	if (!dp)
		return dt_error("cannot open directory '%s': %s", dir, strerror(errno));
	strvec_push(out, dt_strdup(dir));
	while ((e = readdir(dp))) {
		char *sub;
		if (e->d_name[0] == '.')
			continue;
		sub = path_join(dir, e->d_name);
		if (is_dir(sub, e, 0) && walk(sub, out) < 0) {
			free(sub);
			closedir(dp);
			return -1;
		}
		free(sub);
	}
	closedir(dp);
	return 0;
}

/* Appends the sorted .png files of dir to files; counts other image files in *other. */
static int list_pngs(const char *dir, struct strvec *files, int *other)
{
	static const char *const keras_only[] = { ".jpg", ".jpeg", ".bmp", ".gif", NULL };
	struct strvec names = { 0 };
	DIR *dp = opendir(dir);
	struct dirent *e;

	if (!dp)
		return dt_error("cannot open directory '%s': %s", dir, strerror(errno));
	while ((e = readdir(dp))) {
		if (e->d_name[0] == '.' || e->d_type == DT_DIR)
			continue;
		if (has_suffix(e->d_name, ".png")) {
			char *p = path_join(dir, e->d_name);
			if (is_dir(p, e, 1))
				free(p);
			else
				strvec_push(&names, p);
			continue;
		}
		for (int i = 0; keras_only[i]; i++)
			if (has_suffix(e->d_name, keras_only[i]))
				(*other)++;
	}
	closedir(dp);
	if (names.n)
		qsort(names.v, names.n, sizeof(char *), cmp_str);
	for (int i = 0; i < names.n; i++)
		strvec_push(files, names.v[i]);
	free(names.v);
	return 0;
}

/* The class folders of dir, sorted. */
static int list_classes(const char *dir, struct strvec *out)
{
	DIR *dp = opendir(dir);
	struct dirent *e;

	if (!dp)
		return dt_error("cannot open directory '%s': %s", dir, strerror(errno));
	while ((e = readdir(dp))) {
		char *p;
		if (e->d_name[0] == '.')
			continue;
		p = path_join(dir, e->d_name);
		if (is_dir(p, e, 1))
			strvec_push(out, dt_strdup(e->d_name));
		free(p);
	}
	closedir(dp);
	if (out->n)
		qsort(out->v, out->n, sizeof(char *), cmp_str);
	return 0;
}

/* The class names from class_names: (a subset of the folders, in the order given), else all folders. */
static int pick_classes(const struct dt_node *args, const char *dir, struct strvec *folders, struct strvec *out)
{
	const struct dt_node *list = dt_node_get(args, "class_names");

	if (!list) {
		*out = *folders;
		memset(folders, 0, sizeof(*folders));
		return 0;
	}
	if (dt_node_expect(list, DT_NODE_SEQ, "class_names") < 0)
		return -1;
	strvec_push(folders, NULL); /* NULL-terminated for dt_did_you_mean */
	folders->n--;
	for (int i = 0; i < list->n; i++) {
		const struct dt_node *it = list->items[i];
		int found = 0;
		if (it->kind != DT_NODE_SCALAR || !it->value || !*it->value)
			return dt_node_error(it, "a class name must be a folder name");
		for (int j = 0; j < folders->n; j++)
			found |= !strcmp(folders->v[j], it->value);
		if (!found) {
			const char *guess = dt_did_you_mean(it->value, (const char *const *)folders->v);
			if (guess)
				return dt_node_error(it, "'%s' is not a class folder of '%s'; did you mean '%s'?",
						     it->value, dir, guess);
			return dt_node_error(it, "'%s' is not a class folder of '%s'", it->value, dir);
		}
		for (int j = 0; j < out->n; j++)
			if (!strcmp(out->v[j], it->value))
				return dt_node_error(it, "class '%s' is listed twice", it->value);
		strvec_push(out, dt_strdup(it->value));
	}
	return 0;
}

static void folder_close(struct dt_source *s)
{
	struct png_folder *d = s->priv;
	if (!d)
		return;
	free(d->paths);
	free(d->offset);
	free(d->labels);
	dt_png_decoder_free(d->dec);
	free(d);
	s->priv = NULL;
}

static int folder_open(struct dt_source *s, const struct dt_node *args)
{
	static const char *const keys[] = { "format", "directory", "image_size", "color_mode", "class_names",
					    "shuffle", "seed", NULL };
	static const char *const names[] = { "grayscale", "rgb", "rgba", NULL };
	static const int channels[] = { 1, 3, 4 };
	struct strvec folders = { 0 }, classes = { 0 }, files = { 0 };
	struct dt_shape size = { 0 };
	struct png_folder *d;
	char *dir = NULL;
	int mode, shuffle, other = 0, rc = -1;
	int64_t seed;
	size_t bytes = 0;

	if (dt_cfg_check_keys(args, "png_folder", keys) < 0 || dt_cfg_require(args, "directory", "png_folder") < 0 ||
	    dt_cfg_path(args, "directory", &dir) < 0 || dt_cfg_enum(args, "color_mode", names, 1, &mode) < 0 ||
	    dt_cfg_shape(args, "image_size", &size) < 0 || dt_cfg_bool(args, "shuffle", 1, &shuffle) < 0 ||
	    dt_cfg_int(args, "seed", 0, 0, INT64_MAX, &seed) < 0)
		goto out;
	if (size.ndim && size.ndim != 2) {
		dt_node_error(dt_node_get(args, "image_size"), "image_size is [height, width], got %d numbers", size.ndim);
		goto out;
	}
	if (size.ndim && ((int64_t)size.dim[0] * size.dim[1] * channels[mode] > FOLDER_MAX_VALUES ||
			  size.dim[0] > PNG_MAX_SIDE || size.dim[1] > PNG_MAX_SIDE)) {
		dt_node_error(dt_node_get(args, "image_size"), "image_size [%d, %d] is too large", size.dim[0],
			      size.dim[1]);
		goto out;
	}
	if (list_classes(dir, &folders) < 0)
		goto out;
	if (folders.n == 0) {
		dt_error("'%s' has no class folders (it needs one subfolder of .png files per class)", dir);
		goto out;
	}
	if (pick_classes(args, dir, &folders, &classes) < 0)
		goto out;
	if (classes.n == 0) {
		dt_node_error(dt_node_get(args, "class_names"), "class_names is empty");
		goto out;
	}
	if (classes.n < 2) {
		dt_error("'%s' has only one class, '%s'; a classifier needs at least 2 class folders", dir, classes.v[0]);
		goto out;
	}

	d = dt_calloc(1, sizeof(*d));
	s->priv = d;
	d->dec = dt_png_decoder_new();
	for (int k = 0; k < classes.n; k++) {
		struct strvec dirs = { 0 };
		char *cdir = path_join(dir, classes.v[k]);
		int first = files.n;
		int failed = walk(cdir, &dirs) < 0;
		if (!failed)
			qsort(dirs.v, dirs.n, sizeof(char *), cmp_str);
		for (int i = 0; !failed && i < dirs.n; i++)
			failed = list_pngs(dirs.v[i], &files, &other) < 0;
		strvec_free(&dirs);
		if (!failed && files.n == first) {
			dt_error("class folder '%s' holds no .png files", cdir);
			failed = 1;
		}
		free(cdir);
		if (failed)
			goto out;
		d->labels = dt_realloc(d->labels, (size_t)files.n * sizeof(int32_t));
		for (int i = first; i < files.n; i++)
			d->labels[i] = k;
	}
	if (other)
		dt_warn("'%s' holds %d .jpg, .jpeg, .bmp or .gif files: they are ignored, png_folder reads only .png",
			dir, other);

	d->offset = dt_malloc((size_t)files.n * sizeof(int64_t));
	for (int i = 0; i < files.n; i++) {
		d->offset[i] = (int64_t)bytes;
		bytes += strlen(files.v[i]) + 1;
	}
	d->paths = dt_malloc(bytes);
	for (int i = 0; i < files.n; i++)
		memcpy(d->paths + d->offset[i], files.v[i], strlen(files.v[i]) + 1);
	d->c = channels[mode];
	if (size.ndim) {
		d->h = size.dim[0];
		d->w = size.dim[1];
	} else {
		int ch;
		if (dt_png_decoder_info(d->dec, files.v[0], &d->h, &d->w, &ch) < 0) {
			dt_error("cannot decode '%s' (record 0), whose size would be image_size: %s", files.v[0],
				 dt_png_decoder_error(d->dec));
			goto out;
		}
		if ((int64_t)d->h * d->w * d->c > FOLDER_MAX_VALUES) {
			dt_error("'%s' is %d x %d pixels, too large for a sample; set image_size", files.v[0], d->h, d->w);
			goto out;
		}
	}

	if (shuffle) {
		struct dt_rng r;
		dt_rng_seed(&r, (uint64_t)seed, 0x706e67); /* "png" */
		for (int i = files.n - 1; i > 0; i--) {
			int j = (int)dt_rng_below(&r, (uint64_t)i + 1);
			int64_t o = d->offset[i];
			int32_t l = d->labels[i];
			d->offset[i] = d->offset[j], d->offset[j] = o;
			d->labels[i] = d->labels[j], d->labels[j] = l;
		}
	}

	snprintf(s->name, sizeof(s->name), "%s", dir);
	s->count = files.n;
	s->sample = dt_shape_make(3, (int[]){ d->h, d->w, d->c });
	s->label = dt_shape_make(1, (int[]){ 1 });
	s->num_classes = classes.n;
	s->class_names = classes.v;
	memset(&classes, 0, sizeof(classes));
	rc = 0;
out:
	strvec_free(&folders);
	strvec_free(&classes);
	strvec_free(&files);
	free(dir);
	return rc;
}

static int folder_read(struct dt_source *s, const int64_t *idx, int n, float *x, float *y, uint8_t *bad)
{
	struct png_folder *d = s->priv;
	int64_t rec = (int64_t)d->h * d->w * d->c;

	for (int i = 0; i < n; i++) {
		const char *path;
		if (idx[i] < 0 || idx[i] >= s->count)
			return dt_error("record %lld is out of range in '%s' (%lld records)", (long long)idx[i],
					s->name, (long long)s->count);
		path = d->paths + d->offset[idx[i]];
		if (dt_png_decoder_decode(d->dec, path, d->h, d->w, d->c, x + i * rec) < 0) {
			if (!bad)
				return dt_error("cannot decode '%s' (record %lld of '%s'): %s", path, (long long)idx[i],
						s->name, dt_png_decoder_error(d->dec));
			bad[i] = 1;
			continue;
		}
		y[i] = (float)d->labels[idx[i]];
		if (bad)
			bad[i] = 0;
	}
	return 0;
}

const struct dt_source_type dt_png_folder_source = {
	.name = "png_folder",
	.open = folder_open,
	.read = folder_read,
	.close = folder_close,
};

/*
 * The stream reader for `dtrain predict`: a list of PNG paths, one per line
 * (a file or standard input, gzip or plain), each decoded to the model's
 * input shape (H, W, C) as png_folder decodes its records (C channels: 1
 * grayscale, 3 rgb, 4 rgba; resized bilinearly when the image is of another
 * size). Paths are used as written (relative ones to the current directory);
 * blank lines are skipped; line numbers count every line. A path that cannot
 * be decoded stops with an error naming it and its line, or, with
 * skip_bad (data.on_error: skip), is skipped with a warning. The paths of the
 * samples of the last chunk are kept for sample_name().
 */

struct png_stream {
	gzFile gz;
	struct dt_png_decoder *dec;
	char *buf;         /* the current line */
	size_t cap;
	int64_t line;      /* lines read so far */
	char **names;      /* (ncap) the paths of the last chunk's samples */
	size_t *name_cap;
	int ncap;
	int h, w, c, skip;
};

/* The next non-blank line into s->buf, without its line end. 1, 0 at the end, -1 after an error. */
static int png_getline(struct dt_reader *r, struct png_stream *s)
{
	for (;;) {
		size_t len = 0;
		int code, got = 0;
		for (;;) {
			if (s->cap - len < 64) {
				s->cap = s->cap ? 2 * s->cap : 4096;
				s->buf = dt_realloc(s->buf, s->cap);
			}
			if (!gzgets(s->gz, s->buf + len, (int)(s->cap - len))) {
				const char *msg = gzerror(s->gz, &code);
				if (code == Z_ERRNO)
					return dt_error("cannot read '%s': %s", r->name, strerror(errno));
				if (code == Z_BUF_ERROR)
					return dt_error("'%s' is truncated: its gzip stream ends before the gzip trailer",
							r->name);
				if (code != Z_OK)
					return dt_error("cannot read '%s': corrupt gzip stream: %s", r->name, msg);
				break;
			}
			got = 1;
			len += strlen(s->buf + len);
			if (len > 0 && s->buf[len - 1] == '\n')
				break;
			if (len >= 1 << 20)
				return dt_error("'%s', line %lld: longer than 1 MiB, not a path", r->name,
						(long long)s->line + 1);
		}
		if (!got)
			return 0;
		while (len > 0 && (s->buf[len - 1] == '\n' || s->buf[len - 1] == '\r'))
			s->buf[--len] = 0;
		s->line++;
		if (strlen(s->buf) != len)
			return dt_error("'%s', line %lld: the path holds a NUL byte", r->name, (long long)s->line);
		for (size_t i = 0; i < len; i++)
			if (s->buf[i] != ' ' && s->buf[i] != '\t')
				return 1;
	}
}

int dt_png_reader_check(const struct dt_shape *in)
{
	char shape[64];
	if (in->ndim != 3 || (in->dim[2] != 1 && in->dim[2] != 3 && in->dim[2] != 4) || in->dim[0] < 1 ||
	    in->dim[1] < 1 || in->dim[0] > PNG_MAX_SIDE || in->dim[1] > PNG_MAX_SIDE ||
	    dt_shape_count(in) > FOLDER_MAX_VALUES)
		return dt_error("reading PNG paths needs a model input of (height, width, channels) with 1, 3 or 4 "
				"channels, but it is %s",
				dt_shape_format(in, 0, shape, sizeof(shape)));
	return 0;
}

static int png_stream_open(struct dt_reader *r, const char *path, const struct dt_reader_opts *o)
{
	struct png_stream *s;
	const struct dt_shape *in = &o->sample;

	if (dt_png_reader_check(in) < 0)
		return -1;
	s = dt_calloc(1, sizeof(*s));
	r->priv = s;
	r->sample = *in;
	s->h = in->dim[0];
	s->w = in->dim[1];
	s->c = in->dim[2];
	s->skip = o->skip_bad;
	s->dec = dt_png_decoder_new();
	if (!(s->gz = dt_gz_open(path)))
		return -1;
	return 0;
}

static int png_stream_next(struct dt_reader *r, int n, float *x)
{
	struct png_stream *s = r->priv;
	int64_t rec = (int64_t)s->h * s->w * s->c;
	int i = 0;

	if (!s->gz)
		return 0;
	if (n > s->ncap) {
		s->names = dt_realloc(s->names, (size_t)n * sizeof(char *));
		s->name_cap = dt_realloc(s->name_cap, (size_t)n * sizeof(size_t));
		for (int k = s->ncap; k < n; k++)
			s->names[k] = NULL, s->name_cap[k] = 0;
		s->ncap = n;
	}
	while (i < n) {
		size_t len;
		int rc = png_getline(r, s);
		if (rc < 0)
			return -1;
		if (rc == 0)
			break;
		if (dt_png_decoder_decode(s->dec, s->buf, s->h, s->w, s->c, x + i * rec) < 0) {
			if (!s->skip)
				return dt_error("cannot decode '%s' (line %lld of '%s'): %s", s->buf, (long long)s->line,
						r->name, dt_png_decoder_error(s->dec));
			dt_warn("skipping '%s' (line %lld of '%s'): %s", s->buf, (long long)s->line, r->name,
				dt_png_decoder_error(s->dec));
			continue;
		}
		len = strlen(s->buf) + 1;
		if (len > s->name_cap[i]) {
			s->names[i] = dt_realloc(s->names[i], len);
			s->name_cap[i] = len;
		}
		memcpy(s->names[i], s->buf, len);
		i++;
	}
	r->records += i;
	return i;
}

static const char *png_stream_name(struct dt_reader *r, int i)
{
	struct png_stream *s = r->priv;
	return s && i >= 0 && i < s->ncap ? s->names[i] : NULL;
}

static void png_stream_close(struct dt_reader *r)
{
	struct png_stream *s = r->priv;
	if (!s)
		return;
	if (s->gz)
		gzclose(s->gz);
	dt_png_decoder_free(s->dec);
	for (int k = 0; k < s->ncap; k++)
		free(s->names[k]);
	free(s->names);
	free(s->name_cap);
	free(s->buf);
	free(s);
	r->priv = NULL;
}

const struct dt_reader_type dt_png_reader = {
	.name = "png",
	.needs_shape = 1,
	.open = png_stream_open,
	.next = png_stream_next,
	.close = png_stream_close,
	.sample_name = png_stream_name,
};
