/*
 * The distribution-strategy interface (tf.distribute's idea). A strategy
 * decides the replicas (one model copy per device) and how their gradients
 * meet: one_device (one replica), mirrored (several local devices),
 * multi_worker_mirrored (MPI processes) and parameter_server. Strategies live
 * in strategies/, with their table and the auto-selection; the training loop
 * drives them only through these functions.
 */
#ifndef DT_STRATEGY_H
#define DT_STRATEGY_H

#include "core/config/config.h"
#include "core/model/model.h"
#include "core/model/optimizer.h"

#define DT_MAX_REPLICAS 64

struct dt_strategy {
	const struct dt_strategy_type *type;
	int nreplicas;                          /* in this process */
	struct dt_device devices[DT_MAX_REPLICAS];
	int rank, world;                        /* processes: 0 and 1 without MPI */
	int is_chief;                           /* prints progress, writes checkpoints */
	int quiet;                              /* the chief prints no per-epoch report (fit -q) */
	/*
	 * The data slices: a global batch is cut into global_replicas contiguous
	 * slices (dt_batch_slice) and this process's replica r takes slice
	 * first_replica + r. dt_strategy_create sets 0 and nreplicas when init
	 * leaves them 0.
	 */
	int first_replica, global_replicas;
	double timeout;                         /* seconds a collective may wait (distribute.timeout) */
	/*
	 * The exit status, set before release: after a failure here the job ends
	 * (MPI_Abort); 128 + N when every process stopped on signal N at the
	 * same step (the launcher may be ending the job): they leave together.
	 */
	int failed;
	char why[160];                          /* why this strategy: auto's reason, or the config's choice */
	/*
	 * What every process of a job must share with the chief (the config as
	 * JSON text), set before dt_strategy_create, or NULL. A process of
	 * several compares it with the chief's before any other exchange; where
	 * any process's differs, creation fails on every process: chief_job
	 * holds the chief's (freed by dt_strategy_release) and jobs_differing
	 * counts the processes whose job differs, for the caller to say what
	 * differs (job_differs: this process's own does).
	 */
	const char *job;
	char *chief_job;
	int jobs_differing, job_differs;
	void *priv;
};

struct dt_distribute;
struct dt_system;

struct dt_strategy_type {
	const char *name;
	/* 1: trains in this one process (refused in an MPI job of several processes). */
	int one_process;
	/*
	 * 1: each process's gradients are applied as they come (parameter
	 * servers), so no step waits on another process; 0: synchronous.
	 */
	int asynchronous;
	/*
	 * Optional: the strategy's own rules on the `distribute:` keys d (read
	 * and valid), without starting anything; with sys (not NULL), also those
	 * on this job's processes. 0 or -1 after an error.
	 */
	int (*check)(const struct dt_distribute *d, const struct dt_system *sys);
	/* Reads the `distribute:` mapping (may be NULL); fills replicas and roles. */
	int (*init)(struct dt_strategy *s, const struct dt_node *args);
	/*
	 * Makes every replica's parameters (and optimizer state and step count)
	 * equal to the chief's replica 0: at start, and after loading weights.
	 */
	void (*broadcast)(struct dt_strategy *s, struct dt_model *replicas, struct dt_optimizer *opts);
	/*
	 * Aggregates the replicas' gradient buffers (each already scaled by
	 * 1/global batch, so the sum is the global mean) and applies the update
	 * on every replica, leaving identical parameters everywhere.
	 */
	void (*apply_gradients)(struct dt_strategy *s, struct dt_model *replicas, struct dt_optimizer *opts);
	/*
	 * Optional: called while the last local replica runs the backward pass
	 * of a batch that ends an update (without gradient accumulation), each
	 * time the gradients [lo, ntrainable) of every local replica are final
	 * (layers finish from the last down, so lo only falls; lo 0 at the
	 * end, also for a replica without rows). The strategy may start
	 * exchanging them, in buckets, while the layers below compute (as
	 * PyTorch DDP and Horovod do); apply_gradients finishes the exchange.
	 */
	void (*grads_ready)(struct dt_strategy *s, struct dt_model *replicas, int64_t lo);
	/* Sums v[0..n) over all training processes, in place. */
	void (*reduce_sum)(struct dt_strategy *s, double *v, int n);
	/*
	 * Optional (NULL: one process, nothing to do): gives every training
	 * process the chief's v[0..n), so that decisions taken by the chief's
	 * callbacks (stop, learning rate) are the same everywhere.
	 */
	void (*agree)(struct dt_strategy *s, double *v, int n);
	/*
	 * Optional: called at the end of each epoch before the callbacks, e.g. the
	 * parameter server's chief gathers the shards into its replica 0 and
	 * optimizer so that the checkpoint holds the whole state. 0 or -1.
	 */
	int (*epoch_end)(struct dt_strategy *s, struct dt_model *replicas, struct dt_optimizer *opts, int epoch);
	/*
	 * Optional: called on the chief before a checkpoint taken within an
	 * epoch (the only process with checkpoint writers), to make replica 0
	 * and opts[0] hold the whole state as epoch_end does. 0 or -1.
	 */
	int (*sync_state)(struct dt_strategy *s, struct dt_model *replicas, struct dt_optimizer *opts);
	/*
	 * Optional: a process that does not train (a parameter server) runs its
	 * whole job here and returns 1 when the workers are done; a training
	 * process gets 0 at once. -1 after an error.
	 */
	int (*serve)(struct dt_strategy *s, struct dt_model *replicas, struct dt_optimizer *opts);
	void (*release)(struct dt_strategy *s);
};

#endif
