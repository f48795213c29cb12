#include <ctype.h>
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/cuda/cuda.h"
#include "core/checkpoint/ckpt_template.h"
#include "core/error.h"
#include "core/config/monitor.h"
#include "core/config/run_config.h"
#include "core/model/loss.h"

/*
 * dt_cfg_check_keys for a section of the top level, with a hint more: a key
 * that belongs to another section names it there. Keras passes batch_size
 * and validation_split to fit(); dtrain reads them in data.
 */
static int check_section(const struct dt_node *s, const char *what, const char *const *allowed)
{
	for (int i = 0; s->kind == DT_NODE_MAP && i < s->n; i++) {
		if (dt_name_index(allowed, s->keys[i]) >= 0)
			continue;
		for (const struct dt_cfg_section *o = dt_run_config_sections; o->path; o++)
			if (*o->path && !strchr(o->path, '.') && strcmp(o->path, what) &&
			    dt_name_index(o->keys, s->keys[i]) >= 0)
				return dt_node_error(s->key_nodes[i], "unknown key '%s' in '%s'; did you mean '%s.%s'?",
						     s->keys[i], what, o->path, s->keys[i]);
	}
	return dt_cfg_check_keys(s, what, allowed);
}

static const char *const section_keys[] = { "model", "compile", "data", "fit", "checkpoint", "distribute", NULL };
static const char *const model_keys[] = { "name", "input_shape", "layers", NULL };
static int read_model(struct dt_run_config *c, const struct dt_node *root)
{
	const struct dt_node *m = dt_node_get(root, "model");
	if (!m)
		return dt_cfg_require(root, "model", "the config");
	if (dt_node_expect(m, DT_NODE_MAP, "model") < 0 || check_section(m, "model", model_keys) < 0 ||
	    dt_cfg_string(m, "name", c->name, &c->name) < 0 || dt_cfg_require(m, "layers", "model") < 0)
		return -1;
	c->input_shape_node = dt_node_get(m, "input_shape");
	if (c->input_shape_node && dt_cfg_shape(m, "input_shape", &c->input_shape) < 0)
		return -1;
	if (c->input_shape_node && dt_shape_count(&c->input_shape) > DT_MAX_COUNT) {
		char shape[160], n[32], max[32];
		return dt_node_error(c->input_shape_node,
				     "'input_shape' %s holds %s values per sample; dtrain takes at most %s",
				     dt_shape_format(&c->input_shape, 0, shape, sizeof(shape)),
				     dt_count_format(dt_shape_count(&c->input_shape), n, sizeof(n)),
				     dt_count_format(DT_MAX_COUNT, max, sizeof(max)));
	}
	c->layers = dt_node_get(m, "layers");
	return dt_node_expect(c->layers, DT_NODE_SEQ, "layers");
}

