/*
 * dtrain fit: train the model a YAML file describes (man dtrain-fit).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cmd.h"
#include "core/fit/callbacks.h"
#include "core/error.h"
#include "core/fit/fit_callbacks.h"
#include "core/checkpoint/snapshot.h"

static const char usage[] =
	"usage: dtrain fit [options] MODEL.yaml\n"
	"\n"
	"Trains the model MODEL.yaml describes; progress on stderr, checkpoints in\n"
	"checkpoint.dir (runs/NAME by default).\n"
	"\n"
	"  --set KEY=VALUE        override a config key, e.g. --set fit.epochs=2 (repeatable)\n"
	"  --json                 one JSON object per epoch (and one for the test set) on stdout\n"
	"  -q, --quiet            no progress or notes on stderr\n"
	"  --init-weights FILE    start from the weights in FILE (a .safetensors checkpoint)\n"
	"  --resume               continue the run in checkpoint.dir from its latest checkpoint\n"
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

/* How to go on after an interruption: the command line, --resume added. */
static void print_resume_hint(const struct dt_opts *o, const char *ckpt, int sig)
{
	fprintf(stderr, "\n%s: stopped after the current step; checkpoint '%s' written\nresume with: dtrain fit %s --resume",
		sig == SIGINT ? "interrupted (SIGINT)" : "terminated (SIGTERM)", ckpt, o->config);
	for (int i = 0; i < o->nsets; i++)
		fprintf(stderr, " --set '%s'", o->sets[i]);
	fputc('\n', stderr);
}

/*
 * --resume: the latest checkpoint of dir, checked against the config, or NULL
 * with *rc set (1: nothing to resume or a bad file; 2: another model).
 */
static struct dt_ckpt *open_resume(const struct dt_app *a, const char *dir, int *rc)
{
	char path[4200];
	struct stat st;
	struct dt_ckpt *f;
	snprintf(path, sizeof(path), "%s/latest.safetensors", dir);
	*rc = DT_EXIT_FAIL;
	if (lstat(path, &st) < 0) {
		dt_error("nothing to resume: '%s' holds no checkpoint (no latest.safetensors); run without --resume to "
			 "start training", dir);
		return NULL;
	}
	if (!(f = dt_checkpoint_load(path)))
		return NULL;
	if (dt_resume_check(f, a) < 0) {
		dt_checkpoint_free(f);
		*rc = DT_EXIT_USAGE;
		return NULL;
	}
	return f;
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
	struct dt_ckpt *resume = NULL;
	struct dt_checkpointer mcs[DT_MAX_MODEL_CHECKPOINTS];
	char mc_names[DT_MAX_MODEL_CHECKPOINTS][32];
	int nmcs = 0, nextra = 0;
	char *config_json = NULL, *class_names = NULL;
	char *preprocessing_json = NULL;
	struct dt_ckpt_meta extra[DT_MAX_EXTRA_META];
	FILE *trace = NULL;
	int rc, have_ckpt = 0;

