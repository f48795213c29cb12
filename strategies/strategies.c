#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/cuda/cuda.h"
#include "core/error.h"
#include "mpi_coll.h"
#include "strategies.h"

const struct dt_strategy_type *const dt_strategy_types[] = {
	&dt_one_device_strategy,
	&dt_mirrored_strategy,
	&dt_multi_worker_strategy,
	&dt_parameter_server_strategy,
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
	if (gethostname(s->host, sizeof(s->host) - 1) < 0)
		snprintf(s->host, sizeof(s->host), "unknown");
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
	const char *name, *why = "";
	int which;

	memset(s, 0, sizeof(*s));
	if (dt_cfg_enum(distribute, "strategy", names, 0, &which) < 0)
		return -1;
	name = which == 0 ? dt_strategy_auto(sys, &why) : names[which];
	/* auto under mpirun with parameter servers configured: parameter_server */
	if (which == 0 && sys->mpi_world > 1 && dt_node_get(distribute, "num_ps"))
		name = "parameter_server";
	for (int i = 0; dt_strategy_types[i]; i++) {
		if (!strcmp(dt_strategy_types[i]->name, name)) {
			s->type = dt_strategy_types[i];
			s->timeout = 300;
			if (s->type->init(s, distribute) < 0)
				return -1;
			if (!s->global_replicas) {
				s->first_replica = 0;
				s->global_replicas = s->nreplicas;
			}
			return 0;
		}
	}
	if (which == 0)
		return dt_error("strategy 'auto' chose '%s' (%s), which this version of dtrain does not have yet",
				name, why);
	return dt_node_error(dt_node_get(distribute, "strategy"),
			     "strategy '%s' is not available in this version of dtrain", name);
}

void dt_strategy_release(struct dt_strategy *s)
{
	if (s->type && s->type->release)
		s->type->release(s);
	memset(s, 0, sizeof(*s));
}

/*
 * "cpu:N", "gpu:N" (or "cpu", "gpu") into d. Whether a GPU exists is checked
 * by the strategy (dt_local_devices), which knows the config node.
 */
static int parse_device(const struct dt_node *n, struct dt_device *d)
{
	int index = 0;
	char tail;
	if (n->kind != DT_NODE_SCALAR)
		return dt_node_error(n, "a device is a name such as 'cpu:0' or 'gpu:0'");
	if (!strcmp(n->value, "gpu") || !strcmp(n->value, "cpu"))
		index = 0;
	else if ((sscanf(n->value, "gpu:%d%c", &index, &tail) != 1 && sscanf(n->value, "cpu:%d%c", &index, &tail) != 1) ||
		 index < 0 || index >= DT_MAX_REPLICAS)
		return dt_node_error(n, "unknown device '%s' (expected cpu:N or gpu:N with N below %d)", n->value,
				     DT_MAX_REPLICAS);
	d->kind = n->value[0] == 'g' ? DT_DEVICE_CUDA : DT_DEVICE_CPU;
	d->index = index;
	return 0;
}

int dt_distribute_read(const struct dt_node *args, struct dt_distribute *d)
{
	static const char *const keys[] = { "strategy", "device", "devices", "num_ps", "timeout", NULL };
	const struct dt_node *n = dt_node_get(args, "devices");
	int64_t num_ps;

	memset(d, 0, sizeof(*d));
	if (dt_cfg_check_keys(args, "distribute", keys) < 0 || dt_cfg_int(args, "num_ps", 1, 1, 1 << 20, &num_ps) < 0 ||
	    dt_cfg_float(args, "timeout", 300, 0.001, 1e9, &d->timeout) < 0)
		return -1;
	d->num_ps = (int)num_ps;
	d->has_num_ps = dt_node_get(args, "num_ps") != NULL;
	d->devices_node = n;
	if (!n || (n->kind == DT_NODE_SCALAR && !strcmp(n->value, "auto")))
		return 0;
	if (n->kind != DT_NODE_SEQ || n->n == 0)
		return dt_node_error(n, "'devices' is 'auto' or a list of devices such as [cpu:0, cpu:1]");
	if (n->n > DT_MAX_REPLICAS)
		return dt_node_error(n, "%d devices: at most %d", n->n, DT_MAX_REPLICAS);
	for (int i = 0; i < n->n; i++) {
		if (parse_device(n->items[i], &d->devices[i]) < 0)
			return -1;
		for (int j = 0; j < i; j++)
			if (d->devices[j].kind == d->devices[i].kind && d->devices[j].index == d->devices[i].index)
				return dt_node_error(n->items[i], "device '%s' is listed twice", n->items[i]->value);
	}
	d->ndevices = n->n;
	return 0;
}

int dt_strategy_mpi_launched(void) { return dt_mpi_launched(); }

char *dt_strategy_gather_lines(const char *mine)
{
	enum { LINE = 512 };
	char line[LINE], *all = NULL;
	int rank, world;

	snprintf(line, sizeof(line), "%s", mine);
	if (!dt_mpi_launched() || dt_mpi_start(&rank, &world) < 0)
		return dt_strdup(mine);
	if (rank == 0)
		all = dt_calloc((size_t)world, LINE);
	MPI_Gather(line, LINE, MPI_CHAR, all, LINE, MPI_CHAR, 0, MPI_COMM_WORLD);
	if (rank == 0) {
		char *out = dt_calloc((size_t)world, LINE + 1);
		for (int i = 0; i < world; i++) {
			strcat(out, all + (size_t)i * LINE);
			strcat(out, "\n");
		}
		free(all);
		all = out;
	}
	dt_mpi_stop();
	return all;
}
