/*
 * The callbacks `fit.callbacks` lists, Keras' names and arguments:
 *
 *   early_stopping         stop when a monitored metric stops improving;
 *                          restore_best_weights puts back the best epoch's weights
 *   reduce_lr_on_plateau   multiply the learning rate by `factor` on a plateau
 *   terminate_on_nan       stop with an error at the batch whose loss is NaN or
 *                          infinite, naming the first layer with a non-finite value
 *   csv_logger             one row per epoch in a CSV file (history.csv in the
 *                          run directory)
 *   model_checkpoint       known here, read and run by the checkpointer
 *   tensorboard            scalars in TensorBoard event files (core/fit/tensorboard.h)
 *
 * dt_callbacks_config_read checks the list when the config loads (one table of
 * names, did-you-mean, file:line:col). The callbacks decide from the logs
 * dt_fit hands them, whose metrics are reduced over all workers, so every rank
 * that runs early_stopping and reduce_lr_on_plateau reaches the same decision
 * (dt_early_stopping_decide and dt_reduce_lr_decide are the pure steps);
 * terminate_on_nan sums a per-batch "loss not finite" flag with the
 * strategy's reduce_sum, one double per batch, so all ranks stop together.
 * Each callback with state implements state_save/state_load for --resume.
 */
#ifndef DT_FIT_CALLBACKS_H
#define DT_FIT_CALLBACKS_H

#include <stdio.h>

#include "core/config/config.h"
#include "core/config/monitor.h"
#include "core/fit/train.h"

struct dt_early_stopping_config {
	const char *monitor;        /* "val_loss" */
	double min_delta;           /* 0; its absolute value is used */
	int64_t patience;           /* 0 */
	enum dt_monitor_mode mode;  /* auto: dt_monitor_greater's rule */
	int has_baseline;
	double baseline;
	int restore_best_weights;   /* 0 */
	int64_t start_from_epoch;   /* 0 */
	const struct dt_node *where;
};

struct dt_reduce_lr_config {
	const char *monitor;        /* "val_loss" */
	double factor;              /* 0.1, in [0, 1) */
	int64_t patience;           /* 10 */
	enum dt_monitor_mode mode;  /* auto: dt_monitor_greater's rule */
	double min_delta;           /* 1e-4 */
	int64_t cooldown;           /* 0 */
	double min_lr;              /* 0 */
	const struct dt_node *where;
};

struct dt_csv_logger_config {
	const char *filename;       /* "history.csv", relative to the run directory */
	const char *separator;      /* "," */
	int append;                 /* 0 */
	const struct dt_node *where;
};

struct dt_tensorboard_config {
	const char *log_dir;        /* "logs", relative to the run directory */
	int64_t update_freq;        /* 0: "epoch"; N: also every N batches ("batch": 1) */
	const struct dt_node *where;
};

struct dt_callbacks_config {
	int early_stopping, reduce_lr_on_plateau, terminate_on_nan, csv_logger, model_checkpoint, tensorboard;
	struct dt_early_stopping_config early;
	struct dt_reduce_lr_config plateau;
	struct dt_csv_logger_config csv;
	struct dt_tensorboard_config tensorboard_cfg;
};

/*
 * Reads the `fit.callbacks` sequence (NULL: none). Items are a name
 * (`- terminate_on_nan`) or one name with its arguments
 * (`- early_stopping: {patience: 3}`); each name at most once.
 * model_checkpoint items are left to the checkpointer. 0 or -1.
 */
int dt_callbacks_config_read(struct dt_callbacks_config *c, const struct dt_node *list);
/*
 * Errors when a monitored metric will not be in the logs (dt_monitor_check):
 * has_accuracy, has_errors (MAE and RMSE), has_val and metrics (compile.metrics'
 * others, NULL: none) say what fit reports.
 * 0 or -1 (the error names the YAML position).
 */
int dt_callbacks_config_check(const struct dt_callbacks_config *c, int has_accuracy, int has_errors, int has_val,
			      const struct dt_metric_set *metrics);

