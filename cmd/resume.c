/*
 * --resume's check that the checkpoint was written for this model: the model
 * (input shape, layers and their arguments), the loss, the optimizer's kind,
 * the batch size and the seed (the last two fix the data position) must be as
 * they were. Everything else may change: epochs, steps_per_epoch, learning
 * rate and other optimizer arguments, callbacks, checkpoint settings, threads.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cmd.h"
#include "core/checkpoint/checkpoint.h"
#include "core/error.h"
#include "core/model/loss.h"

/* o[a][b]..., or NULL. */
static const cJSON *at(const cJSON *o, const char *a, const char *b)
{
	o = cJSON_GetObjectItemCaseSensitive(o, a);
	return b ? cJSON_GetObjectItemCaseSensitive(o, b) : o;
}

char *dt_json_text(const struct cJSON *j)
{
	if (!j)
		return dt_strdup("(not set)");
	if (cJSON_IsString(j))
		return dt_strdup(j->valuestring);
	{
		char *s = cJSON_PrintUnformatted(j), *r = dt_strdup(s);
		cJSON_free(s);
		return r;
	}
}

static int same(const cJSON *a, const cJSON *b)
{
	if (!a || !b)
		return a == b;
	return cJSON_Compare(a, b, 1);
}

/* A layer item: `flatten` or {dense: {units: 8}}. Its kind and its arguments (or NULL). */
static const char *layer_kind(const cJSON *l, const cJSON **args)
{
	*args = NULL;
	if (cJSON_IsString(l))
		return l->valuestring;
	if (cJSON_IsObject(l) && l->child) {
		*args = l->child;
		return l->child->string;
	}
	return "?";
}

/* The optimizer's kind: `adam` or {adam: {...}}; "rmsprop" (the default) when absent. */
static const char *optimizer_kind(const cJSON *compile)
{
	const cJSON *o = at(compile, "optimizer", NULL);
	if (cJSON_IsString(o))
		return o->valuestring;
	if (cJSON_IsObject(o) && o->child)
		return o->child->string;
	return "rmsprop";
}

static int differs(const char *ckpt, const char *cfg, const char *what, const cJSON *old, const cJSON *now)
{
	char *a = dt_json_text(old), *b = dt_json_text(now);
	dt_error("cannot resume from '%s': %s %s in the checkpoint, %s in '%s'", ckpt, what, a, b, cfg);
	free(a);
	free(b);
	return -1;
}

/*
 * The name of the model's layer that item i of the YAML list made: the i-th
 * layer outside residual blocks (a block's item makes its add, at depth 0;
 * its inner layers and projection sit deeper). NULL past the end.
 */
static const char *item_layer_name(const struct dt_model *m, int i)
{
	for (int j = 0; j < m->nlayers; j++)
		if (m->depth[j] == 0 && i-- == 0)
			return m->layers[j].name;
	return NULL;
}

static int compare_layers(const char *ckpt, const char *cfg, const cJSON *old, const cJSON *now,
			  const struct dt_model *m)
{
	int n0 = cJSON_GetArraySize(old), n1 = cJSON_GetArraySize(now);
	char what[256];
	if (n0 != n1)
		return dt_error("cannot resume from '%s': the model has %d layers in the checkpoint, %d in '%s'", ckpt, n0,
				n1, cfg);
	for (int i = 0; i < n1; i++) {
		const cJSON *a0, *a1, *e;
		const char *k0 = layer_kind(cJSON_GetArrayItem(old, i), &a0);
		const char *k1 = layer_kind(cJSON_GetArrayItem(now, i), &a1);
		const char *name = item_layer_name(m, i) ? item_layer_name(m, i) : k1;
		if (strcmp(k0, k1))
			return dt_error("cannot resume from '%s': layer %d is a %s in the checkpoint, a %s in '%s'", ckpt,
					i + 1, k0, k1, cfg);
		/* Every argument either side has, with the same value. */
		for (int side = 0; side < 2; side++)
			cJSON_ArrayForEach(e, (side ? a0 : a1)) {
				const cJSON *x = cJSON_GetObjectItemCaseSensitive(a0, e->string);
				const cJSON *y = cJSON_GetObjectItemCaseSensitive(a1, e->string);
				if (!same(x, y)) {
					snprintf(what, sizeof(what), "layer %d '%s': %s", i + 1, name, e->string);
					return differs(ckpt, cfg, what, x, y);
				}
			}
		if (!cJSON_IsObject(a0) || !cJSON_IsObject(a1))
			if (!same(a0, a1)) {
				snprintf(what, sizeof(what), "layer %d '%s': arguments", i + 1, name);
				return differs(ckpt, cfg, what, a0, a1);
			}
	}
	return 0;
}

/*
 * compile.loss under its dtrain name, a Keras alias (mse) replaced in place:
 * a loss spelt the other way is the same loss.
 */
static void canonical_loss(cJSON *root)
{
	cJSON *compile = cJSON_GetObjectItemCaseSensitive(root, "compile");
	cJSON *loss = cJSON_GetObjectItemCaseSensitive(compile, "loss"), *args;
	const char *name;
	if (cJSON_IsString(loss)) {
		name = dt_loss_canonical(loss->valuestring);
		if (name != loss->valuestring)
			cJSON_SetValuestring(loss, name);
	} else if (cJSON_IsObject(loss) && loss->child && loss->child->string) {
		name = dt_loss_canonical(loss->child->string);
		if (name != loss->child->string) {
			args = cJSON_DetachItemViaPointer(loss, loss->child);
			cJSON_AddItemToObject(loss, name, args);
		}
	}
}

int dt_resume_check(const struct dt_ckpt *f, const struct dt_app *a)
{
	const char *ckpt = dt_checkpoint_path(f), *cfg = a->cfg.path, *stored = dt_checkpoint_meta(f, "config");
	char *now_text = dt_node_to_json(dt_doc_root(a->cfg.doc));
	cJSON *old = stored ? cJSON_Parse(stored) : NULL, *now = cJSON_Parse(now_text);
	static const char *const same_keys[][2] = {
		{ "model", "input_shape" }, { "compile", "loss" }, { "compile", "from_logits" },
		{ "data", "batch_size" }, { "fit", "seed" },
	};
	int rc = -1;

	free(now_text);
	if (!cJSON_IsObject(old)) {
		dt_error("'%s' holds no config: it was not written by dtrain fit", ckpt);
		goto out;
	}
	canonical_loss(old);
	canonical_loss(now);
	if (compare_layers(ckpt, cfg, at(old, "model", "layers"), at(now, "model", "layers"), &a->models[0]) < 0)
		goto out;
	for (size_t i = 0; i < sizeof(same_keys) / sizeof(same_keys[0]); i++) {
		const cJSON *x = at(old, same_keys[i][0], same_keys[i][1]);
		const cJSON *y = at(now, same_keys[i][0], same_keys[i][1]);
		char what[64];
		if (!same(x, y)) {
			snprintf(what, sizeof(what), "%s.%s", same_keys[i][0], same_keys[i][1]);
			differs(ckpt, cfg, what, x, y);
			goto out;
		}
	}
	if (strcmp(optimizer_kind(at(old, "compile", NULL)), optimizer_kind(at(now, "compile", NULL)))) {
		dt_error("cannot resume from '%s': optimizer %s in the checkpoint, %s in '%s'", ckpt,
			 optimizer_kind(at(old, "compile", NULL)), optimizer_kind(at(now, "compile", NULL)), cfg);
		goto out;
	}
	rc = 0;
out:
	cJSON_Delete(old);
	cJSON_Delete(now);
	return rc;
}
