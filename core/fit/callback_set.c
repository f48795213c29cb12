#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/checkpoint/run_dir.h"
#include "core/error.h"
#include "core/fit/callback_set.h"

/* Progress on stderr (a bar on a terminal, lines otherwise) and --json lines on stdout. */
static void install_output(struct dt_callback_set *set, struct dt_trainer *t, const struct dt_run_config *cfg,
			   const struct dt_callback_env *env)
{
	enum dt_progress_mode mode = env->quiet ? DT_PROGRESS_OFF
				   : isatty(STDERR_FILENO) ? DT_PROGRESS_BAR : DT_PROGRESS_LINES;
	dt_progress_init(&set->progress, mode, stderr, cfg->epochs);
	dt_trainer_add_callback(t, &set->progress.cb);
	if (env->json) {
		dt_json_log_init(&set->json, stdout, cfg->epochs);
		dt_trainer_add_callback(t, &set->json.cb);
	}
}

/* fit.callbacks without model_checkpoint: the deciding ones everywhere, csv_logger and tensorboard on the chief. */
static int install_fit_callbacks(struct dt_callback_set *set, struct dt_trainer *t, const struct dt_run_config *cfg,
				 const struct dt_callback_env *env)
{
	const struct dt_callbacks_config *cbc = &cfg->callback_cfg;
	FILE *out = env->chief && !env->quiet ? stderr : NULL;
	if (cbc->terminate_on_nan) {
		dt_terminate_on_nan_init(&set->nan_stop);
		dt_trainer_add_callback(t, &set->nan_stop.cb);
	}
	if (cbc->early_stopping) {
		dt_early_stopping_init(&set->early, &cbc->early, t, out);
		dt_trainer_add_callback(t, &set->early.cb);
	}
	if (cbc->reduce_lr_on_plateau) {
		dt_reduce_lr_init(&set->plateau, &cbc->plateau, out);
		dt_trainer_add_callback(t, &set->plateau.cb);
	}
	if (cbc->csv_logger && env->chief) {
		if (dt_mkdir_p(env->dir) < 0)
			return -1;
		dt_csv_logger_init(&set->csv, &cbc->csv, env->dir);
		dt_trainer_add_callback(t, &set->csv.cb);
	}
	if (cbc->tensorboard && env->chief) {
		dt_tensorboard_init(&set->tensorboard, &cbc->tensorboard_cfg, env->dir);
		dt_trainer_add_callback(t, &set->tensorboard.cb);
	}
	if (cfg->plot && env->chief) {
		if (dt_mkdir_p(env->dir) < 0)
			return -1;
		dt_plot_callback_init(&set->plot, env->dir);
		set->have_plot = 1;
		dt_trainer_add_callback(t, &set->plot.cb);
	}
	return 0;
}

/* The metadata every checkpoint file carries beside the config. */
static void collect_metadata(struct dt_callback_set *set, const struct dt_run_config *cfg,
			     const struct dt_callback_env *env)
{
	if (cfg->checkpoint_enabled || cfg->nmodel_checkpoints)
		set->config_json = dt_node_to_json(dt_doc_root(cfg->doc));
	if (env->class_names) {
		cJSON *names = cJSON_CreateStringArray((const char *const *)env->class_names, env->num_classes);
		set->class_names_json = cJSON_PrintUnformatted(names);
		cJSON_Delete(names);
		set->extra[set->nextra++] = (struct dt_ckpt_meta){ "class_names", set->class_names_json };
	} else if (env->num_classes > 0) {
		/* Numbered classes: evaluate refuses a test label the training data did not have, as fit does. */
		snprintf(set->num_classes_text, sizeof(set->num_classes_text), "%d", env->num_classes);
		set->extra[set->nextra++] = (struct dt_ckpt_meta){ "num_classes", set->num_classes_text };
	}
	if (env->feature_names) {
		cJSON *names = cJSON_CreateStringArray((const char *const *)env->feature_names, env->num_features);
		set->feature_names_json = cJSON_PrintUnformatted(names);
		cJSON_Delete(names);
		set->extra[set->nextra++] = (struct dt_ckpt_meta){ "feature_names", set->feature_names_json };
	}
	if (env->preprocessing)
		set->extra[set->nextra++] = (struct dt_ckpt_meta){ "preprocessing", env->preprocessing };
	/* What a checkpoint needs beside "config" to be used alone (cmd/checkpoint.c): */
	if (env->input_shape) {
		cJSON *shape = cJSON_CreateArray();
		for (int i = 0; i < env->input_shape->ndim; i++)
			cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)env->input_shape->dim[i]));
		set->input_shape_json = cJSON_PrintUnformatted(shape);
		cJSON_Delete(shape);
		set->extra[set->nextra++] = (struct dt_ckpt_meta){ "input_shape", set->input_shape_json };
	}
	/* Nothing that depends on where the run was (a directory): runs elsewhere write the same bytes. */
	set->extra[set->nextra++] = (struct dt_ckpt_meta){ "config_name", cfg->file_name };
}

