/*
 * predict's stream readers (data/reader.h): the first byte picks the format
 * (csv, npy, idx), whether the model's input shape is known (a CSV reader
 * always needs one), the chunk size and the training layout a CSV input may
 * follow (label column, delimiter); the rest is the input, raw or gzip, read
 * to its end a chunk at a time.
 */
#include "data/reader.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const names[3] = { "a.csv", "a.npy", "a.idx" };
	static const char *const train[4] = { NULL, "format: csv\nlabel: 0\n", "format: csv\ndelimiter: \";\"\n",
					      "format: csv\nlabel: species\n" };
	static const struct dt_shape shapes[4] = {
		{ 0 }, { 1, { 3 } }, { 1, { 4 } }, { 3, { 2, 2, 1 } },
	};
	const struct dt_reader_type *type;
	struct dt_reader_opts o = { 0 };
	struct dt_doc *d = NULL;
	struct dt_reader r;
	int b, f, n;

	fuzz_quiet();
	if (size < 1 || size > FUZZ_MAX_INPUT)
		return 0;
	b = data[0];
	f = (b & 3) % 3;
	type = dt_reader_find(f == 0 ? "csv" : f == 1 ? "npy" : "idx");
	o.sample = shapes[b >> 2 & 3];
	if (f == 0 && !o.sample.ndim)
		o.sample = shapes[1];
	n = 1 + (b >> 4 & 3) * 3;
	if (f == 0 && train[b >> 6 & 3]) {
		d = dt_doc_parse("fuzz.yaml", train[b >> 6 & 3], fuzz_dir());
		if (!d)
			abort();
		o.train = dt_doc_root(d);
	}
	if (dt_reader_open(&r, type, fuzz_write(names[f], data + 1, size - 1), &o) == 0) {
		int64_t per = dt_shape_count(&r.sample);
		float *x = malloc((size_t)n * (size_t)per * sizeof(float));
		if (!x)
			abort();
		while (r.type->next(&r, n, x) > 0)
			;
		free(x);
		dt_reader_close(&r);
	}
	dt_doc_free(d);
	return 0;
}
