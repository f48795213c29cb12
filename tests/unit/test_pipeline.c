/*
 * The input pipeline over a fake source whose record i has x = (i, -i) and
 * label i % 5: order per epoch, batching, sub-ranges, rescale and one-hot;
 * replica slices; prefetch against synchronous reads; cache; unreadable
 * records; normalization; augmentation over a fake image source; pipelines
 * over record lists and the splits that make them.
 */
#include <math.h>

#include "helpers.h"

#include "core/pipeline/pipeline.h"

#define FAKE_CLASSES 5

static int fake_bad_label = -1; /* record whose label is out of range, or -1 */
static int64_t fake_unreadable[16]; /* records the source cannot decode */
static int nfake_unreadable;
static int64_t fake_reads;          /* records read so far */

static int fake_is_unreadable(int64_t r)
{
	for (int k = 0; k < nfake_unreadable; k++)
		if (fake_unreadable[k] == r)
			return 1;
	return 0;
}

static int fake_read(struct dt_source *s, const int64_t *idx, int n, float *x, float *y, uint8_t *bad)
{
	for (int i = 0; i < n; i++) {
		if (idx[i] < 0 || idx[i] >= s->count)
			return dt_error("record %lld is out of range in '%s'", (long long)idx[i], s->name);
		fake_reads++;
		if (fake_is_unreadable(idx[i])) {
			if (!bad)
				return dt_error_at(s->name, "record %lld: cannot decode it", (long long)idx[i]);
			bad[i] = 1;
			continue;
		}
		x[2 * i] = (float)idx[i];
		x[2 * i + 1] = (float)-idx[i];
		y[i] = idx[i] == fake_bad_label ? FAKE_CLASSES : (float)(idx[i] % FAKE_CLASSES);
	}
	return 0;
}

static const struct dt_source_type fake_type = { .name = "fake", .read = fake_read };

static struct dt_source fake_source(int64_t count)
{
	struct dt_source s = { .type = &fake_type, .count = count, .num_classes = FAKE_CLASSES };
	snprintf(s.name, sizeof(s.name), "fake.idx");
	s.sample = dt_shape_make(1, (int[]){ 2 });
	s.label = dt_shape_make(1, (int[]){ 1 });
	return s;
}

/* Reads every batch of `epoch` and appends the record indices (x[0]) to order. Returns the count. */
static int64_t read_epoch(struct dt_pipeline *p, int epoch, int64_t *order)
{
	struct dt_batch b;
	int64_t k = 0, steps = dt_pipeline_steps(p);

	dt_batch_alloc(&b, p);
	for (int64_t step = 0; step < steps; step++) {
		assert_int_equal(dt_pipeline_read(p, epoch, step, &b), 0);
		assert_true(b.n >= 1 && b.n <= p->batch_size);
		if (step < steps - 1)
			assert_int_equal(b.n, p->batch_size);
		for (int i = 0; i < b.n; i++)
			order[k++] = (int64_t)b.x[2 * i];
	}
	dt_batch_free(&b);
	return k;
}

static void assert_each_once(const int64_t *order, int64_t n, int64_t begin, int64_t end)
{
	char *seen = calloc(end, 1);
	assert_int_equal(n, end - begin);
	for (int64_t i = 0; i < n; i++) {
		assert_true(order[i] >= begin && order[i] < end);
		assert_int_equal(seen[order[i]], 0);
		seen[order[i]] = 1;
	}
	free(seen);
}

static int is_identity(const int64_t *order, int64_t n, int64_t begin)
{
	for (int64_t i = 0; i < n; i++)
		if (order[i] != begin + i)
			return 0;
	return 1;
}

static void test_every_record_once_per_epoch(void **state)
{
	static const int batch_sizes[] = { 1, 7, 10, 25, 100, 128 };
	struct dt_source s = fake_source(100);
	int64_t order[100];

	for (size_t k = 0; k < sizeof(batch_sizes) / sizeof(*batch_sizes); k++) {
		struct dt_pipeline p;
		int b = batch_sizes[k];
		assert_int_equal(dt_pipeline_init(&p, &s, 0, 100, b, 1, 42, 1, 0), 0);
		assert_int_equal(dt_pipeline_size(&p), 100);
		assert_int_equal(dt_pipeline_steps(&p), (100 + b - 1) / b);
		for (int epoch = 0; epoch < 3; epoch++)
			assert_each_once(order, read_epoch(&p, epoch, order), 0, 100);
		dt_pipeline_release(&p);
	}
}

static void test_same_seed_epoch_same_order(void **state)
{
	struct dt_source s = fake_source(1000);
	struct dt_pipeline p, q;
	int64_t a[1000], b[1000], c[1000];

	assert_int_equal(dt_pipeline_init(&p, &s, 0, 1000, 32, 1, 7, 1, 0), 0);
	assert_int_equal(dt_pipeline_init(&q, &s, 0, 1000, 50, 1, 7, 1, 0), 0);
	read_epoch(&p, 3, a);
	read_epoch(&p, 4, c); /* p moves on, then comes back to epoch 3 */
	read_epoch(&p, 3, b);
	assert_memory_equal(a, b, sizeof(a));
	read_epoch(&q, 3, b); /* another pipeline, another batch size: same order */
	assert_memory_equal(a, b, sizeof(a));
	assert_false(is_identity(a, 1000, 0));
	dt_pipeline_release(&p);
	dt_pipeline_release(&q);
}

static void test_epochs_and_seeds_differ(void **state)
{
	struct dt_source s = fake_source(1000);
	struct dt_pipeline p, q;
	int64_t a[1000], b[1000];

	assert_int_equal(dt_pipeline_init(&p, &s, 0, 1000, 32, 1, 7, 1, 0), 0);
	assert_int_equal(dt_pipeline_init(&q, &s, 0, 1000, 32, 1, 8, 1, 0), 0);
	read_epoch(&p, 0, a);
	read_epoch(&p, 1, b);
	assert_memory_not_equal(a, b, sizeof(a));
	read_epoch(&q, 0, b);
	assert_memory_not_equal(a, b, sizeof(a));
	dt_pipeline_release(&p);
	dt_pipeline_release(&q);
}

/* Over 2400 epochs every one of the 24 orders of 4 records comes up about 100 times. */
static void test_shuffle_is_uniform(void **state)
{
	struct dt_source s = fake_source(4);
	struct dt_pipeline p;
	int64_t order[4];
	int counts[256] = { 0 }, distinct = 0;

	assert_int_equal(dt_pipeline_init(&p, &s, 0, 4, 4, 1, 11, 1, 0), 0);
	for (int epoch = 0; epoch < 2400; epoch++) {
		read_epoch(&p, epoch, order);
		counts[order[0] * 64 + order[1] * 16 + order[2] * 4 + order[3]]++;
	}
	for (int k = 0; k < 256; k++) {
		if (!counts[k])
			continue;
		distinct++;
		assert_in_range(counts[k], 60, 140);
	}
	assert_int_equal(distinct, 24);
	dt_pipeline_release(&p);
}

static void test_no_shuffle_is_identity(void **state)
{
	struct dt_source s = fake_source(100);
	struct dt_pipeline p;
	int64_t order[100];

	assert_int_equal(dt_pipeline_init(&p, &s, 0, 100, 16, 0, 7, 1, 0), 0);
	for (int epoch = 0; epoch < 2; epoch++) {
		assert_int_equal(read_epoch(&p, epoch, order), 100);
		assert_true(is_identity(order, 100, 0));
	}
	dt_pipeline_release(&p);
}

