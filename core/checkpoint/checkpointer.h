/*
 * Full-state checkpoints in the run directory: the writer the trainer calls
 * through its saver interface, file rotation, latest/best links, and the
 * restore of a trainer from such a file (--resume).
 */
#ifndef DT_CHECKPOINTER_H
#define DT_CHECKPOINTER_H

#include "core/checkpoint/checkpoint.h"
#include "core/fit/train.h"

/*
 * Writes full-state checkpoints: weights, optimizer slots and iterations, the
 * position (struct dt_fit_pos), the callbacks' states, the resolved config.
 * The trainer calls it through its saver (struct dt_saver of core/fit/train.h):
 * every `saver.every` steps, at the end of each epoch and on signals. Each file is named from the template, written
 * atomically, then `latest.safetensors` (a symlink, replaced atomically) is
 * pointed at it, best.safetensors (a hard link) when the monitored value
 * improved, and the oldest files beyond `keep` are removed (never the newest).
 */
struct dt_checkpointer {
	struct dt_saver saver;   /* what the trainer calls: every, at_epoch_end, resumable (keeps latest.safetensors) */
	struct dt_callback cb;   /* name "checkpoint": only its state (kept files, best) for resume */
	const char *dir;
	const char *config_json; /* the resolved config, stored in the metadata */
	/*
	 * More metadata for every file, set by the caller after init (not owned):
	 * "class_names" (a JSON array of strings, for predict), "feature_names"
	 * (the training CSV's feature columns, a JSON array of strings, so that
	 * evaluate and predict take columns by name), "preprocessing" (a JSON
	 * object with the normalization computed on the training set).
	 */
	const struct dt_ckpt_meta *extra_meta;
	int nextra_meta;
	int keep;                /* files kept; 0: all */
	const char *filename;    /* template (core/checkpoint/ckpt_template.h), without the extension */
	const char *monitor;     /* NULL: val_loss with validation data, else loss */
	int mode;                /* +1: higher is better; -1: lower */
	int save_best;           /* keep best.safetensors (default 1) */
	int best_only;           /* write epoch files only when the monitored value improves */
	int weights_only;        /* no optimizer state (such files cannot be resumed) */
	double best;             /* monitored value of best.safetensors */
	int has_best;
	int nfiles;              /* files written and kept, oldest first (names in dir) */
	char **files;
	char last[4200];         /* the newest file written, or "" */
};
/*
 * Creates dir (and parents) and removes the temporary files that writes cut
 * short by a crash left there (of processes no longer running); the defaults
 * above. 0 or -1.
 */
int dt_checkpointer_init(struct dt_checkpointer *c, const char *dir, const char *config_json);
void dt_checkpointer_release(struct dt_checkpointer *c);
/* Takes every, keep, filename and save_best from the run config's checkpoint section. */
struct dt_run_config;
void dt_checkpointer_configure(struct dt_checkpointer *c, const struct dt_run_config *cfg);
/* Writes the checkpoint of position pos (see above); saver.save. 0, or -1 with an error. */
int dt_checkpointer_save(struct dt_checkpointer *c, const struct dt_trainer *t, const struct dt_fit_pos *pos);
/* Takes the kept-file list and best value from a checkpoint this writer wrote. */
void dt_checkpointer_restore(struct dt_checkpointer *c, const struct dt_ckpt *f);

/*
 * Restores a full-state checkpoint into the trainer: every replica's weights
 * and optimizer state, the learning rate, the position to start from and the
 * states of the callbacks added so far. 0, or -1 with an error naming the file.
 */
int dt_trainer_restore(struct dt_trainer *t, const struct dt_ckpt *f);

#endif
