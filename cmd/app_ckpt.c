/*
 * The checkpoint a command reads (evaluate, predict, summary, config): named
 * as the model argument itself, with --checkpoint, or the run directory's
 * best or latest file; its stored config in place of a model file; its
 * class names and weights (the moving average under use_ema). One loader,
 * so that every command reads a checkpoint the same way.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "cmd.h"
#include "core/checkpoint/run_dir.h"
#include "core/checkpoint/snapshot.h"
#include "core/error.h"

/* Does dir/name exist? */
static int has_file(const char *dir, const char *name)
{
	char path[4200];
	struct stat st;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return stat(path, &st) == 0;
}

int dt_app_is_checkpoint(const char *arg)
{
	unsigned char head[9];
	struct stat st;
	FILE *f;
	size_t n;

	if (stat(arg, &st) < 0)
		return 0;
	if (S_ISDIR(st.st_mode)) /* a run directory; any other is an error of the model file's reader */
		return has_file(arg, "best.safetensors") || has_file(arg, "latest.safetensors");
	if (!S_ISREG(st.st_mode) || !(f = fopen(arg, "rb")))
		return 0;
	n = fread(head, 1, sizeof(head), f);
	fclose(f);
	/* safetensors: an 8-byte little-endian header length (under 2^32 here), then the JSON header's '{' */
	return n == sizeof(head) && head[4] == 0 && head[5] == 0 && head[6] == 0 && head[7] == 0 && head[8] == '{';
}

/* A run directory's checkpoint: best.safetensors when the run saved one, else latest.safetensors. */
static void run_dir_file(const char *dir, char *buf, size_t size)
{
	struct stat st;
	snprintf(buf, size, "%s/best.safetensors", dir);
	if (stat(buf, &st) == 0) {
		dt_note("using '%s', the run's best checkpoint", buf);
		return;
	}
	snprintf(buf, size, "%s/latest.safetensors", dir);
	dt_note("using '%s', the run's latest checkpoint (it saved no best)", buf);
}

/* Loads path into a->ckpt. 0 or -1 with an error. */
static int load(struct dt_app *a, const char *path)
{
	snprintf(a->ckpt_path, sizeof(a->ckpt_path), "%s", path);
	a->ckpt = dt_checkpoint_load(a->ckpt_path);
	return a->ckpt ? 0 : -1;
}

/*
 * The config stored in the checkpoint arg (a file or a run directory) as a
 * document: relative paths from the working directory (the checkpoint stores
 * no directory: runs from two directories write the same bytes), the model's
 * input shape filled in when the file gave none. NULL after an error.
 */
static struct dt_doc *stored_config(struct dt_app *a, const char *arg)
{
	struct stat st;
	const char *text, *shape;
	struct dt_doc *d;
	char set[256];

	if (stat(arg, &st) == 0 && S_ISDIR(st.st_mode)) {
		char path[4096];
		run_dir_file(arg, path, sizeof(path));
		if (load(a, path) < 0)
			return NULL;
	} else if (load(a, arg) < 0) {
		return NULL;
	}
	if (!(text = dt_checkpoint_meta(a->ckpt, "config"))) {
		dt_error("'%s' holds no config (it was not written by dtrain fit): give the model file, "
			 "MODEL.yaml --checkpoint '%s'", a->ckpt_path, a->ckpt_path);
		return NULL;
	}
	if (!(d = dt_doc_parse_json(a->ckpt_path, text, ".")))
		return NULL;
	shape = dt_checkpoint_meta(a->ckpt, "input_shape");
	if (shape && !dt_node_get(dt_node_get(dt_doc_root(d), "model"), "input_shape")) {
		snprintf(set, sizeof(set), "model.input_shape=%s", shape);
		if (strlen(shape) > 200 || dt_doc_set(d, set) < 0) {
			dt_error("the input_shape of '%s' is not a shape: %.60s", a->ckpt_path, shape);
			dt_doc_free(d);
			return NULL;
		}
	}
	return d;
}

static void append(char **buf, size_t *len, size_t *cap, const char *s)
{
	size_t k = strlen(s);
	if (*len + k + 1 > *cap) {
		*cap = 2 * (*len + k + 1);
		*buf = dt_realloc(*buf, *cap);
	}
	memcpy(*buf + *len, s, k + 1);
	*len += k;
}

