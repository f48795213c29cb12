#include <math.h>
#include <string.h>

#include "core/error.h"
#include "core/model/optimizer.h"

static void defaults(struct dt_optimizer_config *c, enum dt_opt_kind kind)
{
	memset(c, 0, sizeof(*c));
	c->kind = kind;
	c->learning_rate = kind == DT_OPT_SGD ? 0.01 : 0.001;
	c->rho = 0.9;
	c->beta_1 = 0.9;
	c->beta_2 = 0.999;
	c->epsilon = 1e-7;
	c->weight_decay = kind == DT_OPT_ADAMW ? 0.004 : 0;
}

int dt_optimizer_config_read(struct dt_optimizer_config *c, const struct dt_node *compile)
{
	static const char *const sgd_keys[] = { "learning_rate", "momentum", "nesterov", "weight_decay", "clipnorm", NULL };
	static const char *const adam_keys[] = { "learning_rate", "beta_1", "beta_2", "epsilon", "weight_decay", "clipnorm", NULL };
	static const char *const rms_keys[] = { "learning_rate", "rho", "momentum", "epsilon", "weight_decay", "clipnorm", NULL };
	const struct dt_node *n = dt_node_get(compile, "optimizer"), *args = NULL;
	const char *name;
	int kind;

	defaults(c, DT_OPT_RMSPROP);
	dt_schedule_read(&c->schedule, NULL, c->learning_rate);
	if (!n)
		return 0;
	if (n->kind == DT_NODE_SCALAR) {
		name = n->value;
	} else if (n->kind == DT_NODE_MAP && n->n == 1) {
		name = n->keys[0];
		args = n->items[0];
		if (args->kind == DT_NODE_SCALAR && !args->value[0])
			args = NULL;
		else if (dt_node_expect(args, DT_NODE_MAP, name) < 0)
			return -1;
	} else {
		return dt_node_error(n, "'optimizer' is a name ('adam') or one key with arguments ('{adam: {learning_rate: 0.001}}')");
	}
	for (kind = 0; dt_optimizer_names[kind]; kind++)
		if (!strcmp(dt_optimizer_names[kind], name))
			break;
	if (!dt_optimizer_names[kind]) {
		const char *close = dt_did_you_mean(name, dt_optimizer_names);
		const struct dt_node *at = n->kind == DT_NODE_MAP ? n->key_nodes[0] : n;
		if (close)
			return dt_node_error(at, "unknown optimizer '%s'; did you mean '%s'?", name, close);
		return dt_node_error(at, "unknown optimizer '%s' (expected one of: sgd, adam, adamw, rmsprop)", name);
	}
	defaults(c, (enum dt_opt_kind)kind);
	if (dt_cfg_check_keys(args, name, kind == DT_OPT_SGD ? sgd_keys : kind == DT_OPT_RMSPROP ? rms_keys : adam_keys) < 0 ||
	    dt_schedule_read(&c->schedule, dt_node_get(args, "learning_rate"), c->learning_rate) < 0 ||
	    dt_cfg_float(args, "momentum", 0, 0, 1, &c->momentum) < 0 ||
	    dt_cfg_bool(args, "nesterov", 0, &c->nesterov) < 0 ||
	    dt_cfg_float(args, "rho", c->rho, 0, 1, &c->rho) < 0 ||
	    dt_cfg_float(args, "beta_1", c->beta_1, 0, 0.999999, &c->beta_1) < 0 ||
	    dt_cfg_float(args, "beta_2", c->beta_2, 0, 0.999999999, &c->beta_2) < 0 ||
	    dt_cfg_float(args, "epsilon", c->epsilon, 0, 1, &c->epsilon) < 0 ||
	    dt_cfg_float(args, "weight_decay", c->weight_decay, 0, 1e6, &c->weight_decay) < 0 ||
	    dt_cfg_float(args, "clipnorm", 0, 0, 1e30, &c->clipnorm) < 0)
		return -1;
	c->learning_rate = dt_schedule_value(&c->schedule, 0);
	return 0;
}

int dt_optimizer_state_count(const struct dt_optimizer_config *cfg)
{
	struct dt_optimizer o;
	int n = 0;
	dt_optimizer_init(&o, cfg, NULL);
	for (int i = 0; i < o.nslots; i++)
		n += o.slot_names[i] != NULL;
	return n;
}

void dt_optimizer_init(struct dt_optimizer *o, const struct dt_optimizer_config *cfg, const struct dt_model *m)
{
	memset(o, 0, sizeof(*o));
	o->cfg = *cfg;
	dt_optimizer_set_learning_rate(o, cfg->learning_rate);
	switch (cfg->kind) {
	case DT_OPT_SGD:
		if (cfg->momentum > 0)
			o->slot_names[o->nslots++] = "momentum";
		break;
	case DT_OPT_ADAM:
	case DT_OPT_ADAMW:
		o->slot_names[o->nslots++] = "m";
		o->slot_names[o->nslots++] = "v";
		break;
	case DT_OPT_RMSPROP:
		/* s1 is momentum, s2 the velocity: keep the velocity always in slot 1. */
		o->slot_names[0] = cfg->momentum > 0 ? "momentum" : NULL;
		o->slot_names[1] = "velocity";
		o->nslots = 2;
		break;
	default:
		DT_BUG("optimizer %d", (int)cfg->kind);
	}
	for (int i = 0; m && i < o->nslots; i++)
		if (o->slot_names[i])
			o->slots[i] = dt_device_alloc(m->dev, m->ntrainable);
}

