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