static void test_sub_range(void **state)
{
	struct dt_source s = fake_source(100);
	struct dt_pipeline p;
	int64_t order[100];

	/* Training part [0, 80) shuffled, validation part [80, 100) in order. */
	assert_int_equal(dt_pipeline_init(&p, &s, 0, 80, 16, 1, 1, 1, 0), 0);
	assert_int_equal(dt_pipeline_steps(&p), 5);
	assert_each_once(order, read_epoch(&p, 0, order), 0, 80);
	dt_pipeline_release(&p);

	assert_int_equal(dt_pipeline_init(&p, &s, 80, 100, 16, 0, 1, 1, 0), 0);
	assert_int_equal(dt_pipeline_size(&p), 20);
	assert_int_equal(dt_pipeline_steps(&p), 2);
	assert_int_equal(read_epoch(&p, 0, order), 20);
	assert_true(is_identity(order, 20, 80));
	dt_pipeline_release(&p);

	assert_int_equal(dt_pipeline_init(&p, &s, 30, 70, 7, 1, 1, 1, 0), 0);
	assert_each_once(order, read_epoch(&p, 2, order), 30, 70);
	dt_pipeline_release(&p);
}

/* A pipeline over a list of records: each listed record once per epoch, the list 0..n-1 as the range. */
static void test_record_list(void **state)
{
	static const int64_t list[] = { 3, 5, 6, 10, 11, 17, 40, 49 };
	struct dt_source s = fake_source(50);
	struct dt_pipeline p, q;
	int64_t order[50], range[50], all[50], seen = 0;

	assert_int_equal(dt_pipeline_init_list(&p, &s, list, 8, 3, 1, 1, 1, 0), 0);
	assert_int_equal(dt_pipeline_size(&p), 8);
	assert_int_equal(dt_pipeline_steps(&p), 3);
	assert_int_equal(dt_pipeline_record(&p, 6), 40);
	assert_int_equal(read_epoch(&p, 0, order), 8);
	for (int i = 0; i < 8; i++)
		for (int j = 0; j < 8; j++)
			seen += order[i] == list[j];
	assert_int_equal(seen, 8);
	dt_pipeline_release(&p);

	/* Unshuffled, in list order. */
	assert_int_equal(dt_pipeline_init_list(&p, &s, list, 8, 3, 0, 1, 1, 0), 0);
	read_epoch(&p, 0, order);
	assert_memory_equal(order, list, sizeof(list));
	dt_pipeline_release(&p);

	/* The list 0..49 gives the batches of the range [0, 50), shuffled the same way. */
	for (int i = 0; i < 50; i++)
		all[i] = i;
	assert_int_equal(dt_pipeline_init_list(&p, &s, all, 50, 7, 1, 9, 1, 0), 0);
	assert_int_equal(dt_pipeline_init(&q, &s, 0, 50, 7, 1, 9, 1, 0), 0);
	for (int epoch = 0; epoch < 2; epoch++) {
		read_epoch(&p, epoch, order);
		read_epoch(&q, epoch, range);
		assert_memory_equal(order, range, sizeof(order));
	}
	dt_pipeline_release(&p);
	dt_pipeline_release(&q);

	/* Through the cache: each listed record read once. */
	assert_int_equal(dt_pipeline_init_list(&p, &s, list, 8, 3, 1, 1, 1, 0), 0);
	assert_int_equal(dt_pipeline_configure(&p, &(struct dt_pipeline_options){ 0, 1, DT_ON_ERROR_ERROR, NULL, 0 }), 0);
	fake_reads = 0;
	for (int epoch = 0; epoch < 3; epoch++)
		assert_int_equal(read_epoch(&p, epoch, order), 8);
	assert_int_equal(fake_reads, 8);
	dt_pipeline_release(&p);

	/* Lists that are empty, out of order or out of range. */
	assert_int_equal(dt_pipeline_init_list(&p, &s, list, 0, 3, 0, 1, 1, 0), -1);
	assert_int_equal(dt_pipeline_init_list(&p, &s, (int64_t[]){ 4, 4 }, 2, 3, 0, 1, 1, 0), -1);
	assert_error_contains("not increasing");
	assert_int_equal(dt_pipeline_init_list(&p, &s, (int64_t[]){ 4, 50 }, 2, 3, 0, 1, 1, 0), -1);
	assert_error_contains("fake.idx");
}

static void test_last_batch_shorter(void **state)
{
	struct dt_source s = fake_source(10);
	struct dt_pipeline p;
	struct dt_batch b;

	assert_int_equal(dt_pipeline_init(&p, &s, 0, 10, 4, 0, 0, 1, 0), 0);
	assert_int_equal(dt_pipeline_steps(&p), 3);
	dt_batch_alloc(&b, &p);
	assert_int_equal(dt_pipeline_read(&p, 0, 2, &b), 0);
	assert_int_equal(b.n, 2);
	assert_true(b.x[0] == 8 && b.x[2] == 9);
	assert_int_equal(dt_pipeline_read(&p, 0, 0, &b), 0);
	assert_int_equal(b.n, 4);
	assert_int_equal(dt_pipeline_read(&p, 0, 3, &b), -1);
	assert_error_contains("out of range");
	dt_batch_free(&b);
	dt_pipeline_release(&p);
}

static void test_rescale_and_labels(void **state)
{
	struct dt_source s = fake_source(10);
	struct dt_pipeline p;
	struct dt_batch b;

	assert_int_equal(dt_pipeline_init(&p, &s, 0, 10, 10, 0, 0, 0.5f, 0), 0);
	assert_int_equal(p.label.ndim, 1);
	assert_int_equal(p.label.dim[0], 1);
	dt_batch_alloc(&b, &p);
	assert_int_equal(dt_pipeline_read(&p, 0, 0, &b), 0);
	for (int i = 0; i < 10; i++) {
		assert_true(b.x[2 * i] == 0.5f * i);
		assert_true(b.x[2 * i + 1] == -0.5f * i);
		assert_true(b.y[i] == (float)(i % FAKE_CLASSES));
	}
	dt_batch_free(&b);
	dt_pipeline_release(&p);
}

static void test_one_hot(void **state)
{
	struct dt_source s = fake_source(12);
	struct dt_pipeline p;
	struct dt_batch b;

	assert_int_equal(dt_pipeline_init(&p, &s, 0, 12, 8, 1, 3, 1, 7), 0);
	assert_int_equal(p.label.ndim, 1);
	assert_int_equal(p.label.dim[0], 7);
	dt_batch_alloc(&b, &p);
	for (int step = 0; step < 2; step++) {
		assert_int_equal(dt_pipeline_read(&p, 0, step, &b), 0);
		for (int i = 0; i < b.n; i++) {
			int c = (int)b.x[2 * i] % FAKE_CLASSES;
			for (int j = 0; j < 7; j++)
				assert_true(b.y[i * 7 + j] == (j == c ? 1.0f : 0.0f));
		}
	}
	dt_batch_free(&b);
	dt_pipeline_release(&p);
}

static void test_one_hot_bad_label(void **state)
{
	struct dt_source s = fake_source(12);
	struct dt_pipeline p;
	struct dt_batch b;

	/* The source under-reports its classes: record 9 has label 5, outside 5 one-hot classes. */
	fake_bad_label = 9;
	assert_int_equal(dt_pipeline_init(&p, &s, 0, 12, 4, 0, 0, 1, 5), 0);
	dt_batch_alloc(&b, &p);
	assert_int_equal(dt_pipeline_read(&p, 0, 0, &b), 0);
	assert_int_equal(dt_pipeline_read(&p, 0, 2, &b), -1);
	assert_error_contains("record 9");
	assert_error_contains("fake.idx");
	fake_bad_label = -1;
	dt_batch_free(&b);
	dt_pipeline_release(&p);
}

static void test_init_errors(void **state)
{
	struct dt_source s = fake_source(10);
	struct dt_pipeline p;

	assert_int_equal(dt_pipeline_init(&p, &s, 0, 11, 4, 0, 0, 1, 0), -1);
	assert_error_contains("fake.idx");
	assert_int_equal(dt_pipeline_init(&p, &s, 5, 5, 4, 0, 0, 1, 0), -1);
	assert_error_contains("empty");
	assert_int_equal(dt_pipeline_init(&p, &s, 0, 10, 0, 0, 0, 1, 0), -1);
	assert_error_contains("batch size");
	assert_int_equal(dt_pipeline_init(&p, &s, 0, 10, 4, 0, 0, 1, 3), -1);
	assert_error_contains("5 classes");
	dt_pipeline_release(&p); /* a failed init leaves nothing to free */
}

