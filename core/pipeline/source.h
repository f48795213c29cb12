/*
 * The data-source interface. A source is a random-access collection of
 * (sample, label) records: IDX, CSV and NPY files, PNG folders, CIFAR
 * batches, a synthetic set. Sources live in data/, one file per format,
 * with their table in data/sources.c; core/ knows none of them by name.
 *
 * A source reads records on the host into float buffers; the pipeline
 * (pipeline.h) decides the order, batches, rescales and moves them on.
 */
#ifndef DT_SOURCE_H
#define DT_SOURCE_H

#include <stdint.h>

#include "core/config/config.h"
#include "core/tensor.h"

struct dt_source {
	const struct dt_source_type *type;
	char name[512];          /* what errors name: usually the data file's path */
	int64_t count;           /* number of records */
	struct dt_shape sample;  /* shape of one x, e.g. (28, 28, 1) */
	struct dt_shape label;   /* shape of one y: (1,) for a class index, (C,) for a vector */
	int num_classes;         /* classes when labels are class indices, else 0 */
	/*
	 * Class names (num_classes malloc'd strings in a malloc'd array, freed
	 * by dt_source_close) when the format knows them: CSV label strings, PNG folder names,
	 * CIFAR's meta file. NULL otherwise. Checkpoints store them for predict.
	 */
	char **class_names;
	void *priv;
};

struct dt_source_type {
	const char *name; /* the `format:` value, e.g. "idx" */
	/*
	 * Reads the source's arguments (the mapping that holds `format:`), opens and
	 * validates its files and fills count, sample, label and num_classes.
	 * Unknown keys, missing files, wrong magic, truncation, count mismatch:
	 * an error naming the file (or the YAML position for bad arguments), -1.
	 */
	int (*open)(struct dt_source *s, const struct dt_node *args);
	/*
	 * Reads records idx[0..n) into x (n, sample) and y (n, label), host memory,
	 * raw values (no rescale). A record that cannot be read: with bad == NULL,
	 * an error naming the file and the record, -1; with bad != NULL
	 * (data.on_error: skip), bad[i] = 1 for it (else 0), its rows of x and y
	 * are left undefined, and read goes on. Returns 0 or -1. Must be safe to
	 * call from the prefetch thread while no other thread uses the source.
	 */
	int (*read)(struct dt_source *s, const int64_t *idx, int n, float *x, float *y, uint8_t *bad);
	void (*close)(struct dt_source *s); /* frees priv; s may be half-open */
	/*
	 * Optional: checks the source's arguments, every key and each value that
	 * can be judged without its files, and opens nothing, so that the whole
	 * config is checked before any data is read (open checks them again).
	 * 0, or -1 after an error naming the YAML position.
	 */
	int (*check)(const struct dt_node *args);
};

/* Checks the arguments of the source `args` describes (a mapping with `format:`) without opening it. 0 or -1. */
int dt_source_check(const struct dt_node *args, const struct dt_source_type *const *types);
/* Opens the source described by `args` (a mapping with `format:`) using the table. */
int dt_source_open(struct dt_source *s, const struct dt_node *args,
		   const struct dt_source_type *const *types);
void dt_source_close(struct dt_source *s);

#endif