/* A scalar as flow YAML that reads back the same: plain when it was plain and safe there, else quoted. */
static void flow_scalar(const struct dt_node *n, char **buf, size_t *len, size_t *cap)
{
	static const char safe[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./+-~";
	const char *v = n->value ? n->value : "";
	cJSON *j;
	char *q;

	if (!n->quoted && (!*v || strspn(v, safe) == strlen(v))) {
		append(buf, len, cap, *v ? v : "~");
		return;
	}
	j = cJSON_CreateString(v);
	q = cJSON_PrintUnformatted(j);
	append(buf, len, cap, q);
	free(q);
	cJSON_Delete(j);
}

/* n as one line of flow YAML ({a: 1, b: [2, 3]}) that dt_doc_set reads back as n. */
static void flow(const struct dt_node *n, char **buf, size_t *len, size_t *cap)
{
	if (n->kind == DT_NODE_SCALAR) {
		flow_scalar(n, buf, len, cap);
		return;
	}
	append(buf, len, cap, n->kind == DT_NODE_MAP ? "{" : "[");
	for (int i = 0; i < n->n; i++) {
		if (i)
			append(buf, len, cap, ", ");
		if (n->kind == DT_NODE_MAP) {
			struct dt_node key = { .kind = DT_NODE_SCALAR, .value = n->keys[i] };
			flow_scalar(&key, buf, len, cap);
			append(buf, len, cap, ": ");
		}
		flow(n->items[i], buf, len, cap);
	}
	append(buf, len, cap, n->kind == DT_NODE_MAP ? "}" : "]");
}

/* Does path end in .yaml or .yml? */
static int is_yaml(const char *path)
{
	size_t n = strlen(path);
	return (n > 5 && !strcmp(path + n - 5, ".yaml")) || (n > 4 && !strcmp(path + n - 4, ".yml"));
}

/* "KEY=VALUE" with value the JSON string of s, for dt_doc_set. Caller frees. */
static char *set_string(const char *key, const char *s)
{
	cJSON *j = cJSON_CreateString(s);
	char *q = cJSON_PrintUnformatted(j), *out = dt_malloc(strlen(key) + strlen(q) + 2);
	sprintf(out, "%s=%s", key, q);
	free(q);
	cJSON_Delete(j);
	return out;
}

/*
 * evaluate --data FILE: data.test becomes the source FILE names. A YAML file
 * holds the source's mapping (format and its keys, as data.test); any other
 * file takes the place of the file of data.train's source (its `path` or
 * `directory`), with data.train's other keys. 0 or -1 with an error.
 */
static int set_test_data(struct dt_doc *d, const char *file)
{
	struct dt_node *data = dt_node_get(dt_doc_root(d), "data"), *train = dt_node_get(data, "train");
	static const char *const file_keys[] = { "path", "directory", NULL };
	char *set = NULL, *text = NULL;
	size_t len = 0, cap = 0;
	const char *key = NULL;
	int rc = -1;

	if (dt_node_get(data, "test_split") && dt_doc_set(d, "data.test_split=~") < 0)
		return -1;
	if (is_yaml(file)) {
		set = set_string("data.test", file);
		rc = dt_doc_set_from(d, "--data", set) < 0 ? -1 : 0;
		if (rc == 0 && dt_doc_include(d, dt_node_get(dt_doc_root(d), "data"), "test") < 0)
			rc = -1;
		free(set);
		return rc;
	}
	for (int i = 0; train && train->kind == DT_NODE_MAP && file_keys[i] && !key; i++)
		if (dt_node_get(train, file_keys[i]))
			key = file_keys[i];
	if (!key)
		return dt_error("--data '%s': data.train names no single file (path or directory) to replace; give a YAML "
				"file with the test source instead (format and its keys, as data.test)", file);
	append(&text, &len, &cap, "data.test=");
	flow(train, &text, &len, &cap);
	if (dt_doc_set_from(d, "--data", text) == 0) {
		char k[32];
		snprintf(k, sizeof(k), "data.test.%s", key);
		set = set_string(k, file);
		rc = dt_doc_set_from(d, "--data", set);
	}
	free(set);
	free(text);
	return rc;
}

int dt_app_config_doc(struct dt_app *a, const struct dt_opts *o, struct dt_doc **doc)
{
	*doc = NULL;
	if (dt_app_is_checkpoint(o->config)) {
		if (!o->checkpoint_first) {
			dt_error("'%s' is a checkpoint, but this command reads a model file (YAML)", o->config);
			return DT_EXIT_USAGE;
		}
		if (o->checkpoint) {
			dt_error("'%s' is a checkpoint already: give --checkpoint with a model file only", o->config);
			return DT_EXIT_USAGE;
		}
		if (!(*doc = stored_config(a, o->config)))
			return DT_EXIT_FAIL;
	} else if (!(*doc = dt_doc_load(o->config)) ||
		   dt_doc_include(*doc, dt_doc_root(*doc), "data") < 0) {
		return DT_EXIT_USAGE;
	}
	if (o->data_file && set_test_data(*doc, o->data_file) < 0)
		return dt_exit_status();
	return 0;
}

void dt_app_config_name(struct dt_app *a)
{
	const char *name = a->ckpt ? dt_checkpoint_meta(a->ckpt, "config_name") : NULL;
	if (name && a->cfg.name == a->cfg.file_name)
		snprintf(a->cfg.file_name, sizeof(a->cfg.file_name), "%s", name);
}

int dt_app_checkpoint(struct dt_app *a, const struct dt_opts *o)
{
	char path[4096];
	if (a->ckpt)
		return 0;
	dt_run_dir_checkpoint(&a->cfg, o->checkpoint, path, sizeof(path));
	return load(a, path) < 0 ? DT_EXIT_FAIL : 0;
}

/*
 * The metadata `key` of a->ckpt, a JSON list of n >= 1 strings, into *names
 * (malloc'd copies in a malloc'd array). 0, or -1 when it is not one.
 */
static int name_list(const struct dt_app *a, const char *key, const char *meta, char ***names, int *n)
{
	cJSON *list = cJSON_Parse(meta), *it;
	int k = 0;

	*n = cJSON_GetArraySize(list);
	cJSON_ArrayForEach(it, list)
		k += cJSON_IsString(it);
	if (!cJSON_IsArray(list) || *n < 1 || k != *n) {
		cJSON_Delete(list);
		return dt_error("the %s of '%s' are not a list of names", key, a->ckpt_path);
	}
	*names = dt_calloc(*n, sizeof(char *));
	k = 0;
	cJSON_ArrayForEach(it, list)
		(*names)[k++] = dt_strdup(it->valuestring);
	cJSON_Delete(list);
	return 0;
}

int dt_app_checkpoint_classes(const struct dt_app *a, struct dt_class_map *map, char ***names)
{
	const char *meta = dt_checkpoint_meta(a->ckpt, "class_names"), *count = dt_checkpoint_meta(a->ckpt, "num_classes");
	int n;

	memset(map, 0, sizeof(*map));
	*names = NULL;
	if (!meta && count) {
		char *end;
		long c = strtol(count, &end, 10);
		if (end == count || *end || c < 1 || c > INT_MAX)
			return dt_error("the num_classes of '%s' is not a count of classes: '%.40s'", a->ckpt_path, count);
		map->n = (int)c;
		return 0;
	}
	if (!meta)
		return 0;
	if (name_list(a, "class_names", meta, names, &n) < 0)
		return -1;
	*map = (struct dt_class_map){ .n = n, .names = *names };
	return 0;
}

int dt_app_checkpoint_features(const struct dt_app *a, char ***names, int *n)
{
	const char *meta = dt_checkpoint_meta(a->ckpt, "feature_names");

	*names = NULL;
	*n = 0;
	return meta ? name_list(a, "feature_names", meta, names, n) : 0;
}

int dt_app_checkpoint_input_shape(const struct dt_app *a, struct dt_shape *s)
{
	const char *text = dt_checkpoint_meta(a->ckpt, "input_shape");
	cJSON *list = text ? cJSON_Parse(text) : NULL, *it;
	int ok = cJSON_IsArray(list) && cJSON_GetArraySize(list) >= 1 && cJSON_GetArraySize(list) <= DT_MAX_DIMS;

	memset(s, 0, sizeof(*s));
	cJSON_ArrayForEach(it, list) {
		if (!ok || !cJSON_IsNumber(it) || !(it->valuedouble >= 1 && it->valuedouble <= 1e9))
			ok = 0;
		else
			s->dim[s->ndim++] = (int)it->valuedouble;
	}
	cJSON_Delete(list);
	return ok;
}

int dt_app_checkpoint_weights(struct dt_app *a, struct dt_model *m, const char *doing)
{
	int ema;
	if (dt_snapshot_load(a->ckpt, m, NULL) < 0 || (ema = dt_snapshot_load_ema(a->ckpt, m)) < 0)
		return -1;
	if (ema)
		dt_note("'%s' holds the moving average of the weights (use_ema): %s", a->ckpt_path, doing);
	return ema;
}
