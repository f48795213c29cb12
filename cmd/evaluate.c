/*
 * dtrain evaluate: loss and accuracy of a checkpoint on the test set (man dtrain-evaluate).
 */
#include <stdio.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "cmd.h"
#include "core/checkpoint/run_dir.h"
#include "core/error.h"
#include "core/checkpoint/snapshot.h"

static const char usage[] =
	"usage: dtrain evaluate [options] MODEL.yaml\n"
	"\n"
	"Evaluates a checkpoint of the model on data.test.\n"
	"\n"
	"  --checkpoint FILE      the weights (default: CHECKPOINT_DIR/latest.safetensors)\n"
	"  --set KEY=VALUE        override a config key (repeatable)\n"
	"  --json                 print the result as one JSON object on stdout\n"
	"  -h, --help             this help\n";

int cmd_evaluate(int argc, char **argv)
{
	struct dt_opts o;
	struct dt_app a;
	struct dt_ckpt *c = NULL;
	char path[4096];
	double loss, acc;
	struct dt_preprocess pp = { 0 };
	int rc;

	if ((rc = dt_opts_parse(&o, argc, argv, "config set json checkpoint", usage)) >= 0)
		goto out_opts;
	if ((rc = dt_app_config(&a, &o, 1)) || (rc = dt_app_data(&a, 0, 1)) || (rc = dt_app_build(&a)))
		goto out;
	if (!a.strategy.is_chief)
		goto out; /* under mpirun, the chief alone evaluates and prints */
	dt_run_dir_checkpoint(&a.cfg, o.checkpoint, path, sizeof(path));
	rc = DT_EXIT_FAIL;
	c = dt_checkpoint_load(path);
	if (!c || dt_snapshot_load(c, &a.models[0], NULL) < 0)
		goto out;
	/* The normalization fit saved, not one recomputed here. */
	if (dt_app_preprocess(&a, dt_checkpoint_meta(c, "preprocessing"), path, &a.test.sample, &pp) < 0)
		goto out;
	if (pp.nchan && dt_pipeline_set_normalize(&a.test, pp.nchan, pp.mean, pp.std) < 0)
		goto out;
	if (dt_evaluate(&a.trainer, &a.test, &loss, &acc) < 0)
		goto out;
	if (o.json) {
		cJSON *j = cJSON_CreateObject();
		char *text;
		cJSON_AddStringToObject(j, "event", "evaluate");
		cJSON_AddStringToObject(j, "checkpoint", path);
		cJSON_AddNumberToObject(j, "loss", loss);
		if (a.cfg.accuracy)
			cJSON_AddNumberToObject(j, "accuracy", acc);
		cJSON_AddNumberToObject(j, "samples", (double)dt_pipeline_size(&a.test));
		text = cJSON_PrintUnformatted(j);
		printf("%s\n", text);
		free(text);
		cJSON_Delete(j);
	} else {
		fprintf(stderr, "%lld samples", (long long)dt_pipeline_size(&a.test));
		if (a.cfg.accuracy)
			fprintf(stderr, " - accuracy: %.4f", acc);
		fprintf(stderr, " - loss: %.4f\n", loss);
	}
	rc = DT_EXIT_OK;
out:
	dt_preprocess_release(&pp);
	dt_checkpoint_free(c);
	dt_app_release(&a);
out_opts:
	dt_opts_release(&o);
	return rc;
}
