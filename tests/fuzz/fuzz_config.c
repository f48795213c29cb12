/*
 * The model file: YAML parsed and bound into the run config, as `dtrain
 * fit` does before it opens any data (dt_run_config_load: every section,
 * key, type and range). `data: FILE` would read a file the input names, so
 * an input whose data is a file name is parsed but not bound.
 */
#include "core/config/run_config.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dt_run_config c;
	const struct dt_node *n;
	struct dt_doc *d;
	char *text;
	int bind;

	fuzz_quiet();
	if (size > FUZZ_MAX_INPUT)
		return 0;
	text = malloc(size + 1);
	if (!text)
		abort();
	memcpy(text, data, size);
	text[size] = 0;
	d = dt_doc_parse("fuzz.yaml", text, fuzz_dir());
	free(text);
	if (!d)
		return 0;
	n = dt_node_get(dt_doc_root(d), "data");
	bind = !n || n->kind != DT_NODE_SCALAR;
	dt_doc_free(d);
	if (bind && dt_run_config_load(&c, fuzz_write("fuzz.yaml", data, size), NULL, 0) == 0)
		dt_run_config_release(&c);
	return 0;
}
