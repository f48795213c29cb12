/*
 * The replicas of one process (mirrored, and the local part of
 * multi_worker_mirrored): gradient sum into replica 0, and replica 0's
 * parameters copied to the others. CPU replicas share host memory, so these
 * are plain dt_op calls on host views. GPU replicas (strategies/local_gpu.c)
 * meet through NCCL instead: one communicator per local GPU, the gradient
 * buffers all-reduced in place and every replica running its own optimizer.
 */
#ifndef DT_STRATEGIES_LOCAL_H
#define DT_STRATEGIES_LOCAL_H

#include "strategies.h"

/*
 * Reads `devices` into s->devices / s->nreplicas. A list is all CPUs or all
 * GPUs; each GPU must exist (the CUDA backend loads and sees it), else a
 * config error at the item. auto: every usable GPU (under mpirun, this
 * host's share of them: OMPI_COMM_WORLD_LOCAL_RANK / LOCAL_SIZE), else cpu:0.
 * 0 or -1.
 */
int dt_local_devices(struct dt_strategy *s, const struct dt_distribute *d);
/* replicas[0].grads[lo, hi) += replicas[r].grads[lo, hi) for r = 1..n-1 (no-op for one replica). */
void dt_local_sum_grads(struct dt_strategy *s, struct dt_model *replicas, int64_t lo, int64_t hi);
/* Every replica's parameters (all nparams) become replica 0's; opts[r] take its step count. */
void dt_local_copy_params(struct dt_strategy *s, struct dt_model *replicas, struct dt_optimizer *opts);

/* ---- GPU replicas (local_gpu.c) ---- */

/* 1 when this process's replicas are GPUs (dt_local_devices never mixes kinds). */
int dt_local_is_gpu(const struct dt_strategy *s);

/* This process's NCCL communicators, one per local GPU replica. */
struct dt_local_nccl {
	int n;                        /* communicators made; 0: none (one GPU in all) */
	void *comms[DT_MAX_REPLICAS];
};

/* One clique of the local GPUs (mirrored). 0, or -1 with an error naming `who`. */
int dt_local_nccl_init_all(struct dt_local_nccl *c, const struct dt_strategy *s, const char *who);
/*
 * Local GPU l of this rank becomes member rank * nreplicas + l of a clique
 * of world * nreplicas GPUs, from the unique id rank 0 made (id, broadcast by
 * the caller). 0, or -1 with an error.
 */
int dt_local_nccl_init_ranks(struct dt_local_nccl *c, const struct dt_strategy *s,
			     const unsigned char *id, const char *who);
/* Makes the NCCL unique id (rank 0). 0, or -1 with an error. */
int dt_local_nccl_unique_id(unsigned char *id, const char *who);
/*
 * Every replica's parameters (all nparams) and optimizer slots become those
 * of the clique's member 0 (the chief's replica 0); local opts take opts[0]'s
 * step count. Queued on the GPUs' streams.
 */
void dt_local_nccl_broadcast(struct dt_local_nccl *c, const struct dt_strategy *s, struct dt_model *replicas,
			     struct dt_optimizer *opts);
/*
 * Sums the gradient buffers (ntrainable floats) over the clique in place and
 * gives every replica member 0's non-trainable state (BatchNormalization's
 * moving statistics: the CPU path keeps replica 0's), in one NCCL group.
 */
void dt_local_nccl_allreduce(struct dt_local_nccl *c, const struct dt_strategy *s, struct dt_model *replicas);
void dt_local_nccl_release(struct dt_local_nccl *c);

/*
 * Joins the MPI world when launched by mpirun or srun (fills s->rank and
 * s->world); otherwise one process. Refuses an environment that claims
 * several processes without a launcher. 0 or -1.
 */
int dt_strategy_join_world(struct dt_strategy *s, const char *name);
/*
 * s->job against the chief's over g (the whole world), the first exchange of
 * init, so that a process started with another config (another strategy
 * even) fails there rather than in an exchange it breaks. -1 on every
 * process when any process's job differs (s->chief_job, s->jobs_differing
 * and s->job_differs say how); else 0.
 */
struct dt_mpi_group;
int dt_strategy_same_job(struct dt_strategy *s, struct dt_mpi_group *g);

#endif