static const char *const compile_keys[] = { "optimizer", "loss", "from_logits", "metrics", "precision", NULL };
static int read_compile(struct dt_run_config *c, const struct dt_node *root)
{
	static const char *const metrics[] = { "accuracy", "acc", "mae", "mean_absolute_error", "rmse",
					       "root_mean_squared_error", "precision", "recall", "f1_score", "auc",
					       "binary_accuracy", "categorical_accuracy", "sparse_categorical_accuracy",
					       "top_k_categorical_accuracy", "sparse_top_k_categorical_accuracy", NULL };
	const struct dt_node *s = dt_node_get(root, "compile"), *list;
	if (!s)
		return dt_cfg_require(root, "compile", "the config");
	if (dt_node_expect(s, DT_NODE_MAP, "compile") < 0 || check_section(s, "compile", compile_keys) < 0 ||
	    dt_cfg_require(s, "loss", "compile") < 0 ||
	    dt_loss_config_read(&c->loss, &c->loss_args, s) < 0 ||
	    dt_cfg_bool(s, "from_logits", 0, &c->from_logits) < 0 ||
	    dt_cfg_enum(s, "precision", dt_precision_names, DT_PRECISION_FP32, &c->precision) < 0 ||
	    dt_optimizer_config_read(&c->optimizer, s) < 0)
		return -1;
	c->loss_node = dt_node_get(s, "loss");
	c->precision_node = dt_node_get(s, "precision");
	list = dt_node_get(s, "metrics");
	if (list) {
		if (dt_node_expect(list, DT_NODE_SEQ, "metrics") < 0)
			return -1;
		for (int i = 0; i < list->n; i++) {
			const struct dt_node *it = list->items[i];
			const char *close;
			int rc = dt_metric_read(&c->metrics, it);
			if (rc < 0)
				return -1;
			if (rc)
				continue;
			if (it->kind == DT_NODE_MAP && it->n == 1)
				return dt_node_error(it, "unknown metric '%s' (metrics with arguments: precision, recall, "
						     "f1_score, auc, binary_accuracy, top_k_categorical_accuracy, "
						     "sparse_top_k_categorical_accuracy)", it->key_nodes[0]->value);
			if (dt_node_expect(it, DT_NODE_SCALAR, "a metric") < 0)
				return -1;
			if (!strcmp(it->value, "accuracy") || !strcmp(it->value, "acc")) {
				c->accuracy = 1;
				continue;
			}
			/* Keras' names of MAE and RMSE: either one reports both. */
			if (!strcmp(it->value, "mae") || !strcmp(it->value, "mean_absolute_error") ||
			    !strcmp(it->value, "rmse") || !strcmp(it->value, "root_mean_squared_error")) {
				c->errors = 1;
				c->errors_node = it;
				continue;
			}
			close = dt_did_you_mean_config(it->value, metrics);
			if (close)
				return dt_node_error(it, "unknown metric '%s'; did you mean '%s'?", it->value, close);
			return dt_node_error(it, "unknown metric '%s' (expected: accuracy, mae, rmse, precision, recall, "
					     "f1_score, auc, binary_accuracy, categorical_accuracy, "
					     "sparse_categorical_accuracy, top_k_categorical_accuracy or "
					     "sparse_top_k_categorical_accuracy; the loss is always reported)", it->value);
		}
	}
	return 0;
}

static const char *const data_keys[] = { "train", "validation", "test", "batch_size", "validation_split",
					 "rescale", "shuffle", "one_hot", "prefetch", "cache", "on_error",
					 "normalize", "augment", "test_split", "split", NULL };
static int read_data(struct dt_run_config *c, struct dt_node *root)
{
	const struct dt_node *s;
	int64_t batch;
	/* Again, in case a --set replaced the data mapping by a file name. */
	if (dt_doc_include(c->doc, root, "data") < 0)
		return -1;
	s = dt_node_get(root, "data");
	c->data_node = s;
	c->batch_size = 32;
	c->rescale = 1;
	c->shuffle = 1;
	if (!s) /* summary and time need model.input_shape alone; what reads data asks for it (dt_app_data) */
		return dt_pipeline_config_read(&c->pipeline, NULL);
	/* data.train may be absent (evaluate --data): what trains asks for it (dt_app_data) */
	if (dt_node_expect(s, DT_NODE_MAP, "data") < 0 || check_section(s, "data", data_keys) < 0 ||
	    dt_cfg_int(s, "batch_size", 32, 1, 1 << 20, &batch) < 0 ||
	    dt_cfg_float(s, "validation_split", 0, 0, 0.99, &c->validation_split) < 0 ||
	    dt_cfg_float(s, "rescale", 1, -1e30, 1e30, &c->rescale) < 0 ||
	    dt_cfg_bool(s, "shuffle", 1, &c->shuffle) < 0 || dt_cfg_bool(s, "one_hot", 0, &c->one_hot) < 0)
		return -1;
	c->batch_size = (int)batch;
	if (dt_pipeline_config_read(&c->pipeline, s) < 0)
		return -1;
	c->train = dt_node_get(s, "train");
	c->validation = dt_node_get(s, "validation");
	c->test = dt_node_get(s, "test");
	if ((c->train && dt_node_expect(c->train, DT_NODE_MAP, "train") < 0) ||
	    (c->validation && dt_node_expect(c->validation, DT_NODE_MAP, "validation") < 0) ||
	    (c->test && dt_node_expect(c->test, DT_NODE_MAP, "test") < 0))
		return -1;
	if (c->validation && c->validation_split > 0)
		return dt_node_error(dt_node_get(s, "validation_split"),
				     "give either 'validation' or 'validation_split', not both");
	return 0;
}

