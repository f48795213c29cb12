/*
 * The PNG decoder of png.h; the png_folder source and the PNG-paths reader
 * of predict, which use it, are in png_folder.c.
 *
 * The whole file is read into a buffer the decoder keeps, libpng decodes it
 * from memory with its expansions (palette to RGB, low bit depths to 8, tRNS
 * to alpha when alpha is wanted, interlace), and one pass converts to float
 * channels, resizing when the size differs.
 *
 * libpng reports errors by longjmp: every resource that must survive one is
 * either in the decoder (buffers) or freed by png_destroy_read_struct on the
 * setjmp path, so a corrupt file leaks nothing.
 *
 * Memory follows the bytes present, not the sizes a header declares: the
 * pixel buffer grows as rows are decoded (an interlaced image, whose passes
 * need every row at once, is first checked against its compressed bytes:
 * deflate cannot expand a byte to more than 1032), and libpng skips the
 * ancillary chunks dtrain does not use (text, ICC profiles, sPLT, ...)
 * without allocating what their lengths declare.
 */
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

#include "core/error.h"
#include "png.h"

#define PNG_MAX_DECODED (1LL << 30)     /* bytes of decoded pixels */
#define PNG_MAX_PIXELS (1LL << 26)      /* pixels of one image (its floats must fit too) */
#define PNG_MAX_FILE (1LL << 30)
#define PNG_DEFLATE_RATIO 1032          /* the most bytes deflate makes of one */
#define PNG_FIRST_ROWS (1 << 16)        /* bytes of decoded rows before the data proves more */

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

