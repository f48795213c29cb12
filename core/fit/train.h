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

#include <stdio.h>

#include "core/model/loss.h"
#include "core/model/metric.h"
#include "core/pipeline/pipeline.h"
#include "core/fit/strategy.h"

/* Metrics of an epoch (or a running part of one). */
struct dt_logs {
	int epoch;             /* 0-based */
	int64_t step, steps;   /* steps done, steps in the epoch */
	double loss;
	double accuracy;       /* when has_accuracy */
	int has_accuracy;
	double mae, rmse;      /* when has_errors: mean absolute error, root mean squared error */
	int has_errors;
	int has_val;
	double val_loss, val_accuracy, val_mae, val_rmse;
	double seconds;        /* wall time of the epoch's training steps so far */
	double samples_per_sec;
	int has_learning_rate; /* the rate varies (a schedule, reduce_lr_on_plateau): show it */
	double learning_rate;  /* at the epoch's end (always set): the rate of the next update, before callbacks */
	int64_t skipped;       /* unreadable records skipped in the epoch (data.on_error: skip) */
	/* compile.metrics of the table (core/model/metric.h): metric[i] is metrics->m[i]'s value */
	const struct dt_metric_set *metrics; /* NULL or n 0: none */
	double metric[DT_MAX_METRICS], val_metric[DT_MAX_METRICS];
};

/* The metrics of one pass over a pipeline (dt_evaluate); accuracy, mae and rmse when reported. */
struct dt_metrics {
	double loss, accuracy, mae, rmse;
	double metric[DT_MAX_METRICS]; /* the trainer's metrics' values (dt_metric_value) */
	double *stats;                 /* set by the caller: a buffer of metrics.nstats that gets the statistics, or NULL */
	int64_t samples;               /* dt_evaluate: the samples scored (records skipped under on_error: skip are not) */
};

/*
 * The running sums of an epoch behind its metrics, in this order in
 * dt_fit_pos.sums and in a checkpoint's 'sums' (whose files before MAE and
 * RMSE hold the first three only).
 */
enum dt_fit_sum {
	DT_SUM_LOSS,      /* the samples' losses */
	DT_SUM_CORRECT,   /* correct predictions */
	DT_SUM_SAMPLES,
	DT_SUM_ABS_ERROR, /* sum|pred - target| over every output (MAE) */
	DT_SUM_SQ_ERROR,  /* sum (pred - target)^2 over every output (RMSE) */
	DT_NSUMS
};

struct dt_trainer;

/*
 * A callback: hooks the loop calls, each optional. The trainer is not const:
 * a callback that changes training state does it through the functions
 * declared below (dt_trainer_set_learning_rate, dt_trainer_stop,
 * dt_trainer_set_weights), never by writing its fields.
 */
struct dt_callback {
	const char *name; /* "early_stopping", ...: names its state in checkpoints */
	void *priv;
	void (*on_epoch_begin)(struct dt_callback *cb, struct dt_trainer *t, int epoch);
	void (*on_batch_end)(struct dt_callback *cb, struct dt_trainer *t, const struct dt_logs *logs);
	/* Returns 0 to go on, 1 to stop training normally (early stopping), -1 to stop with an error. */
	int (*on_epoch_end)(struct dt_callback *cb, struct dt_trainer *t, const struct dt_logs *logs);
	/*
	 * For exact resume: the callback's state (best value, counters) as JSON
	 * text the caller frees, and the inverse (0, or -1 with an error).
	 * t may be NULL (unit tests).
	 */
	char *(*state_save)(struct dt_callback *cb, const struct dt_trainer *t);
	int (*state_load)(struct dt_callback *cb, struct dt_trainer *t, const char *json);
	/* After the last epoch or a stop (early stopping restores its best weights here). 0 or -1. */
	int (*on_train_end)(struct dt_callback *cb, struct dt_trainer *t);
};

#define DT_MAX_CALLBACKS 16
#define DT_MAX_SAVERS 8

/*
 * A place in training, what a checkpoint records to resume exactly: the data
 * order and dropout masks are functions of (seed, epoch, step), so with the
 * weights, optimizer state and callback states this is the whole state.
 */
