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
#include "core/checkpoint/run_dir.h"
#include "core/checkpoint/snapshot.h"
#include "core/error.h"
#include "core/fit/callback_set.h"

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

static void print_test(const struct dt_app *a, int json, int quiet, const struct dt_metrics *m)
{
	if (json) {
		cJSON *o = cJSON_CreateObject();
		char *text;
		cJSON_AddStringToObject(o, "event", "test");
		dt_app_metrics_json(a, m, o);
		cJSON_AddNumberToObject(o, "samples", (double)m->samples);
		text = cJSON_PrintUnformatted(o);
		printf("%s\n", text);
		free(text);
		cJSON_Delete(o);
	}
	if (quiet)
		return;
	fprintf(stderr, "test: %lld samples", (long long)m->samples);
	dt_app_metrics_line(a, m, stderr);
}

/*
 * How to go on after an interruption: the command line, --resume added, under
 * the launcher that started this job ("mpirun -np 2"; "" for one process).
 * Open MPI's mpirun turns Ctrl-C into SIGTERM for every rank.
 */
static void print_resume_hint(const struct dt_opts *o, const char *launcher, const char *ckpt, int sig)
{
	const char *what = sig == SIGINT ? "interrupted (SIGINT)"
			   : *launcher   ? "terminated (SIGTERM, which mpirun sends every rank on Ctrl-C)"
					 : "terminated (SIGTERM)";
	fprintf(stderr, "\n%s: stopped after the current step; checkpoint '%s' written\nresume with: %s%sdtrain fit %s --resume",
		what, ckpt, launcher, *launcher ? " " : "", o->config);
	for (int i = 0; i < o->nsets; i++)
		fprintf(stderr, " --set '%s'", o->sets[i]);
	fputc('\n', stderr);
}

/*
 * The chief's line on stderr (not with -q) that says which strategy runs on
 * which devices and why, and with --json the same as the first event.
 */
static void print_strategy(const struct dt_app *a, const struct dt_opts *o)
{
	const struct dt_strategy *s = &a->strategy;
	char line[512], dev[32];

	if (!s->is_chief)
		return;
	if (!o->quiet) {
		dt_strategy_describe(s, line, sizeof(line));
		fprintf(stderr, "dtrain: strategy: %s\n", line);
	}
	if (o->json) {
		cJSON *j = cJSON_CreateObject(), *devices;
		char *text;
		cJSON_AddStringToObject(j, "event", "strategy");
		cJSON_AddStringToObject(j, "strategy", s->type->name);
		devices = cJSON_AddArrayToObject(j, "devices");
		for (int r = 0; r < s->nreplicas; r++)
			cJSON_AddItemToArray(devices, cJSON_CreateString(dt_device_format(s->devices[r], dev, sizeof(dev))));
		cJSON_AddNumberToObject(j, "processes", s->world);
		cJSON_AddNumberToObject(j, "replicas", s->global_replicas);
		cJSON_AddStringToObject(j, "reason", s->why);
		text = cJSON_PrintUnformatted(j);
		printf("%s\n", text);
		fflush(stdout);
		free(text);
		cJSON_Delete(j);
	}
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
	dt_run_dir_file(&a->cfg, "latest.safetensors", path, sizeof(path));
	*rc = DT_EXIT_FAIL;
	if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode)) {
		dt_error("cannot resume: the run directory '%s' is not a directory but a %s; set checkpoint.dir to "
			 "the directory of the run", dir, S_ISREG(st.st_mode) ? "regular file" : "special file");
		return NULL;
	}
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

/* --init-weights FILE: the weights of every replica (the chief's copy counts). 0 or -1. */
static int load_init_weights(struct dt_app *a, const char *path)
{
	struct dt_ckpt *c = dt_checkpoint_load(path);
	int rc = 0;
	if (!c)
		return -1;
	for (int r = 0; r < a->nreplicas && rc == 0; r++)
		rc = dt_snapshot_load(c, &a->models[r], NULL);
	dt_checkpoint_free(c);
	if (rc == 0)
		a->strategy.type->broadcast(&a->strategy, a->models, a->opts);
	return rc;
}

/* Test hook DTRAIN_TRACE_SAMPLES=PREFIX: "epoch record" per sample trained, in PREFIX.RANK. NULL: off or failed (*rc). */
static FILE *open_trace(const struct dt_app *a, int *rc)
{
	char path[4096];
	FILE *f;
	*rc = 0;
	if (!getenv("DTRAIN_TRACE_SAMPLES"))
		return NULL;
	snprintf(path, sizeof(path), "%s.%d", getenv("DTRAIN_TRACE_SAMPLES"), a->strategy.rank);
	if (!(f = fopen(path, "w")))
		*rc = dt_error("cannot write '%s'", path);
	return f;
}

/*
 * --resume: the state from f into the trainer and the writers. -1 to go on
 * training; else the exit status: DT_EXIT_FAIL after an error, DT_EXIT_OK
 * when nothing is left to do.
 */
