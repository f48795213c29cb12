/*
 * Data sources: IDX files written to temporary files (raw and gzip), every
 * way they can be wrong, the synthetic generator, and Fashion-MNIST when it
 * is installed. Also the byte stream every format reads through
 * (data/reader.h: dt_gz_*).
 */
#include "helpers.h"

#include <zlib.h>

#include "core/config/config.h"
#include "core/pipeline/source.h"
#include "data/reader.h"
#include "data/sources.h"

#define FASHION "/usr/share/datasets/fashion-mnist/"

static int open_idx(struct dt_source *s, const char *images, const char *labels)
{
	return dt_test_open_source(s, "format: idx\nimages: \"%s\"\nlabels: \"%s\"\n", images, labels);
}

/* Bytes of an IDX file: the header for `magic` and dims, then n bytes of data. */
static uint8_t *idx_bytes(uint32_t magic, const uint32_t *dims, const uint8_t *data, size_t n, size_t *size)
{
	int ndim = magic & 0xff;
	uint8_t *b = malloc(4 + 4 * ndim + n);
	for (int i = 0; i <= ndim; i++) {
		uint32_t v = i == 0 ? magic : dims[i - 1];
		b[4 * i] = v >> 24, b[4 * i + 1] = v >> 16, b[4 * i + 2] = v >> 8, b[4 * i + 3] = v;
	}
	if (n)
		memcpy(b + 4 + 4 * ndim, data, n);
	*size = 4 + 4 * ndim + n;
	return b;
}

static char *write_gzip(const void *data, size_t n)
{
	char *path = dt_test_write_file(".gz", "", 0);
	gzFile gz = gzopen(path, "wb");
	assert_non_null(gz);
	assert_int_equal(gzwrite(gz, data, (unsigned)n), (int)n);
	assert_int_equal(gzclose(gz), Z_OK);
	return path;
}

/* Writes an IDX file (gzipped when gz) and returns its path; the caller frees and removes it. */
static char *write_idx(int gz, uint32_t magic, const uint32_t *dims, const uint8_t *data, size_t n)
{
	size_t size;
	uint8_t *b = idx_bytes(magic, dims, data, n, &size);
	char *path = gz ? write_gzip(b, size) : dt_test_write_file("-ubyte", b, size);
	free(b);
	return path;
}

static void drop(char *path)
{
	unlink(path);
	free(path);
}

/* 5 images of 3x4: pixel j of image i is 10 * i + j. Labels 0 2 1 2 0. */
static const uint8_t labels5[5] = { 0, 2, 1, 2, 0 };
static const uint32_t dims5[] = { 5, 3, 4 }, ldims5[] = { 5 };

static uint8_t *pixels5(void)
{
	static uint8_t px[5 * 12];
	for (int i = 0; i < 5; i++)
		for (int j = 0; j < 12; j++)
			px[i * 12 + j] = (uint8_t)(10 * i + j);
	return px;
}

static void check_idx_roundtrip(int gz)
{
	char *im = write_idx(gz, 0x803, dims5, pixels5(), 60);
	char *lb = write_idx(gz, 0x801, ldims5, labels5, 5);
	struct dt_source s;
	int64_t idx[2] = { 4, 1 };
	float x[24], y[2];

	assert_int_equal(open_idx(&s, im, lb), 0);
	assert_int_equal(s.count, 5);
	assert_int_equal(s.sample.ndim, 3);
	assert_int_equal(s.sample.dim[0], 3);
	assert_int_equal(s.sample.dim[1], 4);
	assert_int_equal(s.sample.dim[2], 1);
	assert_int_equal(s.label.ndim, 1);
	assert_int_equal(s.label.dim[0], 1);
	assert_int_equal(s.num_classes, 3);
	assert_string_equal(s.name, im);
	assert_int_equal(s.type->read(&s, idx, 2, x, y, NULL), 0);
	for (int j = 0; j < 12; j++) {
		assert_true(x[j] == 40 + j);
		assert_true(x[12 + j] == 10 + j);
	}
	assert_true(y[0] == 0 && y[1] == 2);
	idx[1] = 5;
	assert_int_equal(s.type->read(&s, idx, 2, x, y, NULL), -1);
	assert_error_contains("record 5");
	assert_error_contains(im);
	dt_source_close(&s);
	assert_null(s.type);
	assert_null(s.priv);
	drop(im);
	drop(lb);
}

