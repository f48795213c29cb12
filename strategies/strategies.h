/*
 * The strategies dtrain has, the machine they were chosen for, and the
 * auto-selection (DESIGN.md): MPI world > 1 -> multi_worker_mirrored; else
 * more than one GPU -> mirrored; one GPU -> one_device gpu:0; else one_device
 * cpu:0. Strategies not yet in this build are named by auto-selection but
 * refused by dt_strategy_create with a clear error.
 */
#ifndef DT_STRATEGIES_H
#define DT_STRATEGIES_H

#include "core/strategy.h"

struct dt_system {
	char cpu_model[128];
	int cpu_cores;      /* online logical CPUs */
	int gpus;           /* usable GPUs (0 without the CUDA backend) */
	int mpi_world;      /* processes in the MPI job, 1 without MPI */
	int mpi_rank;
};

extern const struct dt_strategy_type dt_one_device_strategy;
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
