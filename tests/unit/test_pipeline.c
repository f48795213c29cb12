/*
 * The input pipeline over a fake source whose record i has x = (i, -i) and
 * label i % 5: order per epoch, batching, sub-ranges, rescale and one-hot.
 */
#include "helpers.h"

#include "core/pipeline.h"

#define FAKE_CLASSES 5

static int fake_bad_label = -1; /* record whose label is out of range, or -1 */

static int fake_read(struct dt_source *s, const int64_t *idx, int n, float *x, float *y)
{
	for (int i = 0; i < n; i++) {
		if (idx[i] < 0 || idx[i] >= s->count)
			return dt_error("record %lld is out of range in '%s'", (long long)idx[i], s->name);
		x[2 * i] = (float)idx[i];
		x[2 * i + 1] = (float)-idx[i];
		y[i] = idx[i] == fake_bad_label ? FAKE_CLASSES : (float)(idx[i] % FAKE_CLASSES);
	}
	return 0;
}

static const struct dt_source_type fake_type = { "fake", NULL, fake_read, NULL };

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_record_once_per_epoch),
		cmocka_unit_test(test_same_seed_epoch_same_order),
		cmocka_unit_test(test_epochs_and_seeds_differ),
		cmocka_unit_test(test_shuffle_is_uniform),
		cmocka_unit_test(test_no_shuffle_is_identity),
		cmocka_unit_test(test_sub_range),
		cmocka_unit_test(test_last_batch_shorter),
		cmocka_unit_test(test_rescale_and_labels),
		cmocka_unit_test(test_one_hot),
		cmocka_unit_test(test_one_hot_bad_label),
		cmocka_unit_test(test_init_errors),
		cmocka_unit_test(test_source_read_error),
	};
	dt_error_set_quiet(1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