struct dt_fit_pos {
	int epoch;               /* epochs completed */
	int64_t step;            /* training steps done in epoch `epoch` (0 after an epoch end) */
	int64_t global_step;     /* training steps since the run began */
	double sums[DT_NSUMS];   /* that epoch's running sums (enum dt_fit_sum) */
	const struct dt_logs *logs; /* metrics: running, or the finished epoch's with epoch_end */
	int epoch_end;           /* an epoch just ended (validation and callbacks done) */
	int stopped;             /* a callback stopped training */
	/*
	 * sums over every training process (sums itself with one process), kept
	 * after each step and at the epoch's end: what a checkpoint stores, so
	 * that a resumed MPI run's chief carries them and the other ranks start
	 * from 0.
	 */
	double all_sums[DT_NSUMS];
	/* the metrics' statistics (t->metrics.nstats each), as sums and all_sums */
	double *stats, *all_stats;
};

/*
 * What the loop calls at save points, without knowing how a checkpoint is
 * written (core/checkpoint/checkpointer.h implements it). The loop calls
 * save every `every` global steps (at the end of an update), at each epoch's
 * end after every callback's on_epoch_end when at_epoch_end, and, when
 * resumable, on SIGINT, SIGTERM and SIGUSR1.
 */
struct dt_saver {
	/* Writes the state at pos. 0, or -1 with an error. */
	int (*save)(struct dt_saver *s, const struct dt_trainer *t, const struct dt_fit_pos *pos);
	int64_t every;    /* steps; 0: at epoch ends only */
	int at_epoch_end; /* also at epoch ends */
	int resumable;    /* a full state that --resume reads: also written on signals */
};

/* fit's result beyond 0 and -1: a SIGINT or SIGTERM stopped it after a checkpoint. */
#define DT_FIT_INTERRUPTED 2

struct dt_trainer {
	struct dt_strategy *strategy;
	struct dt_model *models;          /* one per replica */
	struct dt_optimizer *opts;        /* one per replica */
	struct dt_objective objective;
	int accuracy;                     /* report accuracy */
	int errors;                       /* report mae and rmse (labels shaped like the output) */
	struct dt_pipeline *train, *val;  /* val may be NULL */
	int epochs, initial_epoch;
	uint64_t seed;
	int64_t steps_per_epoch;          /* 0: all */
	int ncallbacks;
	struct dt_callback *callbacks[DT_MAX_CALLBACKS];
	FILE *trace;                      /* test hook: "epoch record" per sample trained, or NULL */
	/*
	 * fit.accumulate_steps (1: off): the gradients of k consecutive batches
	 * are summed, each batch's scaled by 1/(its size * k), so one update
	 * applies the mean of the k batch means (Keras 3's
	 * gradient_accumulation_steps). Groups do not cross epochs: an epoch's
	 * last group of m < k batches applies the mean of its m batch means.
	 * The optimizer's iterations count applied updates.
	 */
	int accumulate_steps;
	/*
	 * The replica whose backward pass calls the strategy's grads_ready
	 * (set by the loop for each batch that ends an update; -1: none).
	 */
	int ready_replica;
	float **class_weights;            /* per replica, on its device, num_classes floats; NULL: none */
	int num_classes;                  /* entries of class_weights */
	/*
	 * data.sample_weight of the training source (its sample_weight, by
	 * record; set by dt_trainer_init): per replica a device buffer of one
	 * weight per row of its slice, copied from weight_host (B floats, the
	 * global batch's weights).
	 * NULL: none.
	 */
	float **sample_weights;
	float *weight_host;
	int log_learning_rate;            /* put the rate in the logs (it varies) */
	int stop_training;                /* dt_trainer_stop()'s request */
	/* exact resume and checkpoints (set before dt_fit; zero: a fresh run without) */
	int64_t initial_step;             /* steps already done in initial_epoch */
	int64_t initial_global_step;
	double initial_sums[DT_NSUMS];    /* their running sums */
	double *initial_stats;            /* and the metrics' statistics (metrics.nstats; NULL: zeros); freed by dt_trainer_release */
	/*
	 * compile.metrics of the table beyond accuracy, MAE and RMSE, laid out
	 * (dt_metric_set_layout) before dt_trainer_init; n 0: none.
	 */
	struct dt_metric_set metrics;
	int nsavers;                      /* the resumable ones also write on signals */
	struct dt_saver *savers[DT_MAX_SAVERS];
	int stop_signal;                  /* after DT_FIT_INTERRUPTED: SIGINT or SIGTERM */
	/* owned by dt_trainer_init: */
	struct dt_batch batch;
	float **labels;                   /* per replica, on its device */
	float **accum;                    /* per replica, ntrainable: the gradients accumulated so far */
	struct dt_shape label;
	float **metric_scratch;           /* per replica, on its device, dt_metric_scratch floats */
	float **metric_host;              /* per replica, their copy in host memory */
	double *reduce_buf;               /* 2 + DT_NSUMS + metrics.nstats: the per-step all-reduce */
};

