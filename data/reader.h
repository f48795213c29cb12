/*
 * Stream readers: samples read in order, a chunk at a time, for `dtrain
 * predict`. A source (core/pipeline/source.h) loads a whole data set for random
 * access; a reader keeps only the chunk it hands out, so its memory stays
 * bounded however long the input (a pipe of millions of CSV rows).
 *
 * One reader type per input format, next to its source in the format's file
 * (data/csv.c, data/npy.c, data/idx.c, data/png_folder.c), listed in dt_reader_types
 * of data/reader.c. A new format adds one `struct dt_reader_type` and one line
 * there. The PNG reader reads a list of paths, one per line (or, given a path
 * ending in .png, that one image), and names each sample by its path
 * (sample_name).
 *
 * Also here: the path-or-standard-input opening every format shares. A path
 * of "-" is standard input; gzip or plain data are read from either.
 */
#ifndef DT_DATA_READER_H
#define DT_DATA_READER_H

#include <stddef.h>
#include <stdint.h>

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
	 * The training data's feature column names (nfeatures, its order: the
	 * checkpoint's feature_names), or NULL: a CSV input with a header gives
	 * each feature from the column of its name, else an error naming the
	 * missing or foreign column. Not owned.
	 */
	char *const *features;
	int nfeatures;
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
 * of PNG paths), *.png → png (that one image: the png reader's open takes a
 * path ending in .png for the image, not a list); NULL when the name does not
 * tell (and for "-"). A .txt may
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

/*
 * A byte stream read from a path or standard input ("-"), gzip or plain: a
 * stream that starts with the gzip magic is inflated (one gzip member or
 * several, one after another, as gzip(1) reads them), any other is read as it
 * is. Stricter than zlib's gzread: bytes after the last gzip member that do
 * not start another member are an error (gzread drops them silently), and a
 * path that names a character or block device (/dev/zero), a socket or a
 * directory is refused at open; regular files and pipes are read (standard
 * input may also be any character device: a terminal, /dev/null).
 */
struct dt_gz;
/* Opens path ("-": standard input). NULL after an error naming the file. */
struct dt_gz *dt_gz_open(const char *path);
/*
 * Reads up to n bytes; returns bytes read (less only at the end of the
 * stream, or before the end of a gzip stream cut short: the next read is
 * then the error), or -1 after an error naming `name` (a read error, a
 * corrupt gzip stream, a gzip stream cut before its trailer, trailing bytes
 * after it).
 */
int64_t dt_gz_read(struct dt_gz *gz, const char *name, void *buf, int64_t n);
/*
 * Reads up to n bytes as read(2) does: what one read of the stream makes
 * (at least 1 byte, waiting only while none has come), so that a reader of a
 * pipe gets the lines already written while the writer goes on. Returns the
 * bytes read, 0 at the end of the stream, or -1 after an error as dt_gz_read.
 */
int64_t dt_gz_read_some(struct dt_gz *gz, const char *name, void *buf, int64_t n);
/*
 * Reads one line into buf, as fgets does: up to size - 1 bytes, through the
 * newline when it comes first, NUL-terminated (the line itself may hold NUL
 * bytes: the count tells its length). Returns the bytes stored, 0 at the end
 * of the stream, or -1 after an error as dt_gz_read.
 */
int64_t dt_gz_gets(struct dt_gz *gz, const char *name, char *buf, int64_t size);
void dt_gz_close(struct dt_gz *gz); /* accepts NULL */

/*
 * What the readers of fixed-size binary records (NPY, IDX) share: the open
 * stream, a buffer for the chunk that grows as bytes arrive (never to what a
 * header promises before those bytes are there), and the checks at both
 * ends: a file cut short, and bytes after the records the header promises.
 */
struct dt_record_stream {
	struct dt_gz *gz;
	const char *noun; /* what a record is, for the errors: "image", "record" */
	int64_t size;     /* bytes of one record */
	int64_t count;    /* records the header promises */
	uint8_t *buf;
	int64_t cap;      /* bytes buf holds */
	int ahead;        /* records at the start of buf read by dt_record_stream_first, not handed out yet */
};
/*
 * Checks that records of `values` values fit the model's input o->sample
 * and sets r->sample to it. 0, or -1 after an error naming the file.
 */
int dt_record_stream_fit(struct dt_reader *r, const struct dt_reader_opts *o, int64_t values, const char *noun);
/*
 * Reads the first record ahead, so that a header whose records are larger
 * than the stream is an error here, before anything is sized by it: a reader
 * that takes the sample shape from its header calls it at open. A stream
 * whose header promises no record is an error too (it cannot tell a shape
 * then). 0, or -1 after an error naming the file.
 */
int dt_record_stream_first(struct dt_record_stream *s, const struct dt_reader *r);
/*
 * The next records, up to n, in the stream's buffer (*out, valid until the
 * next call); adds them to r->records. Returns how many; 0 at the end. -1
 * after an error naming the file: the record cut short, or bytes after the
 * last record (checked when the last record is read, or at the first call
 * when the header promises none).
 */
int dt_record_stream_next(struct dt_record_stream *s, struct dt_reader *r, int n, const uint8_t **out);
/* Closes the stream and frees the buffer. */
void dt_record_stream_close(struct dt_record_stream *s);

#endif
