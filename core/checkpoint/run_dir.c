#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/checkpoint/run_dir.h"
#include "core/error.h"

int dt_mkdir_p(const char *path)
{
	char *p = dt_strdup(path);
	for (char *s = p + 1;; s++) {
		if (*s == '/' || *s == '\0') {
			char c = *s;
			*s = '\0';
			if (mkdir(p, 0777) < 0 && errno != EEXIST) {
				int e = errno;
				free(p);
				return dt_error("cannot create directory '%s': %s", path, strerror(e));
			}
			*s = c;
			if (!c)
				break;
		}
	}
	free(p);
	return 0;
}

void dt_run_dir(const struct dt_run_config *cfg, char *buf, size_t size)
{
	if (cfg->checkpoint_dir)
		snprintf(buf, size, "%s", cfg->checkpoint_dir);
	else
		snprintf(buf, size, "runs/%s", cfg->name);
}

void dt_run_dir_checkpoint(const struct dt_run_config *cfg, const char *given, char *buf, size_t size)
{
	char dir[4096];
	if (given) {
		snprintf(buf, size, "%s", given);
		return;
	}
	dt_run_dir(cfg, dir, sizeof(dir));
	snprintf(buf, size, "%s/latest.safetensors", dir);
}
