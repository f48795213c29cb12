/*
 * The input pipeline: order, batching, preprocessing, augmentation, caching
 * and prefetching over a source.
 *
 * A pipeline covers records [begin, end) of a source, or a list of them (a
 * part of a split: split.h; by default validation_split takes the last
 * fraction, as Keras does, before any shuffling). Each epoch has one
 * permutation drawn from (seed, epoch), the same on every worker; global batch
 * b is perm[b*B .. b*B+B), the last one possibly shorter. Replicas take
 * contiguous slices of a global batch (dt_batch_slice), so every record is
 * seen exactly once per epoch and the position (epoch, step) is enough to
 * resume.
 *
 * One batch, in order: the source reads the records (from the cache when
 * data.cache is on); with on_error: skip, unreadable records are dropped (the
 * batch gets shorter, possibly empty) and counted; augmentation (training
 * only) transforms each image with randomness drawn from (seed, epoch, record
 * index), never from the batch position or the thread; then x = (x * rescale
 * - mean[c]) / std[c] (dt_preprocess); with one_hot > 0 class-index labels
 * become one-hot vectors of that many classes.
 *
 * With prefetch > 0 a background thread fills a ring of that many batches
 * ahead of the trainer, in the order the trainer asks for them; asking for
 * another position (a resume, a new epoch after steps_per_epoch, a second
 * evaluation) restarts it there. The batches are the same, byte for byte, as
 * without the thread. Errors raised in the thread reach the caller of
 * dt_pipeline_read() with the same message. All source reads of all pipelines
 * are serialized (one source may back a training and a validation pipeline).
 */
#ifndef DT_PIPELINE_H
#define DT_PIPELINE_H

#include <stdint.h>

#include "core/config/config.h"
#include "core/pipeline/source.h"
#include "core/pipeline/split.h"

enum dt_on_error { DT_ON_ERROR_ERROR, DT_ON_ERROR_SKIP };
enum dt_fill_mode { DT_FILL_REFLECT, DT_FILL_WRAP, DT_FILL_NEAREST, DT_FILL_CONSTANT };

/*
 * Random augmentation of images (H, W, C), Keras' layers: RandomFlip
 * (horizontal, vertical or both), a random crop after zero padding (the
 * CIFAR recipe) and RandomTranslation by whole pixels. Applied in that order.
 */
struct dt_augment {
	int flip_h, flip_v;
	int crop_padding;                 /* pixels of zeros on each side, 0: no crop */
	int translate;                    /* random_translation given */
	double height_lo, height_hi;      /* shift range, fractions of H (positive: down) */
	double width_lo, width_hi;        /* fractions of W (positive: right) */
	enum dt_fill_mode fill_mode;      /* outside the image after a translation */
	float fill_value;                 /* for DT_FILL_CONSTANT */
};

/* The pipeline keys of the data section (man dtrain.yaml(5)). */
struct dt_pipeline_config {
	int prefetch;                     /* ring size, default 2; 0: synchronous */
	int cache;
	enum dt_on_error on_error;
	enum { DT_NORMALIZE_NONE, DT_NORMALIZE_GIVEN, DT_NORMALIZE_AUTO } normalize;
	int nnorm;                        /* given: channels */
	float *mean, *std;                /* given: (nnorm), owned */
	const struct dt_node *normalize_node; /* position for channel-count errors */
	int has_augment;
	struct dt_augment augment;
	const struct dt_node *augment_node;
	struct dt_split_config split;     /* test_split and split */
};

/*
 * Reads prefetch, cache, on_error, normalize, augment, test_split and split
 * of the data mapping. 0, or -1 after the error.
 */
int dt_pipeline_config_read(struct dt_pipeline_config *c, const struct dt_node *data);
/*
 * The keys the mappings data.normalize, data.augment and its random_crop and
 * random_translation allow, NULL-terminated: the lists their readers check.
 */
extern const char *const dt_normalize_keys[];
extern const char *const dt_augment_keys[];
extern const char *const dt_random_crop_keys[];
extern const char *const dt_random_translation_keys[];
void dt_pipeline_config_release(struct dt_pipeline_config *c);

/*
 * Value preprocessing: x = (x * rescale - mean[c]) / std[c] where c is the
 * channel of the value: the last dimension of an (H, W, C) sample, the feature
 * of a flat (F,) sample, and one channel for other shapes. nchan 0: rescale only.
 * The same struct, saved as JSON in checkpoints, lets evaluate and predict
 * apply what fit computed.
 */
struct dt_preprocess {
	float rescale;
	int nchan;
	float *mean, *std; /* (nchan), owned */
};

