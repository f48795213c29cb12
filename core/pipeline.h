/*
 * The input pipeline: order, batching and preprocessing over a source.
 *
 * A pipeline covers records [begin, end) of a source (validation_split takes
 * the last fraction, as Keras does, before any shuffling). Each epoch has one
 * permutation drawn from (seed, epoch), the same on every worker; global batch
 * b is perm[b*B .. b*B+B), the last one possibly shorter. Replicas take
 * contiguous slices of a global batch (strategy's job), so every record is seen
 * exactly once per epoch and the position (epoch, step) is enough to resume.
 *
 * Preprocessing: x is multiplied by `rescale`; with one_hot > 0 class-index
 * labels become one-hot vectors of that many classes.
 */
#ifndef DT_PIPELINE_H
#define DT_PIPELINE_H

#include <stdint.h>

#include "source.h"

struct dt_pipeline {
	struct dt_source *src;   /* not owned */
	int64_t begin, end;      /* records used */
	int batch_size;          /* global batch B */
	int shuffle;
	uint64_t seed;
	float rescale;
	int one_hot;             /* 0, or number of classes */
	struct dt_shape sample;  /* = src->sample */
	struct dt_shape label;   /* src->label, or (one_hot,) */
	int64_t *perm;           /* (end - begin) record indices of the current epoch */
	int64_t *idx;            /* (B) scratch */
	float *ylabel;           /* (B) scratch for one-hot conversion */
	int epoch;               /* epoch of perm, -1 before the first */
};

/* Host batch, owned by the caller: x (B, sample) and y (B, label). */
struct dt_batch {
	int n;   /* samples in this batch (< B for the last one) */
	float *x;
	float *y;
};

int dt_pipeline_init(struct dt_pipeline *p, struct dt_source *src, int64_t begin, int64_t end,
		     int batch_size, int shuffle, uint64_t seed, float rescale, int one_hot);
void dt_pipeline_release(struct dt_pipeline *p);
int64_t dt_pipeline_size(const struct dt_pipeline *p);  /* end - begin */
int64_t dt_pipeline_steps(const struct dt_pipeline *p); /* ceil(size / B) */
/* Allocates a host batch sized for B samples; free with dt_batch_free(). */
void dt_batch_alloc(struct dt_batch *b, const struct dt_pipeline *p);
void dt_batch_free(struct dt_batch *b);
/* Fills b with global batch `step` of `epoch`. Returns 0, or -1 on a read error. */
int dt_pipeline_read(struct dt_pipeline *p, int epoch, int64_t step, struct dt_batch *b);

#endif
