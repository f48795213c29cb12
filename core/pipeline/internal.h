/*
 * Inside the pipeline: what the files of core/pipeline/ share. pipeline.h is
 * the interface; only the files of core/pipeline/ include this header, after
 * pipeline.h (it includes nothing of the pipeline's, so no include circle).
 *
 *   pipeline.c    init and options, the epoch's order, one global batch
 *                 (dt_pipeline_fill_batch), the public calls, replica slices
 *   cache.c       record reads: one source read at a time, through the cache
 *                 of decoded records when data.cache is on
 *   preprocess.c  rescale and normalization (given or auto), one-hot labels
 *   augment.c     random flip, crop and translation of images
 *   prefetch.c    the thread that fills a ring of batches ahead of the trainer
 *
 * A worker is the order and scratch of one reading thread: the synchronous
 * reads have one (p->sync), the prefetch thread its own, so they never share
 * a buffer.
 */
#ifndef DT_PIPELINE_INTERNAL_H
#define DT_PIPELINE_INTERNAL_H

#include <stdint.h>

/* The types are pipeline.h's; this header names them only through pointers. */
struct dt_augment;
struct dt_batch;
struct dt_node;
struct dt_pipeline;
struct dt_pipeline_config;

/* The order of one epoch and the scratch of one reading thread. */
struct dt_pipeline_worker {
	int64_t *perm;    /* (end - begin) record indices of `epoch` */
	int epoch;        /* -1 before the first */
	int64_t *idx;     /* (B) records of the batch */
	float *yraw;      /* (B) class indices before one-hot, or NULL */
	uint8_t *bad;     /* (B) */
	int64_t *skipped; /* (B) records dropped from the batch */
	float *tmp;       /* (sample) augmentation scratch */
	/* cache misses: their positions in the batch, records, and read buffers */
	int *mpos;
	int64_t *midx;
	float *mx, *my;
	uint8_t *mbad;
};

/* ---- pipeline.c ---- */

/* A worker sized for p's batch and sample (cache scratch when p->cache is set); free with _free. */
struct dt_pipeline_worker *dt_pipeline_worker_new(const struct dt_pipeline *p);
void dt_pipeline_worker_free(struct dt_pipeline_worker *w); /* accepts NULL */
/*
 * Global batch `step` of `epoch` into b, with w's order and scratch; the
 * records dropped as unreadable into skipped[0..*nskipped). 0 or -1.
 */
int dt_pipeline_fill_batch(struct dt_pipeline *p, struct dt_pipeline_worker *w, int epoch, int64_t step,
			   struct dt_batch *b, int64_t *skipped, int *nskipped);
/* The epoch a batch depends on: 0 for pipelines without shuffle or augmentation. */
int dt_pipeline_pos_epoch(const struct dt_pipeline *p, int epoch);
/* Adds n skipped records to p's count and to the list the end-of-epoch warning names (the lowest, in order). */
void dt_pipeline_count_skipped(struct dt_pipeline *p, const int64_t *skipped, int n);
/* The position of record r among p's records (the inverse of dt_pipeline_record). */
int64_t dt_pipeline_position(const struct dt_pipeline *p, int64_t r);

/* ---- cache.c ---- */

/*
 * Records idx[0..n) into x (n, sample) and y (n, source label), raw values,
 * through the cache when on (w's miss buffers then; w may be NULL without a
 * cache); bad[i] = 1 for unreadable records under on_error: skip. 0, or -1
 * with the source's error.
 */
int dt_pipeline_read_records(struct dt_pipeline *p, struct dt_pipeline_worker *w, const int64_t *idx, int n,
			     float *x, float *y, uint8_t *bad);
/* Allocates p->cache for p's records; refused when it would take over half the memory. 0 or -1. */
int dt_pipeline_cache_init(struct dt_pipeline *p);
void dt_pipeline_cache_free(struct dt_pipeline *p); /* p->cache may be NULL */

/* ---- preprocess.c ---- */

/* Reads data.normalize (`auto` or {mean, std}) into c. 0, or -1 after the error. */
int dt_pipeline_normalize_read(struct dt_pipeline_config *c, const struct dt_node *n);
/* Whether y[0..n) (the labels of records w->idx) are class indices below limit: 0, or -1 naming the first that is not. */
int dt_pipeline_check_classes(const struct dt_pipeline *p, const struct dt_pipeline_worker *w, int n, const float *y,
			      int limit);
/* Whether y[0..n * per) (the labels of records w->idx) all lie in [0, 1]: 0, or -1 naming the first that does not. */
int dt_pipeline_check_binary(const struct dt_pipeline *p, const struct dt_pipeline_worker *w, int n, int64_t per,
			     const float *y);
/* The class indices of w->yraw (n) as one-hot rows of y (n, p->one_hot). 0, or -1 for a label that is no class. */
int dt_pipeline_one_hot(const struct dt_pipeline *p, const struct dt_pipeline_worker *w, int n, float *y);

/* ---- augment.c ---- */

/* Reads data.augment into a. 0, or -1 after the error. */
int dt_augment_read(struct dt_augment *a, const struct dt_node *n);
/*
 * Transforms one image x (H, W, C) of p's samples in place with p->augment,
 * randomness from (p->seed, epoch, record) alone; tmp holds H*W*C floats.
 */
void dt_augment_image(const struct dt_pipeline *p, float *x, float *tmp, int epoch, int64_t record);

/* ---- prefetch.c ---- */

/* Starts the thread at (epoch, step) with a ring of p->prefetch batches. 0 or -1. */
int dt_prefetch_start(struct dt_pipeline *p, int epoch, int64_t step);
/* Stops and frees the thread of p, if any. */
void dt_prefetch_stop(struct dt_pipeline *p);
/* Batch (epoch, step) from the ring into b: restarts the thread there unless it is next. 0 or -1. */
int dt_prefetch_take(struct dt_pipeline *p, int epoch, int64_t step, struct dt_batch *b);

#endif
