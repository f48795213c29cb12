/*
 * PNG decoding, `format: png_folder` and `format: cifar10/cifar100`: files
 * written by the test (PNGs through libpng, in every colour type and bit
 * depth), decoded values checked against the conversions of data/png.h,
 * folder order and class names as Keras gives them, and every corrupt input
 * ending as an error that names the file (or as bad[i] = 1).
 */
#include "helpers.h"

#include <ftw.h>
#include <math.h>
#include <png.h>
#include <sys/stat.h>
#include <zlib.h>

#include "core/config/config.h"
#include "core/pipeline/source.h"
#include "data/png.h"
#include "data/reader.h"
#include "data/sources.h"

/* ---- files and folders ---- */

static char *make_dir(void)
{
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char *p = malloc(4096);
	snprintf(p, 4096, "%s/dtrain-png-XXXXXX", tmp);
	assert_non_null(mkdtemp(p));
	return p;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	return remove(path);
}

static void rm_tree(char *dir)
{
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(dir);
}

static void put_file(const char *path, const void *data, size_t n)
{
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, n, f), n);
	fclose(f);
}

static uint8_t *get_file(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	uint8_t *b;
	long len;
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	fseek(f, 0, SEEK_SET);
	b = malloc(len + 1);
	assert_int_equal(fread(b, 1, len, f), (size_t)len);
	fclose(f);
	*n = (size_t)len;
	return b;
}

static void mkdirf(const char *fmt, const char *a, const char *b)
{
	char p[4096];
	snprintf(p, sizeof(p), fmt, a, b);
	assert_int_equal(mkdir(p, 0755), 0);
}

/* ---- PNG files through libpng ---- */

struct img {
	int w, h, type, depth, interlace;
	int nch;              /* samples per pixel in the file: 1 gray or index, 2, 3, 4 */
	uint16_t *v;          /* (h, w, nch) samples at the file's bit depth */
	uint8_t pal[256][3];  /* palette */
	int npal;
	uint8_t trns[256];    /* palette alpha */
	int ntrns;            /* palette entries with tRNS (0: no tRNS chunk) */
	int key;              /* gray/RGB tRNS: 1 when a transparent colour is set */
	uint16_t keyv[3];     /* the transparent colour */
};

static int type_channels(int type)
{
	switch (type) {
	case PNG_COLOR_TYPE_GRAY: return 1;
	case PNG_COLOR_TYPE_GRAY_ALPHA: return 2;
	case PNG_COLOR_TYPE_RGB: return 3;
	case PNG_COLOR_TYPE_RGB_ALPHA: return 4;
	}
	return 1; /* palette */
}

/* An image with samples from a fixed pseudo-random sequence. */
static struct img make_img(int w, int h, int type, int depth, int interlace, int with_trns)
{
	struct img m = { .w = w, .h = h, .type = type, .depth = depth, .interlace = interlace };
	uint32_t r = 12345u + 977u * (uint32_t)(type * 17 + depth);
	int max;

	m.nch = type_channels(type);
	m.v = calloc((size_t)w * h * m.nch, sizeof(uint16_t));
	if (type == PNG_COLOR_TYPE_PALETTE) {
		m.npal = depth == 8 ? 200 : 1 << depth;
		for (int i = 0; i < m.npal; i++)
			for (int k = 0; k < 3; k++)
				m.pal[i][k] = (uint8_t)(i * 37 + k * 101 + 13);
		if (with_trns) {
			m.ntrns = m.npal > 3 ? m.npal - 2 : m.npal; /* entries past ntrns are opaque */
			for (int i = 0; i < m.ntrns; i++)
				m.trns[i] = (uint8_t)(i * 53 + 7);
		}
	}
	max = type == PNG_COLOR_TYPE_PALETTE ? m.npal - 1 : (1 << depth) - 1;
	for (int i = 0; i < w * h * m.nch; i++) {
		r = r * 1103515245u + 12345u;
		m.v[i] = (uint16_t)((r >> 8) % (uint32_t)(max + 1));
	}
	m.v[0] = 0;
	m.v[m.nch] = (uint16_t)max; /* both extremes appear */
	if (with_trns && type != PNG_COLOR_TYPE_PALETTE) {
		m.key = 1;
		for (int k = 0; k < m.nch; k++)
			m.keyv[k] = m.v[2 * m.nch + k]; /* pixel 2 is transparent, and any equal to it */
	}
	return m;
}

/* When not 0, the PNG_FILTER_* flags write_png makes libpng use. */
static int force_filters;