/*
 * fit.max_memory: a number of bytes, or one with a suffix K, M, G or T
 * (powers of 1024, an optional B or iB after it: 512M, 8G, 8GiB).
 */
static int read_max_memory(struct dt_run_config *c, const struct dt_node *fit)
{
	static const char units[] = "KMGT";
	const struct dt_node *n = dt_node_get(fit, "max_memory");
	const char *unit;
	char *end;
	long long v;
	int shift = 0;

	c->max_memory_node = n;
	if (!n)
		return 0;
	if (n->kind != DT_NODE_SCALAR || !n->value[0] || !strchr("0123456789", n->value[0]))
		goto bad;
	errno = 0;
	v = strtoll(n->value, &end, 10);
	if (*end && (unit = strchr(units, toupper((unsigned char)*end)))) {
		shift = 10 * (int)(unit - units + 1);
		end++;
		if (toupper((unsigned char)end[0]) == 'I' && toupper((unsigned char)end[1]) == 'B')
			end += 2;
		else if (toupper((unsigned char)end[0]) == 'B')
			end++;
	}
	if (errno || *end || v < 1)
		goto bad;
	if (v > (INT64_MAX >> shift))
		return dt_node_error(n, "fit.max_memory '%s' is more bytes than a 64-bit count holds", n->value);
	c->max_memory = (int64_t)v << shift;
	return 0;
bad:
	return dt_node_error(n, "fit.max_memory must be a number of bytes, or one with a suffix K, M, G or T "
			     "(powers of 1024) such as 8G, not '%s'",
			     n->kind == DT_NODE_SCALAR ? n->value : "a collection");
}

static const char *const fit_keys[] = { "epochs", "seed", "steps_per_epoch", "threads", "accumulate_steps",
					"class_weight", "callbacks", "max_memory", "plot", NULL };
static int read_fit(struct dt_run_config *c, const struct dt_node *root)
{
	const struct dt_node *s = dt_node_get(root, "fit");
	int64_t epochs, seed, threads, accumulate;
	if (s && (dt_node_expect(s, DT_NODE_MAP, "fit") < 0 || check_section(s, "fit", fit_keys) < 0))
		return -1;
	if (dt_cfg_int(s, "epochs", 1, 1, DT_MAX_EPOCHS, &epochs) < 0 ||
	    dt_cfg_int(s, "seed", 0, 0, INT64_MAX, &seed) < 0 ||
	    dt_cfg_int(s, "steps_per_epoch", 0, 0, INT64_MAX, &c->steps_per_epoch) < 0 ||
	    dt_cfg_int(s, "threads", 0, 0, 4096, &threads) < 0 ||
	    dt_cfg_int(s, "accumulate_steps", 1, 1, 1 << 20, &accumulate) < 0 || read_max_memory(c, s) < 0 ||
	    dt_cfg_bool(s, "plot", 0, &c->plot) < 0)
		return -1;
	c->accumulate_steps = (int)accumulate;
	c->class_weight = dt_node_get(s, "class_weight");
	if (c->class_weight && dt_node_expect(c->class_weight, DT_NODE_MAP, "class_weight") < 0)
		return -1;
	c->callbacks = dt_node_get(s, "callbacks");
	/*
	 * A monitored metric must be in fit's logs: accuracy when asked for,
	 * mae and rmse for regression, val_ with validation data.
	 */
	if (dt_callbacks_config_read(&c->callback_cfg, c->callbacks) < 0 ||
	    dt_callbacks_config_check(&c->callback_cfg, c->accuracy, c->errors || dt_loss_is_regression(c->loss),
				      c->validation || c->validation_split > 0, &c->metrics) < 0)
		return -1;
	if (c->callback_cfg.reduce_lr_on_plateau && dt_schedule_varies(&c->optimizer.schedule))
		return dt_node_error(c->callback_cfg.plateau.where, "'reduce_lr_on_plateau' cannot change a learning rate "
				     "that follows a schedule (compile.optimizer's learning_rate); use one or the other");
	c->epochs = (int)epochs;
	c->seed = (uint64_t)seed;
	c->threads = (int)threads;
	return 0;
}