static void test_idx_raw(void **state) { check_idx_roundtrip(0); }
static void test_idx_gzip(void **state) { check_idx_roundtrip(1); }

/* Opening must fail with a message that contains every one of needles. */
static void expect_open_error(const char *images, const char *labels, const char *const *needles)
{
	struct dt_source s;
	assert_int_equal(open_idx(&s, images, labels), -1);
	assert_null(s.priv);
	for (; *needles; needles++)
		assert_error_contains(*needles);
}

static void test_idx_min_two_classes(void **state)
{
	static const uint8_t zeros[5] = { 0 };
	char *im = write_idx(1, 0x803, dims5, pixels5(), 60), *lb = write_idx(0, 0x801, ldims5, zeros, 5);
	struct dt_source s;

	assert_int_equal(open_idx(&s, im, lb), 0);
	assert_int_equal(s.num_classes, 2);
	dt_source_close(&s);
	drop(im);
	drop(lb);
}

static void test_idx_other_ranks(void **state)
{
	static const uint32_t vec[] = { 5, 12 }, rgb[] = { 5, 2, 2, 3 };
	char *lb = write_idx(0, 0x801, ldims5, labels5, 5);
	char *im = write_idx(0, 0x802, vec, pixels5(), 60);
	struct dt_source s;

	assert_int_equal(open_idx(&s, im, lb), 0);
	assert_int_equal(s.sample.ndim, 1);
	assert_int_equal(s.sample.dim[0], 12);
	dt_source_close(&s);
	drop(im);

	im = write_idx(0, 0x804, rgb, pixels5(), 60);
	assert_int_equal(open_idx(&s, im, lb), 0);
	assert_int_equal(s.sample.ndim, 3);
	assert_int_equal(s.sample.dim[2], 3);
	dt_source_close(&s);
	drop(im);
	drop(lb);
}

static void test_idx_wrong_magic(void **state)
{
	char *im = write_idx(0, 0x803, dims5, pixels5(), 60), *lb = write_idx(1, 0x801, ldims5, labels5, 5);
	char *text = dt_test_write_file(".gz", "hello, world\n", 13);
	char *f32 = write_idx(0, 0xd03, dims5, pixels5(), 60);

	/* Swapped files. */
	expect_open_error(lb, im, (const char *[]){ lb, "0x00000801", "0x00000803", "labels file", NULL });
	expect_open_error(im, im, (const char *[]){ im, "0x00000803", "0x00000801", "images file", NULL });
	expect_open_error(text, lb, (const char *[]){ text, "0x68656c6c", "0x00000803", "IDX file", NULL });
	expect_open_error(f32, lb, (const char *[]){ f32, "float32", NULL });
	drop(im);
	drop(lb);
	drop(text);
	drop(f32);
}

static void test_idx_truncated(void **state)
{
	char *im = write_idx(0, 0x803, dims5, pixels5(), 60), *lb = write_idx(0, 0x801, ldims5, labels5, 5);
	char *short_im = write_idx(1, 0x803, dims5, pixels5(), 40); /* 3 records and a third */
	char *short_lb = write_idx(0, 0x801, ldims5, labels5, 4);
	char *head = dt_test_write_file("-ubyte", "\0\0\x08\x03\0\0\0\x05\0\0", 10);
	char *empty = dt_test_write_file("-ubyte", "", 0);

	expect_open_error(short_im, lb, (const char *[]){ short_im, "truncated", "5 images", "3 whole images", NULL });
	expect_open_error(im, short_lb, (const char *[]){ short_lb, "truncated", "5 labels", "4 whole labels", NULL });
	expect_open_error(head, lb, (const char *[]){ head, "truncated", NULL });
	expect_open_error(empty, lb, (const char *[]){ empty, "empty", NULL });
	drop(im);
	drop(lb);
	drop(short_im);
	drop(short_lb);
	drop(head);
	drop(empty);
}