static void test_source_read_error(void **state)
{
	struct dt_source s = fake_source(10);
	struct dt_pipeline p;
	struct dt_batch b;

	assert_int_equal(dt_pipeline_init(&p, &s, 0, 10, 4, 0, 0, 1, 0), 0);
	s.count = 5; /* the source shrank under the pipeline: its read fails */
	dt_batch_alloc(&b, &p);
	assert_int_equal(dt_pipeline_read(&p, 0, 1, &b), -1);
	assert_error_contains("record 5");
	dt_batch_free(&b);
	dt_pipeline_release(&p);
}

/* ---- replica slices ---- */

static void test_batch_slice_covers_once(void **state)
{
	for (int R = 1; R <= 4; R++) {
		for (int n = 0; n <= 130; n++) {
			int prev = 0, lo = n, hi = 0;
			for (int r = 0; r < R; r++) {
				int b, e;
				dt_batch_slice(n, r, R, &b, &e);
				assert_int_equal(b, prev); /* contiguous, in replica order */
				assert_true(e >= b);
				lo = e - b < lo ? e - b : lo;
				hi = e - b > hi ? e - b : hi;
				prev = e;
			}
			assert_int_equal(prev, n);
			assert_true(hi - lo <= 1);
		}
	}
}

/* Every record once per epoch across the replica slices, R = 1..4, B not divisible by R. */
static void test_exactly_once_over_replicas(void **state)
{
	static const int batch_sizes[] = { 5, 7, 10, 13, 33 };
	struct dt_source s = fake_source(101);

	for (int R = 1; R <= 4; R++) {
		for (size_t k = 0; k < sizeof(batch_sizes) / sizeof(*batch_sizes); k++) {
			struct dt_pipeline p;
			struct dt_batch b;
			int64_t order[101];
			int64_t m = 0;
			assert_int_equal(dt_pipeline_init(&p, &s, 0, 101, batch_sizes[k], 1, 5, 1, 0), 0);
			dt_batch_alloc(&b, &p);
			for (int64_t step = 0; step < dt_pipeline_steps(&p); step++) {
				assert_int_equal(dt_pipeline_read(&p, 1, step, &b), 0);
				for (int r = 0; r < R; r++) {
					int lo, hi;
					dt_batch_slice(b.n, r, R, &lo, &hi);
					for (int i = lo; i < hi; i++)
						order[m++] = (int64_t)b.x[2 * i];
				}
			}
			assert_each_once(order, m, 0, 101);
			dt_batch_free(&b);
			dt_pipeline_release(&p);
		}
	}
}

/* ---- a fake image source: record i, element j has value i * 100 + j ---- */

static int img_read(struct dt_source *s, const int64_t *idx, int n, float *x, float *y, uint8_t *bad)
{
	int64_t xs = dt_shape_count(&s->sample);
	for (int i = 0; i < n; i++) {
		fake_reads++;
		if (fake_is_unreadable(idx[i])) {
			if (!bad)
				return dt_error_at(s->name, "record %lld: cannot decode it", (long long)idx[i]);
			bad[i] = 1;
			continue;
		}
		for (int64_t j = 0; j < xs; j++)
			x[i * xs + j] = (float)(idx[i] * 100 + j);
		y[i] = (float)(idx[i] % FAKE_CLASSES);
	}
	return 0;
}

static const struct dt_source_type img_type = { .name = "img", .read = img_read };

static struct dt_source img_source(int64_t count, int h, int w, int c)
{
	struct dt_source s = { .type = &img_type, .count = count, .num_classes = FAKE_CLASSES };
	snprintf(s.name, sizeof(s.name), "images/");
	s.sample = dt_shape_make(3, (int[]){ h, w, c });
	s.label = dt_shape_make(1, (int[]){ 1 });
	return s;
}

static void init_opts(struct dt_pipeline *p, struct dt_source *s, int batch, int shuffle, int one_hot,
		      const struct dt_pipeline_options *o)
{
	assert_int_equal(dt_pipeline_init(p, s, 0, s->count, batch, shuffle, 3, 0.5f, one_hot), 0);
	assert_int_equal(dt_pipeline_configure(p, o), 0);
}

static void assert_batches_equal(const struct dt_pipeline *p, const struct dt_batch *a, const struct dt_batch *b)
{
	assert_int_equal(a->n, b->n);
	assert_memory_equal(a->x, b->x, (size_t)a->n * dt_shape_count(&p->sample) * sizeof(float));
	assert_memory_equal(a->y, b->y, (size_t)a->n * dt_shape_count(&p->label) * sizeof(float));
}

/*
 * Prefetch on (rings of 1, 2 and 3) == off, byte for byte, over several
 * epochs read in order and then at random positions, with shuffle,
 * augmentation, normalization, one-hot and skipped records.
 */
static void test_prefetch_same_as_sync(void **state)
{
	struct dt_source s = img_source(45, 4, 5, 2);
	struct dt_augment aug = { .flip_h = 1, .crop_padding = 1, .translate = 1, .height_lo = -0.25,
				  .height_hi = 0.25, .width_lo = -0.2, .width_hi = 0.2, .fill_mode = DT_FILL_REFLECT };
	static const float mean[2] = { 1, 2 }, std[2] = { 3, 4 };
	static const int jumps[][2] = { { 2, 3 }, { 0, 0 }, { 2, 4 }, { 2, 5 }, { 1, 0 }, { 3, 6 }, { 0, 6 }, { 0, 0 } };

	nfake_unreadable = 2;
	fake_unreadable[0] = 4;
	fake_unreadable[1] = 30;
	for (int ring = 1; ring <= 3; ring++) {
		struct dt_pipeline p, q;
		struct dt_batch a, b;
		struct dt_pipeline_options off = { 0, 0, DT_ON_ERROR_SKIP, &aug, 0 }, on = off;
		on.prefetch = ring;
		init_opts(&p, &s, 7, 1, 5, &off);
		init_opts(&q, &s, 7, 1, 5, &on);
		assert_int_equal(dt_pipeline_set_normalize(&p, 2, mean, std), 0);
		assert_int_equal(dt_pipeline_set_normalize(&q, 2, mean, std), 0);
		dt_batch_alloc(&a, &p);
		dt_batch_alloc(&b, &q);
		for (int epoch = 0; epoch < 4; epoch++) {
			for (int64_t step = 0; step < dt_pipeline_steps(&p); step++) {
				assert_int_equal(dt_pipeline_read(&p, epoch, step, &a), 0);
				assert_int_equal(dt_pipeline_read(&q, epoch, step, &b), 0);
				assert_batches_equal(&p, &a, &b);
			}
			assert_int_equal(dt_pipeline_report_skipped(&p, epoch), 2);
			assert_int_equal(dt_pipeline_report_skipped(&q, epoch), 2);
		}
		for (size_t k = 0; k < sizeof(jumps) / sizeof(*jumps); k++) {
			assert_int_equal(dt_pipeline_read(&p, jumps[k][0], jumps[k][1], &a), 0);
			assert_int_equal(dt_pipeline_read(&q, jumps[k][0], jumps[k][1], &b), 0);
			assert_batches_equal(&p, &a, &b);
		}
		dt_batch_free(&a);
		dt_batch_free(&b);
		dt_pipeline_release(&p);
		dt_pipeline_release(&q);
	}
	nfake_unreadable = 0;
}

