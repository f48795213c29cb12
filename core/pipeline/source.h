/*
 * The data-source interface. A source is a random-access collection of
 * (sample, label) records: IDX, CSV and NPY files, PNG folders, CIFAR
 * batches, a synthetic set. Sources live in data/, one file per format,
 * with their table in data/sources.c; core/ knows none of them by name.
 *
 * A source reads records on the host into float buffers; the pipeline
 * (pipeline.h) decides the order, batches, rescales and moves them on.
 *
 * One class map per model: the training source numbers its classes (CSV
 * label strings in sorted order, PNG class folders, ...); validation and
 * test sources are opened with that map (dt_source_open_classes), so a file
 * that lacks a class, or lists them in another order, still numbers each
 * class as training did. evaluate takes the map from the checkpoint's
 * class_names when it opens no training data. The map also carries the
 * training data's feature column names, so that a CSV file with a header
 * gives each feature from the column of its name, in whatever order.
 */
#ifndef DT_SOURCE_H
#define DT_SOURCE_H

#include <stdint.h>

#include "core/config/config.h"
#include "core/tensor.h"

/*
 * The classes of the training data, by which other data number their labels:
 * n classes, and names[0..n) when the training labels are names (CSV label
 * strings, PNG folders), NULL when they are class numbers; n 0 when the
 * labels are no classes (a regression). features[0..nfeatures): the names
 * of the training data's feature columns, in its order, when its file had
 * a header (else NULL, 0). Not owned.
 */
struct dt_class_map {
	int n;
	char *const *names;
	int nfeatures;
	char *const *features;
};

struct dt_source {
	const struct dt_source_type *type;
	char name[512];          /* what errors name: usually the data file's path */
	int64_t count;           /* number of records */
	struct dt_shape sample;  /* shape of one x, e.g. (28, 28, 1) */
	struct dt_shape label;   /* shape of one y: (1,) for a class index, (C,) for a vector */
	int num_classes;         /* classes when labels are class indices, else 0 */
	/*
	 * The file that holds the labels, where it is not `name` (npy's y, IDX's
	 * labels file), else "" (then errors name `name`); and the record of
	 * the largest class index, for the error when the model has fewer outputs.
	 */
	char label_file[512];
	int64_t label_max_record;
	/*
	 * Class names (num_classes malloc'd strings in a malloc'd array, freed
	 * by dt_source_close) when the format knows them: CSV label strings, PNG folder names,
	 * CIFAR's meta file. NULL otherwise. Checkpoints store them for predict.
	 */
	char **class_names;
	/*
	 * The names of the feature columns (dt_shape_count(&sample) malloc'd
	 * strings in a malloc'd array, freed by dt_source_close) when the file
	 * names its columns: a CSV header. NULL otherwise. Checkpoints store them,
	 * so that test and predict files are read by column name.
	 */
	char **feature_names;
	/*
	 * During open() only (dt_source_open_classes sets it, then NULL): the
	 * classes to number labels by, or NULL for the source's own numbering.
	 * A format that knows names (csv, png_folder) numbers each label by its
	 * name in the map; csv numbers are kept but must be below n. A label
	 * outside the map makes its record unreadable (an error naming the file
	 * and row or path, or skipped under data.on_error: skip), and
	 * num_classes and class_names become the map's. Other formats ignore it.
	 * With map->features, csv takes each training feature from the column
	 * of its name in the file's header (a missing or foreign feature column
	 * is an error at open); a file without a header is read by position.
	 */
	const struct dt_class_map *class_map;
	/*
	 * data.sample_weight: count malloc'd weights (>= 0), one per record,
	 * when the source's arguments name them (a CSV column, an NPY file),
	 * freed by dt_source_close; NULL otherwise. Training multiplies each
	 * record's loss by it (evaluation and metrics stay unweighted).
	 */
	float *sample_weight;
	void *priv;
};

struct dt_source_type {
	const char *name; /* the `format:` value, e.g. "idx" */
	const char *const *keys; /* the keys its arguments allow (format too), NULL-terminated: the list it checks */
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
	 * Optional: the class index of every record into out (count), -1 for
	 * a record known to be unreadable, without decoding samples. Sources without it
	 * are read whole by dt_source_labels.
	 */
	void (*labels)(struct dt_source *s, int32_t *out);
	/*
	 * Optional: checks the source's arguments, every key and each value that
	 * can be judged without its files, and opens nothing, so that the whole
	 * config is checked before any data is read (open checks them again).
	 * 0, or -1 after an error naming the YAML position.
	 */
	int (*check)(const struct dt_node *args);
	/*
	 * Optional: what tells record i apart, for the warning about skipped
	 * records, which prints it in parentheses after the record's number:
	 * png_folder's image path in quotes, csv's row (the file's line) and
	 * what is wrong with it, as their read errors say. Writes it into buf
	 * (size bytes); 0 when there is nothing to write.
	 */
	int (*record_what)(struct dt_source *s, int64_t i, char *buf, size_t size);
	/*
	 * Optional: 1 when record i is known to be unreadable without decoding
	 * it (csv: a bad row, found when the file was read; png_folder: an
	 * image in a folder that is no training class). With on_error:
	 * error, the pipeline reads the lowest such record when it is
	 * configured, so that its error comes before training.
	 */
	int (*known_bad)(struct dt_source *s, int64_t i);
};

/* Checks the arguments of the source `args` describes (a mapping with `format:`) without opening it. 0 or -1. */
int dt_source_check(const struct dt_node *args, const struct dt_source_type *const *types);
/* Opens the source described by `args` (a mapping with `format:`) using the table. */
int dt_source_open(struct dt_source *s, const struct dt_node *args,
		   const struct dt_source_type *const *types);
/* The same, numbering labels by `map` (NULL: the source's own numbering); see class_map. */
int dt_source_open_classes(struct dt_source *s, const struct dt_node *args,
			   const struct dt_source_type *const *types, const struct dt_class_map *map);
void dt_source_close(struct dt_source *s);
/* The classes of map for a message: "'cat', 'dog', ..." (names) or "0 to 9" (numbers). Returns buf. */
const char *dt_class_map_format(const struct dt_class_map *map, char *buf, size_t size);
/* Whether the labels are class indices: shape (1,) and num_classes > 0. */
int dt_source_has_classes(const struct dt_source *s);
/*
 * The class index of every record into out (count): the source's labels(),
 * else every record read in turn (unreadable ones give -1, no error). Only
 * for sources with class indices (dt_source_has_classes), before any
 * pipeline reads s. 0, or -1 with the source's error.
 */
int dt_source_labels(struct dt_source *s, int32_t *out);

#endif