	memset(&early, 0, sizeof(early));
	memset(&csv, 0, sizeof(csv));
	if ((rc = dt_opts_parse(&o, argc, argv, "config set json quiet init-weights resume", usage)) >= 0)
		goto out_opts;
	if (o.resume && o.init_weights) {
		dt_error("give --resume (continue a run) or --init-weights (start from weights), not both");
		rc = DT_EXIT_USAGE;
		goto out_opts;
	}
	if ((rc = dt_app_config(&a, &o)) || (rc = dt_app_data(&a, 1, a.cfg.test != NULL)) ||
	    (rc = dt_app_build(&a)))
		goto out;
	if (a.cfg.checkpoint_dir)
		snprintf(dir, sizeof(dir), "%s", a.cfg.checkpoint_dir);
	else
		snprintf(dir, sizeof(dir), "runs/%s", a.cfg.name);
	cbc = &a.cfg.callback_cfg;
	if (dt_callbacks_config_check(cbc, a.cfg.accuracy, a.trainer.val != NULL) < 0) {
		rc = DT_EXIT_USAGE;
		goto out;
	}
	if (o.resume && !a.cfg.checkpoint_enabled) {
		dt_error("--resume needs checkpoints, but checkpoint.enabled is false in '%s'", a.cfg.path);
		rc = DT_EXIT_USAGE;
		goto out;
	}
	if (o.resume && !(resume = open_resume(&a, dir, &rc)))
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
		/* Every process loaded the file; the chief's copy is the one that counts. */
		a.strategy.type->broadcast(&a.strategy, a.models, a.opts);
	}
	if (getenv("DTRAIN_TRACE_SAMPLES")) {
		/* Test hook: "epoch record" for every sample this process trains on, one file per rank. */
		char path[4096];
		snprintf(path, sizeof(path), "%s.%d", getenv("DTRAIN_TRACE_SAMPLES"), a.strategy.rank);
		if (!(trace = fopen(path, "w"))) {
			rc = DT_EXIT_FAIL;
			dt_error("cannot write '%s'", path);
			goto out;
		}
		a.trainer.trace = trace;
	}
	a.strategy.quiet = o.quiet;
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
		if (a.cfg.checkpoint_enabled || a.cfg.nmodel_checkpoints)
			config_json = dt_node_to_json(dt_doc_root(a.cfg.doc));
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
		/* fit.callbacks' model_checkpoint items: before the checkpoint section's writer, which stores their state. */
		for (int i = 0; i < a.cfg.nmodel_checkpoints; i++) {
			const struct dt_model_checkpoint_cfg *m = &a.cfg.model_checkpoints[i];
			struct dt_checkpointer *w = &mcs[i];
			rc = DT_EXIT_FAIL;
			if (dt_checkpointer_init(w, m->dir[0] ? m->dir : dir, config_json) < 0)
				goto out;
			nmcs++;
			snprintf(mc_names[i], sizeof(mc_names[i]), i ? "model_checkpoint_%d" : "model_checkpoint", i + 1);
			w->cb.name = mc_names[i];
			w->filename = m->filename;
			w->every = m->save_freq;
			w->monitor = m->monitor;
			w->mode = m->mode;
			w->best_only = m->save_best_only;
			w->weights_only = m->save_weights_only;
			w->save_best = 0;
			w->write_latest = 0;
			w->at_epoch_end = m->save_freq == 0;
			w->extra_meta = extra;
			w->nextra_meta = nextra;
			a.trainer.savers[a.trainer.nsavers++] = w;
			dt_trainer_add_callback(&a.trainer, &w->cb);
		}
		if (a.cfg.checkpoint_enabled) {
			rc = DT_EXIT_FAIL;
			if (dt_checkpointer_init(&ckpt, dir, config_json) < 0)
				goto out;
			have_ckpt = 1;
			dt_checkpointer_configure(&ckpt, &a.cfg);
			ckpt.extra_meta = extra;
			ckpt.nextra_meta = nextra;
			a.trainer.savers[a.trainer.nsavers++] = &ckpt;
		}
	}
	rc = DT_EXIT_FAIL;
	if (resume) {
		if (dt_trainer_restore(&a.trainer, resume) < 0)
			goto out;
		/* Every process read the file (the run directory is shared); the chief's copy is the one that counts. */
		a.strategy.type->broadcast(&a.strategy, a.models, a.opts);
		if (have_ckpt)
			dt_checkpointer_restore(&ckpt, resume);
		rc = DT_EXIT_OK;
		if (dt_checkpoint_meta(resume, "stopped")) {
			fprintf(stderr, "nothing to resume: a callback stopped training after epoch %d (%s)\n",
				a.trainer.initial_epoch, dt_checkpoint_path(resume));
			goto out;
		}
		if (a.trainer.initial_epoch >= a.cfg.epochs) {
			fprintf(stderr, "nothing to resume: the run has done %d epochs and fit.epochs is %d; raise it to train more\n",
				a.trainer.initial_epoch, a.cfg.epochs);
			goto out;
		}
		if (!o.quiet && a.strategy.is_chief)
			fprintf(stderr, "resuming from '%s': epoch %d, step %lld\n", dt_checkpoint_path(resume),
				a.trainer.initial_epoch + 1, (long long)a.trainer.initial_step);
		rc = DT_EXIT_FAIL;
	}
	dt_fit_signals_install();
	rc = dt_fit(&a.trainer);
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	if (rc == DT_FIT_INTERRUPTED) {
		int sig = a.trainer.stop_signal;
		if (have_ckpt)
			print_resume_hint(&o, ckpt.last, sig);
		rc = 128 + sig;
		goto out;
	}
	if (rc < 0) {
		rc = DT_EXIT_FAIL;
		goto out;
	}
	rc = DT_EXIT_FAIL;
	if (a.have_test && a.strategy.is_chief) {
		double loss, acc;
		if (dt_evaluate(&a.trainer, &a.test, &loss, &acc) < 0)
			goto out;
		print_test(o.json, o.quiet, loss, acc, a.cfg.accuracy, dt_pipeline_size(&a.test));
	}
	rc = DT_EXIT_OK;
out:
	/* Under MPI, the other ranks must not wait for this one. */
	a.strategy.failed = rc;
	if (trace)
		fclose(trace);
	dt_early_stopping_release(&early);
	dt_csv_logger_release(&csv);
	if (have_ckpt)
		dt_checkpointer_release(&ckpt);
	for (int i = 0; i < nmcs; i++)
		dt_checkpointer_release(&mcs[i]);
	dt_checkpoint_free(resume);
	free(config_json);
	free(class_names);
	free(preprocessing_json);
	dt_app_release(&a);
out_opts:
	dt_opts_release(&o);
	return rc;
}
