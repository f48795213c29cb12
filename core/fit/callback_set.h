/*
 * The callbacks fit installs, from the config: progress and --json lines,
 * fit.callbacks (terminate_on_nan, early_stopping, reduce_lr_on_plateau,
 * csv_logger, tensorboard, model_checkpoint), fit.plot and the checkpoint section's writer. One
 * struct owns them all, so that `dtrain fit` wires a run in one call and
 * frees it in another.
 *
 * The deciding callbacks go on every MPI rank (they see reduced metrics); the
 * printing and writing ones on the chief only.
 */
#ifndef DT_CALLBACK_SET_H
#define DT_CALLBACK_SET_H

#include "core/checkpoint/checkpointer.h"
#include "core/config/run_config.h"
#include "core/fit/fit_callbacks.h"
#include "core/fit/progress.h"
#include "core/fit/tensorboard.h"
#include "core/plot/plot.h"

/* What the run knows beyond its config. */
struct dt_callback_env {
	const char *dir;          /* the run directory (core/checkpoint/run_dir.h) */
	int chief;                /* this process prints and writes */
	int quiet;                /* fit -q */
	int json;                 /* fit --json */
	char *const *class_names; /* the training data's class names, stored for predict; NULL: none */
	int num_classes;          /* its classes when labels are class indices (named or numbers), else 0 */
	/* The training data's feature column names (a CSV header), stored so that evaluate and predict find columns by name; NULL: none */
	char *const *feature_names;
	int num_features;
	const char *preprocessing; /* the normalization fit used as JSON (evaluate and predict reuse it); NULL: none */
	const struct dt_shape *input_shape; /* the model's per-sample input, stored for a checkpoint alone; NULL: none */
};

struct dt_callback_set {
	struct dt_progress progress;
	struct dt_json_log json;
	struct dt_terminate_on_nan nan_stop;
	struct dt_early_stopping early;
	struct dt_reduce_lr plateau;
	struct dt_csv_logger csv;
	struct dt_tensorboard tensorboard;
	struct dt_plot_callback plot; /* fit.plot, when have_plot */
	int have_plot;
	struct dt_checkpointer ckpt;  /* the checkpoint section's writer, when have_ckpt */
	int have_ckpt;
	struct dt_checkpointer mcs[DT_MAX_MODEL_CHECKPOINTS]; /* fit.callbacks' model_checkpoint items */
	int nmcs;
	char mc_names[DT_MAX_MODEL_CHECKPOINTS][32];
	struct dt_ckpt_meta extra[DT_MAX_EXTRA_META]; /* class names, preprocessing: in every file */
	int nextra;
	char *config_json;            /* the resolved config, in every file */
	char *class_names_json;
	char num_classes_text[16];    /* "3": numbered classes, that have no names to store */
	char *feature_names_json;
	char *input_shape_json;       /* [28,28,1] */
};

/*
 * Creates the callbacks cfg names (and the run directory when something is
 * written there) and adds them to t. 0, or -1 with an error; release either way.
 */
int dt_callback_set_install(struct dt_callback_set *set, struct dt_trainer *t, const struct dt_run_config *cfg,
			    const struct dt_callback_env *env);
/*
 * --resume: the trainer's state, then the checkpoint writer's kept files and
 * best value, from f. 0, or -1 with an error naming the file.
 */
int dt_callback_set_restore(struct dt_callback_set *set, struct dt_trainer *t, const struct dt_ckpt *f);
/* The newest checkpoint the checkpoint section wrote ("" when none). */
const char *dt_callback_set_last(const struct dt_callback_set *set);
void dt_callback_set_release(struct dt_callback_set *set);

#endif
