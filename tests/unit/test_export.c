/*
 * ONNX export (core/export/onnx.c): a model whose layer type has no export
 * fails naming the layer and its type; a file that cannot be written fails
 * naming it; a model of every exportable layer type is written and reads
 * back as a protobuf message. tests/cli/export.bats checks the files with ONNX's
 * checker and onnxruntime.
 */
#include <sys/stat.h>

#include "helpers.h"

#include "core/export/onnx.h"
#include "core/model/model.h"
#include "core/pipeline/pipeline.h"
#include "layers/layers.h"
#include "onnx.pb-c.h"

struct built {
	struct dt_doc *doc;
	struct dt_model m;
};

/* Builds a model from "layers: ..." YAML and a table of types; -1 on error. */
static int build(struct built *b, const char *yaml, struct dt_shape in, const struct dt_layer_type *const *types)
{
	memset(b, 0, sizeof(*b));
	b->doc = dt_doc_parse("model.yaml", yaml, ".");
	assert_non_null(b->doc);
	if (dt_model_init(&b->m, "t", &in, dt_node_get(dt_doc_root(b->doc), "layers"), types) < 0)
		return -1;
	return dt_model_alloc(&b->m, DT_CPU, 2);
}

static void release(struct built *b)
{
	dt_model_release(&b->m);
	dt_doc_free(b->doc);
}

static char *tmp_path(const char *name)
{
	const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char *path = malloc(4096);
	snprintf(path, 4096, "%s/dtrain-export-%d-%s", dir, (int)getpid(), name);
	return path;
}

static void test_layer_without_export_is_named(void **state)
{
	struct dt_layer_type plain = dt_flatten_layer;
	const struct dt_layer_type *types[] = { &dt_dense_layer, &plain, NULL };
	struct built b;
	char *path = tmp_path("none.onnx");
	struct stat st;

	plain.name = "plain";
	plain.class_name = "Plain";
	plain.export = NULL;
	dt_error_set_quiet(1);
	assert_int_equal(build(&b, "layers:\n  - dense: {units: 3}\n  - plain\n", dt_shape_make(1, (int[]){ 4 }), types),
			 0);
	assert_int_equal(dt_onnx_export(&b.m, NULL, DT_ACT_LINEAR, path), -1);
	assert_non_null(strstr(dt_error_last(), "layer 'plain' (Plain) cannot be exported to ONNX"));
	assert_int_not_equal(stat(path, &st), 0); /* nothing written */
	release(&b);
	free(path);
}

static void test_unwritable_path_is_named(void **state)
{
	struct built b;
	assert_int_equal(build(&b, "layers:\n  - dense: {units: 3}\n", dt_shape_make(1, (int[]){ 4 }), dt_layer_types), 0);
	dt_error_set_quiet(1);
	assert_int_equal(dt_onnx_export(&b.m, NULL, DT_ACT_LINEAR, "/nonexistent-dir/m.onnx"), -1);
	assert_non_null(strstr(dt_error_last(), "cannot write '/nonexistent-dir/m.onnx'"));
	release(&b);
}

/*
 * The layer types of the first table (dense to reshape), preprocessing and a
 * final softmax: one graph, read back.
 */
static void test_every_layer_type(void **state)
{
	static const char yaml[] = "layers:\n"
				   "  - reshape: {target_shape: [4, 4, 3]}\n"
				   "  - conv2d: {filters: 2, kernel_size: 3, padding: same, activation: gelu}\n"
				   "  - batch_normalization\n"
				   "  - max_pooling2d: {pool_size: 2, padding: same}\n"
				   "  - average_pooling2d: {pool_size: 1}\n"
				   "  - activation: {activation: swish}\n"
				   "  - dropout: {rate: 0.5}\n"
				   "  - global_average_pooling2d\n"
				   "  - reshape: {target_shape: [1, 1, 2]}\n"
				   "  - flatten\n"
				   "  - dense: {units: 3}\n";
	float mean[3] = { 1, 2, 3 }, std[3] = { 2, 2, 2 };
	struct dt_preprocess pp = { .rescale = 0.5f, .nchan = 3, .mean = mean, .std = std };
	struct built b;
	char *path = tmp_path("every.onnx");
	Onnx__ModelProto *model;
	FILE *f;
	uint8_t buf[1 << 16];
	size_t n;

	assert_int_equal(build(&b, yaml, dt_shape_make(1, (int[]){ 48 }), dt_layer_types), 0);
	assert_int_equal(dt_onnx_export(&b.m, &pp, DT_ACT_SOFTMAX, path), 0);
	f = fopen(path, "rb");
	assert_non_null(f);
	n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	model = onnx__model_proto__unpack(NULL, n, buf);
	assert_non_null(model);
	assert_int_equal(model->opset_import[0]->version, DT_ONNX_OPSET);
	assert_string_equal(model->graph->input[0]->name, "input");
	assert_string_equal(model->graph->output[0]->name, "output");
	assert_string_equal(model->graph->node[0]->op_type, "Mul"); /* rescale first */
	assert_string_equal(model->graph->node[1]->op_type, "Sub"); /* then normalize */
	onnx__model_proto__free_unpacked(model, NULL);
	remove(path);
	release(&b);
	free(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_layer_without_export_is_named),
		cmocka_unit_test(test_unwritable_path_is_named),
		cmocka_unit_test(test_every_layer_type),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
