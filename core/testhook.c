#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testhook.h"

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

void dt_test_raise_at(int64_t global_step)
{
	static const struct { const char *name; int sig; } sigs[] = { { "INT", SIGINT }, { "TERM", SIGTERM }, { "USR1", SIGUSR1 } };
	const char *spec = getenv("DTRAIN_TEST_RAISE_AT"), *colon;
	if (!spec || !(colon = strchr(spec, ':')) || strtoll(colon + 1, NULL, 10) != global_step)
		return;
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (strlen(sigs[i].name) == (size_t)(colon - spec) && !strncmp(spec, sigs[i].name, (size_t)(colon - spec)))
			raise(sigs[i].sig);
}
