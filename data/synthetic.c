/*
 * `format: synthetic`: a seeded, in-memory data set for tests and for trying
 * dtrain without files.
 *
 *   kind: blobs | spirals   (blobs)
 *   samples: 1000           records; record i has class i % classes
 *   classes: 3
 *   features: 2             spirals: exactly 2
 *   noise: 0.1              standard deviation of the Gaussian noise (spirals: of the angle, in radians)
 *   seed: 0
 *
 * blobs: the centre of class c lies on the unit circle at angle
 * 2*pi*c/classes in the first two features (at c when there is one feature);
 * its other features are drawn uniformly from [-1, 1). A sample is its
 * class centre plus noise. spirals: class c is an arm whose points at radius
 * r, uniform in (0, 1], lie at angle 2*pi*c/classes + 4r plus noise, like the
 * classic CS231n spirals.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "core/pipeline/source.h"
#include "sources.h"

#define SYN_MAX_VALUES (1 << 28) /* samples * features: 1 GiB of floats */

enum { SYN_BLOBS, SYN_SPIRALS };

struct synthetic {
	float *x; /* (samples, features) */
	int features;
};

static void synthetic_close(struct dt_source *s)
{
	struct synthetic *d = s->priv;
	if (!d)
		return;
	free(d->x);
	free(d);
	s->priv = NULL;
}

static void synthetic_blobs(struct synthetic *d, int64_t n, int classes, double noise, uint64_t seed)
{
	int f = d->features;
	double *centre = dt_calloc((size_t)classes * f, sizeof(double));
	struct dt_rng r;

	dt_rng_seed(&r, seed, 1);
	for (int c = 0; c < classes; c++) {
		double *m = centre + (size_t)c * f;
		double a = 2 * M_PI * c / classes;
		if (f == 1) {
			m[0] = c;
			continue;
		}
		m[0] = cos(a);
		m[1] = sin(a);
		for (int j = 2; j < f; j++)
			m[j] = 2 * dt_rng_uniform(&r) - 1;
	}
	dt_rng_seed(&r, seed, 0);
	for (int64_t i = 0; i < n; i++) {
		const double *m = centre + (size_t)(i % classes) * f;
		for (int j = 0; j < f; j++)
			d->x[i * f + j] = (float)(m[j] + noise * dt_rng_normal(&r));
	}
	free(centre);
}

static void synthetic_spirals(struct synthetic *d, int64_t n, int classes, double noise, uint64_t seed)
{
	struct dt_rng r;

	dt_rng_seed(&r, seed, 0);
	for (int64_t i = 0; i < n; i++) {
		/* A random radius, so that any tail of the records (validation_split) covers whole arms. */
		double radius = 1 - dt_rng_uniform(&r);
		double a = 2 * M_PI * (i % classes) / classes + 4 * radius + noise * dt_rng_normal(&r);
		d->x[2 * i] = (float)(radius * cos(a));
		d->x[2 * i + 1] = (float)(radius * sin(a));
	}
}

struct synthetic_args {
	int kind;
	int64_t samples, classes, features, seed;
	double noise;
};

static const char *const kinds[] = { "blobs", "spirals", NULL };

static const char *const synthetic_keys[] = { "format", "kind", "samples", "classes", "features", "noise", "seed",
					      NULL };

static int synthetic_args(const struct dt_node *args, struct synthetic_args *a)
{
	const struct dt_node *where = dt_node_get(args, "samples") ? dt_node_get(args, "samples") : args;

	if (dt_cfg_check_keys(args, "synthetic", synthetic_keys) < 0 ||
	    dt_cfg_enum(args, "kind", kinds, SYN_BLOBS, &a->kind) < 0 ||
	    dt_cfg_int(args, "samples", 1000, 1, INT32_MAX, &a->samples) < 0 ||
	    dt_cfg_int(args, "classes", 3, 2, 1000, &a->classes) < 0 ||
	    dt_cfg_int(args, "features", 2, 1, 65536, &a->features) < 0 ||
	    dt_cfg_float(args, "noise", 0.1, 0, 100, &a->noise) < 0 ||
	    dt_cfg_int(args, "seed", 0, 0, INT64_MAX, &a->seed) < 0)
		return -1;
	if (a->kind == SYN_SPIRALS && a->features != 2)
		return dt_node_error(dt_node_get(args, "features"), "spirals have exactly 2 features, got %lld",
				     (long long)a->features);
	if (a->samples < a->classes)
		return dt_node_error(where, "%lld samples cannot cover %lld classes", (long long)a->samples,
				     (long long)a->classes);
	if (a->samples * a->features > SYN_MAX_VALUES)
		return dt_node_error(where, "%lld samples of %lld features are too many (at most %d values)",
				     (long long)a->samples, (long long)a->features, SYN_MAX_VALUES);
	return 0;
}

static int synthetic_check(const struct dt_node *args)
{
	struct synthetic_args a;
	return synthetic_args(args, &a);
}

static int synthetic_open(struct dt_source *s, const struct dt_node *args)
{
	struct synthetic_args a;
	struct synthetic *d;

	if (synthetic_args(args, &a) < 0)
		return -1;
	d = dt_calloc(1, sizeof(*d));
	d->features = (int)a.features;
	d->x = dt_malloc((size_t)(a.samples * a.features) * sizeof(float));
	s->priv = d;
	if (a.kind == SYN_BLOBS)
		synthetic_blobs(d, a.samples, (int)a.classes, a.noise, (uint64_t)a.seed);
	else
		synthetic_spirals(d, a.samples, (int)a.classes, a.noise, (uint64_t)a.seed);

	snprintf(s->name, sizeof(s->name), "synthetic %s", kinds[a.kind]);
	s->count = a.samples;
	s->sample = dt_shape_make(1, (int[]){ (int)a.features });
	s->label = dt_shape_make(1, (int[]){ 1 });
	s->num_classes = (int)a.classes;
	return 0;
}

static int synthetic_read(struct dt_source *s, const int64_t *idx, int n, float *x, float *y, uint8_t *bad)
{
	const struct synthetic *d = s->priv;
	for (int i = 0; i < n; i++) {
		if (idx[i] < 0 || idx[i] >= s->count)
			return dt_error("record %lld is out of range in '%s' (%lld records)", (long long)idx[i],
					s->name, (long long)s->count);
		memcpy(x + (int64_t)i * d->features, d->x + idx[i] * d->features, d->features * sizeof(float));
		y[i] = (float)(idx[i] % s->num_classes);
		if (bad)
			bad[i] = 0;
	}
	return 0;
}

const struct dt_source_type dt_synthetic_source = {
	.name = "synthetic",
	.keys = synthetic_keys,
	.open = synthetic_open,
	.read = synthetic_read,
	.close = synthetic_close,
	.check = synthetic_check,
};