/*
 * Sizes the trainer's buffers; models and optimizers must be allocated, and
 * accumulate_steps set (0 is taken as 1).
 */
void dt_trainer_init(struct dt_trainer *t);
void dt_trainer_release(struct dt_trainer *t);
int dt_trainer_add_callback(struct dt_trainer *t, struct dt_callback *cb);
int dt_trainer_add_saver(struct dt_trainer *t, struct dt_saver *s);
/*
 * The one way to change the learning rate: every replica's optimizer gets
 * lr (a schedule overrides it again at the next update).
 */
void dt_trainer_set_learning_rate(struct dt_trainer *t, double lr);
/* The rate of the latest update (replica 0's; all agree). */
double dt_trainer_learning_rate(const struct dt_trainer *t);
/*
 * Keras' stop_training, from a callback: how 1 ends the epoch after this
 * batch and stops normally, -1 stops with the error the callback printed.
 */
void dt_trainer_stop(struct dt_trainer *t, int how);
/* Every replica's parameters from host memory (models[0].nparams floats). */
void dt_trainer_set_weights(struct dt_trainer *t, const float *host);
/*
 * A metric of logs by its name (loss, accuracy, mae, rmse, the metrics of
 * logs->metrics, their val_ forms, learning_rate); NaN when the logs do not
 * have it.
 */
double dt_logs_get(const struct dt_logs *logs, const char *name);
/*
 * Copies num_classes weights (host) to every replica's device, for the loss
 * of training steps (evaluation is unweighted, as Keras' class_weight).
 */
void dt_trainer_set_class_weights(struct dt_trainer *t, const float *w, int num_classes);
/*
 * 1 when an update is applied after batch `step` (0-based) of an epoch of
 * `steps` batches: the end of an accumulation group (every batch when
 * accumulate_steps is 1). A checkpoint between steps is exact only there.
 */
int dt_trainer_ends_update(const struct dt_trainer *t, int64_t step, int64_t steps);
/*
 * Reads training batch `step` of `epoch` into t->batch: this process's part
 * of it when the pipeline has one (dt_pipeline_set_part), the other parts'
 * rows counted as read in full. Under on_error: skip they may have dropped
 * some: a synchronous strategy then learns every part's rows (one small sum
 * over the processes), so that the loss is the mean over the global batch
 * and the dropout keys are global rows everywhere; an asynchronous one (a
 * parameter server's workers) keeps its own count, so that no step waits
 * for another worker. 0, or -1 after a read error.
 */
int dt_trainer_read_batch(struct dt_trainer *t, int epoch, int64_t step);
/*
 * Forward (and with train, backward and the regularizers) of replica r on
 * rows [begin, end) of the host batch b; adds its loss sum (with its share
 * of the penalty when training), correct count and errors to sums (all but
 * DT_SUM_SAMPLES), and the metrics' statistics to stats (NULL: not kept). The gradient is scaled by 1/(b->n * group), b->n the
 * whole global batch and group the batches accumulated into one update (1
 * without accumulation). One training step of fit is this on every replica,
 * then the strategy's apply_gradients; dtrain inspect runs it too.
 */
void dt_trainer_replica_step(struct dt_trainer *t, int r, const struct dt_batch *b, int begin, int end, int train,
			     const struct dt_step_ctx *ctx, double sums[DT_NSUMS], double *stats, int group);
/* The randomness (dropout keys) of global step `step` of `epoch`: the same for every replica. */
uint64_t dt_trainer_step_key(const struct dt_trainer *t, int epoch, int64_t step);
/*
 * Trains from (initial_epoch, initial_step) to epochs. 0; -1 after an error;
 * DT_FIT_INTERRUPTED after SIGINT or SIGTERM (with dt_fit_signals_install()):
 * the current step finished and saver 0 wrote a checkpoint.
 */
int dt_fit(struct dt_trainer *t);
/*
 * SIGINT and SIGTERM ask fit to stop after the current step (a second one
 * while it stops kills the process at once, with the signal's default action);
 * SIGUSR1 asks for a checkpoint and training goes on. The handlers only set flags.
 */
void dt_fit_signals_install(void);
/*
 * The metrics over a whole pipeline with replica 0, inference mode: 0; 1 when
 * a stop signal cut it short (only fit's loop asks for signals); -1 after an
 * error.
 */
int dt_evaluate(struct dt_trainer *t, struct dt_pipeline *p, struct dt_metrics *out);

double dt_now(void); /* monotonic seconds */

#endif