/* steps_per_epoch: the thread wraps to the next epoch early; validation-like pipelines repeat epoch 0. */
static void test_prefetch_steps_per_epoch(void **state)
{
	struct dt_source s = fake_source(50);
	struct dt_pipeline p, q, v;
	struct dt_batch a, b, c;
	struct dt_pipeline_options off = { 0, 0, DT_ON_ERROR_ERROR, NULL, 3 }, on = off, val = { 2, 0, 0, NULL, 0 };

	on.prefetch = 2;
	init_opts(&p, &s, 4, 1, 0, &off);
	init_opts(&q, &s, 4, 1, 0, &on);
	init_opts(&v, &s, 8, 0, 0, &val);
	dt_batch_alloc(&a, &p);
	dt_batch_alloc(&b, &q);
	dt_batch_alloc(&c, &v); /* v's batches are larger */
	for (int epoch = 0; epoch < 3; epoch++) {
		for (int64_t step = 0; step < 3; step++) {
			assert_int_equal(dt_pipeline_read(&p, epoch, step, &a), 0);
			assert_int_equal(dt_pipeline_read(&q, epoch, step, &b), 0);
			assert_batches_equal(&p, &a, &b);
		}
		for (int64_t step = 0; step < dt_pipeline_steps(&v); step++) {
			assert_int_equal(dt_pipeline_read(&v, 0, step, &c), 0);
			assert_true(c.x[0] == 8.0f * step * 0.5f);
		}
	}
	dt_batch_free(&a);
	dt_batch_free(&b);
	dt_batch_free(&c);
	dt_pipeline_release(&p);
	dt_pipeline_release(&q);
	dt_pipeline_release(&v);
}

/* An error in the thread reaches the caller with the source's message and place. */
static void test_prefetch_error_travels(void **state)
{
	struct dt_source s = fake_source(20);
	struct dt_pipeline p;
	struct dt_batch b;
	struct dt_pipeline_options on = { 3, 0, DT_ON_ERROR_ERROR, NULL, 0 };
	char sync_msg[1024];

	nfake_unreadable = 1;
	fake_unreadable[0] = 13;
	init_opts(&p, &s, 4, 0, 0, &(struct dt_pipeline_options){ 0, 0, DT_ON_ERROR_ERROR, NULL, 0 });
	dt_batch_alloc(&b, &p);
	assert_int_equal(dt_pipeline_read(&p, 0, 3, &b), -1);
	snprintf(sync_msg, sizeof(sync_msg), "%s", dt_error_last());
	dt_pipeline_release(&p);

	init_opts(&p, &s, 4, 0, 0, &on);
	dt_error_capture(NULL);
	assert_int_equal(dt_pipeline_read(&p, 0, 0, &b), 0);
	assert_int_equal(dt_pipeline_read(&p, 0, 1, &b), 0);
	assert_int_equal(dt_pipeline_read(&p, 0, 2, &b), 0);
	assert_int_equal(dt_pipeline_read(&p, 0, 3, &b), -1);
	assert_string_equal(dt_error_last(), sync_msg);
	assert_string_equal(dt_error_last_where(), "fake.idx");
	assert_error_contains("record 13");
	/* Another position restarts the thread; the bad batch fails again. */
	assert_int_equal(dt_pipeline_read(&p, 0, 4, &b), 0);
	assert_int_equal(dt_pipeline_read(&p, 0, 3, &b), -1);
	dt_batch_free(&b);
	dt_pipeline_release(&p);
	nfake_unreadable = 0;
}

/* ---- unreadable records ---- */

/* What dt_pipeline_report_skipped(p, epoch) prints on stderr, into buf. */
static int64_t report_text(struct dt_pipeline *p, int epoch, char *buf, size_t size)
{
	FILE *tmp = tmpfile();
	int saved = dup(2);
	int64_t n;
	size_t len;

	assert_non_null(tmp);
	fflush(stderr);
	dup2(fileno(tmp), 2);
	dt_error_set_quiet(0);
	n = dt_pipeline_report_skipped(p, epoch);
	fflush(stderr);
	dt_error_set_quiet(1);
	dup2(saved, 2);
	close(saved);
	rewind(tmp);
	len = fread(buf, 1, size - 1, tmp);
	buf[len] = '\0';
	fclose(tmp);
	return n;
}

static void test_on_error_skip(void **state)
{
	struct dt_source s = fake_source(12);
	for (int prefetch = 0; prefetch <= 2; prefetch += 2) {
		struct dt_pipeline p;
		struct dt_batch b;
		struct dt_pipeline_options o = { prefetch, 0, DT_ON_ERROR_SKIP, NULL, 0 };

		nfake_unreadable = 6;
		memcpy(fake_unreadable, (int64_t[]){ 9, 4, 5, 6, 7, 1 }, 6 * sizeof(int64_t));
		init_opts(&p, &s, 4, 0, 0, &o);
		dt_batch_alloc(&b, &p);
		assert_int_equal(dt_pipeline_read(&p, 0, 0, &b), 0);
		assert_int_equal(b.n, 3); /* 0, 2, 3 */
		assert_true(b.x[0] == 0 && b.x[2] == 1 && b.x[4] == 1.5f);
		assert_true(b.y[0] == 0 && b.y[1] == 2 && b.y[2] == 3);
		assert_int_equal(dt_pipeline_read(&p, 0, 1, &b), 0);
		assert_int_equal(b.n, 0); /* every record bad: an empty batch */
		assert_int_equal(dt_pipeline_read(&p, 0, 2, &b), 0);
		assert_int_equal(b.n, 3); /* 8, 10, 11 */
		assert_true(b.x[0] == 4 && b.x[2] == 5 && b.x[4] == 5.5f);
		assert_int_equal(p.skipped, 6);
		{
			char text[512];
			assert_int_equal(report_text(&p, 2, text, sizeof(text)), 6);
			assert_string_equal(text, "dtrain: warning: skipped 6 unreadable records in epoch 3 of 'fake.idx': "
						  "records 1, 4, 5, 6, 7, 9\n");
			assert_int_equal(report_text(&p, 0, text, sizeof(text)), 0);
			assert_string_equal(text, "");
			/* more than DT_SKIP_LIST: the lowest ten, in order, then "..." (the epoch read three times) */
			for (int k = 0; k < 3; k++)
				for (int64_t step = 0; step < 3; step++)
					assert_int_equal(dt_pipeline_read(&p, 0, step, &b), 0);
			assert_int_equal(report_text(&p, -1, text, sizeof(text)), 18);
			assert_string_equal(text, "dtrain: warning: skipped 18 unreadable records of 'fake.idx': "
						  "records 1, 1, 1, 4, 4, 4, 5, 5, 5, 6, ...\n");
		}
		dt_batch_free(&b);
		dt_pipeline_release(&p);
	}
	nfake_unreadable = 0;
}

/*
 * Processes that read their parts (dt_pipeline_set_part): P processes of
 * R replicas each read, together, every row of every global batch once, in
 * order, each at the offset its rows have in the whole batch.
 */
static void test_parts_cover_the_batch(void **state)
{
	struct dt_source s = fake_source(101);
	for (int P = 1; P <= 3; P++) {
		for (int R = 1; R <= 2; R++) {
			for (int prefetch = 0; prefetch <= 2; prefetch += 2) {
				struct dt_pipeline whole, part[3];
				struct dt_batch bw, bp[3];
				struct dt_pipeline_options o = { prefetch, 0, DT_ON_ERROR_ERROR, NULL, 0 };
				init_opts(&whole, &s, 13, 1, 0, &o);
				dt_batch_alloc(&bw, &whole);
				for (int k = 0; k < P; k++) {
					init_opts(&part[k], &s, 13, 1, 0, &o);
					dt_pipeline_set_part(&part[k], k * R, R, P * R);
					dt_batch_alloc(&bp[k], &part[k]);
				}
				for (int64_t step = 0; step < dt_pipeline_steps(&whole); step++) {
					int rows = 0;
					assert_int_equal(dt_pipeline_read(&whole, 1, step, &bw), 0);
					for (int k = 0; k < P; k++) {
						int lo, hi, unused;
						assert_int_equal(dt_pipeline_read(&part[k], 1, step, &bp[k]), 0);
						/* its rows are those of its replicas' slices of the whole batch */
						dt_batch_slice(bw.n, k * R, P * R, &lo, &unused);
						dt_batch_slice(bw.n, k * R + R - 1, P * R, &unused, &hi);
						assert_int_equal(bp[k].offset, lo);
						assert_int_equal(bp[k].n, hi - lo);
						assert_int_equal(bp[k].total, bw.n);
						assert_int_equal(bp[k].offset, rows);
						for (int i = 0; i < bp[k].n; i++) {
							assert_true(bp[k].x[2 * i] == bw.x[2 * (lo + i)]);
							assert_int_equal(bp[k].records[i], bw.records[lo + i]);
						}
						rows += bp[k].n;
					}
					assert_int_equal(rows, bw.n);
				}
				dt_batch_free(&bw);
				dt_pipeline_release(&whole);
				for (int k = 0; k < P; k++) {
					dt_batch_free(&bp[k]);
					dt_pipeline_release(&part[k]);
				}
			}
		}
	}
}

