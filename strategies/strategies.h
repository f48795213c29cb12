/*
 * The strategies dtrain has, the machine they were chosen for, and the
 * auto-selection (DESIGN.md): MPI world > 1 -> multi_worker_mirrored; else
 * more than one GPU -> mirrored; one GPU -> one_device gpu:0; else one_device
 * cpu:0. Every strategy is in the table; their devices are checked when
 * they are created (a GPU without the CUDA backend is a config error).
 */
#ifndef DT_STRATEGIES_H
#define DT_STRATEGIES_H

#include "core/fit/strategy.h"

struct dt_system {
	char cpu_model[128];
	int cpu_cores;      /* online logical CPUs */
	int gpus;           /* usable GPUs (0 without the CUDA backend) */
	int mpi_world;      /* processes in the MPI job, 1 without MPI */
	int mpi_rank;
	char host[256];     /* this host's name */
};

extern const struct dt_strategy_type dt_one_device_strategy;
extern const struct dt_strategy_type dt_mirrored_strategy;
extern const struct dt_strategy_type dt_multi_worker_strategy;
extern const struct dt_strategy_type dt_parameter_server_strategy;

/*
 * The `distribute:` keys every strategy accepts (so that one file runs with
 * `strategy: auto` on one process or under mpirun); each strategy uses those
 * it needs. devices: `auto` (ndevices 0) or a list of cpu:N or gpu:N (checked
 * by dt_local_devices); num_ps >= 1; timeout > 0 seconds (default 300).
 */
struct dt_distribute {
	int ndevices;
	struct dt_device devices[DT_MAX_REPLICAS];
	const struct dt_node *devices_node; /* for errors, NULL when absent */
	int num_ps;
	int has_num_ps;
	double timeout;
};
int dt_distribute_read(const struct dt_node *args, struct dt_distribute *d);
/* 1 when `what` was started by mpirun or srun (MPI is to be initialized). */
int dt_strategy_mpi_launched(void);
/*
 * Under mpirun: rank 0 gets every rank's `mine` line (others get NULL); the
 * caller frees the result, lines separated by '\n'. Without MPI: a copy of mine.
 */
char *dt_strategy_gather_lines(const char *mine);
/* NULL-terminated. */
extern const struct dt_strategy_type *const dt_strategy_types[];

void dt_system_detect(struct dt_system *s);
/* The strategy `strategy: auto` picks on this system, and why (static strings). */
const char *dt_strategy_auto(const struct dt_system *s, const char **why);
/*
 * Creates the strategy named by the `distribute:` mapping (NULL: auto). Errors
 * point into the config. 0 or -1.
 */
int dt_strategy_create(struct dt_strategy *s, const struct dt_node *distribute, const struct dt_system *sys);
void dt_strategy_release(struct dt_strategy *s);

#endif
