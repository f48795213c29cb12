#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/checkpoint/snapshot.h"

#define NAME_MAX_LEN 160

static void param_name(char *buf, const struct dt_layer *l, const struct dt_param *p)
{
	snprintf(buf, NAME_MAX_LEN, "%s/%s", l->name, p->name);
}

static void slot_name(char *buf, const struct dt_layer *l, const struct dt_param *p, const char *slot)
{
	snprintf(buf, NAME_MAX_LEN, "optimizer/%s/%s/%s", l->name, p->name, slot);
}

int dt_snapshot_save(const char *path, const struct dt_model *m, const struct dt_optimizer *o,
		     const struct dt_ckpt_meta *meta, int nmeta)
{
	int nt = 0, cap = 0, rc;
	struct dt_ckpt_tensor *t;
	char *names;
	float *host = dt_malloc((size_t)m->nparams * (1 + DT_OPT_MAX_SLOTS) * sizeof(float));
	char iters[32];
	struct dt_ckpt_meta *all = dt_calloc(nmeta + 1, sizeof(*all));

	for (int i = 0; i < m->nlayers; i++)
		cap += m->layers[i].nparams * (1 + DT_OPT_MAX_SLOTS);
	t = dt_calloc(cap, sizeof(*t));
	names = dt_calloc(cap, NAME_MAX_LEN);
	dt_op_to_host(&(struct dt_tensor){ m->params, { 1, { (int)m->nparams } }, m->dev }, host);
	for (int s = 0; o && s < DT_OPT_MAX_SLOTS; s++)
		if (o->slots[s])
			dt_op_to_host(&(struct dt_tensor){ o->slots[s], { 1, { (int)m->ntrainable } }, m->dev },
				      host + (s + 1) * m->nparams);
	for (int i = 0; i < m->nlayers; i++) {
		const struct dt_layer *l = &m->layers[i];
		for (int p = 0; p < l->nparams; p++) {
			const struct dt_param *pr = &l->params[p];
			param_name(names + nt * NAME_MAX_LEN, l, pr);
			t[nt] = (struct dt_ckpt_tensor){ names + nt * NAME_MAX_LEN, pr->shape, host + pr->offset };
			nt++;
		}
	}
	for (int s = 0; o && s < DT_OPT_MAX_SLOTS; s++) {
		if (!o->slots[s])
			continue;
		for (int i = 0; i < m->nlayers; i++) {
			const struct dt_layer *l = &m->layers[i];
			for (int p = 0; p < l->nparams; p++) {
				const struct dt_param *pr = &l->params[p];
				if (!pr->trainable)
					continue;
				slot_name(names + nt * NAME_MAX_LEN, l, pr, o->slot_names[s]);
				t[nt] = (struct dt_ckpt_tensor){ names + nt * NAME_MAX_LEN, pr->shape,
								 host + (s + 1) * m->nparams + pr->offset };
				nt++;
			}
		}
	}
	memcpy(all, meta, nmeta * sizeof(*meta));
	if (o) {
		snprintf(iters, sizeof(iters), "%lld", (long long)o->iterations);
		all[nmeta++] = (struct dt_ckpt_meta){ "optimizer.iterations", iters };
	}
	rc = dt_checkpoint_save(path, t, nt, all, nmeta);
	free(all);
	free(names);
	free(t);
	free(host);
	return rc;
}

static int load_one(const struct dt_ckpt *c, const char *name, const struct dt_shape *shape, struct dt_tensor *dst)
{
	const struct dt_ckpt_tensor *t = dt_checkpoint_find(c, name);
	char a[64], b[64];
	if (!t)
		return dt_error("'%s' has no tensor '%s': it was not written for this model",
				dt_checkpoint_path(c), name);
	if (!dt_shape_equal(&t->shape, shape))
		return dt_error("'%s': tensor '%s' has shape %s but the model needs %s", dt_checkpoint_path(c),
				name, dt_shape_format(&t->shape, 0, a, sizeof(a)), dt_shape_format(shape, 0, b, sizeof(b)));
	dt_op_from_host(dst, t->data);
	return 0;
}

static int model_has(const struct dt_model *m, const char *name)
{
	char own[NAME_MAX_LEN];
	for (int i = 0; i < m->nlayers; i++)
		for (int p = 0; p < m->layers[i].nparams; p++) {
			param_name(own, &m->layers[i], &m->layers[i].params[p]);
			if (!strcmp(own, name))
				return 1;
		}
	return 0;
}

int dt_snapshot_load_ema(const struct dt_ckpt *c, struct dt_model *m)
{
	char name[NAME_MAX_LEN];
	int found = 0;
	for (int i = 0; i < m->nlayers; i++) {
		struct dt_layer *l = &m->layers[i];
		for (int p = 0; p < l->nparams; p++) {
			struct dt_param *pr = &l->params[p];
			if (!pr->trainable)
				continue;
			slot_name(name, l, pr, "ema");
			if (!found && !dt_checkpoint_find(c, name))
				return 0;
			found = 1;
			if (load_one(c, name, &pr->shape, &pr->value) < 0)
				return -1;
		}
	}
	return found;
}

int dt_snapshot_load(const struct dt_ckpt *c, struct dt_model *m, struct dt_optimizer *o)
{
	char name[NAME_MAX_LEN];
	for (int i = 0; i < m->nlayers; i++) {
		struct dt_layer *l = &m->layers[i];
		for (int p = 0; p < l->nparams; p++) {
			struct dt_param *pr = &l->params[p];
			param_name(name, l, pr);
			if (load_one(c, name, &pr->shape, &pr->value) < 0)
				return -1;
			for (int s = 0; o && pr->trainable && s < DT_OPT_MAX_SLOTS; s++) {
				struct dt_tensor slot;
				if (!o->slots[s])
					continue;
				slot = dt_optimizer_slot(o, s, pr, m->dev);
				slot_name(name, l, pr, o->slot_names[s]);
				if (load_one(c, name, &pr->shape, &slot) < 0)
					return -1;
			}
		}
	}
	for (int i = 0; i < dt_checkpoint_count(c); i++) {
		struct dt_ckpt_tensor t = dt_checkpoint_at(c, i);
		if (strncmp(t.name, "optimizer/", 10) != 0 && !model_has(m, t.name))
			return dt_error("'%s' holds tensor '%s', which the model does not have: it was not written for this model",
					dt_checkpoint_path(c), t.name);
	}
	if (o) {
		const char *it = dt_checkpoint_meta(c, "optimizer.iterations");
		o->iterations = it ? strtoll(it, NULL, 10) : 0;
	}
	return 0;
}
