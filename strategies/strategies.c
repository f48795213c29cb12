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
const char *const dt_strategy_names[] = { "auto", "one_device", "mirrored", "multi_worker_mirrored",
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
	s->mpi_launched = s->mpi_world > 1 && dt_mpi_launched();
	/* Open MPI's mpirun sets OMPI_COMM_WORLD_SIZE (also inside a Slurm allocation); srun sets SLURM_STEP_ID. */
	if (s->mpi_world > 1) {
		const char *cmd = getenv("OMPI_COMM_WORLD_SIZE") ? "mpirun -np" : getenv("SLURM_STEP_ID") ? "srun -n"
													  : "mpiexec -n";
		snprintf(s->launcher, sizeof(s->launcher), "%s %d", cmd, s->mpi_world);
	}
}

const char *dt_strategy_auto(const struct dt_system *s, const struct dt_distribute *d, char *why, size_t size)
{
	if (s->mpi_world > 1 && d && d->has_num_ps) {
		snprintf(why, size, "the MPI job has %d processes and distribute.num_ps is %d", s->mpi_world, d->num_ps);
		return "parameter_server";
	}
	if (s->mpi_world > 1) {
		snprintf(why, size, "the MPI job has %d processes", s->mpi_world);
		return "multi_worker_mirrored";
	}
	if (d && d->ndevices > 1) {
		snprintf(why, size, "distribute.devices names %d devices", d->ndevices);
		return "mirrored";
	}
	if (s->gpus > 1) {
		snprintf(why, size, "%d GPUs and one process", s->gpus);
		return "mirrored";
	}
	snprintf(why, size, "%s and one process", s->gpus == 1 ? "one GPU" : "no GPU");
	return "one_device";
}

/* The strategy d names (auto's choice, with its reason), or NULL after an error at distribute.strategy. */
static const struct dt_strategy_type *choose(const struct dt_distribute *d, const struct dt_system *sys, char *why,
					     size_t size)
{
	const char *name = dt_strategy_names[d->which];
	if (d->which == 0)
		name = dt_strategy_auto(sys, d, why, size);
	else
		snprintf(why, size, "as distribute.strategy asks");
	for (int i = 0; dt_strategy_types[i]; i++)
		if (!strcmp(dt_strategy_types[i]->name, name))
			return dt_strategy_types[i];
	if (d->which == 0)
		dt_error("strategy 'auto' chose '%s' (%s), which this version of dtrain does not have yet", name, why);
	else
		dt_node_error(d->strategy_node, "strategy '%s' is not available in this version of dtrain", name);
	return NULL;
}

/* The check of dt_strategy_check, keeping d and the choice for dt_strategy_create. */
static const struct dt_strategy_type *check(const struct dt_node *distribute, const struct dt_system *sys,
					    struct dt_distribute *d, char *why, size_t size)
{
	/* Without a system, auto chooses as for one process without a GPU. */
	static const struct dt_system alone = { .mpi_world = 1 };
	const struct dt_strategy_type *type;
	if (dt_distribute_read(distribute, d) < 0 || !(type = choose(d, sys ? sys : &alone, why, size)))
		return NULL;
	if (sys && type->one_process && sys->mpi_world > 1) {
		dt_node_error(d->strategy_node, "strategy '%s' trains in one process, but this MPI job (%s) has %d: each "
			      "would train alone and write the same run directory; use multi_worker_mirrored or auto, or "
			      "start one process", type->name, sys->launcher, sys->mpi_world);
		return NULL;
	}
	return type->check && type->check(d, sys) < 0 ? NULL : type;
}

int dt_strategy_check(const struct dt_node *distribute, const struct dt_system *sys)
{
	struct dt_distribute d;
	char why[160];
	return check(distribute, sys, &d, why, sizeof(why)) ? 0 : -1;
}

int dt_strategy_create(struct dt_strategy *s, const struct dt_node *distribute, const struct dt_system *sys)
{
	struct dt_distribute d;

	const char *job = s->job;
	memset(s, 0, sizeof(*s));
	s->job = job;
	if (!(s->type = check(distribute, sys, &d, s->why, sizeof(s->why))))
		return -1;
	s->timeout = 300;
	if (s->type->init(s, distribute) < 0)
		return -1;
	if (!s->global_replicas) {
		s->first_replica = 0;
		s->global_replicas = s->nreplicas;
	}
	return 0;
}

/* "cpu:0" or "cpu:0, cpu:1": the replicas of this process. */
static void devices_text(const struct dt_strategy *s, char *buf, size_t size)
{
	size_t len = 0;
	buf[0] = '\0';
	for (int r = 0; r < s->nreplicas && len + 1 < size; r++) {
		char dev[32];
		dt_device_format(s->devices[r], dev, sizeof(dev));
		len += (size_t)snprintf(buf + len, size - len, "%s%s", r ? ", " : "", dev);
	}
}

void dt_strategy_describe(const struct dt_strategy *s, char *buf, size_t size)
{
	char devs[256];
	int servers = s->world - s->global_replicas;

	devices_text(s, devs, sizeof(devs));
	if (s->world > 1 && s->type->serve)
		snprintf(buf, size, "%s over %d processes (%d worker%s, %d server%s), %s each (%s)", s->type->name,
			 s->world, s->global_replicas, s->global_replicas == 1 ? "" : "s", servers, servers == 1 ? "" : "s",
			 devs, s->why);
	else if (s->world > 1)
		snprintf(buf, size, "%s over %d processes, %s each (%s)", s->type->name, s->world, devs, s->why);
	else if (s->nreplicas > 1)
		snprintf(buf, size, "%s over %s (%s)", s->type->name, devs, s->why);
	else
		snprintf(buf, size, "%s %s (%s)", s->type->name, devs, s->why);
}

void dt_strategy_release(struct dt_strategy *s)
{
	if (s->type && s->type->release)
		s->type->release(s);
	free(s->chief_job);
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

const char *const dt_distribute_keys[] = { "strategy", "device", "devices", "num_ps", "timeout", "bucket_mb",
					     "communication", NULL };
static const char *const communication_names[] = { "auto", "shared_memory", "mpi", NULL };

int dt_distribute_read(const struct dt_node *args, struct dt_distribute *d)
{
	const struct dt_node *n = dt_node_get(args, "devices");
	int64_t num_ps;

	memset(d, 0, sizeof(*d));
	if (dt_cfg_check_keys(args, "distribute", dt_distribute_keys) < 0 ||
	    dt_cfg_enum(args, "strategy", dt_strategy_names, 0, &d->which) < 0 ||
	    dt_cfg_int(args, "num_ps", 1, 1, 1 << 20, &num_ps) < 0 ||
	    dt_cfg_float(args, "timeout", 300, 0.001, 1e9, &d->timeout) < 0 ||
	    dt_cfg_float(args, "bucket_mb", 1, 0, 1e6, &d->bucket_mb) < 0 ||
	    dt_cfg_enum(args, "communication", communication_names, DT_COMM_AUTO, &d->communication) < 0)
		return -1;
	d->communication_node = dt_node_get(args, "communication");
	d->strategy_node = dt_node_get(args, "strategy");
	d->num_ps = (int)num_ps;
	d->has_num_ps = dt_node_get(args, "num_ps") != NULL;
	d->device_node = dt_node_get(args, "device");
	d->has_device = d->device_node != NULL;
	if (d->has_device && parse_device(d->device_node, &d->device) < 0)
		return -1;
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