static void test_idx_trailing_data(void **state)
{
	static const uint8_t six[6] = { 0, 1, 2, 3, 4, 5 };
	char *im = write_idx(0, 0x803, dims5, pixels5(), 60), *lb = write_idx(1, 0x801, ldims5, six, 6);

	expect_open_error(im, lb, (const char *[]){ lb, "trailing data", NULL });
	drop(im);
	drop(lb);
}

static void test_idx_count_mismatch(void **state)
{
	static const uint32_t four[] = { 4 };
	char *im = write_idx(0, 0x803, dims5, pixels5(), 60), *lb = write_idx(0, 0x801, four, labels5, 4);

	expect_open_error(im, lb, (const char *[]){ im, lb, "5 images", "4 labels", NULL });
	drop(im);
	drop(lb);
}

static void test_idx_no_records(void **state)
{
	static const uint32_t none[] = { 0, 3, 4 };
	char *im = write_idx(0, 0x803, none, NULL, 0), *lb = write_idx(0, 0x801, ldims5, labels5, 5);

	expect_open_error(im, lb, (const char *[]){ im, "no records", NULL });
	drop(im);
	drop(lb);
}

static void test_idx_absurd_dims(void **state)
{
	static const uint32_t huge[] = { 5, 0xffffffff, 0xffffffff }, zero[] = { 5, 0, 4 };
	static const uint32_t many[] = { 0xffffffff, 28, 28 }, many_labels[] = { 0xffffffff };
	char *lb = write_idx(0, 0x801, ldims5, labels5, 5);
	char *im = write_idx(0, 0x803, huge, pixels5(), 60);
	char *im0 = write_idx(0, 0x803, zero, pixels5(), 60);
	/* Promises 3.7 TB of images and 4 GB of labels: must end as truncated, not as a huge allocation. */
	char *im_many = write_idx(1, 0x803, many, pixels5(), 60);
	char *lb_many = write_idx(0, 0x801, many_labels, labels5, 5);
	char *im_ok = write_idx(0, 0x803, dims5, pixels5(), 60);

	expect_open_error(im, lb, (const char *[]){ im, "absurd dimension 4294967295", NULL });
	expect_open_error(im0, lb, (const char *[]){ im0, "absurd dimension 0", NULL });
	expect_open_error(im_many, lb, (const char *[]){ im_many, "truncated", "4294967295 images", NULL });
	expect_open_error(im_ok, lb_many, (const char *[]){ lb_many, "truncated", NULL });
	drop(lb);
	drop(im);
	drop(im0);
	drop(im_many);
	drop(lb_many);
	drop(im_ok);
}

/* Reads a whole file into memory. */
static uint8_t *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	uint8_t *b = malloc(1 << 20);
	assert_non_null(f);
	*n = fread(b, 1, 1 << 20, f);
	fclose(f);
	return b;
}

