#include <stdio.h>
#include <string.h>

#include "core/checkpoint/ckpt_template.h"
#include "core/config/monitor.h"
#include "core/error.h"
#include "core/checkpoint/model_checkpoint.h"

static int read_one(const struct dt_node *args, const struct dt_node *at, int accuracy, int errors,
		    const struct dt_metric_set *metrics, struct dt_model_checkpoint_cfg *c)
{
	static const char *const keys[] = { "filepath", "monitor", "mode", "save_best_only", "save_weights_only",
					    "save_freq", "verbose", NULL };
	const struct dt_node *fp, *freq;
	const char *path, *slash;
	char msg[256];
	enum dt_monitor_mode mode;
	int64_t verbose;
	size_t len;

	if (!args)
		return dt_node_error(at, "model_checkpoint needs its arguments, at least 'filepath'");
	if (dt_node_expect(args, DT_NODE_MAP, "model_checkpoint") < 0 ||
	    dt_cfg_check_keys(args, "model_checkpoint", keys) < 0 || dt_cfg_require(args, "filepath", "model_checkpoint") < 0 ||
	    dt_cfg_string(args, "filepath", NULL, &path) < 0 ||
	    dt_monitor_read(args, "val_loss", &c->monitor, &mode) < 0 ||
	    dt_monitor_check(dt_node_get(args, "monitor"), "model_checkpoint", c->monitor, accuracy, errors, -1,
			     metrics) < 0 ||
	    dt_cfg_bool(args, "save_best_only", 0, &c->save_best_only) < 0 ||
	    dt_cfg_bool(args, "save_weights_only", 0, &c->save_weights_only) < 0 ||
	    dt_cfg_int(args, "verbose", 0, 0, 1, &verbose) < 0)
		return -1;
	fp = dt_node_get(args, "filepath");
	c->mode = dt_monitor_greater(mode, c->monitor) ? 1 : -1;
	freq = dt_node_get(args, "save_freq");
	c->save_freq = 0;
	if (freq && !(freq->kind == DT_NODE_SCALAR && !strcmp(freq->value, "epoch"))) {
		int64_t n;
		if (freq->kind != DT_NODE_SCALAR || dt_cfg_int(args, "save_freq", 0, 1, INT64_MAX, &n) < 0)
			return freq->kind != DT_NODE_SCALAR
				       ? dt_node_error(freq, "save_freq must be 'epoch' or a number of steps")
				       : -1;
		c->save_freq = n;
	}
	if (c->save_freq && c->save_best_only)
		return dt_node_error(freq, "save_best_only compares epochs' metrics: use it with save_freq: epoch");
	slash = strrchr(path, '/');
	c->dir[0] = '\0';
	if (slash) {
		if ((size_t)(slash - path) >= sizeof(c->dir))
			return dt_node_error(fp, "filepath's directory is too long");
		snprintf(c->dir, sizeof(c->dir), "%.*s", (int)(slash == path ? 1 : slash - path), path);
		path = slash + 1;
	}
	len = strlen(path);
	if (len > 12 && !strcmp(path + len - 12, ".safetensors"))
		len -= 12;
	if (len >= sizeof(c->filename))
		return dt_node_error(fp, "filepath is too long");
	snprintf(c->filename, sizeof(c->filename), "%.*s", (int)len, path);
	if (dt_ckpt_template_check(c->filename, c->save_freq > 0, accuracy, metrics, msg, sizeof(msg)) < 0)
		return dt_node_error(fp, "model_checkpoint filepath '%s': %s", path, msg);
	if (!strcmp(c->filename, "latest") || !strcmp(c->filename, "best"))
		return dt_node_error(fp, "filepath '%s' is reserved for the checkpoint section's files", path);
	return 0;
}

int dt_model_checkpoints_read(const struct dt_node *callbacks, int accuracy, int errors,
			      const struct dt_metric_set *metrics, struct dt_model_checkpoint_cfg *out, int *n)
{
	*n = 0;
	if (!callbacks || callbacks->kind != DT_NODE_SEQ)
		return 0; /* fit.callbacks' own reader reports its shape */
	for (int i = 0; i < callbacks->n; i++) {
		const struct dt_node *it = callbacks->items[i], *at = it, *args = NULL;
		if (it->kind == DT_NODE_SCALAR && !strcmp(it->value, "model_checkpoint")) {
			args = NULL;
		} else if (it->kind == DT_NODE_MAP && it->n == 1 && !strcmp(it->keys[0], "model_checkpoint")) {
			at = it->key_nodes[0];
			args = it->items[0];
		} else {
			continue;
		}
		if (*n == DT_MAX_MODEL_CHECKPOINTS)
			return dt_node_error(at, "at most %d model_checkpoint callbacks", DT_MAX_MODEL_CHECKPOINTS);
		memset(&out[*n], 0, sizeof(out[*n]));
		if (read_one(args, at, accuracy, errors, metrics, &out[*n]) < 0)
			return -1;
		(*n)++;
	}
	return 0;
}