/* `every: epoch` or a number of steps. */
static int read_every(const struct dt_node *s, int64_t *every)
{
	const struct dt_node *n = dt_node_get(s, "every");
	*every = 0;
	if (!n || (n->kind == DT_NODE_SCALAR && !strcmp(n->value, "epoch")))
		return 0;
	if (n->kind != DT_NODE_SCALAR)
		return dt_node_error(n, "checkpoint.every must be 'epoch' or a number of steps");
	{
		char *end;
		long long v = strtoll(n->value, &end, 10);
		if (*end || end == n->value || v < 1)
			return dt_node_error(n, "checkpoint.every must be 'epoch' or a number of steps (1 or more), "
					     "not '%s'", n->value);
		*every = v;
	}
	return 0;
}

/* Does fit report MAE and RMSE (a regression loss, or metrics: [mae] or [rmse]), as dt_app_build decides? */
static int report_errors(const struct dt_run_config *c)
{
	return c->errors || dt_loss_is_regression(c->loss);
}

static const char *const save_best_keys[] = { "monitor", "mode", NULL };
/* save_best: {monitor: NAME, mode: min | max | auto} (core/config/monitor.h). */
static int read_save_best(struct dt_run_config *c, const struct dt_node *s)
{
	const struct dt_node *b = dt_node_get(s, "save_best");
	enum dt_monitor_mode mode;
	c->checkpoint_mode = -1;
	if (!b)
		return 0;
	if (dt_node_expect(b, DT_NODE_MAP, "save_best") < 0 || dt_cfg_check_keys(b, "save_best", save_best_keys) < 0 ||
	    dt_monitor_read(b, NULL, &c->checkpoint_monitor, &mode) < 0)
		return -1;
	c->checkpoint_monitor_node = dt_node_get(b, "monitor");
	if (c->checkpoint_monitor && dt_monitor_check(c->checkpoint_monitor_node, "save_best", c->checkpoint_monitor,
						      c->accuracy, report_errors(c), -1, &c->metrics) < 0)
		return -1;
	c->checkpoint_mode = dt_monitor_greater(mode, c->checkpoint_monitor) ? 1 : -1;
	return 0;
}

static const char *const checkpoint_keys[] = { "dir", "enabled", "every", "keep", "save_best", "filename", NULL };
static int read_checkpoint(struct dt_run_config *c, const struct dt_node *root)
{
	const struct dt_node *s = dt_node_get(root, "checkpoint");
	int64_t keep;
	char msg[256];
	if (s && (dt_node_expect(s, DT_NODE_MAP, "checkpoint") < 0 ||
		  check_section(s, "checkpoint", checkpoint_keys) < 0))
		return -1;
	if (dt_cfg_string(s, "dir", NULL, &c->checkpoint_dir) < 0 ||
	    dt_cfg_bool(s, "enabled", 1, &c->checkpoint_enabled) < 0 || read_every(s, &c->checkpoint_every) < 0 ||
	    dt_cfg_int(s, "keep", 5, 0, 1000000, &keep) < 0 || read_save_best(c, s) < 0 ||
	    dt_cfg_string(s, "filename", "ckpt-{epoch:03d}-{batch:05d}", &c->checkpoint_filename) < 0)
		return -1;
	c->checkpoint_keep = (int)keep;
	if (dt_model_checkpoints_read(dt_node_get(dt_node_get(root, "fit"), "callbacks"), c->accuracy, report_errors(c),
				      &c->metrics, c->model_checkpoints, &c->nmodel_checkpoints) < 0)
		return -1;
	if (dt_ckpt_template_check(c->checkpoint_filename, c->checkpoint_every > 0, c->accuracy, &c->metrics,
				   msg, sizeof(msg)) < 0)
		return dt_node_error(dt_node_get(s, "filename"), "checkpoint.filename '%s': %s", c->checkpoint_filename,
				     msg);
	if (!strcmp(c->checkpoint_filename, "latest") || !strcmp(c->checkpoint_filename, "best"))
		return dt_node_error(dt_node_get(s, "filename"), "checkpoint.filename '%s' is reserved for the %s "
				     "checkpoint", c->checkpoint_filename, c->checkpoint_filename);
	return 0;
}

