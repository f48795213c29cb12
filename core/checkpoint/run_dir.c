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

void dt_run_dir_file(const struct dt_run_config *cfg, const char *name, char *buf, size_t size)
{
	char dir[4096];
	dt_run_dir(cfg, dir, sizeof(dir));
	snprintf(buf, size, "%s/%s", dir, name);
}

void dt_run_dir_checkpoint(const struct dt_run_config *cfg, const char *given, char *buf, size_t size)
{
	struct stat st;
	if (given) {
		snprintf(buf, size, "%s", given);
		return;
	}
	dt_run_dir_file(cfg, "best.safetensors", buf, size);
	if (stat(buf, &st) == 0) {
		dt_note("using '%s', the run's best checkpoint (--checkpoint FILE for another)", buf);
		return;
	}
	dt_run_dir_file(cfg, "latest.safetensors", buf, size);
	dt_note("using '%s', the run's latest checkpoint (it saved no best)", buf);
}