/* A part drops its own unreadable records: the total counts the other parts' rows as read. */
static void test_part_skips_its_records(void **state)
{
	struct dt_source s = fake_source(12);
	struct dt_pipeline p;
	struct dt_batch b;
	struct dt_pipeline_options o = { 0, 0, DT_ON_ERROR_SKIP, NULL, 0 };

	nfake_unreadable = 2;
	memcpy(fake_unreadable, (int64_t[]){ 1, 6 }, 2 * sizeof(int64_t));
	init_opts(&p, &s, 8, 0, 0, &o);
	dt_pipeline_set_part(&p, 1, 1, 2); /* rows 4..7 of each batch of 8 */
	dt_batch_alloc(&b, &p);
	assert_int_equal(dt_pipeline_read(&p, 0, 0, &b), 0);
	assert_int_equal(b.n, 3); /* 4, 5, 7: record 1 is another part's */
	assert_true(b.records[0] == 4 && b.records[1] == 5 && b.records[2] == 7);
	assert_int_equal(b.offset, 4);
	assert_int_equal(b.total, 7);
	assert_int_equal(p.skipped, 1);
	assert_int_equal(dt_pipeline_read(&p, 0, 1, &b), 0); /* the last batch, 4 rows: this part's are 10, 11 */
	assert_true(b.n == 2 && b.offset == 2 && b.total == 4 && b.records[0] == 10);
	dt_batch_free(&b);
	dt_pipeline_release(&p);
	nfake_unreadable = 0;
}

static void test_on_error_error(void **state)
{
	struct dt_source s = fake_source(12);
	struct dt_pipeline p;
	struct dt_batch b;

	nfake_unreadable = 1;
	fake_unreadable[0] = 5;
	init_opts(&p, &s, 4, 0, 0, &(struct dt_pipeline_options){ 0, 1, DT_ON_ERROR_ERROR, NULL, 0 });
	dt_batch_alloc(&b, &p);
	assert_int_equal(dt_pipeline_read(&p, 0, 0, &b), 0);
	assert_int_equal(dt_pipeline_read(&p, 0, 1, &b), -1);
	assert_string_equal(dt_error_last_where(), "fake.idx");
	assert_string_equal(dt_error_last(), "record 5: cannot decode it");
	dt_batch_free(&b);
	dt_pipeline_release(&p);
	nfake_unreadable = 0;
}

/* ---- cache ---- */

static void test_cache_reads_once(void **state)
{
	struct dt_source s = img_source(30, 2, 2, 3);
	struct dt_pipeline p, q;
	struct dt_batch a, b;

	nfake_unreadable = 1;
	fake_unreadable[0] = 11;
	init_opts(&p, &s, 8, 1, 0, &(struct dt_pipeline_options){ 2, 1, DT_ON_ERROR_SKIP, NULL, 0 });
	init_opts(&q, &s, 8, 1, 0, &(struct dt_pipeline_options){ 0, 0, DT_ON_ERROR_SKIP, NULL, 0 });
	dt_batch_alloc(&a, &p);
	dt_batch_alloc(&b, &q);
	fake_reads = 0;
	for (int64_t step = 0; step < dt_pipeline_steps(&p); step++)
		assert_int_equal(dt_pipeline_read(&p, 0, step, &a), 0);
	assert_int_equal(fake_reads, 30);
	assert_int_equal(dt_pipeline_report_skipped(&p, 0), 1);
	for (int epoch = 1; epoch < 3; epoch++) {
		for (int64_t step = 0; step < dt_pipeline_steps(&p); step++) {
			int64_t before = fake_reads;
			assert_int_equal(dt_pipeline_read(&p, epoch, step, &a), 0);
			assert_int_equal(fake_reads, before); /* from the cache */
			assert_int_equal(dt_pipeline_read(&q, epoch, step, &b), 0);
			assert_batches_equal(&p, &a, &b);
		}
		assert_int_equal(dt_pipeline_report_skipped(&p, epoch), 1); /* still counted and reported */
		dt_pipeline_report_skipped(&q, epoch);
	}
	dt_batch_free(&a);
	dt_batch_free(&b);
	dt_pipeline_release(&p);
	dt_pipeline_release(&q);
	nfake_unreadable = 0;
}

static void test_cache_too_big(void **state)
{
	struct dt_source s = fake_source((int64_t)1 << 50);
	struct dt_pipeline p;
	assert_int_equal(dt_pipeline_init(&p, &s, 0, s.count, 32, 0, 0, 1, 0), 0);
	assert_int_equal(dt_pipeline_configure(&p, &(struct dt_pipeline_options){ 0, 1, 0, NULL, 0 }), -1);
	assert_error_contains("half of the physical memory");
	assert_error_contains("fake.idx");
	dt_pipeline_release(&p);
}

/* ---- normalization ---- */

static void test_normalize_auto(void **state)
{
	struct dt_source s = img_source(23, 3, 2, 2);
	struct dt_pipeline p;
	struct dt_batch b;
	double sum[2] = { 0, 0 }, sq[2] = { 0, 0 }, cnt = 0;
	float mean[2], std[2];

	/* Direct: rescaled values of records 2..19 (the pipeline's range), channel = j % 2, but not record 7. */
	for (int64_t r = 2; r < 20; r++) {
		if (r == 7)
			continue;
		for (int j = 0; j < 12; j++) {
			double v = (double)(r * 100 + j) * 0.5;
			sum[j % 2] += v;
			sq[j % 2] += v * v;
		}
		cnt += 6;
	}
	for (int c = 0; c < 2; c++) {
		mean[c] = (float)(sum[c] / cnt);
		std[c] = (float)sqrt(sq[c] / cnt - (sum[c] / cnt) * (sum[c] / cnt));
	}
	nfake_unreadable = 1;
	fake_unreadable[0] = 7;
	assert_int_equal(dt_pipeline_init(&p, &s, 2, 20, 5, 1, 3, 0.5f, 0), 0);
	assert_int_equal(dt_pipeline_configure(&p, &(struct dt_pipeline_options){ 2, 0, DT_ON_ERROR_SKIP, NULL, 0 }), 0);
	assert_int_equal(dt_pipeline_normalize_auto(&p), 17); /* the records used: 2..19 but 7 */
	assert_int_equal(p.pre.nchan, 2);
	for (int c = 0; c < 2; c++) {
		assert_float_equal(p.pre.mean[c], mean[c], 1e-3);
		assert_float_equal(p.pre.std[c], std[c], 1e-3);
	}
	assert_int_equal(p.skipped, 0); /* not counted as an epoch's skips */
	dt_batch_alloc(&b, &p);
	assert_int_equal(dt_pipeline_read(&p, 0, 0, &b), 0);
	for (int i = 0; i < b.n; i++) {
		int64_t r = (int64_t)lround((b.x[i * 12] * p.pre.std[0] + p.pre.mean[0]) / 0.5 / 100);
		for (int j = 0; j < 12; j++)
			assert_float_equal(b.x[i * 12 + j], ((r * 100 + j) * 0.5f - mean[j % 2]) / std[j % 2], 1e-4);
	}
	dt_batch_free(&b);
	dt_pipeline_release(&p);
	nfake_unreadable = 0;
}