/* Number of normalization channels of samples shaped `sample`. */
int dt_preprocess_channels(const struct dt_shape *sample);
/* x (n, sample_size) in place. */
void dt_preprocess_apply(const struct dt_preprocess *pp, float *x, int64_t n, int64_t sample_size);
/* Copies mean and std (nchan each) into pp. */
void dt_preprocess_set(struct dt_preprocess *pp, int nchan, const float *mean, const float *std);
void dt_preprocess_release(struct dt_preprocess *pp);
/* {"rescale": r, "mean": [..], "std": [..]} (no arrays when nchan is 0). Caller frees. */
char *dt_preprocess_to_json(const struct dt_preprocess *pp);
/* The inverse; `what` names the text's origin in errors. 0, or -1 with an error. */
int dt_preprocess_from_json(struct dt_preprocess *pp, const char *json, const char *what);

struct dt_pipeline_worker; /* order and scratch of one reading thread */
struct dt_prefetch;
struct dt_cache;

#define DT_SKIP_LIST 10 /* skipped record numbers named in the end-of-epoch warning */

struct dt_pipeline {
	struct dt_source *src;   /* not owned */
	int64_t begin, end;      /* records used: [begin, end), or positions in `records` */
	int64_t *records;        /* NULL, or the records used, increasing (begin 0, end their count); owned */
	int batch_size;          /* global batch B */
	int shuffle;
	uint64_t seed;
	float rescale;           /* = pre.rescale */
	int one_hot;             /* 0, or number of classes */
	struct dt_shape sample;  /* = src->sample */
	struct dt_shape label;   /* src->label, or (one_hot,) */
	struct dt_preprocess pre;
	/* options (dt_pipeline_configure) */
	int prefetch;
	enum dt_on_error on_error;
	int augment_on;
	struct dt_augment augment;
	int64_t steps_per_epoch; /* 0: all; where the prefetch thread wraps to the next epoch */
	/* state */
	struct dt_pipeline_worker *sync; /* reads without prefetch */
	struct dt_prefetch *pf;          /* the thread, started by the first read */
	struct dt_cache *cache;
	/* records skipped (on_error: skip) in the batches returned since the last report */
	int64_t skipped;
	int quiet_skips;  /* count but do not warn (MPI ranks other than the chief, which warns for all) */
	/* this process's part of each global batch (dt_pipeline_set_part): replicas [first, first + count) of total; total 0: all */
	int part_first, part_count, part_total;
	int64_t skipped_list[DT_SKIP_LIST]; /* the lowest of the skipped records, ascending */
	/* token indices (dt_pipeline_set_index_limit): 0, or every x value must be a whole number below it */
	int64_t index_limit;
	char index_layer[64];
	/* class-index labels (dt_pipeline_set_class_limit): 0, or every label must be a whole number below it */
	int class_limit;
	/* binary labels (dt_pipeline_set_binary_labels): every label value must lie in [0, 1] */
	int binary_labels;
};

/*
 * Host batch, owned by the caller: x (B, sample) and y (B, label). Without
 * a part it is the whole global batch (offset 0, total n); with one
 * (dt_pipeline_set_part) it is this process's rows of it.
 */
struct dt_batch {
	int n;   /* samples in this batch (< B for the last one, or after skipped records) */
	/*
	 * The global batch's rows before this batch's first row, and its rows
	 * in all, as this process knows them: the other parts' rows are counted
	 * as read, without skips. Under on_error: skip with a part, the
	 * trainer learns the true ones from the other processes.
	 */
	int offset, total;
	float *x;
	float *y;
	int64_t *records; /* (B) the source record of each row */
	int capacity;     /* B of the pipeline it was allocated for */
};

int dt_pipeline_init(struct dt_pipeline *p, struct dt_source *src, int64_t begin, int64_t end,
		     int batch_size, int shuffle, uint64_t seed, float rescale, int one_hot);
/*
 * As dt_pipeline_init, over records[0..n) of src (increasing, within the
 * source; copied) instead of a range: a part of a split (split.h). The
 * epoch's order starts from the list, so the list 0..n-1 reads as the range
 * [0, n) does.
 */
int dt_pipeline_init_list(struct dt_pipeline *p, struct dt_source *src, const int64_t *records, int64_t n,
			  int batch_size, int shuffle, uint64_t seed, float rescale, int one_hot);
/* The record at position i of p (0 <= i < dt_pipeline_size(p)). */
int64_t dt_pipeline_record(const struct dt_pipeline *p, int64_t i);