struct dt_early_stopping {
	struct dt_callback cb;
	struct dt_early_stopping_config cfg;
	FILE *out;                  /* messages; NULL: silent */
	int greater;                /* the monitor improves upward */
	double min_delta;           /* signed as Keras: negative in min mode */
	double best;
	int64_t wait, stopped_epoch, best_epoch;
	int has_best_weights;
	int take_at_begin;          /* after state_load: the weights at the next epoch's start are the best */
	float *best_weights;        /* host copy of replica 0's nparams, with restore_best_weights */
	char file[4096];            /* where the best weights are also written ("" : nowhere) */
	/* what the file carries beside the weights, as every checkpoint does (dt_early_stopping_keep_file) */
	const char *config_json;
	const struct dt_ckpt_meta *meta;
	int nmeta;
};

/*
 * t (read for the parameter count only) may be NULL when
 * restore_best_weights is off (tests); out may be NULL. The callback is
 * &e->cb; release with dt_early_stopping_release.
 */
void dt_early_stopping_init(struct dt_early_stopping *e, const struct dt_early_stopping_config *cfg,
			    const struct dt_trainer *t, FILE *out);
void dt_early_stopping_release(struct dt_early_stopping *e);
/*
 * With restore_best_weights, also writes the best weights to `path` (a
 * safetensors file, replaced atomically) whenever they change, and names it
 * in the saved state, so that a resumed run restores the same weights. Only
 * the chief calls it; state_load on any rank reads the file it names. The
 * file also holds config_json and meta[0..nmeta) (kept by pointer), the
 * checkpoints' metadata (class names, preprocessing, input shape), so that
 * evaluate, predict and export take it as they take a checkpoint.
 */
void dt_early_stopping_keep_file(struct dt_early_stopping *e, const char *path, const char *config_json,
				 const struct dt_ckpt_meta *meta, int nmeta);
/*
 * Keras 3's EarlyStopping.on_epoch_end on the value `current` (NAN: not
 * available). Returns 1 to stop, 0 to go on, 2 to go on after an improvement
 * (take the best weights now).
 */
int dt_early_stopping_decide(struct dt_early_stopping *e, int64_t epoch, double current);

struct dt_reduce_lr {
	struct dt_callback cb;
	struct dt_reduce_lr_config cfg;
	FILE *out;
	int greater;
	double best;
	int64_t wait, cooldown_counter;
};

/* Lowers the rate through dt_trainer_set_learning_rate; out (messages) may be NULL. */
void dt_reduce_lr_init(struct dt_reduce_lr *p, const struct dt_reduce_lr_config *cfg, FILE *out);
/*
 * Keras' ReduceLROnPlateau.on_epoch_end: from the value `current` and the
 * learning rate *lr, lowers *lr when the plateau lasted `patience` epochs.
 * Returns 1 when it changed *lr.
 */
int dt_reduce_lr_decide(struct dt_reduce_lr *p, double current, double *lr);

struct dt_terminate_on_nan {
	struct dt_callback cb;
};
void dt_terminate_on_nan_init(struct dt_terminate_on_nan *n);

struct dt_csv_logger {
	struct dt_callback cb;
	char path[4096];
	char sep[16];
	int append;
	FILE *f;
	long offset;                /* bytes of the file after the latest row */
	int resumed;                /* state_load gave an offset: truncate there, no header */
};
/* Where a callback writes name: name itself when absolute, else run_dir/name. */
void dt_callback_path(const char *run_dir, const char *name, char *buf, size_t size);
/* The file is cfg->filename, or history.csv, relative to run_dir. 0 or -1. */
int dt_csv_logger_init(struct dt_csv_logger *c, const struct dt_csv_logger_config *cfg, const char *run_dir);
void dt_csv_logger_release(struct dt_csv_logger *c);

/* Python's repr() of a float64 (shortest round trip, "1.0", "1e-05"): the CSV values. */
void dt_format_repr(double v, char *buf, size_t size);

#endif