struct dt_tensor dt_optimizer_slot(const struct dt_optimizer *o, int slot, const struct dt_param *p, struct dt_device dev)
{
	struct dt_tensor t = { o->slots[slot] + p->offset, p->shape, dev };
	DT_ASSERT(o->slots[slot]);
	return t;
}

static struct dt_opt_step step_of(const struct dt_optimizer *o, float grad_scale)
{
	struct dt_opt_step s = {
		.kind = o->cfg.kind,
		.lr = o->learning_rate,
		.momentum = (float)o->cfg.momentum,
		.rho = o->cfg.rho,
		.nesterov = o->cfg.nesterov,
		.beta_1 = o->cfg.beta_1,
		.beta_2 = o->cfg.beta_2,
		.epsilon = (float)o->cfg.epsilon,
		.t = o->iterations,
		.weight_decay = o->cfg.weight_decay,
		.grad_scale = grad_scale,
	};
	return s;
}

void dt_optimizer_set_learning_rate(struct dt_optimizer *o, double lr) { o->learning_rate = (float)lr; }

double dt_optimizer_lr(const struct dt_optimizer *o)
{
	return dt_schedule_varies(&o->cfg.schedule) ? dt_schedule_value(&o->cfg.schedule, o->iterations)
						    : o->learning_rate;
}

void dt_optimizer_apply(struct dt_optimizer *o, struct dt_model *m)
{
	/* Keras: the schedule is called with the count of updates before this one. */
	if (dt_schedule_varies(&o->cfg.schedule))
		dt_optimizer_set_learning_rate(o, dt_schedule_value(&o->cfg.schedule, o->iterations));
	o->iterations++;
	if (o->cfg.clipnorm <= 0) {
		struct dt_opt_step s = step_of(o, 1);
		struct dt_tensor w = dt_model_params(m), g = dt_model_grads(m), s1, s2;
		s1 = dt_tensor_flat(o->slots[0], m->dev, m->ntrainable);
		s2 = dt_tensor_flat(o->slots[1], m->dev, m->ntrainable);
		dt_op_optimizer_update(&s, &w, &g, o->slots[0] ? &s1 : NULL, o->slots[1] ? &s2 : NULL);
		return;
	}
	for (int i = 0; i < m->nlayers; i++) {
		struct dt_layer *l = &m->layers[i];
		for (int p = 0; p < l->nparams; p++) {
			struct dt_param *pr = &l->params[p];
			double norm;
			if (!pr->trainable)
				continue;
			norm = sqrt(dt_op_sum_squares(&pr->grad));
			struct dt_opt_step s = step_of(o, norm > o->cfg.clipnorm ? (float)(o->cfg.clipnorm / norm) : 1);
			struct dt_tensor s1, s2;
			if (o->slots[0])
				s1 = dt_optimizer_slot(o, 0, pr, m->dev);
			if (o->slots[1])
				s2 = dt_optimizer_slot(o, 1, pr, m->dev);
			dt_op_optimizer_update(&s, &pr->value, &pr->grad, o->slots[0] ? &s1 : NULL,
					       o->slots[1] ? &s2 : NULL);
		}
	}
}

void dt_optimizer_apply_range(struct dt_optimizer *o, struct dt_model *m, int64_t lo, int64_t hi)
{
	o->iterations++;
	for (int i = 0; i < m->nlayers; i++) {
		struct dt_layer *l = &m->layers[i];
		for (int p = 0; p < l->nparams; p++) {
			struct dt_param *pr = &l->params[p];
			int64_t n = dt_shape_count(&pr->shape);
			double norm;
			struct dt_tensor s1, s2;
			if (!pr->trainable || pr->offset < lo || pr->offset >= hi)
				continue;
			DT_ASSERT(pr->offset + n <= hi);
			norm = o->cfg.clipnorm > 0 ? sqrt(dt_op_sum_squares(&pr->grad)) : 0;
			struct dt_opt_step s = step_of(o, norm > o->cfg.clipnorm ? (float)(o->cfg.clipnorm / norm) : 1);
			if (o->slots[0])
				s1 = dt_optimizer_slot(o, 0, pr, m->dev);
			if (o->slots[1])
				s2 = dt_optimizer_slot(o, 1, pr, m->dev);
			dt_op_optimizer_update(&s, &pr->value, &pr->grad, o->slots[0] ? &s1 : NULL,
					       o->slots[1] ? &s2 : NULL);
		}
	}
}

void dt_optimizer_release(struct dt_optimizer *o, const struct dt_model *m)
{
	for (int i = 0; i < 2; i++)
		if (o->slots[i])
			dt_device_free(m->dev, o->slots[i]);
	memset(o, 0, sizeof(*o));
}