/* The options of one pipeline (augment only for training data; NULL: none). */
struct dt_pipeline_options {
	int prefetch;
	int cache;
	enum dt_on_error on_error;
	const struct dt_augment *augment;
	int64_t steps_per_epoch;
};
/*
 * Applies options before the first read: a cache that would not fit in half
 * of the physical memory, or augmentation of samples that are not images
 * (H, W, C), is an error. 0 or -1.
 */
int dt_pipeline_configure(struct dt_pipeline *p, const struct dt_pipeline_options *o);
/*
 * With on_error: error (configured), the lowest of p's records that the
 * source knows to be unreadable (a bad CSV row, an image of a folder that
 * is no training class) fails now, with the error its read gives: before
 * training, not when the shuffle first meets it, perhaps late in an epoch.
 * For the commands that read records, not those that want only a shape.
 * 0, or -1 after that error.
 */
int dt_pipeline_check_known_bad(struct dt_pipeline *p);
/* Sets the normalization (nchan must be dt_preprocess_channels(&p->sample)). 0 or -1. */
int dt_pipeline_set_normalize(struct dt_pipeline *p, int nchan, const float *mean, const float *std);
/*
 * Token inputs (an embedding first, issue 14): from now on every value of
 * every sample must be a whole number in [0, limit), or the batch fails with
 * an error naming the source, the record and the value (dt_index_check);
 * `layer` names the embedding in it.
 */
void dt_pipeline_set_index_limit(struct dt_pipeline *p, int64_t limit, const char *layer);
/*
 * Labels that a sparse loss reads as class indices (the model's outputs,
 * limit of them): a batch with a label that is negative, fractional or not
 * below limit is an error naming the label file and the record, as under
 * one_hot. Without it such a label added nothing to the loss, silently.
 */
void dt_pipeline_set_class_limit(struct dt_pipeline *p, int limit);
/*
 * Labels that binary_crossentropy reads as probabilities: a batch with a
 * label value outside [0, 1] (classes numbered 1 and 2, or a third class)
 * is an error naming the label file and the record. Without it such a
 * label made a negative loss, silently.
 */
void dt_pipeline_set_binary_labels(struct dt_pipeline *p);
/*
 * Checks x (n, per_sample) for token indices: whole numbers in [0, limit).
 * The first bad one fails: "'FILE' record R: value V at position P is not
 * a token index of embedding 'LAYER' (a whole number from 0 to limit-1)",
 * where R is records[i], or first + i when records is NULL. 0 or -1.
 */
int dt_index_check(const float *x, int n, int64_t per_sample, int64_t limit, const char *file,
		   const int64_t *records, int64_t first, const char *layer);
/*
 * Computes per-channel mean and population std (floored at 1e-7, as Keras'
 * Normalization) of the rescaled records of p, read once in record order
 * without augmentation, skipping unreadable ones under on_error: skip, and
 * sets them as p's normalization. Call before the first dt_pipeline_read.
 * Returns the number of records used (at least 1), or -1.
 */
int64_t dt_pipeline_normalize_auto(struct dt_pipeline *p);
/* Stops the prefetch thread and frees everything; p may be zeroed or half-initialized. */
void dt_pipeline_release(struct dt_pipeline *p);
int64_t dt_pipeline_size(const struct dt_pipeline *p);  /* end - begin */
int64_t dt_pipeline_steps(const struct dt_pipeline *p); /* ceil(size / B) */
/* Allocates a host batch sized for B samples; free with dt_batch_free(). */
void dt_batch_alloc(struct dt_batch *b, const struct dt_pipeline *p);
void dt_batch_free(struct dt_batch *b);
/*
 * Fills b with global batch `step` of `epoch`. Returns 0, or -1 on a read
 * error (the source's message, raised in the calling thread).
 */
int dt_pipeline_read(struct dt_pipeline *p, int epoch, int64_t step, struct dt_batch *b);
/*
 * With skipped records since the last call: warns "skipped N unreadable
 * records in epoch E of 'path': records i, j, ..." (E is epoch + 1; no
 * epoch when epoch < 0, for validation and test data) and resets the
 * count. Returns the count.
 */
int64_t dt_pipeline_report_skipped(struct dt_pipeline *p, int epoch);

/*
 * From now on p reads only the rows of each global batch that replicas
 * [first, first + count) of `total` compute (dt_batch_slice of the batch as
 * read, before unreadable records are dropped): each process of a job reads
 * and decodes its own slice. Call before the first read.
 */
void dt_pipeline_set_part(struct dt_pipeline *p, int first, int count, int total);

/*
 * Rows [begin, end) of a global batch of n rows that replica r of R
 * computes: contiguous, in replica order, sizes differing by at most one, so
 * every row belongs to exactly one replica (some get none when n < R).
 */
void dt_batch_slice(int n, int r, int R, int *begin, int *end);

#endif
