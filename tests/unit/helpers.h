/*
 * Shared by the cmocka unit tests: the cmocka includes, the case filter and
 * small helpers for temporary files. Each test_*.c is its own program linked
 * with libdtrain.a.
 */
#ifndef DT_TEST_HELPERS_H
#define DT_TEST_HELPERS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/config/config.h"
#include "core/error.h"
#include "core/pipeline/source.h"
#include "data/sources.h"

/*
 * DT_TEST_FILTER=WORD runs only the cases whose name contains WORD (a cmocka
 * pattern, so '*' and '?' work inside it); tests/run.sh sets it for
 * `make test F=WORD`. The constructor runs before main, so every test program
 * has the filter without a line in its main.
 */
__attribute__((constructor)) static void dt_test_filter_from_env(void)
{
	static char pattern[1024];
	const char *word = getenv("DT_TEST_FILTER");

	if (!word || !*word)
		return;
	snprintf(pattern, sizeof(pattern), "*%s*", word);
	cmocka_set_test_filter(pattern);
}

/*
 * x rounded to the nearest bfloat16 (ties to even), as a float: what
 * precision bf16 multiplies. Finite x only.
 */
static inline float dt_test_bf16(float x)
{
	uint32_t u;
	memcpy(&u, &x, sizeof(u));
	u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
	memcpy(&x, &u, sizeof(x));
	return x;
}

/* A copy of x (n floats), each rounded to bfloat16 when round is set. */
static inline float *dt_test_bf16_copy(const float *x, int64_t n, int round)
{
	float *y = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
	for (int64_t i = 0; i < n; i++)
		y[i] = round ? dt_test_bf16(x[i]) : x[i];
	return y;
}

/* Writes n bytes to a fresh file under $TMPDIR and returns its path (static buffer per call site is not safe: caller frees). */
static inline char *dt_test_write_file(const char *suffix, const void *data, size_t n)
{
	const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char *path = malloc(4096);
	int fd;
	snprintf(path, 4096, "%s/dtrain-test-XXXXXX%s", dir, suffix);
	fd = mkstemps(path, (int)strlen(suffix));
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, n), (ssize_t)n);
	close(fd);
	return path;
}

/*
 * Opens a data source from YAML text built like printf, numbering its classes
 * by the training classes `map` (dt_source_open_classes); its result.
 */
static inline int dt_test_open_source_classes(struct dt_source *s, const struct dt_class_map *map, const char *fmt,
					      ...) DT_PRINTF(3, 4);
static inline int dt_test_open_source_classes(struct dt_source *s, const struct dt_class_map *map, const char *fmt,
					      ...)
{
	char text[8192];
	struct dt_doc *d;
	va_list ap;
	int rc;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	d = dt_doc_parse("test.yaml", text, ".");
	assert_non_null(d);
	rc = dt_source_open_classes(s, dt_doc_root(d), dt_source_types, map);
	dt_doc_free(d);
	return rc;
}

/* The same with the source's own numbering (dt_source_open). */
#define dt_test_open_source(s, ...) dt_test_open_source_classes((s), NULL, __VA_ARGS__)

/* Asserts that the last error message contains `needle`. */
#define assert_error_contains(needle) \
	do { \
		if (!strstr(dt_error_last(), (needle))) \
			fail_msg("error \"%s\" lacks \"%s\"", dt_error_last(), (needle)); \
	} while (0)

#endif
