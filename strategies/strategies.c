#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/cuda.h"
#include "core/error.h"
#include "strategies.h"

const struct dt_strategy_type *const dt_strategy_types[] = {
	&dt_one_device_strategy,
	NULL,
};

/* Every name the config accepts; those absent from the table are refused. */
static const char *const names[] = { "auto", "one_device", "mirrored", "multi_worker_mirrored",
				     "parameter_server", NULL };

/* The first of vars set to a whole number >= min; def when none is. */
static int env_int(const char *const *vars, int min, int def)
{
	for (int i = 0; vars[i]; i++) {
		const char *v = getenv(vars[i]);
		char *end;
		long x;
		if (!v || !*v)
			continue;
		x = strtol(v, &end, 10);
		if (*end || x < min || x > 1 << 24) {
			dt_warn("ignoring %s='%s': not a number >= %d", vars[i], v, min);
			continue;
		}
		return (int)x;
	}
	return def;
}

void dt_system_detect(struct dt_system *s)
{
	static const char *const size_vars[] = { "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", NULL };
	static const char *const rank_vars[] = { "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", NULL };
	char line[512];
	FILE *f = fopen("/proc/cpuinfo", "r");

	memset(s, 0, sizeof(*s));
	snprintf(s->cpu_model, sizeof(s->cpu_model), "unknown");
	while (f && fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':');
		if (!strncmp(line, "model name", 10) && colon) {
			colon += 1 + strspn(colon + 1, " \t");
			colon[strcspn(colon, "\n")] = '\0';
			snprintf(s->cpu_model, sizeof(s->cpu_model), "%s", colon);
			break;
		}
	}
	if (f)
		fclose(f);
	s->cpu_cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
	s->gpus = dt_cuda_device_count(); /* the driver only: no CUDA library is loaded for this */
	s->mpi_world = env_int(size_vars, 1, 1);
	s->mpi_rank = env_int(rank_vars, 0, 0);
}

const char *dt_strategy_auto(const struct dt_system *s, const char **why)
{
	if (s->mpi_world > 1) {
		*why = "the MPI job has more than one process";
		return "multi_worker_mirrored";
	}
	if (s->gpus > 1) {
		*why = "more than one GPU";
		return "mirrored";
	}
	*why = s->gpus == 1 ? "one GPU" : "no GPU and one process";
	return "one_device";
}

int dt_strategy_create(struct dt_strategy *s, const struct dt_node *distribute, const struct dt_system *sys)
{
	const char *name, *why;
	int which;

	memset(s, 0, sizeof(*s));
	if (dt_cfg_enum(distribute, "strategy", names, 0, &which) < 0)
		return -1;
	name = which == 0 ? dt_strategy_auto(sys, &why) : names[which];
	for (int i = 0; dt_strategy_types[i]; i++) {
		if (!strcmp(dt_strategy_types[i]->name, name)) {
			s->type = dt_strategy_types[i];
			return s->type->init(s, distribute);
		}
	}
	if (which == 0)
		return dt_error("strategy 'auto' chose '%s' (%s), which this version of dtrain does not have yet",
				name, why);
	return dt_node_error(dt_node_get(distribute, "strategy"),
			     "strategy '%s' is not available in this version of dtrain (available: one_device)", name);
}

void dt_strategy_release(struct dt_strategy *s)
{
	if (s->type && s->type->release)
		s->type->release(s);
	memset(s, 0, sizeof(*s));
}
