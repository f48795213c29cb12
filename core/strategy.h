/*
 * The distribution-strategy interface (tf.distribute's idea). A strategy
 * decides the replicas (one model copy per device) and how their gradients
 * meet: one_device (one replica), later mirrored (several local devices),
 * multi_worker_mirrored (MPI processes) and parameter_server. Strategies live
 * in strategies/, with their table and the auto-selection; the training loop
 * drives them only through these functions.
 */
#ifndef DT_STRATEGY_H
#define DT_STRATEGY_H

#include "config.h"
#include "model.h"
#include "optimizer.h"

#define DT_MAX_REPLICAS 64

struct dt_strategy {
	const struct dt_strategy_type *type;
	int nreplicas;                          /* in this process */
	struct dt_device devices[DT_MAX_REPLICAS];
	int rank, world;                        /* processes: 0 and 1 without MPI */
	int is_chief;                           /* prints progress, writes checkpoints */
	void *priv;
};

struct dt_strategy_type {
	const char *name;
	/* Reads the `distribute:` mapping (may be NULL); fills replicas and roles. */
	int (*init)(struct dt_strategy *s, const struct dt_node *args);
	/* Makes every replica's parameters equal to the chief's replica 0. */
	void (*broadcast)(struct dt_strategy *s, struct dt_model *replicas);
	/*
	 * Aggregates the replicas' gradient buffers (each already scaled by
	 * 1/global batch, so the sum is the global mean) and applies the update
	 * on every replica, leaving identical parameters everywhere.
	 */
	void (*apply_gradients)(struct dt_strategy *s, struct dt_model *replicas, struct dt_optimizer *opts);
	/* Sums v[0..n) over all processes, in place. */
	void (*reduce_sum)(struct dt_strategy *s, double *v, int n);
	void (*release)(struct dt_strategy *s);
};

#endif