/*
 * fit.callbacks' model_checkpoint items, then the checkpoint section's
 * writer, which stores their state, so it comes after them.
 */
static int install_writers(struct dt_callback_set *set, struct dt_trainer *t, const struct dt_run_config *cfg,
			   const struct dt_callback_env *env)
{
	for (int i = 0; i < cfg->nmodel_checkpoints; i++) {
		const struct dt_model_checkpoint_cfg *m = &cfg->model_checkpoints[i];
		struct dt_checkpointer *w = &set->mcs[i];
		if (dt_checkpointer_init(w, m->dir[0] ? m->dir : env->dir, set->config_json) < 0)
			return -1;
		set->nmcs++;
		snprintf(set->mc_names[i], sizeof(set->mc_names[i]), i ? "model_checkpoint_%d" : "model_checkpoint", i + 1);
		w->cb.name = set->mc_names[i];
		w->filename = m->filename;
		w->saver.every = m->save_freq;
		w->saver.at_epoch_end = m->save_freq == 0;
		w->saver.resumable = 0;
		w->monitor = m->monitor;
		w->mode = m->mode;
		w->best_only = m->save_best_only;
		w->weights_only = m->save_weights_only;
		w->save_best = 0;
		w->extra_meta = set->extra;
		w->nextra_meta = set->nextra;
		dt_trainer_add_saver(t, &w->saver);
		dt_trainer_add_callback(t, &w->cb);
	}
	if (!cfg->checkpoint_enabled)
		return 0;
	if (dt_checkpointer_init(&set->ckpt, env->dir, set->config_json) < 0)
		return -1;
	set->have_ckpt = 1;
	dt_checkpointer_configure(&set->ckpt, cfg);
	set->ckpt.extra_meta = set->extra;
	set->ckpt.nextra_meta = set->nextra;
	dt_trainer_add_saver(t, &set->ckpt.saver);
	return 0;
}

int dt_callback_set_install(struct dt_callback_set *set, struct dt_trainer *t, const struct dt_run_config *cfg,
			    const struct dt_callback_env *env)
{
	memset(set, 0, sizeof(*set));
	if (env->chief)
		install_output(set, t, cfg, env);
	if (install_fit_callbacks(set, t, cfg, env) < 0)
		return -1;
	if (!env->chief)
		return 0;
	collect_metadata(set, cfg, env);
	if (cfg->callback_cfg.early_stopping && cfg->checkpoint_enabled) {
		char best[4200];
		snprintf(best, sizeof(best), "%s/early_stopping_best.safetensors", env->dir);
		dt_early_stopping_keep_file(&set->early, best, set->config_json, set->extra, set->nextra);
	}
	return install_writers(set, t, cfg, env);
}

int dt_callback_set_restore(struct dt_callback_set *set, struct dt_trainer *t, const struct dt_ckpt *f)
{
	if (dt_trainer_restore(t, f) < 0)
		return -1;
	if (set->have_ckpt)
		dt_checkpointer_restore(&set->ckpt, f);
	return 0;
}

const char *dt_callback_set_last(const struct dt_callback_set *set) { return set->have_ckpt ? set->ckpt.last : ""; }

void dt_callback_set_release(struct dt_callback_set *set)
{
	dt_early_stopping_release(&set->early);
	dt_csv_logger_release(&set->csv);
	dt_tensorboard_release(&set->tensorboard);
	if (set->have_plot)
		dt_plot_callback_release(&set->plot);
	if (set->have_ckpt)
		dt_checkpointer_release(&set->ckpt);
	for (int i = 0; i < set->nmcs; i++)
		dt_checkpointer_release(&set->mcs[i]);
	free(set->config_json);
	free(set->input_shape_json);
	free(set->class_names_json);
	free(set->feature_names_json);
	memset(set, 0, sizeof(*set));
}
