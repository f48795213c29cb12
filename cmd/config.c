/*
 * dtrain config: the configuration as fit would use it, defaults filled in,
 * the data file inlined and --set applied, or the one a checkpoint was
 * trained with (man dtrain-config).
 */
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "core/config/resolved.h"
#include "core/error.h"

static const char usage[] =
	"usage: dtrain config [options] MODEL.yaml|CHECKPOINT\n"
	"\n"
	"Prints the configuration as fit would use it: every key with the value fit\n"
	"would take (defaults filled in), the data file inlined, --set applied,\n"
	"relative paths made absolute. Given a checkpoint (a safetensors file, or a\n"
	"run directory), the configuration it was trained with. YAML that dtrain fit\n"
	"reads back, or JSON.\n"
	"\n"
	"  --set KEY=VALUE        override a config key (repeatable)\n"
	"  --json                 print JSON instead of YAML\n"
	"  -h, --help             this help\n";

/* Bare names of a layer list as mappings, into residual blocks' own lists too. */
static void layer_names_to_maps(struct dt_doc *doc, struct dt_node *list)
{
	for (int i = 0; list && list->kind == DT_NODE_SEQ && i < list->n; i++) {
		struct dt_node *item = list->items[i];
		dt_node_name_to_map(doc, item);
		if (item->kind == DT_NODE_MAP && item->n == 1 && !strcmp(item->keys[0], "residual"))
			layer_names_to_maps(doc, dt_node_get(item->items[0], "layers"));
	}
}

int dt_config_prepare(struct dt_doc *doc)
{
	static const char *const optional[] = { "data", "fit", "checkpoint", "distribute", NULL };
	static const char *const lists[][2] = { { "model", "layers" }, { "fit", "callbacks" } };
	struct dt_node *root = dt_doc_root(doc), *compile;
	char set[64];

	for (int i = 0; optional[i]; i++) {
		snprintf(set, sizeof(set), "%s={}", optional[i]);
		if (!dt_node_get(root, optional[i]) && dt_doc_set(doc, set) < 0)
			return -1;
	}
	compile = dt_node_get(root, "compile");
	if (compile && compile->kind == DT_NODE_MAP) {
		if (!dt_node_get(compile, "optimizer") && dt_doc_set(doc, "compile.optimizer={rmsprop: {}}") < 0)
			return -1;
		dt_node_name_to_map(doc, dt_node_get(compile, "optimizer"));
		dt_node_name_to_map(doc, dt_node_get(compile, "loss"));
	}
	for (int k = 0; k < 2; k++) {
		struct dt_node *list = dt_node_get(dt_node_get(root, lists[k][0]), lists[k][1]);
		if (k == 0)
			layer_names_to_maps(doc, list);
		for (int i = 0; k > 0 && list && list->kind == DT_NODE_SEQ && i < list->n; i++)
			dt_node_name_to_map(doc, list->items[i]);
	}
	return 0;
}

/* Builds the layers once more, so that their arguments' defaults are noted: from the data's shape without model.input_shape. */
static int note_layers(struct dt_app *a)
{
	struct dt_model m = { 0 };
	int rc;

	if (a->cfg.input_shape.ndim)
		return 0; /* dt_app_config built them */
	rc = dt_app_model(a, &m);
	dt_model_release(&m);
	return rc;
}

int cmd_config(int argc, char **argv)
{
	struct dt_opts o;
	struct dt_app a;
	int rc;

	if ((rc = dt_opts_parse(&o, argc, argv, "config model-or-checkpoint set json", usage)) >= 0)
		goto out_opts;
	o.resolve = 1;
	if ((rc = dt_app_config(&a, &o, 0)) || (rc = note_layers(&a)))
		goto out;
	dt_cfg_note(dt_node_get(dt_doc_root(a.cfg.doc), "model"), "name", a.cfg.name, 0);
	dt_cfg_record(0);
	rc = dt_resolved_write(stdout, dt_doc_root(a.cfg.doc), o.json) < 0 ? DT_EXIT_FAIL : DT_EXIT_OK;
out:
	dt_cfg_record(0);
	dt_cfg_record_release();
	dt_app_release(&a);
out_opts:
	dt_opts_release(&o);
	return rc;
}