static void test_idx_bad_gzip(void **state)
{
	static const uint32_t dims[] = { 100, 28, 28 };
	uint8_t *px = malloc(100 * 784);
	char *lb, *good, *flipped, *cut, *cut_trailer, *crc;
	uint8_t *z;
	size_t size;
	uint8_t labels[100] = { 0 };

	for (int i = 0; i < 100 * 784; i++)
		px[i] = (uint8_t)((i * 7919) >> 5);
	lb = write_idx(0, 0x801, (const uint32_t[]){ 100 }, labels, 100);
	good = write_idx(1, 0x803, dims, px, 100 * 784);
	z = slurp(good, &size);
	assert_true(size > 200);

	z[size / 2] ^= 0x55;
	flipped = dt_test_write_file(".gz", z, size);
	z[size / 2] ^= 0x55;
	cut = dt_test_write_file(".gz", z, size * 3 / 4);
	cut_trailer = dt_test_write_file(".gz", z, size - 4);
	z[size - 6] ^= 0x01; /* CRC32 of the gzip trailer */
	crc = dt_test_write_file(".gz", z, size);

	expect_open_error(flipped, lb, (const char *[]){ flipped, "corrupt gzip", NULL });
	expect_open_error(cut, lb, (const char *[]){ cut, "truncated", "whole images", NULL });
	expect_open_error(cut_trailer, lb, (const char *[]){ cut_trailer, "truncated", "gzip trailer", NULL });
	expect_open_error(crc, lb, (const char *[]){ crc, "corrupt gzip", "incorrect data check", NULL });
	assert_null(strstr(strstr(dt_error_last(), "stream: "), crc)); /* the path once, not zlib's copy too */
	{
		struct dt_source s;
		assert_int_equal(open_idx(&s, good, lb), 0);
		dt_source_close(&s);
	}
	free(px);
	free(z);
	drop(lb);
	drop(good);
	drop(flipped);
	drop(cut);
	drop(cut_trailer);
	drop(crc);
}

static void test_idx_missing_file(void **state)
{
	char *im = write_idx(0, 0x803, dims5, pixels5(), 60), *lb = write_idx(0, 0x801, ldims5, labels5, 5);
	const char *missing = "/nonexistent/dtrain/train-images-idx3-ubyte.gz";

	expect_open_error(missing, lb, (const char *[]){ "cannot open", missing, "No such file", NULL });
	expect_open_error(im, missing, (const char *[]){ "cannot open", missing, NULL });
	expect_open_error(im, "/tmp", (const char *[]){ "cannot read '/tmp'", "directory", NULL });
	drop(im);
	drop(lb);
}

static void test_idx_bad_arguments(void **state)
{
	struct dt_source s;
	struct dt_doc *d;

	assert_int_equal(dt_test_open_source(&s, "format: idx\nimages: a.gz\n"), -1);
	assert_error_contains("labels");
	assert_int_equal(dt_test_open_source(&s, "format: idx\nimages: a.gz\nlabels: b.gz\nimagez: c.gz\n"), -1);
	assert_error_contains("imagez");
	assert_int_equal(dt_test_open_source(&s, "format: idz\n"), -1);
	assert_error_contains("idz");
	assert_error_contains("synthetic");
	assert_int_equal(dt_test_open_source(&s, "images: a.gz\n"), -1);
	assert_error_contains("format");
	assert_int_equal(dt_test_open_source(&s, "format: synthetic\nsamples: 10\n"), 0);
	dt_source_close(&s);
	assert_null(s.type);

	d = dt_doc_parse("test.yaml", "data: [1, 2]\n", ".");
	assert_non_null(d);
	assert_int_equal(dt_source_open(&s, dt_node_get(dt_doc_root(d), "data"), dt_source_types), -1);
	assert_error_contains("expected a mapping");
	assert_null(s.type);
	assert_int_equal(dt_source_open(&s, dt_node_get(dt_doc_root(d), "train"), dt_source_types), -1);
	assert_error_contains("missing");
	dt_doc_free(d);
}

/* Reads every record of s into x (count, features) and y (count). */
static void read_all(struct dt_source *s, float **x, float **y)
{
	int64_t n = s->count, f = dt_shape_count(&s->sample);
	int64_t *idx = malloc(n * sizeof(*idx));
	for (int64_t i = 0; i < n; i++)
		idx[i] = i;
	*x = malloc(n * f * sizeof(float));
	*y = malloc(n * sizeof(float));
	assert_int_equal(s->type->read(s, idx, (int)n, *x, *y, NULL), 0);
	free(idx);
}

