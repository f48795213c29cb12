/*
 * `format: synthetic`: a seeded, in-memory data set for tests and for trying
 * dtrain without files.
 *
 *   kind: blobs | spirals | sequence   (blobs)
 *   samples: 1000           records; record i has class i % classes
 *   classes: 3              sequence: 2
 *   features: 2             spirals: exactly 2; not for sequence
 *   noise: 0.1              standard deviation of the Gaussian noise (spirals: of the angle, in radians)
 *   vocab: 20, length: 20   sequence only: tokens 0 to vocab - 1, steps per record
 *   seed: 0
 *
 * blobs: the centre of class c lies on the unit circle at angle
 * 2*pi*c/classes in the first two features (at c when there is one feature);
 * its other features are drawn uniformly from [-1, 1). A sample is its
 * class centre plus noise. spirals: class c is an arm whose points at radius
 * r, uniform in (0, 1], lie at angle 2*pi*c/classes + 4r plus noise, like the
 * classic CS231n spirals.
 *
 * sequence (issue 14): records of `length` token indices, a task whose
 * answer is known and needs the order: class 1 iff token 1 is immediately
 * followed by token 2 somewhere in the record. Every record holds at least
 * one 1 and one 2 at random places (adjacent and in that order in class 1,
 * never so in class 0) among tokens drawn uniformly from [0, vocab), so the
 * tokens' counts barely tell the classes apart: a bag-of-tokens model stays
 * near chance (50%), an order-aware one can reach 100%.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "core/pipeline/source.h"
#include "sources.h"

#define SYN_MAX_VALUES (1 << 28) /* samples * features: 1 GiB of floats */

enum { SYN_BLOBS, SYN_SPIRALS, SYN_SEQUENCE };

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

/* A token other than 1 and 2 (vocab >= 3). */
static float other_token(struct dt_rng *r, int vocab)
{
	int64_t v = (int64_t)dt_rng_below(r, (uint64_t)vocab - 2);
	return (float)(v < 1 ? v : v + 2);
}

static void synthetic_sequence(struct synthetic *d, int64_t n, int vocab, uint64_t seed)
{
	int len = d->features;
	struct dt_rng r;

	dt_rng_seed(&r, seed, 0);
	for (int64_t i = 0; i < n; i++) {
		float *x = d->x + i * len;
		int p, q;
		for (int t = 0; t < len; t++)
			x[t] = (float)dt_rng_below(&r, (uint64_t)vocab);
		if (i % 2) { /* class 1: "1 2" at a random place */
			p = (int)dt_rng_below(&r, (uint64_t)len - 1);
			x[p] = 1;
			x[p + 1] = 2;
			continue;
		}
		do { /* class 0: a 1 and a 2, but not "1 2" */
			p = (int)dt_rng_below(&r, (uint64_t)len);
			q = (int)dt_rng_below(&r, (uint64_t)len);
		} while (p == q || q == p + 1);
		x[p] = 1;
		x[q] = 2;
		/*
		 * Then every "1 2" the random tokens made is broken, left to right, by
		 * redrawing the token that was not planted as another than 1 and 2,
		 * which makes no new pair. (Rejecting whole records instead would
		 * never end on long ones: 65,536 tokens of 20 hold "1 2" almost surely.)
		 */
		for (int t = 0; t + 1 < len; t++)
			if (x[t] == 1 && x[t + 1] == 2)
				x[t + 1 == q ? t : t + 1] = other_token(&r, vocab);
	}
}

struct synthetic_args {
	int kind;
	int64_t samples, classes, features, seed, vocab;
	double noise;
};

static const char *const kinds[] = { "blobs", "spirals", "sequence", NULL };

static const char *const synthetic_keys[] = { "format", "kind", "samples", "classes", "features", "noise", "seed",
					      "vocab", "length", NULL };

/* Keys that belong to other kinds than a->kind: an error at the first. */
static int other_kinds_keys(const struct dt_node *args, const struct synthetic_args *a)
{
	static const char *const seq_only[] = { "vocab", "length", NULL }, *const not_seq[] = { "features", "noise", NULL };
	const char *const *keys = a->kind == SYN_SEQUENCE ? not_seq : seq_only;

	for (int i = 0; keys[i]; i++)
		if (dt_node_get(args, keys[i]))
			return dt_node_error(dt_node_get(args, keys[i]), "'%s' does not apply to kind '%s'%s", keys[i],
					     kinds[a->kind],
					     a->kind == SYN_SEQUENCE ? " (it takes vocab and length)"
								     : " (vocab and length are for kind: sequence)");
	return 0;
}

static int synthetic_args(const struct dt_node *args, struct synthetic_args *a)
{
	const struct dt_node *where = dt_node_get(args, "samples") ? dt_node_get(args, "samples") : args;

	a->noise = 0;
	if (dt_cfg_check_keys(args, "synthetic", synthetic_keys) < 0 ||
	    dt_cfg_enum(args, "kind", kinds, SYN_BLOBS, &a->kind) < 0 || other_kinds_keys(args, a) < 0 ||
	    dt_cfg_int(args, "samples", 1000, 1, INT32_MAX, &a->samples) < 0 ||
	    dt_cfg_int(args, "classes", a->kind == SYN_SEQUENCE ? 2 : 3, 2, 1000, &a->classes) < 0 ||
	    dt_cfg_int(args, "seed", 0, 0, INT64_MAX, &a->seed) < 0)
		return -1;
	/* Each kind reads only its own keys, so that `dtrain config` shows no default of another's. */
	if (a->kind == SYN_SEQUENCE) {
		if (dt_cfg_int(args, "vocab", 20, 3, 1 << 24, &a->vocab) < 0 ||
		    dt_cfg_int(args, "length", 20, 2, 65536, &a->features) < 0)
			return -1;
		if (a->classes != 2)
			return dt_node_error(dt_node_get(args, "classes"),
					     "kind 'sequence' has 2 classes (the pattern is there or not), got %lld",
					     (long long)a->classes);
	} else if (dt_cfg_int(args, "features", 2, 1, 65536, &a->features) < 0 ||
		   dt_cfg_float(args, "noise", 0.1, 0, 100, &a->noise) < 0) {
		return -1;
	}
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
	else if (a.kind == SYN_SPIRALS)
		synthetic_spirals(d, a.samples, (int)a.classes, a.noise, (uint64_t)a.seed);
	else
		synthetic_sequence(d, a.samples, (int)a.vocab, (uint64_t)a.seed);

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
