/*
 * How fast `format: png_folder` delivers records: opens a PNG folder (by
 * default the copy models/fashion_png.py writes) and reads every record once
 * in a shuffled order, in batches of 128, as the pipeline asks for them; one
 * thread, decode and file reads included. Prints samples/s and us/sample for
 * the best of REPS passes (the first pass also warms the page cache).
 *
 *   make && cc -O2 -I. tests/bench/png_read.c build/libdtrain.a \
 *       $(pkg-config --libs yaml-0.1 zlib libpng libcjson) -ldnnl -fopenmp -lm -o build/png_read
 *   build/png_read [DIR [REPS [COLOR_MODE [SIZE]]]]
 *
 * COLOR_MODE (grayscale) and SIZE (28: same size, no resize) also measure
 * the conversion and the bilinear resize. Compare with the training
 * throughput of models/fashion_mlp.yaml (dtrain fit prints its ms/step).
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/config/config.h"
#include "core/pipeline/source.h"
#include "data/sources.h"

#define BATCH 128

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : "fashion-png/train";
	int reps = argc > 2 ? atoi(argv[2]) : 3;
	const char *mode = argc > 3 ? argv[3] : "grayscale";
	int size = argc > 4 ? atoi(argv[4]) : 28;
	char text[4096];
	struct dt_source s;
	struct dt_doc *doc;
	int64_t *perm, rec;
	float *x, *y;
	double best = 1e30;
	uint64_t r = 88172645463325252ull;

	snprintf(text, sizeof(text), "{format: png_folder, directory: \"%s\", color_mode: %s, image_size: [%d, %d]}",
		 dir, mode, size, size);
	doc = dt_doc_parse("bench", text, ".");
	if (!doc || dt_source_open(&s, dt_doc_root(doc), dt_source_types) < 0)
		return 1;
	rec = dt_shape_count(&s.sample);
	perm = malloc(s.count * sizeof(int64_t));
	x = malloc(BATCH * rec * sizeof(float));
	y = malloc(BATCH * sizeof(float));
	for (int64_t i = 0; i < s.count; i++)
		perm[i] = i;
	for (int64_t i = s.count - 1; i > 0; i--) {
		int64_t j, t;
		r ^= r << 13, r ^= r >> 7, r ^= r << 17;
		j = (int64_t)(r % (uint64_t)(i + 1));
		t = perm[i], perm[i] = perm[j], perm[j] = t;
	}
	for (int k = 0; k < reps; k++) {
		double t0 = now(), t;
		for (int64_t b = 0; b < s.count; b += BATCH) {
			int n = s.count - b < BATCH ? (int)(s.count - b) : BATCH;
			if (s.type->read(&s, perm + b, n, x, y, NULL) < 0)
				return 1;
		}
		t = now() - t0;
		if (t < best)
			best = t;
	}
	printf("png_folder %s (%lld records, %s, %dx%d): %.0f samples/s, %.2f us/sample\n", dir, (long long)s.count,
	       mode, size, size, s.count / best, best / s.count * 1e6);
	dt_source_close(&s);
	dt_doc_free(doc);
	free(perm);
	free(x);
	free(y);
	return 0;
}
