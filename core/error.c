#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

static char last[1024];
static char last_where[512];
static int quiet;
static int notes_quiet;
static int rank = -1;
static _Thread_local struct dt_error_capture *capture;

const char *dt_error_last(void) { return last; }
const char *dt_error_last_where(void) { return last_where; }

int dt_error_last_is_config(void)
{
	/* "file:LINE:COL" ends in two numbers separated by colons. */
	const char *c2 = strrchr(last_where, ':');
	const char *c1;
	if (!c2 || c2 == last_where || !c2[1] || strspn(c2 + 1, "0123456789") != strlen(c2 + 1))
		return 0;
	for (c1 = c2 - 1; c1 > last_where && *c1 != ':'; c1--)
		;
	return *c1 == ':' && c2 - c1 > 1 && strspn(c1 + 1, "0123456789") == (size_t)(c2 - c1 - 1);
}
void dt_error_set_quiet(int q) { quiet = q; }
void dt_error_set_rank(int r) { rank = r; }
void dt_note_set_quiet(int q) { notes_quiet = q; }

void dt_error_capture(struct dt_error_capture *c)
{
	capture = c;
	if (c)
		c->set = 0;
}

/*
 * text (n bytes) into buf (size bytes): as it is when it fits, else its start
 * and its end around "...", cut between UTF-8 characters, so that a long
 * value in the middle of a message leaves the message's end (the reason,
 * the closing quote, the line:col of a place) readable.
 */
static void fit_text(char *buf, size_t size, const char *text, size_t n)
{
	size_t head, tail;
	if (n < size) {
		memcpy(buf, text, n + 1);
		return;
	}
	head = (size - 4) * 2 / 3;
	tail = size - 4 - head;
	while (head > 0 && ((unsigned char)text[head] & 0xC0) == 0x80)
		head--;
	while (tail > 0 && ((unsigned char)text[n - tail] & 0xC0) == 0x80)
		tail--;
	memcpy(buf, text, head);
	memcpy(buf + head, "...", 3);
	memcpy(buf + head + 3, text + n - tail, tail);
	buf[head + 3 + tail] = 0;
}

/* The message of fmt into buf (size bytes), shortened by fit_text when it is longer. */
static void format_fit(char *buf, size_t size, const char *fmt, va_list ap)
{
	va_list aq;
	char *full;
	int n;

	va_copy(aq, ap);
	n = vsnprintf(buf, size, fmt, aq);
	va_end(aq);
	if (n < 0 || (size_t)n < size)
		return;
	full = malloc((size_t)n + 1);
	if (!full) {
		memcpy(buf + size - 4, "...", 4);
		return;
	}
	vsnprintf(full, (size_t)n + 1, fmt, ap);
	fit_text(buf, size, full, (size_t)n);
	free(full);
}

int dt_error_atv(const char *where, const char *fmt, va_list ap)
{
	if (capture) {
		format_fit(capture->msg, sizeof(capture->msg), fmt, ap);
		fit_text(capture->where, sizeof(capture->where), where, strlen(where));
		capture->set = 1;
		return -1;
	}
	format_fit(last, sizeof(last), fmt, ap);
	fit_text(last_where, sizeof(last_where), where, strlen(where));
	if (quiet)
		return -1;
	if (rank >= 0)
		fprintf(stderr, "[rank %d] ", rank);
	fprintf(stderr, "%s: error: %s\n", where, last);
	return -1;
}

int dt_error_at(const char *where, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	dt_error_atv(where, fmt, ap);
	va_end(ap);
	return -1;
}

int dt_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	dt_error_atv("dtrain", fmt, ap);
	va_end(ap);
	return -1;
}

/* "WHERE: KIND: <msg>" on stderr, with the rank in multi-process runs. */
static void say(const char *where, const char *kind, const char *fmt, va_list ap)
{
	if (rank >= 0)
		fprintf(stderr, "[rank %d] ", rank);
	fprintf(stderr, "%s: %s: ", where, kind);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void dt_warn(const char *fmt, ...)
{
	va_list ap;
	if (quiet)
		return;
	va_start(ap, fmt);
	say("dtrain", "warning", fmt, ap);
	va_end(ap);
}

void dt_warn_atv(const char *where, const char *fmt, va_list ap)
{
	if (!quiet)
		say(where, "warning", fmt, ap);
}

void dt_note(const char *fmt, ...)
{
	va_list ap;
	if (quiet || notes_quiet)
		return;
	va_start(ap, fmt);
	say("dtrain", "note", fmt, ap);
	va_end(ap);
}

void dt_bug(const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	if (rank >= 0)
		fprintf(stderr, "[rank %d] ", rank);
	fprintf(stderr, "dtrain: internal error at %s:%d: ", file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\n(this is a bug in dtrain; please report it with the command and config)\n", stderr);
	abort();
}

void dt_exit_out_of_memory(void)
{
	/* In a helper thread the error went to its capture, which no one will raise now. */
	if (capture && capture->set && !quiet) {
		if (rank >= 0)
			fprintf(stderr, "[rank %d] ", rank);
		fprintf(stderr, "%s: error: %s\n", capture->where, capture->msg);
	}
	fflush(stdout);
	exit(1);
}

static _Noreturn void out_of_memory(const char *file, int line, size_t n, size_t size)
{
	if (size == 1)
		dt_error("out of memory: cannot allocate %zu bytes (at %s:%d)", n, file, line);
	else
		dt_error("out of memory: cannot allocate %zu x %zu bytes (at %s:%d)", n, size, file, line);
	dt_exit_out_of_memory();
}

void *dt_xmalloc(const char *file, int line, size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		out_of_memory(file, line, n, 1);
	return p;
}

void *dt_xcalloc(const char *file, int line, size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (!p)
		out_of_memory(file, line, n, size);
	return p;
}

void *dt_xrealloc(const char *file, int line, void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	if (!q)
		out_of_memory(file, line, n, 1);
	return q;
}

char *dt_xstrdup(const char *file, int line, const char *s)
{
	size_t n = strlen(s) + 1;
	char *p = dt_xmalloc(file, line, n);
	memcpy(p, s, n);
	return p;
}