static void test_preprocess_json(void **state)
{
	struct dt_preprocess a = { 0.25f, 0, NULL, NULL }, b = { 0 };
	float x[6] = { 4, 8, 12, 16, 20, 24 };
	char *json;

	dt_preprocess_set(&a, 3, (float[]){ 1, 2, 3 }, (float[]){ 0.5f, 1, 2 });
	json = dt_preprocess_to_json(&a);
	assert_int_equal(dt_preprocess_from_json(&b, json, "ckpt"), 0);
	assert_true(b.rescale == 0.25f && b.nchan == 3);
	assert_memory_equal(a.mean, b.mean, 3 * sizeof(float));
	assert_memory_equal(a.std, b.std, 3 * sizeof(float));
	dt_preprocess_apply(&b, x, 2, 3);
	/* (x / 4 - mean[c]) / std[c] */
	assert_true(x[0] == 0 && x[1] == 0 && x[2] == 0 && x[3] == 6 && x[4] == 3 && x[5] == 1.5f);
	assert_int_equal(dt_preprocess_from_json(&b, "{\"mean\": [1]}", "ckpt"), -1);
	assert_error_contains("ckpt");
	assert_int_equal(dt_preprocess_from_json(&b, "{\"rescale\": 1, \"mean\": [1], \"std\": [0]}", "ckpt"), -1);
	free(json);
	dt_preprocess_release(&a);
	dt_preprocess_release(&b);
}

/* ---- augmentation ---- */

/* One image (1, 4, 1) record 0 = [0, 1, 2, 3] through a fixed translation right by dx pixels. */
static void translate_row(enum dt_fill_mode mode, double f, const float *want)
{
	struct dt_source s = img_source(1, 1, 4, 1);
	struct dt_pipeline p;
	struct dt_batch b;
	struct dt_augment aug = { .translate = 1, .width_lo = f, .width_hi = f, .fill_mode = mode, .fill_value = 9 };
	assert_int_equal(dt_pipeline_init(&p, &s, 0, 1, 1, 0, 0, 1, 0), 0);
	assert_int_equal(dt_pipeline_configure(&p, &(struct dt_pipeline_options){ 0, 0, 0, &aug, 0 }), 0);
	dt_batch_alloc(&b, &p);
	assert_int_equal(dt_pipeline_read(&p, 0, 0, &b), 0);
	for (int i = 0; i < 4; i++)
		if (b.x[i] != want[i])
			fail_msg("mode %d factor %g: x[%d] = %g, want %g", mode, f, i, b.x[i], want[i]);
	dt_batch_free(&b);
	dt_pipeline_release(&p);
}

static void test_translate_fill_modes(void **state)
{
	/* Keras' fill modes: reflect (d c b a | a b c d), wrap, nearest, constant. */
	translate_row(DT_FILL_CONSTANT, 0.25, (float[]){ 9, 0, 1, 2 });
	translate_row(DT_FILL_REFLECT, 0.25, (float[]){ 0, 0, 1, 2 });
	translate_row(DT_FILL_REFLECT, 0.5, (float[]){ 1, 0, 0, 1 });
	translate_row(DT_FILL_WRAP, 0.5, (float[]){ 2, 3, 0, 1 });
	translate_row(DT_FILL_NEAREST, 0.5, (float[]){ 0, 0, 0, 1 });
	translate_row(DT_FILL_CONSTANT, -0.25, (float[]){ 1, 2, 3, 9 });
	translate_row(DT_FILL_REFLECT, -0.5, (float[]){ 2, 3, 3, 2 });
	translate_row(DT_FILL_WRAP, 0, (float[]){ 0, 1, 2, 3 });
}

/* The 3x3x2 image of record r shifted by (dy, dx) with zeros, then flipped when fh. */
static void crop_flip_ref(int64_t r, int dy, int dx, int fh, float *out)
{
	for (int y = 0; y < 3; y++)
		for (int x = 0; x < 3; x++)
			for (int c = 0; c < 2; c++) {
				int sy = y + dy, sx = x + dx;
				if (sy >= 0 && sy < 3 && sx >= 0 && sx < 3 && fh)
					sx = 2 - sx;
				out[(y * 3 + x) * 2 + c] =
					sy < 0 || sy >= 3 || sx < 0 || sx >= 3 ? 0 : (float)(r * 100 + (sy * 3 + sx) * 2 + c);
			}
}

/*
 * Flip and padded crop on 3x3x2 images: each output is one of the 2 x 9
 * allowed transforms of its record, many of them occur, and the choice
 * depends on (seed, epoch, record) only: not on the batch size or prefetch.
 */
static void test_flip_and_crop(void **state)
{
	struct dt_source s = img_source(60, 3, 3, 2);
	struct dt_augment aug = { .flip_h = 1, .crop_padding = 1 };
	struct dt_pipeline p, q;
	struct dt_batch a, b;
	int seen[2][3][3] = { { { 0 } } }, kinds = 0;
	float ref[18], first[60][18];

	init_opts(&p, &s, 8, 1, 0, &(struct dt_pipeline_options){ 0, 0, 0, &aug, 0 });
	init_opts(&q, &s, 5, 1, 0, &(struct dt_pipeline_options){ 2, 0, 0, &aug, 0 });
	dt_batch_alloc(&a, &p);
	dt_batch_alloc(&b, &q);
	for (int64_t step = 0; step < dt_pipeline_steps(&p); step++) {
		assert_int_equal(dt_pipeline_read(&p, 1, step, &a), 0);
		for (int i = 0; i < a.n; i++) {
			int found = 0;
			int64_t r = -1;
			for (int64_t k = 0; k < 60 && r < 0; k++) /* the record: its values are k*100 + j, or 0 */
				for (int j = 0; j < 18; j++)
					if (a.x[i * 18 + j] != 0 && (int64_t)(a.x[i * 18 + j] * 2) / 100 == k) {
						r = k;
						break;
					}
			assert_true(r >= 0);
			for (int fh = 0; fh < 2 && !found; fh++)
				for (int dy = -1; dy <= 1 && !found; dy++)
					for (int dx = -1; dx <= 1 && !found; dx++) {
						crop_flip_ref(r, dy, dx, fh, ref);
						for (int j = 0; j < 18; j++)
							ref[j] *= 0.5f; /* rescale */
						if (!memcmp(ref, a.x + i * 18, sizeof(ref))) {
							found = 1;
							kinds += !seen[fh][dy + 1][dx + 1]++;
						}
					}
			assert_true(found);
			memcpy(first[r], a.x + i * 18, sizeof(ref));
		}
	}
	assert_true(kinds >= 12); /* 60 draws of 18 equally likely transforms */
	for (int64_t step = 0; step < dt_pipeline_steps(&q); step++) {
		assert_int_equal(dt_pipeline_read(&q, 1, step, &b), 0);
		for (int i = 0; i < b.n; i++) {
			int64_t r = -1;
			for (int64_t k = 0; k < 60 && r < 0; k++)
				for (int j = 0; j < 18; j++)
					if (b.x[i * 18 + j] != 0 && (int64_t)(b.x[i * 18 + j] * 2) / 100 == k) {
						r = k;
						break;
					}
			assert_memory_equal(first[r], b.x + i * 18, sizeof(ref));
		}
	}
	/* Another epoch draws again. */
	assert_int_equal(dt_pipeline_read(&q, 2, 0, &b), 0);
	dt_batch_free(&a);
	dt_batch_free(&b);
	dt_pipeline_release(&p);
	dt_pipeline_release(&q);
}

