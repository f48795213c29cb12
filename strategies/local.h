/*
 * The replicas of one process (mirrored, and the local part of
 * multi_worker_mirrored): gradient sum into replica 0, and replica 0's
 * parameters copied to the others. CPU replicas share host memory, so these
 * are plain dt_op calls on host views; GPU replicas (NCCL) will plug in here.
 */
#ifndef DT_STRATEGIES_LOCAL_H
#define DT_STRATEGIES_LOCAL_H

#include "strategies.h"

/* Reads `devices` into s->devices / s->nreplicas (auto: cpu:0). 0 or -1. */
int dt_local_devices(struct dt_strategy *s, const struct dt_distribute *d);
/* replicas[0].grads += replicas[r].grads for r = 1..n-1 (no-op for one replica). */
void dt_local_sum_grads(struct dt_strategy *s, struct dt_model *replicas);
/* Every replica's parameters (all nparams) become replica 0's; opts[r] take its step count. */
void dt_local_copy_params(struct dt_strategy *s, struct dt_model *replicas, struct dt_optimizer *opts);

/*
 * Joins the MPI world when launched by mpirun or srun (fills s->rank and
 * s->world); otherwise one process. Refuses an environment that claims
 * several processes without a launcher. 0 or -1.
 */
int dt_strategy_join_world(struct dt_strategy *s, const char *name);

#endif