static void test_synthetic_defaults(void **state)
{
	struct dt_source s;
	float *x, *y;
	int per_class[3] = { 0 };

	assert_int_equal(dt_test_open_source(&s, "format: synthetic\n"), 0);
	assert_int_equal(s.count, 1000);
	assert_int_equal(s.sample.ndim, 1);
	assert_int_equal(s.sample.dim[0], 2);
	assert_int_equal(s.label.ndim, 1);
	assert_int_equal(s.label.dim[0], 1);
	assert_int_equal(s.num_classes, 3);
	read_all(&s, &x, &y);
	for (int i = 0; i < 1000; i++) {
		assert_true(y[i] == 0 || y[i] == 1 || y[i] == 2);
		per_class[(int)y[i]]++;
	}
	assert_in_range(per_class[0], 333, 334);
	assert_in_range(per_class[2], 333, 334);
	free(x);
	free(y);
	dt_source_close(&s);
}

static void test_synthetic_deterministic(void **state)
{
	static const char *const kinds[] = { "blobs", "spirals" };
	for (int k = 0; k < 2; k++) {
		struct dt_source a, b, c;
		float *xa, *ya, *xb, *yb, *xc, *yc;
		const char *fmt = "format: synthetic\nkind: %s\nsamples: 300\nseed: %d\n";

		assert_int_equal(dt_test_open_source(&a, fmt, kinds[k], 5), 0);
		assert_int_equal(dt_test_open_source(&b, fmt, kinds[k], 5), 0);
		assert_int_equal(dt_test_open_source(&c, fmt, kinds[k], 6), 0);
		read_all(&a, &xa, &ya);
		read_all(&b, &xb, &yb);
		read_all(&c, &xc, &yc);
		assert_memory_equal(xa, xb, 600 * sizeof(float));
		assert_memory_equal(ya, yb, 300 * sizeof(float));
		assert_memory_not_equal(xa, xc, 600 * sizeof(float));
		free(xa), free(ya), free(xb), free(yb), free(xc), free(yc);
		dt_source_close(&a);
		dt_source_close(&b);
		dt_source_close(&c);
	}
}

/*
 * kind: sequence: (length,) whole tokens below vocab, classes alternating,
 * class 1 exactly when "1 2" occurs, every record with a 1 and a 2; the
 * same seed the same records, another seed others.
 */
static void test_synthetic_sequence(void **state)
{
	struct dt_source s, t;
	float *x, *y, *x2, *y2;
	const int n = 2000, len = 9, vocab = 5;

	assert_int_equal(dt_test_open_source(&s, "format: synthetic\nkind: sequence\nsamples: %d\nvocab: %d\nlength: %d\n"
					     "seed: 4\n", n, vocab, len), 0);
	assert_int_equal(s.sample.ndim, 1);
	assert_int_equal(s.sample.dim[0], len);
	assert_int_equal(s.num_classes, 2);
	read_all(&s, &x, &y);
	for (int i = 0; i < n; i++) {
		const float *r = x + (int64_t)i * len;
		int ones = 0, twos = 0, pattern = 0;
		for (int t0 = 0; t0 < len; t0++) {
			assert_true(r[t0] >= 0 && r[t0] < vocab && r[t0] == (float)(int)r[t0]);
			ones += r[t0] == 1;
			twos += r[t0] == 2;
			pattern |= t0 + 1 < len && r[t0] == 1 && r[t0 + 1] == 2;
		}
		assert_int_equal((int)y[i], i % 2);
		assert_int_equal(pattern, i % 2);
		assert_true(ones >= 1 && twos >= 1);
	}
	assert_int_equal(dt_test_open_source(&t, "format: synthetic\nkind: sequence\nsamples: %d\nvocab: %d\nlength: %d\n"
					     "seed: 5\n", n, vocab, len), 0);
	read_all(&t, &x2, &y2);
	assert_memory_not_equal(x, x2, (size_t)n * len * sizeof(float));
	free(x), free(y), free(x2), free(y2);
	dt_source_close(&s);
	dt_source_close(&t);
}

