/*
 * dtrain fit: train the model a YAML file describes (man dtrain-fit).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cmd.h"
#include "core/callbacks.h"
#include "core/error.h"
#include "core/fit_callbacks.h"
#include "core/snapshot.h"

static const char usage[] =
	"usage: dtrain fit [options] MODEL.yaml\n"
	"\n"
	"Trains the model MODEL.yaml describes; progress on stderr, checkpoints in\n"
	"checkpoint.dir (runs/NAME by default).\n"
	"\n"
	"  --set KEY=VALUE        override a config key, e.g. --set fit.epochs=2 (repeatable)\n"
	"  --json                 one JSON object per epoch (and one for the test set) on stdout\n"
	"  -q, --quiet            no progress on stderr\n"
	"  --init-weights FILE    start from the weights in FILE (a .safetensors checkpoint)\n"
	"  -h, --help             this help\n";

static void print_test(int json, int quiet, double loss, double acc, int has_acc, int64_t n)
{
	if (json) {
		cJSON *o = cJSON_CreateObject();
		char *text;
		cJSON_AddStringToObject(o, "event", "test");
		cJSON_AddNumberToObject(o, "loss", loss);
		if (has_acc)
			cJSON_AddNumberToObject(o, "accuracy", acc);
		cJSON_AddNumberToObject(o, "samples", (double)n);
		text = cJSON_PrintUnformatted(o);
		printf("%s\n", text);
		free(text);
		cJSON_Delete(o);
	}
	if (quiet)
		return;
	if (has_acc)
		fprintf(stderr, "test: %lld samples - accuracy: %.4f - loss: %.4f\n", (long long)n, acc, loss);
	else
		fprintf(stderr, "test: %lld samples - loss: %.4f\n", (long long)n, loss);
}

int cmd_fit(int argc, char **argv)
{
	struct dt_opts o;
	struct dt_app a;
	struct dt_progress progress;
	struct dt_json_log json;
	struct dt_checkpointer ckpt;
	struct dt_early_stopping early;
	struct dt_reduce_lr plateau;
	struct dt_terminate_on_nan nan_stop;
	struct dt_csv_logger csv;
	const struct dt_callbacks_config *cbc;
	char dir[4096];
	char *config_json = NULL, *class_names = NULL;
	char *preprocessing_json = NULL;
	struct dt_ckpt_meta extra[DT_MAX_EXTRA_META];
	int nextra = 0;
	int rc;

	memset(&early, 0, sizeof(early));
	memset(&csv, 0, sizeof(csv));
	if ((rc = dt_opts_parse(&o, argc, argv, "config set json quiet init-weights", usage)) >= 0)
		goto out_opts;
	if ((rc = dt_app_config(&a, &o)) || (rc = dt_app_data(&a, 1, a.cfg.test != NULL)) ||
	    (rc = dt_app_build(&a)))
		goto out;
	if (o.init_weights) {
		struct dt_ckpt *c = dt_checkpoint_load(o.init_weights);
		rc = DT_EXIT_FAIL;
		if (!c)
			goto out;
		for (int r = 0; r < a.nreplicas; r++)
			if (dt_snapshot_load(c, &a.models[r], NULL) < 0) {
				dt_checkpoint_free(c);
				goto out;
			}
		dt_checkpoint_free(c);
	}
	cbc = &a.cfg.callback_cfg;
	if (a.cfg.checkpoint_dir)
		snprintf(dir, sizeof(dir), "%s", a.cfg.checkpoint_dir);
	else
		snprintf(dir, sizeof(dir), "runs/%s", a.cfg.name);
	if (dt_callbacks_config_check(cbc, a.cfg.accuracy, a.trainer.val != NULL) < 0) {
		rc = DT_EXIT_USAGE;
		goto out;
	}
	if (a.strategy.is_chief) {
		enum dt_progress_mode mode = o.quiet ? DT_PROGRESS_OFF
					   : isatty(STDERR_FILENO) ? DT_PROGRESS_BAR : DT_PROGRESS_LINES;
		dt_progress_init(&progress, mode, stderr, a.cfg.epochs);
		dt_trainer_add_callback(&a.trainer, &progress.cb);
		if (o.json) {
			dt_json_log_init(&json, stdout, a.cfg.epochs);
			dt_trainer_add_callback(&a.trainer, &json.cb);
		}
	}
	/* fit.callbacks: the deciding ones on every rank (they see reduced metrics), the writer on the chief. */
	if (cbc->terminate_on_nan) {
		dt_terminate_on_nan_init(&nan_stop, &a.trainer);
		dt_trainer_add_callback(&a.trainer, &nan_stop.cb);
	}
	if (cbc->early_stopping) {
		dt_early_stopping_init(&early, &cbc->early, &a.trainer, a.strategy.is_chief && !o.quiet ? stderr : NULL);
		if (a.strategy.is_chief && a.cfg.checkpoint_enabled) {
			char best[4200];
			snprintf(best, sizeof(best), "%s/early_stopping_best.safetensors", dir);
			dt_early_stopping_keep_file(&early, best);
		}
		dt_trainer_add_callback(&a.trainer, &early.cb);
	}
	if (cbc->reduce_lr_on_plateau) {
		dt_reduce_lr_init(&plateau, &cbc->plateau, &a.trainer, a.strategy.is_chief && !o.quiet ? stderr : NULL);
		dt_trainer_add_callback(&a.trainer, &plateau.cb);
	}
	if (cbc->csv_logger && a.strategy.is_chief) {
		rc = DT_EXIT_FAIL;
		if (dt_mkdir_p(dir) < 0)
			goto out;
		dt_csv_logger_init(&csv, &cbc->csv, dir);
		dt_trainer_add_callback(&a.trainer, &csv.cb);
	}
	if (a.strategy.is_chief) {
		if (a.cfg.checkpoint_enabled) {
			config_json = dt_node_to_json(dt_doc_root(a.cfg.doc));
			rc = DT_EXIT_FAIL;
			if (dt_checkpointer_init(&ckpt, dir, config_json) < 0)
				goto out;
			dt_trainer_add_callback(&a.trainer, &ckpt.cb);
			/* The training data's class names, for dtrain predict. */
			if (a.train_src.class_names) {
				cJSON *names = cJSON_CreateStringArray((const char *const *)a.train_src.class_names,
								       a.train_src.num_classes);
				class_names = cJSON_PrintUnformatted(names);
				cJSON_Delete(names);
				extra[nextra++] = (struct dt_ckpt_meta){ "class_names", class_names };
			}
			/* The normalization fit used (given or computed), for evaluate and predict. */
			if (a.cfg.pipeline.normalize != DT_NORMALIZE_NONE)
				extra[nextra++] = (struct dt_ckpt_meta){ "preprocessing",
									 preprocessing_json = dt_preprocess_to_json(&a.train.pre) };
			ckpt.extra_meta = extra;
			ckpt.nextra_meta = nextra;
		}
	}
	rc = DT_EXIT_FAIL;
	if (dt_fit(&a.trainer) < 0)
		goto out;
	if (a.have_test && a.strategy.is_chief) {
		double loss, acc;
		if (dt_evaluate(&a.trainer, &a.test, &loss, &acc) < 0)
			goto out;
		print_test(o.json, o.quiet, loss, acc, a.cfg.accuracy, dt_pipeline_size(&a.test));
	}
	rc = DT_EXIT_OK;
out:
	dt_early_stopping_release(&early);
	dt_csv_logger_release(&csv);
	free(config_json);
	free(class_names);
	free(preprocessing_json);
	dt_app_release(&a);
out_opts:
	dt_opts_release(&o);
	return rc;
}