static void write_png(const char *path, const struct img *m)
{
	FILE *f = fopen(path, "wb");
	png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
	png_infop info = png_create_info_struct(png);
	int bits = m->depth * m->nch, rowbytes = (m->w * bits + 7) / 8;
	uint8_t *rows = calloc((size_t)m->h, rowbytes);

	assert_non_null(f);
	assert_false(setjmp(png_jmpbuf(png)));
	png_init_io(png, f);
	if (force_filters)
		png_set_filter(png, 0, force_filters);
	png_set_IHDR(png, info, m->w, m->h, m->depth, m->type, m->interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
		     PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
	if (m->type == PNG_COLOR_TYPE_PALETTE) {
		png_color pal[256];
		for (int i = 0; i < m->npal; i++)
			pal[i].red = m->pal[i][0], pal[i].green = m->pal[i][1], pal[i].blue = m->pal[i][2];
		png_set_PLTE(png, info, pal, m->npal);
		if (m->ntrns)
			png_set_tRNS(png, info, m->trns, m->ntrns, NULL);
	} else if (m->key) {
		png_color_16 c = { 0 };
		if (m->nch == 1)
			c.gray = m->keyv[0];
		else
			c.red = m->keyv[0], c.green = m->keyv[1], c.blue = m->keyv[2];
		png_set_tRNS(png, info, NULL, 0, &c);
	}
	for (int y = 0; y < m->h; y++) {
		uint8_t *row = rows + (size_t)y * rowbytes;
		for (int i = 0; i < m->w * m->nch; i++) {
			uint16_t v = m->v[(size_t)y * m->w * m->nch + i];
			if (m->depth == 16) {
				row[2 * i] = v >> 8, row[2 * i + 1] = v & 255;
			} else if (m->depth == 8) {
				row[i] = (uint8_t)v;
			} else {
				int per = 8 / m->depth, shift = 8 - m->depth * (i % per + 1);
				row[i / per] |= (uint8_t)(v << shift);
			}
		}
	}
	png_write_info(png, info);
	{
		png_bytep rp[64];
		assert_true(m->h <= 64);
		for (int y = 0; y < m->h; y++)
			rp[y] = rows + (size_t)y * rowbytes;
		png_write_image(png, rp);
	}
	png_write_end(png, info);
	png_destroy_write_struct(&png, &info);
	fclose(f);
	free(rows);
}

/* A sample of the file scaled to 0..255 as png.h defines. */
static float scaled(const struct img *m, uint16_t v)
{
	if (m->depth == 16)
		return (float)v / 257.0f;
	return (float)(v * 255 / ((1 << m->depth) - 1));
}

/* The expected (r, g, b, a) of pixel p, 0..255. */
static void expect_rgba(const struct img *m, int p, float *rgba)
{
	const uint16_t *s = m->v + (size_t)p * m->nch;
	rgba[3] = 255;
	if (m->type == PNG_COLOR_TYPE_PALETTE) {
		for (int k = 0; k < 3; k++)
			rgba[k] = m->pal[s[0]][k];
		if (s[0] < m->ntrns)
			rgba[3] = m->trns[s[0]];
		return;
	}
	if (m->nch <= 2) {
		rgba[0] = rgba[1] = rgba[2] = scaled(m, s[0]);
		if (m->nch == 2)
			rgba[3] = scaled(m, s[1]);
		if (m->key && s[0] == m->keyv[0])
			rgba[3] = 0;
		return;
	}
	for (int k = 0; k < 3; k++)
		rgba[k] = scaled(m, s[k]);
	if (m->nch == 4)
		rgba[3] = scaled(m, s[3]);
	if (m->key && s[0] == m->keyv[0] && s[1] == m->keyv[1] && s[2] == m->keyv[2])
		rgba[3] = 0;
}

static int is_color(const struct img *m)
{
	return m->type == PNG_COLOR_TYPE_PALETTE || m->nch >= 3;
}

static void check_close(float got, float want, const char *what, int p, int k)
{
	if (fabsf(got - want) > 1e-4f * (1 + fabsf(want)))
		fail_msg("%s: pixel %d channel %d is %.6f, expected %.6f", what, p, k, got, want);
}

/* Writes m, decodes it to 1, 3 and 4 channels at its own size and checks every value. */
static void check_decode(const struct img *m, const char *what)
{
	char *path = dt_test_write_file(".png", "", 0);
	struct dt_png_decoder *d = dt_png_decoder_new();
	int n = m->w * m->h, h, w, c;
	float *out = malloc((size_t)n * 4 * sizeof(float));

	write_png(path, m);
	assert_int_equal(dt_png_decoder_info(d, path, &h, &w, &c), 0);
	assert_int_equal(h, m->h);
	assert_int_equal(w, m->w);
	assert_int_equal(c, m->type == PNG_COLOR_TYPE_PALETTE ? (m->ntrns ? 4 : 3) : m->nch);
	for (int ch = 1; ch <= 4; ch++) {
		if (ch == 2)
			continue;
		if (dt_png_decoder_decode(d, path, m->h, m->w, ch, out) < 0)
			fail_msg("%s: decoding to %d channels failed: %s", what, ch, dt_png_decoder_error(d));
		for (int p = 0; p < n; p++) {
			float e[4];
			expect_rgba(m, p, e);
			if (ch == 1) {
				float y = is_color(m) ? 0.299f * e[0] + 0.587f * e[1] + 0.114f * e[2] : e[0];
				check_close(out[p], y, what, p, 0);
				continue;
			}
			for (int k = 0; k < 3; k++)
				check_close(out[p * ch + k], e[k], what, p, k);
			if (ch == 4)
				check_close(out[p * 4 + 3], e[3], what, p, 3);
		}
	}
	free(out);
	dt_png_decoder_free(d);
	unlink(path);
	free(path);
}

static void test_png_gray(void **state)
{
	static const int depths[] = { 1, 2, 4, 8, 16 };
	for (int i = 0; i < 5; i++) {
		char what[64];
		struct img m = make_img(7, 5, PNG_COLOR_TYPE_GRAY, depths[i], 0, 0);
		snprintf(what, sizeof(what), "gray %d-bit", depths[i]);
		check_decode(&m, what);
		free(m.v);
		m = make_img(7, 5, PNG_COLOR_TYPE_GRAY, depths[i], 0, 1);
		snprintf(what, sizeof(what), "gray %d-bit with tRNS", depths[i]);
		check_decode(&m, what);
		free(m.v);
	}
}

static void test_png_gray_alpha_rgb_rgba(void **state)
{
	static const int types[] = { PNG_COLOR_TYPE_GRAY_ALPHA, PNG_COLOR_TYPE_RGB, PNG_COLOR_TYPE_RGB_ALPHA };
	for (int t = 0; t < 3; t++)
		for (int depth = 8; depth <= 16; depth += 8) {
			char what[64];
			struct img m = make_img(6, 4, types[t], depth, 0, 0);
			snprintf(what, sizeof(what), "type %d, %d-bit", types[t], depth);
			check_decode(&m, what);
			free(m.v);
		}
	/* RGB with a transparent colour. */
	for (int depth = 8; depth <= 16; depth += 8) {
		struct img m = make_img(6, 4, PNG_COLOR_TYPE_RGB, depth, 0, 1);
		check_decode(&m, "rgb with tRNS");
		free(m.v);
	}
}

/* Each row filter, alone, on the 8-bit kinds (dtrain's own fast path) and on 16-bit ones (libpng's). */
static void test_png_filters(void **state)
{
	static const int filters[] = { PNG_FILTER_NONE, PNG_FILTER_SUB, PNG_FILTER_UP, PNG_FILTER_AVG, PNG_FILTER_PAETH };
	static const int types[] = { PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA, PNG_COLOR_TYPE_RGB,
				     PNG_COLOR_TYPE_RGB_ALPHA };
	for (int f = 0; f < 5; f++)
		for (int t = 0; t < 4; t++)
			for (int depth = 8; depth <= 16; depth += 8) {
				char what[64];
				struct img m = make_img(11, 6, types[t], depth, 0, 0);
				snprintf(what, sizeof(what), "filter %d, type %d, %d-bit", f, types[t], depth);
				force_filters = filters[f];
				check_decode(&m, what);
				force_filters = 0;
				free(m.v);
			}
}

static void test_png_palette(void **state)
{
	static const int depths[] = { 1, 2, 4, 8 };
	for (int i = 0; i < 4; i++)
		for (int trns = 0; trns <= 1; trns++) {
			char what[64];
			struct img m = make_img(9, 3, PNG_COLOR_TYPE_PALETTE, depths[i], 0, trns);
			snprintf(what, sizeof(what), "palette %d-bit%s", depths[i], trns ? " with tRNS" : "");
			check_decode(&m, what);
			free(m.v);
		}
}

static void test_png_interlaced(void **state)
{
	struct img m = make_img(13, 11, PNG_COLOR_TYPE_RGB, 8, 1, 0);
	check_decode(&m, "interlaced rgb");
	free(m.v);
	m = make_img(10, 9, PNG_COLOR_TYPE_GRAY, 2, 1, 0);
	check_decode(&m, "interlaced gray 2-bit");
	free(m.v);
	m = make_img(10, 9, PNG_COLOR_TYPE_PALETTE, 4, 1, 1);
	check_decode(&m, "interlaced palette with tRNS");
	free(m.v);
}

/* 2x2 -> 4x4 against TensorFlow's half-pixel rule written out by hand, and 4x4 -> 2x2 as 2x2 means. */
static void test_png_resize(void **state)
{
	struct img m = make_img(2, 2, PNG_COLOR_TYPE_GRAY, 8, 0, 0);
	/* out i samples at (i + 0.5) / 2 - 0.5: -0.25, 0.25, 0.75, 1.25 -> (lower, upper, weight) */
	static const int lo[4] = { 0, 0, 0, 1 }, hi[4] = { 0, 1, 1, 1 };
	static const float wt[4] = { 0.75f, 0.25f, 0.75f, 0.25f };
	char *path = dt_test_write_file(".png", "", 0);
	float out[16], p[2][2];

	m.v[0] = 0, m.v[1] = 100, m.v[2] = 200, m.v[3] = 40;
	write_png(path, &m);
	assert_int_equal(dt_png_decode(path, 4, 4, 1, out), 0);
	for (int y = 0; y < 2; y++)
		for (int x = 0; x < 2; x++)
			p[y][x] = m.v[y * 2 + x];
	for (int y = 0; y < 4; y++)
		for (int x = 0; x < 4; x++) {
			float top = p[lo[y]][lo[x]] + (p[lo[y]][hi[x]] - p[lo[y]][lo[x]]) * wt[x];
			float bottom = p[hi[y]][lo[x]] + (p[hi[y]][hi[x]] - p[hi[y]][lo[x]]) * wt[x];
			check_close(out[y * 4 + x], top + (bottom - top) * wt[y], "2x2 to 4x4", y * 4 + x, 0);
		}
	/* Corners stay, the centre is 58.75 by hand. */
	check_close(out[0], 0, "2x2 to 4x4", 0, 0);
	check_close(out[15], 40, "2x2 to 4x4", 15, 0);
	check_close(out[5], 58.75f, "2x2 to 4x4", 5, 0);
	unlink(path);
	free(path);
	free(m.v);

	m = make_img(4, 4, PNG_COLOR_TYPE_RGB, 8, 0, 0);
	path = dt_test_write_file(".png", "", 0);
	write_png(path, &m);
	assert_int_equal(dt_png_decode(path, 2, 2, 3, out), 0);
	for (int y = 0; y < 2; y++)
		for (int x = 0; x < 2; x++)
			for (int k = 0; k < 3; k++) {
				float s = 0;
				for (int dy = 0; dy < 2; dy++)
					for (int dx = 0; dx < 2; dx++)
						s += m.v[((2 * y + dy) * 4 + 2 * x + dx) * 3 + k];
				check_close(out[(y * 2 + x) * 3 + k], s / 4, "4x4 to 2x2", y * 2 + x, k);
			}
	unlink(path);
	free(path);
	free(m.v);
}

/* ---- corrupt PNGs ---- */

/* A valid 8-bit gray PNG of w x h with every pixel = v, as bytes. */
static uint8_t *png_bytes(int w, int h, int v, size_t *n)
{
	struct img m = make_img(w, h, PNG_COLOR_TYPE_GRAY, 8, 0, 0);
	char *path = dt_test_write_file(".png", "", 0);
	uint8_t *b;
	for (int i = 0; i < w * h; i++)
		m.v[i] = (uint16_t)v;
	write_png(path, &m);
	b = get_file(path, n);
	unlink(path);
	free(path);
	free(m.v);
	return b;
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = v >> 24, p[1] = v >> 16, p[2] = v >> 8, p[3] = v;
}

/* The PNG of png_bytes with its IDAT data cut to `keep` bytes, length and CRC made consistent. */
static uint8_t *png_idat_cut(int w, int h, size_t keep, size_t *n)
{
	size_t len;
	uint8_t *b = png_bytes(w, h, 77, &len), *o = malloc(len + 64);
	size_t at = 8, out = 8;
	memcpy(o, b, 8);
	while (at + 12 <= len) {
		uint32_t clen = be32(b + at);
		if (!memcmp(b + at + 4, "IDAT", 4)) {
			uint32_t k = clen < keep ? clen : (uint32_t)keep;
			put_be32(o + out, k);
			memcpy(o + out + 4, b + at + 4, 4 + k);
			put_be32(o + out + 8 + k, (uint32_t)crc32(0, o + out + 4, 4 + k));
			out += 12 + k;
		} else {
			memcpy(o + out, b + at, 12 + clen);
			out += 12 + clen;
		}
		at += 12 + clen;
	}
	free(b);
	*n = out;
	return o;
}

static void test_png_corrupt_files(void **state)
{
	struct dt_png_decoder *d = dt_png_decoder_new();
	float out[64];
	size_t n;
	uint8_t *good = png_bytes(4, 4, 9, &n), *cut;
	char *path;
	struct bad_case {
		const char *what, *needle;
		const void *data;
		size_t n;
	} cases[6];
	size_t ncut;

	cut = png_idat_cut(4, 4, 5, &ncut);
	cases[0] = (struct bad_case){ "truncated", "ends early", good, n / 2 };
	cases[1] = (struct bad_case){ "garbage", "not a PNG file", "this is not an image, just text\n", 31 };
	cases[2] = (struct bad_case){ "empty", "empty", "", 0 };
	cases[3] = (struct bad_case){ "signature only", "ends early", good, 8 };
	cases[4] = (struct bad_case){ "IDAT cut", "", cut, ncut };
	cases[5] = (struct bad_case){ "no IEND", "ends early", good, n - 12 };
	for (int i = 0; i < 6; i++) {
		path = dt_test_write_file(".png", cases[i].data, cases[i].n);
		if (dt_png_decoder_decode(d, path, 4, 4, 1, out) == 0)
			fail_msg("%s: decoded without error", cases[i].what);
		if (!strstr(dt_png_decoder_error(d), cases[i].needle) || !*dt_png_decoder_error(d))
			fail_msg("%s: error '%s' lacks '%s'", cases[i].what, dt_png_decoder_error(d), cases[i].needle);
		/* The decoder still works after a longjmp. */
		unlink(path);
		free(path);
		path = dt_test_write_file(".png", good, n);
		assert_int_equal(dt_png_decoder_decode(d, path, 4, 4, 1, out), 0);
		assert_true(out[5] == 9.0f);
		unlink(path);
		free(path);
	}

	/* A bad CRC in IDAT. */
	{
		uint8_t *b = malloc(n);
		memcpy(b, good, n);
		for (size_t at = 8; at + 12 <= n; at += 12 + be32(b + at))
			if (!memcmp(b + at + 4, "IDAT", 4))
				b[at + 8] ^= 0x55;
		path = dt_test_write_file(".png", b, n);
		assert_int_equal(dt_png_decoder_decode(d, path, 4, 4, 1, out), -1);
		assert_true(strlen(dt_png_decoder_error(d)) > 0);
		unlink(path);
		free(path);
		free(b);
	}

	/* A header that promises 60000 x 60000 pixels: refused before any allocation of that size. */
	{
		uint8_t *b = malloc(n);
		memcpy(b, good, n);
		put_be32(b + 16, 60000);
		put_be32(b + 20, 60000);
		put_be32(b + 29, (uint32_t)crc32(0, b + 12, 17));
		path = dt_test_write_file(".png", b, n);
		assert_int_equal(dt_png_decoder_decode(d, path, 4, 4, 1, out), -1);
		if (!strstr(dt_png_decoder_error(d), "too large"))
			fail_msg("huge header: error '%s'", dt_png_decoder_error(d));
		unlink(path);
		free(path);
		free(b);
	}

	/* The one-shot decoder prints the file. */
	dt_error_set_quiet(1);
	assert_int_equal(dt_png_decode("/nonexistent/dtrain/x.png", 4, 4, 1, out), -1);
	assert_error_contains("cannot decode '/nonexistent/dtrain/x.png'");
	assert_error_contains("No such file");
	path = make_dir();
	assert_int_equal(dt_png_decode(path, 4, 4, 1, out), -1);
	assert_error_contains("directory");
	rm_tree(path);
	dt_error_set_quiet(0);
	free(good);
	free(cut);
	dt_png_decoder_free(d);
}

/* ---- png_folder ---- */

/* Writes DIR/SUB/NAME as a 2x2 gray PNG whose pixels are all v. */
static void put_png(const char *dir, const char *sub, int v)
{
	char p[4096];
	size_t n;
	uint8_t *b = png_bytes(2, 2, v, &n);
	snprintf(p, sizeof(p), "%s/%s", dir, sub);
	put_file(p, b, n);
	free(b);
}

/* A folder: classes C, a_cls (with a nested folder), b_cls; and things to ignore. */
static char *make_folder(void)
{
	char *dir = make_dir();
	mkdirf("%s/%s", dir, "b_cls");
	mkdirf("%s/%s", dir, "a_cls");
	mkdirf("%s/%s", dir, "C");
	mkdirf("%s/%s", dir, "a_cls/sub");
	mkdirf("%s/%s", dir, "a_cls/sub-x");
	mkdirf("%s/%s", dir, ".hidden");
	put_png(dir, "b_cls/2.png", 1);
	put_png(dir, "b_cls/10.png", 2);
	put_png(dir, "a_cls/z.PNG", 3);
	put_png(dir, "a_cls/sub/y.png", 4);
	put_png(dir, "a_cls/sub-x/x.png", 5);
	put_png(dir, "a_cls/b.png", 6);
	put_png(dir, "C/only.png", 7);
	put_png(dir, ".hidden/h.png", 8);
	put_png(dir, "top.png", 9);
	put_png(dir, "a_cls/.dot.png", 10);
	{
		char p[4200];
		snprintf(p, sizeof(p), "%s/a_cls/notes.txt", dir);
		put_file(p, "x", 1);
	}
	return dir;
}

static void read_all(struct dt_source *s, float *x, float *y)
{
	int64_t idx[64];
	for (int i = 0; i < s->count; i++)
		idx[i] = i;
	assert_int_equal(s->type->read(s, idx, (int)s->count, x, y, NULL), 0);
}

static void test_folder_order(void **state)
{
	char *dir = make_folder();
	struct dt_source s;
	float x[64 * 4], y[64];
	/* Byte order: C < a_cls < b_cls; in a_cls: its files, then sub/, then sub-x/ ("a_cls/sub" < "a_cls/sub-x"). */
	static const int want_v[] = { 7, 6, 3, 4, 5, 2, 1 }, want_y[] = { 0, 1, 1, 1, 1, 2, 2 };

	assert_int_equal(dt_test_open_source(&s, "{format: png_folder, directory: '%s', color_mode: grayscale, shuffle: false}", dir), 0);
	assert_int_equal(s.count, 7);
	assert_int_equal(s.num_classes, 3);
	assert_int_equal(s.sample.ndim, 3);
	assert_int_equal(s.sample.dim[0], 2);
	assert_int_equal(s.sample.dim[1], 2);
	assert_int_equal(s.sample.dim[2], 1);
	assert_string_equal(s.class_names[0], "C");
	assert_string_equal(s.class_names[1], "a_cls");
	assert_string_equal(s.class_names[2], "b_cls");
	read_all(&s, x, y);
	for (int i = 0; i < 7; i++) {
		assert_true(x[i * 4] == want_v[i] && x[i * 4 + 3] == want_v[i]);
		assert_true(y[i] == want_y[i]);
	}
	dt_source_close(&s);

	/* class_names: a subset in the order given; rgb and a resize. */
	assert_int_equal(dt_test_open_source(&s, "{format: png_folder, directory: '%s', class_names: [b_cls, C], image_size: [3, 5], shuffle: false}",
				   dir), 0);
	assert_int_equal(s.count, 3);
	assert_int_equal(s.num_classes, 2);
	assert_string_equal(s.class_names[0], "b_cls");
	assert_string_equal(s.class_names[1], "C");
	assert_int_equal(s.sample.dim[0], 3);
	assert_int_equal(s.sample.dim[1], 5);
	assert_int_equal(s.sample.dim[2], 3);
	read_all(&s, x, y);
	assert_true(x[0] == 2 && x[14 * 3 + 2] == 2 && y[0] == 0); /* b_cls/10.png */
	assert_true(x[45] == 1 && y[1] == 0);                     /* b_cls/2.png */
	assert_true(x[90 + 7] == 7 && y[2] == 1);                 /* C/only.png */
	dt_source_close(&s);
	rm_tree(dir);
}

/* shuffle (the default): the same records and labels in a seeded order, the same for the same seed. */
static void test_folder_shuffle(void **state)
{
	char *dir = make_dir();
	struct dt_source s;
	float x[3][40 * 4], y[3][40];
	int seen[40] = { 0 }, moved = 0, differs = 0;

	for (int k = 0; k < 4; k++) {
		char cls[8];
		snprintf(cls, sizeof(cls), "c%d", k);
		mkdirf("%s/%s", dir, cls);
		for (int i = 0; i < 10; i++) {
			char sub[32];
			snprintf(sub, sizeof(sub), "c%d/%d.png", k, i);
			put_png(dir, sub, k * 10 + i);
		}
	}
	for (int run = 0; run < 3; run++) {
		assert_int_equal(dt_test_open_source(&s, "{format: png_folder, directory: '%s', color_mode: grayscale%s}", dir,
					   run == 2 ? ", seed: 7" : ""), 0);
		assert_int_equal(s.count, 40);
		read_all(&s, x[run], y[run]);
		dt_source_close(&s);
	}
	for (int i = 0; i < 40; i++) {
		int v = (int)x[0][i * 4];
		assert_true(y[0][i] == v / 10); /* each image keeps its label */
		seen[v]++;
		moved += v != i; /* unshuffled, record i is the image of value i */
		assert_true(x[1][i * 4] == x[0][i * 4]);
		differs += x[2][i * 4] != x[0][i * 4];
	}
	for (int v = 0; v < 40; v++)
		assert_int_equal(seen[v], 1);
	assert_true(moved > 0);
	assert_true(differs > 0);
	/* The last 10 records (a validation_split of 0.25) hold more than one class. */
	{
		int classes = 0, has[4] = { 0 };
		for (int i = 30; i < 40; i++)
			has[(int)y[0][i]] = 1;
		for (int k = 0; k < 4; k++)
			classes += has[k];
		assert_true(classes > 1);
	}
	rm_tree(dir);
}

/* Open errors: each message holds every needle. */
static void expect_folder_error(const char *yaml_fmt, const char *dir, const char *const *needles)
{
	struct dt_source s;
	dt_error_set_quiet(1);
	assert_int_equal(dt_test_open_source(&s, yaml_fmt, dir), -1);
	dt_error_set_quiet(0);
	for (int i = 0; needles[i]; i++) {
		if (needles[i][0] == '@') /* the position of a config error */
			assert_non_null(strstr(dt_error_last_where(), needles[i] + 1));
		else
			assert_error_contains(needles[i]);
	}
}

static void test_folder_open_errors(void **state)
{
	char *dir = make_folder();

	expect_folder_error("{format: png_folder, directory: '%s/none'}", dir,
			    (const char *[]){ "cannot open directory", "/none'", "No such file", NULL });
	expect_folder_error("{format: png_folder, directory: '%s', class_names: [b_cls, a_clz]}", dir,
			    (const char *[]){ "@test.yaml:1:", "'a_clz' is not a class folder", "did you mean 'a_cls'", NULL });
	expect_folder_error("{format: png_folder, directory: '%s', class_names: [b_cls, b_cls]}", dir,
			    (const char *[]){ "listed twice", NULL });
	expect_folder_error("{format: png_folder, directory: '%s', class_names: [b_cls]}", dir,
			    (const char *[]){ "only one class", "b_cls", NULL });
	expect_folder_error("{format: png_folder, directory: '%s', image_size: [28]}", dir,
			    (const char *[]){ "[height, width]", NULL });
	expect_folder_error("{format: png_folder, directory: '%s', color_mode: rgbx}", dir,
			    (const char *[]){ "rgba", NULL });
	expect_folder_error("{format: png_folder, directory: '%s', colour_mode: rgb}", dir,
			    (const char *[]){ "unknown key", "color_mode", NULL });
	expect_folder_error("{format: png_folder}", dir, (const char *[]){ "directory", NULL });
	/* An empty class folder. */
	mkdirf("%s/%s", dir, "d_empty");
	expect_folder_error("{format: png_folder, directory: '%s'}", dir,
			    (const char *[]){ "class folder '", "/d_empty'", "holds no .png files", NULL });
	rm_tree(dir);

	/* No class folders at all, only files. */
	dir = make_dir();
	put_png(dir, "a.png", 1);
	expect_folder_error("{format: png_folder, directory: '%s'}", dir, (const char *[]){ "has no class folders", NULL });
	rm_tree(dir);
}

/*
 * A validation folder numbers its classes by the training classes: a folder
 * may lack classes (one folder is enough), and the images of a folder that
 * is no training class are unreadable records naming their folder.
 */
static void test_folder_class_map(void **state)
{
	static char *const train[] = { "C", "a_cls", "b_cls" };
	const struct dt_class_map map = { .n = 3, .names = train };
	char *dir = make_dir();
	struct dt_source s;
	int64_t idx[3] = { 0, 1, 2 };
	float x[3 * 4], y[3];
	uint8_t bad[3];
	int32_t labels[3];

	mkdirf("%s/%s", dir, "b_cls");
	put_png(dir, "b_cls/0.png", 1);
	put_png(dir, "b_cls/1.png", 2);
	assert_int_equal(dt_test_open_source_classes(
				 &s, &map, "{format: png_folder, directory: '%s', color_mode: grayscale, shuffle: no}", dir), 0);
	assert_int_equal(s.count, 2);
	assert_int_equal(s.num_classes, 3);
	assert_string_equal(s.class_names[0], "C");
	assert_string_equal(s.class_names[2], "b_cls");
	assert_int_equal(s.type->read(&s, idx, 2, x, y, NULL), 0);
	assert_true(y[0] == 2 && y[1] == 2); /* b_cls is training class 2, not this folder's class 0 */
	dt_source_close(&s);

	/* A folder training lacks: its images are unreadable, named with their folder. */
	mkdirf("%s/%s", dir, "zz");
	put_png(dir, "zz/0.png", 3);
	assert_int_equal(dt_test_open_source_classes(
				 &s, &map, "{format: png_folder, directory: '%s', color_mode: grayscale, shuffle: no}", dir), 0);
	assert_int_equal(s.count, 3);
	assert_int_equal(s.num_classes, 3);
	assert_int_equal(s.type->read(&s, idx, 3, x, y, bad), 0);
	assert_true(!bad[0] && !bad[1] && bad[2] && y[0] == 2 && y[1] == 2);
	s.type->labels(&s, labels);
	assert_true(labels[0] == 2 && labels[1] == 2 && labels[2] == -1);
	dt_error_set_quiet(1);
	assert_int_equal(s.type->read(&s, idx + 2, 1, x, y, NULL), -1);
	dt_error_set_quiet(0);
	assert_error_contains("/zz/0.png'");
	assert_error_contains("record 2");
	assert_error_contains("its folder 'zz' is not a class of the training data ('C', 'a_cls', 'b_cls')");
	dt_source_close(&s);

	/* Without the map the same folder numbers its own classes. */
	assert_int_equal(dt_test_open_source(&s, "{format: png_folder, directory: '%s', shuffle: no}", dir), 0);
	assert_int_equal(s.num_classes, 2);
	dt_source_close(&s);
	rm_tree(dir);

	/* No folder is a training class: an error when the folder is opened. */
	dir = make_dir();
	mkdirf("%s/%s", dir, "zz");
	put_png(dir, "zz/0.png", 3);
	dt_error_set_quiet(1);
	assert_int_equal(dt_test_open_source_classes(&s, &map, "{format: png_folder, directory: '%s'}", dir), -1);
	dt_error_set_quiet(0);
	assert_error_contains("none of the class folders of '");
	assert_error_contains("'C', 'a_cls', 'b_cls'");
	rm_tree(dir);
}

/* A corrupt file among good ones: an error naming it and its record, or bad[i] = 1. */
static void test_folder_bad_records(void **state)
{
	char *dir = make_dir(), p[4200];
	struct dt_source s;
	int64_t idx[4] = { 0, 1, 2, 3 };
	float x[4 * 4], y[4];
	uint8_t bad[4];
	size_t n, ncut;
	uint8_t *good = png_bytes(2, 2, 50, &n), *cut = png_idat_cut(2, 2, 4, &ncut);

	mkdirf("%s/%s", dir, "a");
	mkdirf("%s/%s", dir, "b");
	put_png(dir, "a/0.png", 1);
	snprintf(p, sizeof(p), "%s/a/1.png", dir);
	put_file(p, good, n / 2);      /* truncated: record 1 */
	put_png(dir, "b/0.png", 3);
	snprintf(p, sizeof(p), "%s/b/1.png", dir);
	put_file(p, cut, ncut);        /* IDAT cut: record 3 */

	assert_int_equal(dt_test_open_source(&s, "{format: png_folder, directory: '%s', color_mode: grayscale, shuffle: no}", dir), 0);
	assert_int_equal(s.count, 4);
	dt_error_set_quiet(1);
	assert_int_equal(s.type->read(&s, idx, 4, x, y, NULL), -1);
	dt_error_set_quiet(0);
	assert_error_contains("/a/1.png'");
	assert_error_contains("record 1");
	assert_error_contains("ends early");
	dt_error_set_quiet(1);
	assert_int_equal(s.type->read(&s, idx + 3, 1, x, y, NULL), -1);
	dt_error_set_quiet(0);
	assert_error_contains("/b/1.png'");
	assert_error_contains("record 3");

	memset(bad, 7, sizeof(bad));
	assert_int_equal(s.type->read(&s, idx, 4, x, y, bad), 0);
	assert_int_equal(bad[0], 0);
	assert_int_equal(bad[1], 1);
	assert_int_equal(bad[2], 0);
	assert_int_equal(bad[3], 1);
	assert_true(x[0] == 1 && y[0] == 0);
	assert_true(x[8] == 3 && y[2] == 1);
	dt_source_close(&s);
	free(good);
	free(cut);
	rm_tree(dir);
}

/* ---- CIFAR ---- */

/* A CIFAR record: labels then pixels, pixel (ch, y, x) = (id * 7 + ch * 31 + y * 3 + x) & 255. */
static void cifar_record(uint8_t *r, int nlabels, int l0, int l1, int id)
{
	r[0] = (uint8_t)l0;
	if (nlabels == 2)
		r[1] = (uint8_t)l1;
	for (int ch = 0; ch < 3; ch++)
		for (int y = 0; y < 32; y++)
			for (int x = 0; x < 32; x++)
				r[nlabels + ch * 1024 + y * 32 + x] = (uint8_t)(id * 7 + ch * 31 + y * 3 + x);
}

/* Writes dir/name with records id0.. id0+n-1, labels (id % m0, id % m1). */
static void put_cifar(const char *dir, const char *name, int nlabels, int id0, int n, int m0, int m1)
{
	int rec = nlabels + 3072;
	uint8_t *b = malloc((size_t)n * rec);
	char p[4200];
	for (int i = 0; i < n; i++)
		cifar_record(b + (size_t)i * rec, nlabels, (id0 + i) % m0, (id0 + i) % m1, id0 + i);
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	put_file(p, b, (size_t)n * rec);
	free(b);
}

static void check_cifar_records(struct dt_source *s, int id0, int m)
{
	int64_t idx[16];
	float x[16 * 3072], y[16];
	DT_ASSERT(s->count <= 16);
	for (int i = 0; i < s->count; i++)
		idx[i] = i;
	assert_int_equal(s->type->read(s, idx, (int)s->count, x, y, NULL), 0);
	for (int i = 0; i < s->count; i++) {
		int id = id0 + i;
		assert_true(y[i] == id % m);
		for (int yy = 0; yy < 32; yy += 5)
			for (int xx = 0; xx < 32; xx += 3)
				for (int ch = 0; ch < 3; ch++)
					assert_true(x[i * 3072 + (yy * 32 + xx) * 3 + ch] ==
						    (uint8_t)(id * 7 + ch * 31 + yy * 3 + xx));
	}
}

static void test_cifar10(void **state)
{
	char *dir = make_dir(), p[4200];
	struct dt_source s;
	FILE *f;

	for (int b = 1; b <= 5; b++) {
		char name[32];
		snprintf(name, sizeof(name), "data_batch_%d.bin", b);
		put_cifar(dir, name, 1, (b - 1) * 2, 2, 10, 10);
	}
	put_cifar(dir, "test_batch.bin", 1, 100, 3, 10, 10);
	assert_int_equal(dt_test_open_source(&s, "{format: cifar10, directory: '%s'}", dir), 0);
	assert_int_equal(s.count, 10);
	assert_int_equal(s.num_classes, 10);
	assert_int_equal(s.sample.ndim, 3);
	assert_int_equal(s.sample.dim[0], 32);
	assert_int_equal(s.sample.dim[2], 3);
	assert_null(s.class_names);
	check_cifar_records(&s, 0, 10);
	dt_source_close(&s);

	snprintf(p, sizeof(p), "%s/batches.meta.txt", dir);
	f = fopen(p, "w");
	fputs("airplane\nautomobile\nbird\ncat\ndeer\ndog\nfrog\nhorse\nship\ntruck\n\n", f);
	fclose(f);
	assert_int_equal(dt_test_open_source(&s, "{format: cifar10, directory: '%s', split: test}", dir), 0);
	assert_int_equal(s.count, 3);
	assert_non_null(s.class_names);
	assert_string_equal(s.class_names[0], "airplane");
	assert_string_equal(s.class_names[9], "truck");
	check_cifar_records(&s, 100, 10);
	dt_source_close(&s);

	assert_int_equal(dt_test_open_source(&s, "{format: cifar10, files: ['%s/data_batch_3.bin', '%s/data_batch_4.bin']}", dir, dir),
			 0);
	assert_int_equal(s.count, 4);
	check_cifar_records(&s, 4, 10);
	dt_source_close(&s);
	rm_tree(dir);
}

static void test_cifar100(void **state)
{
	char *dir = make_dir(), p[4200];
	struct dt_source s;
	FILE *f;

	put_cifar(dir, "train.bin", 2, 0, 5, 20, 100);
	put_cifar(dir, "test.bin", 2, 40, 2, 20, 100);
	snprintf(p, sizeof(p), "%s/fine_label_names.txt", dir);
	f = fopen(p, "w");
	for (int i = 0; i < 100; i++)
		fprintf(f, "fine%d\n", i);
	fclose(f);

	/* Fine labels are the second byte; the pixels follow both. */
	assert_int_equal(dt_test_open_source(&s, "{format: cifar100, directory: '%s'}", dir), 0);
	assert_int_equal(s.count, 5);
	assert_int_equal(s.num_classes, 100);
	assert_string_equal(s.class_names[42], "fine42");
	{
		int64_t idx[1] = { 3 };
		float x[3072], y[1];
		assert_int_equal(s.type->read(&s, idx, 1, x, y, NULL), 0);
		assert_true(y[0] == 3);
		assert_true(x[(2 * 32 + 1) * 3 + 1] == (uint8_t)(3 * 7 + 31 + 2 * 3 + 1));
	}
	dt_source_close(&s);

	assert_int_equal(dt_test_open_source(&s, "{format: cifar100, directory: '%s', split: test, label_mode: coarse}", dir), 0);
	assert_int_equal(s.count, 2);
	assert_int_equal(s.num_classes, 20);
	assert_null(s.class_names); /* no coarse_label_names.txt */
	check_cifar_records(&s, 40, 20);
	dt_source_close(&s);
	rm_tree(dir);
}

static void expect_cifar_error(const char *fmt, const char *dir, const char *const *needles)
{
	struct dt_source s;
	dt_error_set_quiet(1);
	assert_int_equal(dt_test_open_source(&s, fmt, dir, dir), -1);
	dt_error_set_quiet(0);
	for (int i = 0; needles[i]; i++)
		assert_error_contains(needles[i]);
}

static void test_cifar_errors(void **state)
{
	char *dir = make_dir(), p[4200];
	uint8_t *b;
	size_t n;
	FILE *f;

	/* A size that is not a whole number of records: names the file and the partial record. */
	put_cifar(dir, "a.bin", 1, 0, 3, 10, 10);
	snprintf(p, sizeof(p), "%s/a.bin", dir);
	b = get_file(p, &n);
	put_file(p, b, n - 100);
	expect_cifar_error("{format: cifar10, files: ['%s/a.bin']}", dir,
			   (const char *[]){ "/a.bin'", "not a whole number of 3073-byte CIFAR-10 records",
					     "record 2 is cut after 2973 bytes", NULL });
	free(b);
	/* A label out of range: names the file and the record. */
	put_cifar(dir, "b.bin", 1, 0, 4, 10, 10);
	snprintf(p, sizeof(p), "%s/b.bin", dir);
	b = get_file(p, &n);
	b[2 * 3073] = 10;
	put_file(p, b, n);
	free(b);
	expect_cifar_error("{format: cifar10, files: ['%s/b.bin']}", dir,
			   (const char *[]){ "/b.bin' record 2", "label 10 is out of range", NULL });
	put_cifar(dir, "c.bin", 2, 0, 2, 20, 100);
	snprintf(p, sizeof(p), "%s/c.bin", dir);
	b = get_file(p, &n);
	b[3074 + 1] = 100;
	put_file(p, b, n);
	free(b);
	expect_cifar_error("{format: cifar100, files: ['%s/c.bin']}", dir,
			   (const char *[]){ "/c.bin' record 1", "fine label 100", NULL });
	/* A CIFAR-100 file read as CIFAR-10. */
	put_cifar(dir, "d.bin", 2, 0, 1, 20, 100);
	expect_cifar_error("{format: cifar10, files: ['%s/d.bin']}", dir, (const char *[]){ "is it a CIFAR-100 file?", NULL });
	/* Empty, missing, standard files absent. */
	snprintf(p, sizeof(p), "%s/e.bin", dir);
	put_file(p, "", 0);
	expect_cifar_error("{format: cifar10, files: ['%s/e.bin']}", dir, (const char *[]){ "/e.bin' is empty", NULL });
	expect_cifar_error("{format: cifar100, directory: '%s'}", dir,
			   (const char *[]){ "cannot open '", "/train.bin'", NULL });
	/* Arguments. */
	expect_cifar_error("{format: cifar10, files: ['%s/a.bin'], directory: '%s'}", dir,
			   (const char *[]){ "either 'files' or 'directory'", NULL });
	expect_cifar_error("{format: cifar10, directory: '%s', label_mode: fine}", dir,
			   (const char *[]){ "cifar100 only", NULL });
	expect_cifar_error("{format: cifar100, directory: '%s', label_mode: superfine}", dir,
			   (const char *[]){ "fine, coarse", NULL });
	expect_cifar_error("{format: cifar10, directory: '%s', split: validation}", dir,
			   (const char *[]){ "train, test", NULL });
	/* A names file with a wrong count. */
	put_cifar(dir, "f.bin", 1, 0, 1, 10, 10);
	snprintf(p, sizeof(p), "%s/batches.meta.txt", dir);
	f = fopen(p, "w");
	fputs("cat\ndog\n", f);
	fclose(f);
	expect_cifar_error("{format: cifar10, files: ['%s/f.bin']}", dir,
			   (const char *[]){ "batches.meta.txt' names 2 classes, expected 10", NULL });
	rm_tree(dir);
}

/* ---- the PNG-paths stream reader (dtrain predict) ---- */

static void test_reader_png_paths(void **state)
{
	char *dir = make_dir(), list[4200], p[4200];
	struct dt_reader r;
	struct dt_reader_opts o = { 0 };
	float x[2 * 2 * 2 * 3];
	FILE *f;

	put_png(dir, "a.png", 10);
	put_png(dir, "b.png", 20);
	put_png(dir, "c.png", 30);
	snprintf(p, sizeof(p), "%s/bad.png", dir);
	put_file(p, "not a png", 9);
	snprintf(list, sizeof(list), "%s/imgs.lst", dir);
	assert_non_null(f = fopen(list, "w"));
	/* Blank lines (empty, spaces, CRLF) are skipped but counted. */
	fprintf(f, "%s/a.png\n\n  \t\n%s/b.png\r\n%s/missing.png\n%s/c.png\n%s/bad.png\n%s/a.png", dir, dir, dir, dir, dir,
		dir);
	fclose(f);
	assert_string_equal(dt_reader_guess(list), "png");
	assert_string_equal(dt_reader_guess("x.LST.gz"), "png");
	assert_ptr_equal(dt_reader_find("png"), &dt_png_reader);

	/* Not an image shape: refused. */
	o.sample = dt_shape_make(1, (int[]){ 12 });
	assert_int_equal(dt_reader_open(&r, &dt_png_reader, list, &o), -1);
	assert_error_contains("(height, width, channels)");
	o.sample = dt_shape_make(3, (int[]){ 2, 2, 2 });
	assert_int_equal(dt_reader_open(&r, &dt_png_reader, list, &o), -1);
	assert_error_contains("1, 3 or 4 channels");

	/* (2, 2, 3): gray to RGB; two per chunk, named by their paths; the missing path stops it, naming its line. */
	o.sample = dt_shape_make(3, (int[]){ 2, 2, 3 });
	assert_int_equal(dt_reader_open(&r, &dt_png_reader, list, &o), 0);
	assert_int_equal(r.sample.ndim, 3);
	assert_int_equal(r.type->next(&r, 2, x), 2);
	assert_true(x[0] == 10 && x[11] == 10 && x[12] == 20 && x[23] == 20);
	snprintf(p, sizeof(p), "%s/b.png", dir);
	assert_string_equal(r.type->sample_name(&r, 1), p);
	assert_int_equal(r.type->next(&r, 2, x), -1);
	assert_error_contains("/missing.png' (line 5 of '");
	assert_error_contains("imgs.lst'): No such file");
	dt_reader_close(&r);

	/* skip_bad: the missing and the corrupt paths are skipped; the rest fill the chunks. */
	o.skip_bad = 1;
	assert_int_equal(dt_reader_open(&r, &dt_png_reader, list, &o), 0);
	assert_int_equal(r.type->next(&r, 2, x), 2);
	assert_int_equal(r.type->next(&r, 2, x), 2);
	assert_true(x[0] == 30 && x[12] == 10);
	snprintf(p, sizeof(p), "%s/c.png", dir);
	assert_string_equal(r.type->sample_name(&r, 0), p);
	snprintf(p, sizeof(p), "%s/a.png", dir);
	assert_string_equal(r.type->sample_name(&r, 1), p);
	assert_int_equal(r.type->next(&r, 2, x), 0);
	assert_int_equal(r.records, 4);
	dt_reader_close(&r);

	/* A path ending in .png (any case) is that one image, named by its path; *.png guesses png. */
	o.skip_bad = 0;
	snprintf(p, sizeof(p), "%s/b.png", dir);
	assert_int_equal(dt_reader_open(&r, &dt_png_reader, p, &o), 0);
	assert_int_equal(r.type->next(&r, 2, x), 1);
	assert_true(x[0] == 20 && x[11] == 20);
	assert_string_equal(r.type->sample_name(&r, 0), p);
	assert_int_equal(r.type->next(&r, 2, x), 0);
	dt_reader_close(&r);
	assert_string_equal(dt_reader_guess("a/B.PNG"), "png");
	assert_null(dt_reader_guess("b.png.gz"));
	snprintf(p, sizeof(p), "%s/bad.PNG", dir);
	put_file(p, "not a png", 9);
	assert_int_equal(dt_reader_open(&r, &dt_png_reader, p, &o), 0);
	assert_int_equal(r.type->next(&r, 2, x), -1);
	assert_error_contains("cannot decode '");
	assert_error_contains("/bad.PNG': ");
	dt_reader_close(&r);

	/* An image given as a list, or a list with a control byte: refused as not text, its bytes unprinted. */
	put_png(dir, "image.lst", 20);
	snprintf(p, sizeof(p), "%s/image.lst", dir);
	assert_int_equal(dt_reader_open(&r, &dt_png_reader, p, &o), 0);
	assert_int_equal(r.type->next(&r, 2, x), -1);
	assert_error_contains("image.lst' is not a text list of PNG paths: it looks binary, a PNG image");
	dt_reader_close(&r);
	put_file(p, "\nb\001.png\n", 8);
	assert_int_equal(dt_reader_open(&r, &dt_png_reader, p, &o), 0);
	assert_int_equal(r.type->next(&r, 2, x), -1);
	assert_error_contains("image.lst' is not a text list of PNG paths: line 2 looks binary");
	dt_reader_close(&r);

	/* A list that does not exist. */
	snprintf(p, sizeof(p), "%s/none.lst", dir);
	assert_int_equal(dt_reader_open(&r, &dt_png_reader, p, &o), -1);
	assert_error_contains("none.lst'");
	rm_tree(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_png_gray),
		cmocka_unit_test(test_png_gray_alpha_rgb_rgba),
		cmocka_unit_test(test_png_filters),
		cmocka_unit_test(test_png_palette),
		cmocka_unit_test(test_png_interlaced),
		cmocka_unit_test(test_png_resize),
		cmocka_unit_test(test_png_corrupt_files),
		cmocka_unit_test(test_folder_order),
		cmocka_unit_test(test_folder_shuffle),
		cmocka_unit_test(test_folder_open_errors),
		cmocka_unit_test(test_folder_bad_records),
		cmocka_unit_test(test_folder_class_map),
		cmocka_unit_test(test_cifar10),
		cmocka_unit_test(test_cifar100),
		cmocka_unit_test(test_cifar_errors),
		cmocka_unit_test(test_reader_png_paths),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
