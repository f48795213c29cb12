/*
 * dtrain evaluate: loss and metrics (accuracy; MAE and RMSE for regression;
 * compile.metrics) of a checkpoint on the test set, and with --report the
 * per-class report and confusion matrix (man dtrain-evaluate).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cmd.h"
#include "core/error.h"
#include "core/checkpoint/snapshot.h"
#include "core/fit/report.h"

static const char usage[] =
	"usage: dtrain evaluate [options] MODEL.yaml|CHECKPOINT\n"
	"\n"
	"Evaluates a checkpoint of the model on data.test. Given a checkpoint (a\n"
	"safetensors file, or a run directory: its best, else latest), the config\n"
	"it stored stands in for the model file.\n"
	"\n"
	"  --checkpoint FILE      the weights (default: CHECKPOINT_DIR/best.safetensors,\n"
	"                         else latest.safetensors)\n"
	"  --data FILE            the test data: a YAML file with a data source (as\n"
	"                         data.test), or a file in place of data.train's\n"
	"  --set KEY=VALUE        override a config key (repeatable)\n"
	"  --json                 print the result as one JSON object on stdout\n"
	"  --report               per-class precision, recall, F1 and support, their\n"
	"                         macro and weighted averages and the confusion matrix\n"
	"                         (a table on stdout; with --json, the object's \"report\")\n"
	"  -q, --quiet            no notes on stderr (which checkpoint, how a CSV was\n"
	"                         read); the result still prints\n"
	"  -h, --help             this help\n";

/* The result: a JSON object on stdout (--json), else a line on stderr; --report's table on stdout. */
static void print_result(const struct dt_app *a, const struct dt_opts *o, const struct dt_metrics *m, int ema,
			 const char *const *report_names)
{
	if (o->report)
		dt_report_note_left_out(m->stats, a->trainer.metrics.classes, report_names);
	if (o->json) {
		cJSON *j = cJSON_CreateObject();
		char *text;
		cJSON_AddStringToObject(j, "event", "evaluate");
		cJSON_AddStringToObject(j, "checkpoint", a->ckpt_path);
		if (ema)
			cJSON_AddStringToObject(j, "weights", "ema");
		dt_app_metrics_json(a, m, j);
		cJSON_AddNumberToObject(j, "samples", (double)m->samples);
		if (o->report)
			cJSON_AddItemToObject(j, "report", dt_report_json(m->stats, a->trainer.metrics.classes, report_names));
		text = cJSON_PrintUnformatted(j);
		printf("%s\n", text);
		free(text);
		cJSON_Delete(j);
	} else {
		fprintf(stderr, "%lld samples", (long long)m->samples);
		dt_app_metrics_line(a, m, stderr);
		if (o->report)
			dt_report_print(stdout, m->stats, a->trainer.metrics.classes, report_names);
	}
}

int cmd_evaluate(int argc, char **argv)
{
	struct dt_opts o;
	struct dt_app a;
	struct dt_class_map classes = { 0 }, test_map = { 0 };
	char **names = NULL, **features = NULL;
	int nfeatures = 0;
	const char *const *report_names;
	struct dt_metrics m = { .stats = NULL };
	struct dt_preprocess pp = { 0 };
	int rc, ema = 0;

	rc = dt_opts_parse(&o, argc, argv, "config model-or-checkpoint set json quiet checkpoint data-file report", usage);
	if (rc >= 0)
		goto out_opts;
	if ((rc = dt_app_config(&a, &o, 1)))
		goto out;
	if (o.report && dt_loss_is_regression(a.cfg.loss)) {
		dt_node_error(a.cfg.loss_node, "--report counts classes, but '%s' is a regression loss",
			      dt_loss_names[a.cfg.loss]);
		rc = DT_EXIT_USAGE;
		goto out;
	}
	a.cfg.metrics.confusion |= o.report;
	/*
	 * data.test numbers its classes as the training data did: by the class
	 * names in the checkpoint, and finds its feature columns by the
	 * training names (read where the chief, rank 0, evaluates).
	 */
	if (a.cfg.test && a.sys.mpi_rank == 0) {
		rc = DT_EXIT_FAIL;
		if (dt_app_checkpoint(&a, &o) || dt_app_checkpoint_classes(&a, &classes, &names) < 0 ||
		    dt_app_checkpoint_features(&a, &features, &nfeatures) < 0)
			goto out;
		test_map = classes;
		test_map.nfeatures = nfeatures;
		test_map.features = features;
		a.test_classes = test_map.n || test_map.features ? &test_map : NULL;
	}
	if ((rc = dt_app_data(&a, 0, 1)) || (rc = dt_app_build(&a)))
		goto out;
	if (o.report && a.trainer.metrics.multi_label) {
		dt_node_error(a.cfg.loss_node, "--report counts one class per sample, but this is a multi-label model "
			      "(binary_crossentropy on %lld outputs); compile.metrics' precision, recall and f1_score "
			      "with class_id score each label", (long long)a.trainer.metrics.columns);
		rc = DT_EXIT_USAGE;
		goto out;
	}
	if (!a.strategy.is_chief)
		goto out; /* under mpirun, the chief alone evaluates and prints */
	rc = DT_EXIT_FAIL;
	if (dt_app_checkpoint(&a, &o) || (ema = dt_app_checkpoint_weights(&a, &a.models[0], "evaluating the average")) < 0)
		goto out;
	/* The report names the classes as fit did, also for a test split of the training file. */
	if (o.report && !names && dt_app_checkpoint_classes(&a, &classes, &names) < 0)
		goto out;
	/* The normalization fit saved, not one recomputed here. */
	if (dt_app_preprocess(&a, dt_checkpoint_meta(a.ckpt, "preprocessing"), a.ckpt_path, &a.test.sample, &pp) < 0)
		goto out;
	if (pp.nchan && dt_pipeline_set_normalize(&a.test, pp.nchan, pp.mean, pp.std) < 0)
		goto out;
	if (o.report)
		m.stats = dt_calloc((size_t)a.trainer.metrics.nstats, sizeof(double));
	if (dt_evaluate(&a.trainer, &a.test, &m) < 0)
		goto out;
	report_names = classes.n == a.trainer.metrics.classes ? (const char *const *)names : NULL;
	print_result(&a, &o, &m, ema, report_names);
	rc = DT_EXIT_OK;
out:
	free(m.stats);
	dt_preprocess_release(&pp);
	dt_app_release(&a);
	for (int i = 0; names && i < classes.n; i++)
		free(names[i]);
	free(names);
	for (int i = 0; i < nfeatures; i++)
		free(features[i]);
	free(features);
out_opts:
	dt_opts_release(&o);
	return rc;
}