/* Accuracy of the nearest class mean, fitted on the same data: blobs are linearly separable. */
static double nearest_mean_accuracy(const float *x, const float *y, int64_t n, int f, int classes)
{
	double *mean = calloc((size_t)classes * f, sizeof(double));
	int64_t *count = calloc(classes, sizeof(int64_t)), right = 0;

	for (int64_t i = 0; i < n; i++) {
		count[(int)y[i]]++;
		for (int j = 0; j < f; j++)
			mean[(int)y[i] * f + j] += x[i * f + j];
	}
	for (int c = 0; c < classes; c++)
		for (int j = 0; j < f; j++)
			mean[c * f + j] /= count[c];
	for (int64_t i = 0; i < n; i++) {
		int best = 0;
		double best_d = 1e300;
		for (int c = 0; c < classes; c++) {
			double d = 0;
			for (int j = 0; j < f; j++)
				d += (x[i * f + j] - mean[c * f + j]) * (x[i * f + j] - mean[c * f + j]);
			if (d < best_d)
				best_d = d, best = c;
		}
		right += best == (int)y[i];
	}
	free(mean);
	free(count);
	return (double)right / n;
}

/* Leave-one-out accuracy of the nearest neighbour: spirals are learnable but not linearly. */
static double nearest_neighbour_accuracy(const float *x, const float *y, int64_t n)
{
	int64_t right = 0;
	for (int64_t i = 0; i < n; i++) {
		int64_t best = -1;
		double best_d = 1e300;
		for (int64_t k = 0; k < n; k++) {
			double dx = x[2 * i] - x[2 * k], dy = x[2 * i + 1] - x[2 * k + 1];
			if (k != i && dx * dx + dy * dy < best_d)
				best_d = dx * dx + dy * dy, best = k;
		}
		right += y[best] == y[i];
	}
	return (double)right / n;
}

static void test_synthetic_learnable(void **state)
{
	struct dt_source s;
	float *x, *y;

	assert_int_equal(dt_test_open_source(&s, "format: synthetic\n"), 0);
	read_all(&s, &x, &y);
	assert_true(nearest_mean_accuracy(x, y, 1000, 2, 3) >= 0.95);
	free(x), free(y);
	dt_source_close(&s);

	assert_int_equal(dt_test_open_source(&s, "format: synthetic\nclasses: 10\nfeatures: 8\nsamples: 2000\n"), 0);
	assert_int_equal(s.sample.dim[0], 8);
	read_all(&s, &x, &y);
	assert_true(nearest_mean_accuracy(x, y, 2000, 8, 10) >= 0.95);
	free(x), free(y);
	dt_source_close(&s);

	assert_int_equal(dt_test_open_source(&s, "format: synthetic\nfeatures: 1\n"), 0);
	read_all(&s, &x, &y);
	assert_true(nearest_mean_accuracy(x, y, 1000, 1, 3) >= 0.95);
	free(x), free(y);
	dt_source_close(&s);

	assert_int_equal(dt_test_open_source(&s, "format: synthetic\nkind: spirals\n"), 0);
	read_all(&s, &x, &y);
	assert_true(nearest_neighbour_accuracy(x, y, 1000) >= 0.95);
	assert_true(nearest_mean_accuracy(x, y, 1000, 2, 3) < 0.8);
	free(x), free(y);
	dt_source_close(&s);
}

