/*
 * Stream readers: samples read in order, a chunk at a time, for `dtrain
 * predict`. A source (core/pipeline/source.h) loads a whole data set for random
 * access; a reader keeps only the chunk it hands out, so its memory stays
 * bounded however long the input (a pipe of millions of CSV rows).
 *
 * One reader type per input format, next to its source in the format's file
 * (data/csv.c, data/npy.c, data/idx.c, data/png_folder.c), listed in dt_reader_types
 * of data/reader.c. A new format adds one `struct dt_reader_type` and one line
 * there. The PNG reader reads a list of paths, one per line, and names each
 * sample by its path (sample_name).
 *
 * Also here: the path-or-standard-input opening every format shares. A path
 * of "-" is standard input; zlib reads gzip or plain data from either.
 */
#ifndef DT_DATA_READER_H
#define DT_DATA_READER_H

#include <stddef.h>
#include <stdint.h>
#include <zlib.h>

#include "core/config/config.h"
#include "core/tensor.h"

struct dt_reader_opts {
	/*
	 * The per-sample shape the model wants; ndim 0 when unknown (then a
	 * format whose files tell the shape sets r->sample, and one that cannot,
	 * such as CSV, fails: the caller finds a shape first, see needs_shape).
	 * A file whose samples hold the same number of values in another shape
	 * (an IDX image (28, 28) for an input of (784,)) is accepted.
	 */
	struct dt_shape sample;
	/*
	 * The training source's mapping (data.train), or NULL: a reader of the
	 * same format takes its layout from it (CSV: delimiter, label column).
	 */
	const struct dt_node *train;
	/*
	 * 1 (data.on_error: skip): a record that cannot be decoded is skipped
	 * with a warning naming it instead of stopping the read. Only the PNG
	 * reader has such records (a path it cannot decode); the others ignore it.
	 */
	int skip_bad;
};

struct dt_reader {
	const struct dt_reader_type *type;
	char name[512];         /* what errors name: the path, or "<stdin>" */
	struct dt_shape sample; /* after open: the shape next() writes */
	int64_t records;        /* records handed out so far */
	void *priv;
};

struct dt_reader_type {
	const char *name;      /* the format, as for sources: "csv", "npy", "idx" */
	int needs_shape;       /* 1: open() needs opts->sample (the file cannot tell it) */
	/* Opens path ("-": standard input), reads its header. 0, or -1 after an error naming the file. */
	int (*open)(struct dt_reader *r, const char *path, const struct dt_reader_opts *o);
	/*
	 * Reads up to n samples into x (n, sample), raw values, host memory.
	 * Returns how many (0 at the end of the input), or -1 after an error
	 * naming the file and the record (CSV: the row, its line number).
	 */
	int (*next)(struct dt_reader *r, int n, float *x);
	void (*close)(struct dt_reader *r); /* frees priv; r may be half-open */
	/*
	 * Optional (NULL: samples have no names): the name of sample i of the
	 * chunk the last next() returned (PNG: its path), valid until the next
	 * call of next() or close().
	 */
	const char *(*sample_name)(struct dt_reader *r, int i);
};

extern const struct dt_reader_type dt_csv_reader;
extern const struct dt_reader_type dt_npy_reader;
extern const struct dt_reader_type dt_idx_reader;
extern const struct dt_reader_type dt_png_reader;
/* NULL-terminated. */
extern const struct dt_reader_type *const dt_reader_types[];

/* The reader type of that format name, or NULL. */
const struct dt_reader_type *dt_reader_find(const char *format);
/*
 * The format of a path by its name: *.csv, *.tsv, *.txt (also .gz) → csv,
 * *.npy → npy, *-ubyte, *.idx (also .gz) → idx, *.lst (also .gz) → png (a list
 * of PNG paths); NULL when the name does not tell (and for "-"). A .txt may
 * also be a list of PNG paths: dtrain predict reads it as one when the model
 * trains on a png_folder.
 */
const char *dt_reader_guess(const char *path);
/* Opens a reader of `type` on path. 0, or -1 after the error (r is then closed). */
int dt_reader_open(struct dt_reader *r, const struct dt_reader_type *type, const char *path,
		   const struct dt_reader_opts *o);
void dt_reader_close(struct dt_reader *r);

/* "<stdin>" for "-", else path. */
const char *dt_data_name(const char *path);
/* gzopen(path), or standard input for "-". NULL after an error naming the file. */
gzFile dt_gz_open(const char *path);
/*
 * Reads up to n bytes; returns bytes read (less only at the end of the
 * stream), or -1 after an error naming `name` (a read error, a corrupt gzip
 * stream, a gzip stream cut before its trailer).
 */
int64_t dt_gz_read(gzFile gz, const char *name, void *buf, int64_t n);

/*
 * What the readers of fixed-size binary records (NPY, IDX) share: the open
 * stream and a buffer for the chunk, grown as needed. `noun` is what the
 * file holds, for the errors ("image", "sample", "record").
 */
struct dt_record_stream {
	gzFile gz;
	uint8_t *buf;
	int cap; /* records buf holds */
};
/*
 * Checks that records of `values` values fit the model's input o->sample
 * and sets r->sample to it. 0, or -1 after an error naming the file.
 */
int dt_record_stream_fit(struct dt_reader *r, const struct dt_reader_opts *o, int64_t values, const char *noun);
/*
 * The next n records of `size` bytes (count in the file, r->records read so
 * far), in the stream's buffer; NULL after an error naming the file and the
 * first record cut short.
 */
const uint8_t *dt_record_stream_read(struct dt_record_stream *s, const struct dt_reader *r, int n, int64_t size,
				     int64_t count, const char *noun);
/* Closes the stream and frees the buffer. */
void dt_record_stream_close(struct dt_record_stream *s);

#endif