/* Augmentation and shuffle come from the seed: two pipelines with one seed agree, another seed differs. */
static void test_augment_reproducible(void **state)
{
	struct dt_source s = img_source(40, 4, 4, 1);
	struct dt_augment aug = { .flip_h = 1, .flip_v = 1, .translate = 1, .height_lo = -0.5, .height_hi = 0.5,
				  .width_lo = -0.5, .width_hi = 0.5, .fill_mode = DT_FILL_WRAP };
	struct dt_pipeline p, q, r;
	struct dt_batch a, b;
	int differ = 0;

	init_opts(&p, &s, 40, 1, 0, &(struct dt_pipeline_options){ 0, 0, 0, &aug, 0 });
	init_opts(&q, &s, 40, 1, 0, &(struct dt_pipeline_options){ 3, 0, 0, &aug, 0 });
	assert_int_equal(dt_pipeline_init(&r, &s, 0, 40, 40, 1, 4, 0.5f, 0), 0);
	assert_int_equal(dt_pipeline_configure(&r, &(struct dt_pipeline_options){ 0, 0, 0, &aug, 0 }), 0);
	dt_batch_alloc(&a, &p);
	dt_batch_alloc(&b, &p);
	assert_int_equal(dt_pipeline_read(&p, 5, 0, &a), 0);
	assert_int_equal(dt_pipeline_read(&q, 5, 0, &b), 0);
	assert_batches_equal(&p, &a, &b);
	assert_int_equal(dt_pipeline_read(&r, 5, 0, &b), 0);
	differ = memcmp(a.x, b.x, 40 * 16 * sizeof(float)) != 0;
	assert_true(differ);
	dt_batch_free(&a);
	dt_batch_free(&b);
	dt_pipeline_release(&p);
	dt_pipeline_release(&q);
	dt_pipeline_release(&r);
}

static void test_augment_needs_images(void **state)
{
	struct dt_source s = fake_source(10);
	struct dt_augment aug = { .flip_h = 1 };
	struct dt_pipeline p;
	assert_int_equal(dt_pipeline_init(&p, &s, 0, 10, 4, 0, 0, 1, 0), 0);
	assert_int_equal(dt_pipeline_configure(&p, &(struct dt_pipeline_options){ 0, 0, 0, &aug, 0 }), -1);
	assert_error_contains("images");
	dt_pipeline_release(&p);
}

/* ---- splits ---- */

/* Every record in exactly one part, each part increasing. */
static void assert_partition(const struct dt_split *sp, int64_t count)
{
	char *seen = calloc(count, 1);
	const int64_t *part[3] = { sp->train, sp->val, sp->test };
	int64_t n[3] = { sp->ntrain, sp->nval, sp->ntest };

	assert_int_equal(n[0] + n[1] + n[2], count);
	for (int k = 0; k < 3; k++) {
		for (int64_t i = 0; i < n[k]; i++) {
			assert_true(part[k][i] >= 0 && part[k][i] < count);
			assert_true(i == 0 || part[k][i] > part[k][i - 1]);
			assert_int_equal(seen[part[k][i]], 0);
			seen[part[k][i]] = 1;
		}
	}
	free(seen);
}

/* Records of part (n of them) per class of labels into per[] (nclasses + 1: the last counts -1). */
static void count_classes(const int64_t *part, int64_t n, const int32_t *labels, int nclasses, int64_t *per)
{
	memset(per, 0, (size_t)(nclasses + 1) * sizeof(*per));
	for (int64_t i = 0; i < n; i++)
		per[labels[part[i]] >= 0 ? labels[part[i]] : nclasses]++;
}

/* The default: Keras' last records, validation then test at the end. */
static void test_split_last_records(void **state)
{
	struct dt_split_config c = { 0 };
	struct dt_split sp;

	assert_int_equal(dt_split_size(100, 0.2), 20);
	assert_int_equal(dt_split_size(10, 0.25), 3); /* rounded up, as Keras' validation_split */
	assert_int_equal(dt_split_size(10, 0), 0);
	dt_split_records(&sp, 100, 20, 0, &c, 1, NULL, 0);
	assert_partition(&sp, 100);
	assert_true(sp.ntrain == 80 && sp.nval == 20 && sp.ntest == 0 && !sp.test);
	assert_true(sp.train[79] == 79 && sp.val[0] == 80 && sp.val[19] == 99);
	dt_split_release(&sp);
	dt_split_records(&sp, 100, 20, 10, &c, 1, NULL, 0);
	assert_partition(&sp, 100);
	assert_true(sp.train[69] == 69 && sp.val[0] == 70 && sp.val[19] == 89 && sp.test[0] == 90 && sp.test[9] == 99);
	dt_split_release(&sp);
}

/* shuffle: the parts of one seeded order, the same for the same seed. */
static void test_split_shuffle(void **state)
{
	struct dt_split_config c = { .shuffle = 1 };
	struct dt_split a, b, d;
	int64_t tail = 0;

	dt_split_records(&a, 100, 20, 10, &c, 5, NULL, 0);
	dt_split_records(&b, 100, 20, 10, &c, 5, NULL, 0);
	dt_split_records(&d, 100, 20, 10, &c, 6, NULL, 0);
	assert_partition(&a, 100);
	assert_true(a.ntrain == 70 && a.nval == 20 && a.ntest == 10);
	assert_memory_equal(a.val, b.val, 20 * sizeof(int64_t));
	assert_memory_equal(a.test, b.test, 10 * sizeof(int64_t));
	assert_true(memcmp(a.val, d.val, 20 * sizeof(int64_t)) != 0);
	for (int i = 0; i < 20; i++)
		tail += a.val[i] >= 70;
	assert_true(tail < 20); /* not the last records */
	dt_split_release(&a);
	dt_split_release(&b);
	dt_split_release(&d);
}

/* stratify: each class cut in proportion (largest remainder), from the end of each class. */
static void test_split_stratify(void **state)
{
	static const int size[5] = { 40, 30, 20, 6, 4 };
	int32_t labels[100];
	int64_t per[6];
	struct dt_split sp;
	int n = 0;

	for (int k = 0; k < 5; k++) /* sorted by class, the case validation_split gets wrong */
		for (int i = 0; i < size[k]; i++)
			labels[n++] = k;
	for (int shuffle = 0; shuffle <= 1; shuffle++) {
		struct dt_split_config c = { .shuffle = shuffle, .stratify = 1 };
		dt_split_records(&sp, 100, 20, 10, &c, 3, labels, 5);
		assert_partition(&sp, 100);
		assert_true(sp.nval == 20 && sp.ntest == 10);
		/* validation: 8, 6, 4, 1.2, 0.8 -> 8, 6, 4, 1, 1; test: 4, 3, 2, 0.6, 0.4 -> 4, 3, 2, 1, 0 */
		count_classes(sp.val, sp.nval, labels, 5, per);
		assert_true(per[0] == 8 && per[1] == 6 && per[2] == 4 && per[3] == 1 && per[4] == 1 && per[5] == 0);
		count_classes(sp.test, sp.ntest, labels, 5, per);
		assert_true(per[0] == 4 && per[1] == 3 && per[2] == 2 && per[3] == 1 && per[4] == 0);
		if (!shuffle) /* class 0 is records 0..39: test its last 4, validation the 8 before */
			assert_true(sp.test[0] == 36 && sp.val[0] == 28 && sp.val[7] == 35);
		dt_split_release(&sp);
	}

	/* A class of one record stays in training; unreadable records (-1) are a group of their own. */
	{
		struct dt_split_config c = { .stratify = 1 };
		int32_t few[12] = { 0, 0, 0, 0, 0, 1, -1, -1, -1, -1, 0, 0 };
		dt_split_records(&sp, 12, 6, 0, &c, 3, few, 2);
		assert_partition(&sp, 12);
		count_classes(sp.train, sp.ntrain, few, 2, per);
		assert_true(per[1] == 1 && per[0] >= 1 && per[2] >= 1);
		count_classes(sp.val, sp.nval, few, 2, per);
		assert_true(per[0] == 4 && per[1] == 0 && per[2] == 2); /* 7 * 0.5 = 3.5, 4 * 0.5 = 2, then one more */
		dt_split_release(&sp);
	}

	/* Nothing to cut: stratify is moot and reads no labels (the caller passes none). */
	{
		struct dt_split_config c = { .shuffle = 1, .stratify = 1 };
		dt_split_records(&sp, 12, 0, 0, &c, 3, NULL, 2);
		assert_partition(&sp, 12);
		assert_true(sp.ntrain == 12 && sp.nval == 0 && sp.ntest == 0);
		dt_split_release(&sp);
	}
}