static void test_synthetic_errors(void **state)
{
	struct dt_source s;

	assert_int_equal(dt_test_open_source(&s, "format: synthetic\nkind: spirals\nfeatures: 3\n"), -1);
	assert_error_contains("exactly 2 features");
	assert_int_equal(dt_test_open_source(&s, "format: synthetic\nkind: circles\n"), -1);
	assert_error_contains("circles");
	assert_int_equal(dt_test_open_source(&s, "format: synthetic\nsamples: 2\n"), -1);
	assert_error_contains("3 classes");
	assert_int_equal(dt_test_open_source(&s, "format: synthetic\nclasses: 1\n"), -1);
	assert_error_contains("classes");
	assert_int_equal(dt_test_open_source(&s, "format: synthetic\nnoise: -1\n"), -1);
	assert_error_contains("noise");
	assert_int_equal(dt_test_open_source(&s, "format: synthetic\nsamples: 100000000\nfeatures: 100\n"), -1);
	assert_error_contains("too many");
	assert_int_equal(dt_test_open_source(&s, "format: synthetic\nsampels: 10\n"), -1);
	assert_error_contains("sampels");
}

static void check_fashion(const char *images, const char *labels, int64_t count, uint8_t first_label)
{
	struct dt_source s;
	int64_t idx = 0;
	float x[784], y;
	double sum = 0;

	if (access(images, R_OK) || access(labels, R_OK))
		skip();
	assert_int_equal(open_idx(&s, images, labels), 0);
	assert_int_equal(s.count, count);
	assert_int_equal(s.sample.ndim, 3);
	assert_int_equal(s.sample.dim[0], 28);
	assert_int_equal(s.sample.dim[1], 28);
	assert_int_equal(s.sample.dim[2], 1);
	assert_int_equal(s.num_classes, 10);
	assert_int_equal(s.type->read(&s, &idx, 1, x, &y, NULL), 0);
	assert_true(y == first_label);
	for (int j = 0; j < 784; j++) {
		assert_true(x[j] >= 0 && x[j] <= 255);
		sum += x[j];
	}
	assert_true(sum > 0);
	if (count == 60000)
		assert_true(sum == 76247); /* the first training image, an ankle boot */
	dt_source_close(&s);
}

static void test_fashion_mnist_train(void **state)
{
	check_fashion(FASHION "train-images-idx3-ubyte.gz", FASHION "train-labels-idx1-ubyte.gz", 60000, 9);
}

static void test_fashion_mnist_test(void **state)
{
	check_fashion(FASHION "t10k-images-idx3-ubyte.gz", FASHION "t10k-labels-idx1-ubyte.gz", 10000, 9);
}

/* The whole stream of path through dt_gz_read, in chunks of `chunk` bytes; its length, or -1. */
static int64_t gz_slurp(const char *path, uint8_t *out, int64_t cap, int64_t chunk)
{
	struct dt_gz *g = dt_gz_open(path);
	int64_t got = 0, k;
	if (!g)
		return -1;
	while (got < cap && (k = dt_gz_read(g, path, out + got, chunk < cap - got ? chunk : cap - got)) > 0)
		got += k;
	dt_gz_close(g);
	return k < 0 ? -1 : got;
}

