/*
 * dtrain export: a checkpoint as an ONNX model (man dtrain-export). The
 * model is built as predict builds it, from the checkpoint's stored config
 * (or a model file and its checkpoint), with the checkpoint's weights and
 * training's preprocessing; core/export/onnx.c writes it, each layer
 * emitting its own nodes (the `export` member of its type).
 */
#include <stdio.h>

#include "cmd.h"
#include "core/checkpoint/checkpoint.h"
#include "core/error.h"
#include "core/export/onnx.h"

static const char usage[] =
	"usage: dtrain export [options] CHECKPOINT|MODEL.yaml -o MODEL.onnx\n"
	"\n"
	"Writes the model of a checkpoint (a safetensors file, or a run directory: its\n"
	"best, else latest) as an ONNX model (opset 13): input 'input' (batch, the\n"
	"sample's shape, channels last), the training's rescale and normalization as\n"
	"its first nodes, output 'output': what dtrain predict computes (class\n"
	"probabilities, or a regression model's values).\n"
	"\n"
	"  -o, --output FILE      the ONNX file to write (required)\n"
	"  --checkpoint FILE      the weights, given a model file (default:\n"
	"                         CHECKPOINT_DIR/best.safetensors, else latest.safetensors)\n"
	"  -q, --quiet            no note on stderr of what was written\n"
	"  --set KEY=VALUE        override a config key (repeatable)\n"
	"  -h, --help             this help\n";

/* What follows the last layer: probabilities from a classifier that outputs logits. */
static enum dt_activation final_activation(const struct dt_app *a, const struct dt_model *m)
{
	if (dt_loss_is_regression(a->cfg.loss) || !a->cfg.from_logits)
		return DT_ACT_LINEAR;
	return dt_shape_count(&m->output) == 1 ? DT_ACT_SIGMOID : DT_ACT_SOFTMAX;
}

int cmd_export(int argc, char **argv)
{
	struct dt_opts o;
	struct dt_app a;
	struct dt_model m = { 0 };
	struct dt_preprocess pp = { 0 };
	int rc;

	if ((rc = dt_opts_parse(&o, argc, argv, "config model-or-checkpoint set checkpoint output quiet", usage)) >= 0)
		goto out_opts;
	if (!o.output) {
		dt_error("dtrain export needs -o FILE, the ONNX file to write (dtrain export -h)");
		rc = DT_EXIT_USAGE;
		goto out_opts;
	}
	if ((rc = dt_app_config(&a, &o, 0)))
		goto out;
	if ((rc = dt_app_checkpoint(&a, &o)))
		goto out;
	/* The shape the weights were trained at: the training data need not be there, nor as it was. */
	if (!a.cfg.input_shape.ndim && !dt_app_checkpoint_input_shape(&a, &a.cfg.input_shape))
		a.cfg.input_shape.ndim = 0;
	if ((rc = dt_app_model(&a, &m)))
		goto out;
	rc = DT_EXIT_FAIL;
	if (dt_model_alloc(&m, DT_CPU, 1) < 0)
		goto out;
	if (dt_app_checkpoint_weights(&a, &m, "exporting the average") < 0)
		goto out;
	if (dt_app_preprocess(&a, dt_checkpoint_meta(a.ckpt, "preprocessing"), a.ckpt_path, &m.input, &pp) < 0)
		goto out;
	if (dt_onnx_export(&m, &pp, final_activation(&a, &m), o.output) < 0)
		goto out;
	if (!o.quiet)
		dt_note("wrote '%s' (ONNX opset %d) from '%s'", o.output, DT_ONNX_OPSET, a.ckpt_path);
	rc = DT_EXIT_OK;
out:
	dt_preprocess_release(&pp);
	dt_model_release(&m);
	dt_app_release(&a);
out_opts:
	dt_opts_release(&o);
	return rc;
}