static void test_split_config(void **state)
{
	struct dt_pipeline_config c;
	struct dt_doc *d;

	d = dt_doc_parse("m.yaml", "test_split: 0.2\nsplit: {shuffle: true, stratify: true, seed: 9}\n", ".");
	assert_int_equal(dt_pipeline_config_read(&c, dt_doc_root(d)), 0);
	assert_true(c.split.test == 0.2 && c.split.shuffle && c.split.stratify && c.split.has_seed && c.split.seed == 9);
	dt_pipeline_config_release(&c);
	dt_doc_free(d);
	d = dt_doc_parse("m.yaml", "batch_size: 2\n", ".");
	assert_int_equal(dt_pipeline_config_read(&c, dt_doc_root(d)), 0);
	assert_true(c.split.test == 0 && !c.split.shuffle && !c.split.stratify && !c.split.has_seed);
	dt_pipeline_config_release(&c);
	dt_doc_free(d);

	static const char *const bad[][3] = {
		{ "split: {shufle: true}\n", "m.yaml:1:9", "did you mean 'shuffle'" },
		{ "split: yes\n", "m.yaml:1:8", "split" },
		{ "split: {stratify: maybe}\n", "m.yaml:1:19", "stratify" },
		{ "test_split: 1\n", "m.yaml:1:13", "test_split" },
		{ "test: {format: idx}\ntest_split: 0.1\n", "m.yaml:2:13", "either 'test' or 'test_split'" },
	};
	for (size_t k = 0; k < sizeof(bad) / sizeof(*bad); k++) {
		d = dt_doc_parse("m.yaml", bad[k][0], ".");
		assert_int_equal(dt_pipeline_config_read(&c, dt_doc_root(d)), -1);
		if (strcmp(dt_error_last_where(), bad[k][1]) || !strstr(dt_error_last(), bad[k][2]))
			fail_msg("'%s': error at %s (%s), want %s (%s)", bad[k][0], dt_error_last_where(), dt_error_last(),
				 bad[k][1], bad[k][2]);
		dt_pipeline_config_release(&c);
		dt_doc_free(d);
	}
}

/* ---- the config keys ---- */

static int read_config(const char *yaml, struct dt_pipeline_config *c, struct dt_doc **doc)
{
	*doc = dt_doc_parse("m.yaml", yaml, ".");
	assert_non_null(*doc);
	return dt_pipeline_config_read(c, dt_doc_root(*doc));
}

static void test_config_keys(void **state)
{
	struct dt_pipeline_config c;
	struct dt_doc *d;

	assert_int_equal(read_config("batch_size: 3\n", &c, &d), 0);
	assert_true(c.prefetch == 2 && !c.cache && c.on_error == DT_ON_ERROR_ERROR && c.normalize == DT_NORMALIZE_NONE &&
		    !c.has_augment);
	dt_pipeline_config_release(&c);
	dt_doc_free(d);

	assert_int_equal(read_config("prefetch: 0\ncache: true\non_error: skip\nnormalize: auto\n"
				     "augment:\n  random_flip: horizontal\n  random_crop: {padding: 4}\n"
				     "  random_translation: {height_factor: 0.1, width_factor: [-0.2, 0.3], fill_mode: constant, fill_value: 2}\n",
				     &c, &d), 0);
	assert_true(c.prefetch == 0 && c.cache && c.on_error == DT_ON_ERROR_SKIP && c.normalize == DT_NORMALIZE_AUTO);
	assert_true(c.has_augment && c.augment.flip_h && !c.augment.flip_v && c.augment.crop_padding == 4);
	assert_true(c.augment.translate && c.augment.height_lo == -0.1 && c.augment.height_hi == 0.1);
	assert_true(c.augment.width_lo == -0.2 && c.augment.width_hi == 0.3);
	assert_true(c.augment.fill_mode == DT_FILL_CONSTANT && c.augment.fill_value == 2);
	dt_pipeline_config_release(&c);
	dt_doc_free(d);

	assert_int_equal(read_config("normalize: {mean: [0.5, 0.25], std: [2, 4]}\n", &c, &d), 0);
	assert_true(c.normalize == DT_NORMALIZE_GIVEN && c.nnorm == 2 && c.mean[1] == 0.25f && c.std[1] == 4);
	dt_pipeline_config_release(&c);
	dt_doc_free(d);

	static const char *const bad[][2] = {
		{ "normalize: yes\n", "m.yaml:1:12" },
		{ "normalize: {mean: [1, 2], std: [1]}\n", "m.yaml:1:32" },
		{ "normalize: {mean: [1], std: [0]}\n", "m.yaml:1:30" },
		{ "on_error: ignore\n", "m.yaml:1:11" },
		{ "prefetch: -1\n", "m.yaml:1:11" },
		{ "augment: {random_flip: sideways}\n", "m.yaml:1:24" },
		{ "augment: {random_crop: {pading: 4}}\n", "m.yaml:1:25" },
		{ "augment: {random_translation: {height_factor: 2}}\n", "m.yaml:1:47" },
		{ "augment: {random_rotation: 0.1}\n", "m.yaml:1:11" },
	};
	for (size_t k = 0; k < sizeof(bad) / sizeof(*bad); k++) {
		assert_int_equal(read_config(bad[k][0], &c, &d), -1);
		if (strcmp(dt_error_last_where(), bad[k][1]))
			fail_msg("'%s': error at %s (%s), want %s", bad[k][0], dt_error_last_where(), dt_error_last(),
				 bad[k][1]);
		dt_pipeline_config_release(&c);
		dt_doc_free(d);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_record_once_per_epoch),
		cmocka_unit_test(test_same_seed_epoch_same_order),
		cmocka_unit_test(test_epochs_and_seeds_differ),
		cmocka_unit_test(test_shuffle_is_uniform),
		cmocka_unit_test(test_no_shuffle_is_identity),
		cmocka_unit_test(test_sub_range),
		cmocka_unit_test(test_record_list),
		cmocka_unit_test(test_last_batch_shorter),
		cmocka_unit_test(test_rescale_and_labels),
		cmocka_unit_test(test_one_hot),
		cmocka_unit_test(test_one_hot_bad_label),
		cmocka_unit_test(test_init_errors),
		cmocka_unit_test(test_source_read_error),
		cmocka_unit_test(test_batch_slice_covers_once),
		cmocka_unit_test(test_exactly_once_over_replicas),
		cmocka_unit_test(test_prefetch_same_as_sync),
		cmocka_unit_test(test_prefetch_steps_per_epoch),
		cmocka_unit_test(test_prefetch_error_travels),
		cmocka_unit_test(test_on_error_skip),
		cmocka_unit_test(test_parts_cover_the_batch),
		cmocka_unit_test(test_part_skips_its_records),
		cmocka_unit_test(test_on_error_error),
		cmocka_unit_test(test_cache_reads_once),
		cmocka_unit_test(test_cache_too_big),
		cmocka_unit_test(test_normalize_auto),
		cmocka_unit_test(test_preprocess_json),
		cmocka_unit_test(test_translate_fill_modes),
		cmocka_unit_test(test_flip_and_crop),
		cmocka_unit_test(test_augment_reproducible),
		cmocka_unit_test(test_augment_needs_images),
		cmocka_unit_test(test_split_last_records),
		cmocka_unit_test(test_split_shuffle),
		cmocka_unit_test(test_split_stratify),
		cmocka_unit_test(test_split_config),
		cmocka_unit_test(test_config_keys),
	};
	dt_error_set_quiet(1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