/* Room in d->pix for `need` bytes, keeping the bytes decoded so far; grows by doubling up to `total`. */
static void grow_pix(struct dt_png_decoder *d, size_t need, size_t total)
{
	size_t cap = d->pix_cap;
	if (need <= cap)
		return;
	cap = 2 * cap > need ? 2 * cap : need;
	if (cap < PNG_FIRST_ROWS)
		cap = PNG_FIRST_ROWS;
	if (cap > total)
		cap = total;
	d->pix = dt_realloc(d->pix, cap);
	d->pix_cap = cap;
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

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* The bytes of the IDAT chunks in d->file (of a chunk cut short, those present). */
static size_t idat_bytes(const struct dt_png_decoder *d)
{
	const uint8_t *p = d->file + 8;
	size_t n = 0;
	while (d->end - p >= 8) {
		size_t len = be32(p), left = (size_t)(d->end - p) - 8;
		if (!memcmp(p + 4, "IDAT", 4))
			n += len < left ? len : left;
		if (len >= left)
			break;
		p += 8 + len + (left - len >= 4 ? 4 : left - len);
	}
	return n;
}

/*
 * Decodes d->file. *h0p, *w0p and *nch0 (when h0p is set) get the image's
 * size and the channels of its colour type. With out set, converts to c
 * channels and writes (h, w, c) floats; without, only decodes the pixels
 * (proving the data is there).
 */
static int decode(struct dt_png_decoder *d, int *h0p, int *w0p, int *nch0, int h, int w, int c, float *out)
{
	png_structp png;
	png_infop info;
	png_uint_32 w0, h0;
	int bits, type, interlace, nch, obits;
	size_t rowbytes, stored;

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
	png_set_user_limits(png, DT_PNG_MAX_SIDE, DT_PNG_MAX_SIDE);
	/* Text, profiles and the other ancillary chunks but tRNS: skipped unread, whatever their lengths say. */
	png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_NEVER, NULL, -1);
	png_set_chunk_malloc_max(png, (size_t)(d->end - d->file));
	png_read_info(png, info);
	png_get_IHDR(png, info, &w0, &h0, &bits, &type, &interlace, NULL, NULL);
	if (h0p) {
		int has_trns = png_get_valid(png, info, PNG_INFO_tRNS) != 0;
		*h0p = (int)h0;
		*w0p = (int)w0;
		*nch0 = type == PNG_COLOR_TYPE_GRAY ? 1 : type == PNG_COLOR_TYPE_GRAY_ALPHA ? 2
			: type == PNG_COLOR_TYPE_RGB_ALPHA || (type == PNG_COLOR_TYPE_PALETTE && has_trns) ? 4 : 3;
	}
	stored = png_get_rowbytes(png, info);

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
	/* The rows as stored (before expansion) cannot be more than deflate makes of the IDAT bytes. */
	if ((unsigned long long)stored * h0 / PNG_DEFLATE_RATIO > idat_bytes(d))
		png_error(png, "the image data is too short for its size (truncated)");

	if (interlace == PNG_INTERLACE_NONE) {
		/* Row by row, the buffer growing as they come. */
		for (png_uint_32 y = 0; y < h0; y++) {
			grow_pix(d, (size_t)(y + 1) * rowbytes, rowbytes * h0);
			png_read_row(png, d->pix + y * rowbytes, NULL);
		}
	} else {
		/* Every pass writes into every row: the whole buffer at once. */
		grow_pix(d, rowbytes * h0, rowbytes * h0);
	}
	d->rows = grow(d->rows, &d->rows_cap, h0 * sizeof(png_bytep));
	for (png_uint_32 y = 0; y < h0; y++)
		d->rows[y] = d->pix + y * rowbytes;
	if (interlace != PNG_INTERLACE_NONE)
		png_read_image(png, d->rows);
	png_read_end(png, NULL);
	png_destroy_read_struct(&png, &info, NULL);
	if (out)
		finish(d, (int)h0, (int)w0, nch, obits, c, out, h, w);
	return 0;
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
static int decode_fast(struct dt_png_decoder *d, int *h0p, int *w0p, int *nch0, int h, int w, int c, float *out)
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
	    w0 > DT_PNG_MAX_SIDE || h0 > DT_PNG_MAX_SIDE)
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
	grow_pix(d, total < PNG_FIRST_ROWS ? total : PNG_FIRST_ROWS, total);
	d->z.next_out = d->pix;
	d->z.avail_out = (uInt)(d->pix_cap < total ? d->pix_cap : total);
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
				for (;;) {
					rc = inflate(&d->z, Z_NO_FLUSH);
					if (rc != Z_OK || d->z.avail_out || d->z.total_out == total)
						break;
					/* The rows so far fill the buffer: it grows as the data proves more. */
					grow_pix(d, d->z.total_out + 1, total);
					d->z.next_out = d->pix + d->z.total_out;
					d->z.avail_out = (uInt)((d->pix_cap < total ? d->pix_cap : total) - d->z.total_out);
				}
				if (rc == Z_STREAM_END)
					done = 1;
				else if (rc != Z_OK && !(rc == Z_BUF_ERROR && d->z.avail_in == 0))
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
	if (h0p) {
		*h0p = (int)h0;
		*w0p = (int)w0;
		*nch0 = nch;
	}
	if (out)
		finish(d, (int)h0, (int)w0, nch, 8, c, out, h, w);
	return 1;
}

int dt_png_decoder_decode(struct dt_png_decoder *d, const char *path, int h, int w, int c, float *out)
{
	DT_ASSERT(h > 0 && w > 0 && (c == 1 || c == 3 || c == 4));
	d->err[0] = 0;
	if (read_file(d, path) < 0)
		return -1;
	if (decode_fast(d, NULL, NULL, NULL, h, w, c, out))
		return 0;
	d->at = d->file;
	return decode(d, NULL, NULL, NULL, h, w, c, out);
}

int dt_png_decoder_info(struct dt_png_decoder *d, const char *path, int *h, int *w, int *c)
{
	d->err[0] = 0;
	if (read_file(d, path) < 0)
		return -1;
	/* The pixels too: a size is believed once the data to fill it is there. */
	if (decode_fast(d, h, w, c, 0, 0, 0, NULL))
		return 0;
	d->at = d->file;
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
