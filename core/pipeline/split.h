/*
 * Splitting one training file into training, validation and test parts:
 * data.validation_split, data.test_split and data.split (man
 * dtrain.yaml(5)).
 *
 * By default the parts are the file's last records, as Keras'
 * validation_split takes them: training first, then validation, then test.
 * data.split: {shuffle: true} draws one seeded order of all records first
 * and cuts that instead; {stratify: true} cuts every class on its own, so
 * each part holds each class in proportion. Each part is a list of record
 * numbers in increasing order, which the pipeline reads
 * (dt_pipeline_init_list); the training pipeline still draws its own order
 * every epoch.
 */
#ifndef DT_SPLIT_H
#define DT_SPLIT_H

#include <stdint.h>

#include "core/config/config.h"

/* data.test_split and data.split; data.validation_split stays in the run config. */
struct dt_split_config {
	double test;                   /* data.test_split: fraction of the records, 0: none */
	int shuffle;                   /* split.shuffle */
	int stratify;                  /* split.stratify */
	int has_seed;                  /* split.seed given; else fit.seed is the seed */
	uint64_t seed;
	const struct dt_node *node;    /* data.split, for errors; NULL when absent */
	const struct dt_node *test_node; /* data.test_split, or NULL */
};

/* The keys data.split allows (shuffle, stratify, seed), NULL-terminated. */
extern const char *const dt_split_keys[];
/* Reads test_split and split of the data mapping. 0, or -1 after the error at the key. */
int dt_split_config_read(struct dt_split_config *c, const struct dt_node *data);

/* Records of a part of count records for a fraction: count - floor(count * (1 - fraction)), 0 for 0. */
int64_t dt_split_size(int64_t count, double fraction);

/* The three parts: increasing record numbers, owned (NULL when empty). */
struct dt_split {
	int64_t *train, *val, *test;
	int64_t ntrain, nval, ntest;
};

/*
 * Splits records [0, count) into nval validation and ntest test records
 * (the rest train; nval + ntest < count) by c: the last records of the
 * order (the identity, or with c->shuffle a permutation drawn from seed);
 * with c->stratify the last records of each class in that order, nval and
 * ntest shared among the classes in proportion to their sizes (largest
 * remainder), never taking the last training record of a class, so the
 * parts may come out slightly smaller. labels (count) are the records'
 * classes below nclasses, -1 for unreadable records (a group of their own);
 * only read with c->stratify and nval + ntest > 0 (NULL otherwise is fine).
 * Release with dt_split_release.
 */
void dt_split_records(struct dt_split *s, int64_t count, int64_t nval, int64_t ntest, const struct dt_split_config *c,
		      uint64_t seed, const int32_t *labels, int nclasses);
void dt_split_release(struct dt_split *s);

#endif