static void test_gz_stream(void **state)
{
	uint8_t text[5000], out[6000], *z;
	char *plain, *gz, *two, *garbage, *cut, line[64];
	size_t size;
	FILE *f;
	struct dt_gz *g;

	for (int i = 0; i < 5000; i++)
		text[i] = (uint8_t)(i % 61 == 60 ? '\n' : 'a' + i % 26);
	plain = dt_test_write_file(".txt", text, sizeof(text));
	gz = write_gzip(text, sizeof(text));
	f = fopen(gz, "rb");
	z = malloc(1 << 16);
	size = fread(z, 1, 1 << 16, f);
	fclose(f);

	/* Plain and gzip read the same bytes, whatever the chunks. */
	for (int64_t chunk = 1; chunk <= 8192; chunk *= 8) {
		assert_int_equal(gz_slurp(plain, out, sizeof(out), chunk), 5000);
		assert_memory_equal(out, text, 5000);
		assert_int_equal(gz_slurp(gz, out, sizeof(out), chunk), 5000);
		assert_memory_equal(out, text, 5000);
	}
	/* Two members are one stream, as gzip -d reads them. */
	{
		uint8_t *zz = malloc(2 * size);
		memcpy(zz, z, size);
		memcpy(zz + size, z, size);
		two = dt_test_write_file(".gz", zz, 2 * size);
		free(zz);
		assert_int_equal(gz_slurp(two, out, sizeof(out), 4096), sizeof(out));
		assert_memory_equal(out + 5000, text, 1000);
	}
	/* Bytes after the member that start no other: an error, where gzread drops them. */
	{
		uint8_t *zz = malloc(size + 3);
		memcpy(zz, z, size);
		memcpy(zz + size, "xyz", 3);
		garbage = dt_test_write_file(".gz", zz, size + 3);
		free(zz);
		assert_int_equal(gz_slurp(garbage, out, sizeof(out), 4096), -1);
		assert_error_contains("trailing bytes after its gzip stream");
	}
	/* Cut short: the bytes before the cut come first, then the error. */
	cut = dt_test_write_file(".gz", z, size - 4);
	g = dt_gz_open(cut);
	assert_non_null(g);
	assert_int_equal(dt_gz_read(g, cut, out, sizeof(out)), 5000);
	assert_int_equal(dt_gz_read(g, cut, out, 1), -1);
	assert_error_contains("truncated");
	dt_gz_close(g);

	/* Lines, as fgets: through the newline, or size - 1 bytes. */
	g = dt_gz_open(gz);
	assert_int_equal(dt_gz_gets(g, gz, line, sizeof(line)), 61);
	assert_int_equal(line[60], '\n');
	assert_int_equal(dt_gz_gets(g, gz, line, 11), 10);
	assert_int_equal(dt_gz_gets(g, gz, line, sizeof(line)), 51);
	assert_memory_equal(line, text + 71, 51);
	dt_gz_close(g);

	/* Devices and directories are refused at open; a missing file names itself. */
	assert_null(dt_gz_open("/dev/zero"));
	assert_error_contains("'/dev/zero': it is a character device");
	assert_null(dt_gz_open("/"));
	assert_error_contains("it is a directory");
	assert_null(dt_gz_open("/nonexistent/dtrain"));
	assert_error_contains("cannot open '/nonexistent/dtrain'");

	free(z);
	drop(plain);
	drop(gz);
	drop(two);
	drop(garbage);
	drop(cut);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_idx_raw),
		cmocka_unit_test(test_idx_gzip),
		cmocka_unit_test(test_idx_min_two_classes),
		cmocka_unit_test(test_idx_other_ranks),
		cmocka_unit_test(test_idx_wrong_magic),
		cmocka_unit_test(test_idx_truncated),
		cmocka_unit_test(test_idx_trailing_data),
		cmocka_unit_test(test_idx_count_mismatch),
		cmocka_unit_test(test_idx_no_records),
		cmocka_unit_test(test_idx_absurd_dims),
		cmocka_unit_test(test_idx_bad_gzip),
		cmocka_unit_test(test_idx_missing_file),
		cmocka_unit_test(test_idx_bad_arguments),
		cmocka_unit_test(test_synthetic_defaults),
		cmocka_unit_test(test_synthetic_deterministic),
		cmocka_unit_test(test_synthetic_sequence),
		cmocka_unit_test(test_synthetic_learnable),
		cmocka_unit_test(test_synthetic_errors),
		cmocka_unit_test(test_fashion_mnist_train),
		cmocka_unit_test(test_fashion_mnist_test),
		cmocka_unit_test(test_gz_stream),
	};
	dt_error_set_quiet(1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
