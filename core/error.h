/*
 * Errors, the three kinds of STYLE.md.
 *
 * 1. The user's input or environment: `return dt_error("cannot open '%s': %s", ...)`
 *    prints "dtrain: error: ..." on stderr and returns -1. Config errors carry a
 *    position and are printed by dt_node_error() in config.h.
 * 2. A library call that must not fail: DT_DNNL_CHECK and friends (in the backend
 *    files) print the call, file:line and the library's message, then abort.
 * 3. An impossible state: DT_ASSERT / DT_BUG, on in release builds.
 *
 * The text of the last error is kept so tests can assert on it.
 */
#ifndef DT_ERROR_H
#define DT_ERROR_H

#include <stdarg.h>
#include <stddef.h>

#define DT_PRINTF(a, b) __attribute__((format(printf, a, b)))

/* Prints "dtrain: error: <msg>" (prefixed with "[rank N] " when set) and returns -1. */
int dt_error(const char *fmt, ...) DT_PRINTF(1, 2);
/* Prints "<where>: error: <msg>" and returns -1; `where` is "file:line:col" or "file". */
int dt_error_at(const char *where, const char *fmt, ...) DT_PRINTF(2, 3);
int dt_error_atv(const char *where, const char *fmt, va_list ap);
/* Prints "dtrain: warning: <msg>". */
void dt_warn(const char *fmt, ...) DT_PRINTF(1, 2);
/* Prints "<where>: warning: <msg>"; config warnings go through dt_node_warn() in config.h. */
void dt_warn_atv(const char *where, const char *fmt, va_list ap);
/*
 * Prints "dtrain: note: <msg>": a decision dtrain made for the user (a CSV's
 * first row taken as a header, or as data). Silenced by dt_note_set_quiet(1)
 * (the subcommands' -q, and MPI ranks other than 0) and by dt_error_set_quiet.
 */
void dt_note(const char *fmt, ...) DT_PRINTF(1, 2);
void dt_note_set_quiet(int quiet);

/* The message (without prefix) of the most recent dt_error*, "" if none. */
const char *dt_error_last(void);
/* Its place: "dtrain" for dt_error(), else the `where` given ("model.yaml:3:5"). */
const char *dt_error_last_where(void);
/* 1 if the most recent error points into a config file (file:line:col): a usage error. */
int dt_error_last_is_config(void);
/* When quiet, errors are recorded but not printed (unit tests). */
void dt_error_set_quiet(int quiet);
/* Rank shown in messages of multi-process runs; -1 (default) hides it. */
void dt_error_set_rank(int rank);

/*
 * Errors raised in a helper thread (the prefetch thread): while a thread has
 * a capture set, its dt_error* calls store the message and place in it
 * instead of printing or touching dt_error_last(); the thread hands it to the
 * main thread, which raises it with dt_error_at(c->where, "%s", c->msg), so
 * the user sees the same message as without the thread. NULL ends capturing.
 * The capture is per thread.
 */
struct dt_error_capture {
	char where[512];
	char msg[1024];
	int set;
};
void dt_error_capture(struct dt_error_capture *c);

_Noreturn void dt_bug(const char *file, int line, const char *fmt, ...) DT_PRINTF(3, 4);

#define DT_BUG(...) dt_bug(__FILE__, __LINE__, __VA_ARGS__)
#define DT_ASSERT(c) \
	do { \
		if (!(c)) \
			dt_bug(__FILE__, __LINE__, "assertion failed: %s", #c); \
	} while (0)

/*
 * Ends the process with exit status 1 once an allocation failed and the error
 * saying so is printed: memory that is not there is the environment's limit,
 * not a bug, so it exits as a runtime error does, without a core dump.
 */
_Noreturn void dt_exit_out_of_memory(void);

/*
 * Allocation that cannot fail quietly: on out-of-memory prints
 * "dtrain: error: out of memory: cannot allocate N bytes (at file:line)" and
 * exits with status 1.
 */
void *dt_xmalloc(const char *file, int line, size_t n);
void *dt_xcalloc(const char *file, int line, size_t n, size_t size);
void *dt_xrealloc(const char *file, int line, void *p, size_t n);
char *dt_xstrdup(const char *file, int line, const char *s);
#define dt_malloc(n) dt_xmalloc(__FILE__, __LINE__, (n))
#define dt_calloc(n, s) dt_xcalloc(__FILE__, __LINE__, (n), (s))
#define dt_realloc(p, n) dt_xrealloc(__FILE__, __LINE__, (p), (n))
#define dt_strdup(s) dt_xstrdup(__FILE__, __LINE__, (s))

#endif
