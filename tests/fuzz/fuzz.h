/*
 * What the libFuzzer harnesses of tests/fuzz/ share. Each harness,
 * tests/fuzz/fuzz_NAME.c, defines LLVMFuzzerTestOneInput and feeds its input
 * to one parser the way dtrain does: the readers take paths, so the input is
 * written to files in a directory of the process's own (fuzz_write), and the
 * source is opened through its YAML arguments (fuzz_open_source).
 *
 * `make fuzz` builds them with clang and -fsanitize=fuzzer,address,undefined
 * (build/fuzz/fuzz_NAME) and runs each with its seeds (tests/fuzz/corpus/NAME);
 * tests/unit/test_fuzz.c includes every harness under another name and
 * replays the seeds and the reproducers of past findings
 * (tests/fuzz/regress/NAME) through the normal build, so `make check` needs
 * no clang. Helpers are static and prefixed fuzz_; a harness's own statics
 * carry its name, since test_fuzz.c includes them all into one program.
 */
#ifndef DT_FUZZ_H
#define DT_FUZZ_H

#include <stddef.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/config/config.h"
#include "core/error.h"
#include "core/pipeline/source.h"
#include "data/sources.h"

#define FUZZ_MAX_INPUT (1 << 20) /* larger inputs are skipped: the parsers' cost grows with them, not their risk */

#define FUZZ_FILES 16 /* names a process writes, all harnesses together (tests/unit/test_fuzz.c) */

static char fuzz_dir_path[256];
static char fuzz_paths[FUZZ_FILES][512];
static int fuzz_fds[FUZZ_FILES];
static int fuzz_nfiles;

static void fuzz_cleanup(void)
{
	for (int i = 0; i < fuzz_nfiles; i++) {
		close(fuzz_fds[i]);
		unlink(fuzz_paths[i]);
	}
	rmdir(fuzz_dir_path);
}

/* This process's directory for the files a harness writes (made on first use, removed at exit). */
static inline const char *fuzz_dir(void)
{
	if (!fuzz_dir_path[0]) {
		const char *tmp = getenv("TMPDIR");
		if (!tmp || !*tmp)
			tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp"; /* memory: inputs are written often */
		snprintf(fuzz_dir_path, sizeof(fuzz_dir_path), "%s/dtrain-fuzz-XXXXXX", tmp);
		if (!mkdtemp(fuzz_dir_path)) {
			perror("mkdtemp");
			abort();
		}
		atexit(fuzz_cleanup);
	}
	return fuzz_dir_path;
}

/*
 * Writes data to NAME in fuzz_dir(); returns its path (static storage, one
 * per name slot). The file stays open and is rewritten in place: creating
 * and removing a file per input costs more than the parsers.
 */
static inline const char *fuzz_write(const char *name, const uint8_t *data, size_t n)
{
	int i;
	for (i = 0; i < fuzz_nfiles; i++)
		if (!strcmp(strrchr(fuzz_paths[i], '/') + 1, name))
			break;
	if (i == fuzz_nfiles) {
		if (i == FUZZ_FILES)
			abort(); /* more names than FUZZ_FILES */
		snprintf(fuzz_paths[i], sizeof(fuzz_paths[i]), "%s/%s", fuzz_dir(), name);
		fuzz_fds[i] = open(fuzz_paths[i], O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fuzz_fds[i] < 0) {
			perror(fuzz_paths[i]);
			abort();
		}
		fuzz_nfiles++;
	}
	if (ftruncate(fuzz_fds[i], 0) < 0 || (n && pwrite(fuzz_fds[i], data, n, 0) != (ssize_t)n)) {
		perror(fuzz_paths[i]);
		abort();
	}
	return fuzz_paths[i];
}

/* Errors, warnings and notes recorded, not printed: the fuzzer's output is its own. */
static inline void fuzz_quiet(void)
{
	dt_error_set_quiet(1);
	dt_note_set_quiet(1);
}

/*
 * Two inputs from one: the first two bytes (little-endian) are the length of
 * the first part (at most what follows), the rest is the second. 0, or -1
 * for an input shorter than two bytes.
 */
static inline int fuzz_split(const uint8_t *data, size_t size, const uint8_t **a, size_t *an, const uint8_t **b,
		      size_t *bn)
{
	size_t k;
	if (size < 2)
		return -1;
	k = (size_t)(data[0] | data[1] << 8);
	size -= 2;
	if (k > size)
		k = size;
	*a = data + 2;
	*an = k;
	*b = data + 2 + k;
	*bn = size - k;
	return 0;
}

/* Opens a source from YAML arguments, as dt_app_data does from the config's mapping. 0 or -1. */
static inline int fuzz_open_source(struct dt_source *s, const char *yaml)
{
	struct dt_doc *d = dt_doc_parse("fuzz.yaml", yaml, fuzz_dir());
	int rc;
	if (!d)
		abort(); /* the harness's own YAML */
	rc = dt_source_open(s, dt_doc_root(d), dt_source_types);
	dt_doc_free(d);
	return rc;
}

/* Reads every record of an open source (at most 256), one at a time, as the pipeline does. */
static inline void fuzz_read_all(struct dt_source *s)
{
	int64_t xs = dt_shape_count(&s->sample), ys = dt_shape_count(&s->label);
	float *x = malloc((size_t)(xs > 0 ? xs : 1) * sizeof(float));
	float *y = malloc((size_t)(ys > 0 ? ys : 1) * sizeof(float));
	uint8_t bad;
	if (!x || !y)
		abort();
	for (int64_t i = 0; i < s->count && i < 256; i++) {
		s->type->read(s, &i, 1, x, y, &bad);
		s->type->read(s, &i, 1, x, y, NULL);
	}
	if (dt_source_has_classes(s) && s->count <= 1 << 16) {
		int32_t *labels = malloc((size_t)s->count * sizeof(int32_t));
		if (!labels)
			abort();
		dt_source_labels(s, labels);
		free(labels);
	}
	free(x);
	free(y);
}

/*
 * A source of two files (images and labels, x and y): the input split by
 * fuzz_split into files a and b, `args` the YAML arguments with a '%s' for
 * each path; opened and every record read.
 */
__attribute__((format(printf, 3, 0))) static inline void fuzz_two_file_source(const uint8_t *data, size_t size,
											const char *args)
{
	char yaml[2 * sizeof(fuzz_paths) + 256]; /* two paths (gcc bounds them by the whole table) */
	const uint8_t *a, *b;
	size_t an, bn;
	struct dt_source s;
	if (size > FUZZ_MAX_INPUT || fuzz_split(data, size, &a, &an, &b, &bn) < 0)
		return;
	snprintf(yaml, sizeof(yaml), args, fuzz_write("a", a, an), fuzz_write("b", b, bn));
	if (fuzz_open_source(&s, yaml) == 0)
		fuzz_read_all(&s);
	dt_source_close(&s);
}

#endif