static int read_distribute(struct dt_run_config *c, const struct dt_node *root)
{
	const struct dt_node *s = dt_node_get(root, "distribute");
	if (s && dt_node_expect(s, DT_NODE_MAP, "distribute") < 0)
		return -1;
	c->distribute = s;
	return dt_cfg_string(s, "strategy", "auto", &c->strategy) < 0 ? -1 : 0;
}

int dt_run_config_load(struct dt_run_config *c, const char *path, char *const *sets, int nsets)
{
	struct dt_doc *doc = dt_doc_load(path);
	if (!doc) {
		memset(c, 0, sizeof(*c));
		return -1;
	}
	return dt_run_config_bind(c, doc, path, sets, nsets);
}

int dt_run_config_bind(struct dt_run_config *c, struct dt_doc *doc, const char *path, char *const *sets, int nsets)
{
	struct dt_node *root;
	char *copy, *dot;

	memset(c, 0, sizeof(*c));
	c->path = path;
	c->doc = doc;
	/* The data file is read before --set, so that --set data.batch_size=64 reaches into it. */
	if (dt_doc_include(c->doc, dt_doc_root(c->doc), "data") < 0)
		goto fail;
	for (int i = 0; i < nsets; i++)
		if (dt_doc_set(c->doc, sets[i]) < 0)
			goto fail;
	root = dt_doc_root(c->doc);
	copy = dt_strdup(path);
	snprintf(c->file_name, sizeof(c->file_name), "%s", basename(copy));
	free(copy);
	dot = strrchr(c->file_name, '.');
	if (dot && dot != c->file_name)
		*dot = '\0';
	c->name = c->file_name;
	if (dt_cfg_check_keys(root, "the config", section_keys) < 0 || read_model(c, root) < 0 ||
	    read_compile(c, root) < 0 || read_data(c, root) < 0 || read_fit(c, root) < 0 ||
	    read_checkpoint(c, root) < 0 || read_distribute(c, root) < 0)
		goto fail;
	return 0;
fail:
	dt_run_config_release(c);
	return -1;
}

void dt_run_config_release(struct dt_run_config *c)
{
	dt_pipeline_config_release(&c->pipeline);
	dt_doc_free(c->doc);
	memset(c, 0, sizeof(*c));
}

static cJSON *node_json(const struct dt_node *n)
{
	cJSON *o;
	if (n->kind == DT_NODE_SCALAR)
		return cJSON_CreateString(n->value ? n->value : "");
	o = n->kind == DT_NODE_MAP ? cJSON_CreateObject() : cJSON_CreateArray();
	for (int i = 0; i < n->n; i++) {
		if (n->kind == DT_NODE_MAP)
			cJSON_AddItemToObject(o, n->keys[i], node_json(n->items[i]));
		else
			cJSON_AddItemToArray(o, node_json(n->items[i]));
	}
	return o;
}

char *dt_node_to_json(const struct dt_node *n)
{
	cJSON *o = node_json(n);
	char *s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return s;
}

const struct dt_cfg_section dt_run_config_sections[] = {
	{ "", section_keys },
	{ "model", model_keys },
	{ "compile", compile_keys },
	{ "data", data_keys },
	{ "data.split", dt_split_keys },
	{ "data.normalize", dt_normalize_keys },
	{ "data.augment", dt_augment_keys },
	{ "data.augment.random_crop", dt_random_crop_keys },
	{ "data.augment.random_translation", dt_random_translation_keys },
	{ "fit", fit_keys },
	{ "checkpoint", checkpoint_keys },
	{ "checkpoint.save_best", save_best_keys },
	{ NULL, NULL },
};