static int resume_run(struct dt_app *a, struct dt_callback_set *cbs, const struct dt_ckpt *f, int quiet)
{
	if (dt_callback_set_restore(cbs, &a->trainer, f) < 0)
		return DT_EXIT_FAIL;
	/* Every process read the file (the run directory is shared); the chief's copy is the one that counts. */
	a->strategy.type->broadcast(&a->strategy, a->models, a->opts);
	if (dt_checkpoint_meta(f, "stopped")) {
		fprintf(stderr, "nothing to resume: a callback stopped training after epoch %d (%s)\n",
			a->trainer.initial_epoch, dt_checkpoint_path(f));
		return DT_EXIT_OK;
	}
	if (a->trainer.initial_epoch >= a->cfg.epochs) {
		fprintf(stderr, "nothing to resume: the run has done %d epochs and fit.epochs is %d; raise it to train more\n",
			a->trainer.initial_epoch, a->cfg.epochs);
		return DT_EXIT_OK;
	}
	if (!quiet && a->strategy.is_chief)
		fprintf(stderr, "resuming from '%s': epoch %d, step %lld\n", dt_checkpoint_path(f),
			a->trainer.initial_epoch + 1, (long long)a->trainer.initial_step);
	return -1;
}

/* Trains, then evaluates the test set on the chief: the exit status. */
static int train(struct dt_app *a, const struct dt_opts *o, const struct dt_callback_set *cbs)
{
	int rc;
	dt_fit_signals_install();
	rc = dt_fit(&a->trainer);
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	if (rc == DT_FIT_INTERRUPTED) {
		if (cbs->have_ckpt)
			print_resume_hint(o, a->sys.launcher, dt_callback_set_last(cbs), a->trainer.stop_signal);
		return 128 + a->trainer.stop_signal;
	}
	if (rc < 0)
		return DT_EXIT_FAIL;
	if (a->have_test && a->strategy.is_chief) {
		struct dt_metrics m = { .stats = NULL };
		/* Keras' fit ends with the weights' moving average in the model (finalize_variable_values). */
		if (dt_optimizer_has_ema(&a->opts[0])) {
			dt_optimizer_use_ema(&a->opts[0], &a->models[0]);
			dt_note("the test set is evaluated with the moving average of the weights (use_ema)");
		}
		if (dt_evaluate(&a->trainer, &a->test, &m) < 0)
			return DT_EXIT_FAIL;
		print_test(a, o->json, o->quiet, &m);
	}
	return DT_EXIT_OK;
}

int cmd_fit(int argc, char **argv)
{
	struct dt_opts o;
	struct dt_app a;
	struct dt_callback_set cbs;
	struct dt_callback_env env = { 0 };
	struct dt_ckpt *resume = NULL;
	char dir[4096], *preprocessing = NULL;
	FILE *trace = NULL;
	int rc;

	memset(&cbs, 0, sizeof(cbs));
	if ((rc = dt_opts_parse(&o, argc, argv, "config set json quiet init-weights resume", usage)) >= 0)
		goto out_opts;
	if (o.resume && o.init_weights) {
		dt_error("give --resume (continue a run) or --init-weights (start from weights), not both");
		rc = DT_EXIT_USAGE;
		goto out_opts;
	}
	if ((rc = dt_app_config(&a, &o, 1)) || (rc = dt_app_data(&a, 1, a.cfg.test != NULL)) ||
	    (rc = dt_app_build(&a)))
		goto out;
	print_strategy(&a, &o);
	dt_run_dir(&a.cfg, dir, sizeof(dir));
	rc = DT_EXIT_USAGE;
	if (o.resume && !a.cfg.checkpoint_enabled) {
		dt_error("--resume needs checkpoints, but checkpoint.enabled is false in '%s'", a.cfg.path);
		goto out;
	}
	if (o.resume && !(resume = open_resume(&a, dir, &rc)))
		goto out;
	rc = DT_EXIT_FAIL;
	if ((o.init_weights && load_init_weights(&a, o.init_weights) < 0) || (!(trace = open_trace(&a, &rc)) && rc))
		goto out;
	a.trainer.trace = trace;
	a.strategy.quiet = o.quiet;
	env = (struct dt_callback_env){ .dir = dir, .chief = a.strategy.is_chief, .quiet = o.quiet, .json = o.json };
	if (dt_source_has_classes(&a.train_src) && !dt_loss_is_regression(a.cfg.loss)) {
		env.class_names = a.train_src.class_names;
		env.num_classes = a.train_src.num_classes;
	}
	if (a.train_src.feature_names) {
		env.feature_names = a.train_src.feature_names;
		env.num_features = (int)dt_shape_count(&a.train_src.sample);
	}
	env.input_shape = &a.models[0].input;
	if (a.cfg.pipeline.normalize != DT_NORMALIZE_NONE)
		env.preprocessing = preprocessing = dt_preprocess_to_json(&a.train.pre);
	rc = DT_EXIT_FAIL;
	if (dt_callback_set_install(&cbs, &a.trainer, &a.cfg, &env) < 0)
		goto out;
	if (resume && ((rc = resume_run(&a, &cbs, resume, o.quiet)) >= 0))
		goto out;
	rc = train(&a, &o, &cbs);
out:
	/* Under MPI, the other ranks must not wait for this one (128 + N: all stopped on signal N together). */
	a.strategy.failed = rc;
	if (trace)
		fclose(trace);
	dt_callback_set_release(&cbs);
	dt_checkpoint_free(resume);
	free(preprocessing);
	dt_app_release(&a);
out_opts:
	dt_opts_release(&o);
	return rc;
}
