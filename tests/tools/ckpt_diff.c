/*
 * ckpt_diff A.safetensors B.safetensors [TOL]: compares two checkpoints
 * tensor by tensor (the CLI tests of the strategies). For each tensor of A,
 * B must have one of the same name and shape, and
 *   max |a - b| / max(max |a|, 1e-12) <= TOL   (default 1e-5).
 * Prints the worst relative error per tensor; exit 0 when all are within
 * TOL, 1 otherwise, 2 on a bad file.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/checkpoint/checkpoint.h"

int main(int argc, char **argv)
{
	struct dt_ckpt *a, *b;
	double tol = argc > 3 ? atof(argv[3]) : 1e-5, worst = 0;
	int bad = 0;

	if (argc < 3) {
		fprintf(stderr, "usage: ckpt_diff A.safetensors B.safetensors [TOL]\n");
		return 2;
	}
	a = dt_checkpoint_load(argv[1]);
	b = dt_checkpoint_load(argv[2]);
	if (!a || !b)
		return 2;
	if (dt_checkpoint_count(a) != dt_checkpoint_count(b)) {
		printf("tensor counts differ: %d and %d\n", dt_checkpoint_count(a), dt_checkpoint_count(b));
		bad = 1;
	}
	for (int i = 0; i < dt_checkpoint_count(a); i++) {
		struct dt_ckpt_tensor x = dt_checkpoint_at(a, i);
		const struct dt_ckpt_tensor *y = dt_checkpoint_find(b, x.name);
		int64_t n = dt_shape_count(&x.shape);
		double diff = 0, scale = 1e-12, rel;
		if (!y || !dt_shape_equal(&x.shape, &y->shape)) {
			printf("%s: %s in %s\n", x.name, y ? "another shape" : "missing", argv[2]);
			bad = 1;
			continue;
		}
		for (int64_t k = 0; k < n; k++) {
			double d = fabs((double)x.data[k] - (double)y->data[k]);
			diff = d > diff || isnan(d) ? d : diff;
			scale = fabs(x.data[k]) > scale ? fabs(x.data[k]) : scale;
		}
		rel = diff / scale;
		printf("%s: max relative difference %.3g\n", x.name, rel);
		if (!(rel <= tol))
			bad = 1;
		worst = rel > worst ? rel : worst;
	}
	printf("worst %.3g (tolerance %.3g): %s\n", worst, tol, bad ? "DIFFERENT" : "same");
	dt_checkpoint_free(a);
	dt_checkpoint_free(b);
	return bad;
}
