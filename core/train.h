/*
 * The training loop, Keras' fit and evaluate over a strategy's replicas.
 *
 * One step: the pipeline reads global batch `step` of the epoch; replica r
 * takes its contiguous slice, runs forward, the loss (scaled by 1/global
 * batch) and backward; the strategy aggregates gradients and applies the
 * optimizer. Callbacks (progress, checkpoints, ...) see the running metrics
 * after each batch and the epoch's metrics at its end.
 */
#ifndef DT_TRAIN_H
#define DT_TRAIN_H

#include "loss.h"
#include "pipeline.h"
#include "strategy.h"

/* Metrics of an epoch (or a running part of one). */
struct dt_logs {
	int epoch;             /* 0-based */
	int64_t step, steps;   /* steps done, steps in the epoch */
	double loss;
	double accuracy;       /* when has_accuracy */
	int has_accuracy;
	int has_val;
	double val_loss, val_accuracy;
	double seconds;        /* wall time of the epoch's training steps so far */
	double samples_per_sec;
	int64_t skipped;       /* unreadable records skipped in the epoch (data.on_error: skip) */
};

struct dt_trainer;

struct dt_callback {
	const char *name; /* "early_stopping", ...: names its state in checkpoints */
	void *priv;
	void (*on_epoch_begin)(struct dt_callback *cb, const struct dt_trainer *t, int epoch);
	void (*on_batch_end)(struct dt_callback *cb, const struct dt_trainer *t, const struct dt_logs *logs);
	/* Returns 0 to go on, 1 to stop training normally (early stopping), -1 to stop with an error. */
	int (*on_epoch_end)(struct dt_callback *cb, const struct dt_trainer *t, const struct dt_logs *logs);
	/*
	 * Optional, for exact resume: the callback's state (best value, counters)
	 * as JSON text the caller frees, and the inverse (0, or -1 with an error).
	 */
	char *(*state_save)(struct dt_callback *cb);
	int (*state_load)(struct dt_callback *cb, const char *json);
};

#define DT_MAX_CALLBACKS 8

struct dt_trainer {
	struct dt_strategy *strategy;
	struct dt_model *models;          /* one per replica */
	struct dt_optimizer *opts;        /* one per replica */
	struct dt_objective objective;
	int accuracy;                     /* report accuracy */
	struct dt_pipeline *train, *val;  /* val may be NULL */
	int epochs, initial_epoch;
	uint64_t seed;
	int64_t steps_per_epoch;          /* 0: all */
	int ncallbacks;
	struct dt_callback *callbacks[DT_MAX_CALLBACKS];
	/* owned by dt_trainer_init: */
	struct dt_batch batch;
	float **labels;                   /* per replica, on its device */
	struct dt_shape label;
};

/* Sizes the trainer's buffers; models and optimizers must be allocated. */
void dt_trainer_init(struct dt_trainer *t);
void dt_trainer_release(struct dt_trainer *t);
int dt_trainer_add_callback(struct dt_trainer *t, struct dt_callback *cb);
/* Trains from initial_epoch to epochs. 0, or -1 after an error. */
int dt_fit(struct dt_trainer *t);
/* Loss and accuracy over a whole pipeline with replica 0, inference mode. */
int dt_evaluate(struct dt_trainer *t, struct dt_pipeline *p, double *loss, double *accuracy);

double dt_now(void); /* monotonic seconds */

#endif
