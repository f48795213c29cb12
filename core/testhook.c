#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/testhook.h"

void dt_test_crash_point(const char *point)
{
	static long count;
	const char *spec = getenv("DTRAIN_TEST_CRASH_AT");
	size_t n = strlen(point);
	if (!spec || strncmp(spec, point, n) || spec[n] != ':')
		return;
	if (++count == strtol(spec + n + 1, NULL, 10)) {
		raise(SIGKILL);
		_exit(137);
	}
}

/* The signal named by spec's "SIG:" prefix, or 0. */
static int spec_signal(const char *spec, const char *colon)
{
	static const struct { const char *name; int sig; } sigs[] = { { "INT", SIGINT }, { "TERM", SIGTERM }, { "USR1", SIGUSR1 } };
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (strlen(sigs[i].name) == (size_t)(colon - spec) && !strncmp(spec, sigs[i].name, (size_t)(colon - spec)))
			return sigs[i].sig;
	return 0;
}

void dt_test_raise_in(const char *point)
{
	static int done;
	const char *spec = getenv("DTRAIN_TEST_RAISE_AT"), *colon;
	int sig;
	if (done || !spec || !(colon = strchr(spec, ':')) || strcmp(colon + 1, point) || !(sig = spec_signal(spec, colon)))
		return;
	done = 1;
	raise(sig);
}

void dt_test_raise_at(int64_t global_step)
{
	const char *spec = getenv("DTRAIN_TEST_RAISE_AT"), *colon;
	char *end;
	int sig;
	if (!spec || !(colon = strchr(spec, ':')) || strtoll(colon + 1, &end, 10) != global_step || *end ||
	    !(sig = spec_signal(spec, colon)))
		return;
	raise(sig);
}
