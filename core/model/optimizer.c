#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/error.h"
#include "core/model/optimizer.h"
#include "core/rows.h"

static void defaults(struct dt_optimizer_config *c, enum dt_opt_kind kind)
{
	memset(c, 0, sizeof(*c));
	c->kind = kind;
	c->learning_rate = kind == DT_OPT_SGD ? 0.01 : 0.001;
	c->rho = kind == DT_OPT_ADADELTA ? 0.95 : 0.9;
	c->beta_1 = 0.9;
	c->beta_2 = kind == DT_OPT_LION ? 0.99 : 0.999;
	c->initial_accumulator_value = 0.1;
	c->epsilon = 1e-7;
	c->weight_decay = kind == DT_OPT_ADAMW ? 0.004 : 0;
	c->ema_momentum = 0.99;
}

/* The arguments each optimizer takes besides the common ones (Keras' names), indexed by kind. */
static const char *const *own_keys(enum dt_opt_kind kind)
{
	static const char *const sgd_keys[] = { "momentum", "nesterov", NULL };
	static const char *const adam_keys[] = { "beta_1", "beta_2", "epsilon", "amsgrad", NULL };
	static const char *const rms_keys[] = { "rho", "momentum", "epsilon", NULL };
	static const char *const adagrad_keys[] = { "initial_accumulator_value", "epsilon", NULL };
	static const char *const adadelta_keys[] = { "rho", "epsilon", NULL };
	static const char *const adamax_keys[] = { "beta_1", "beta_2", "epsilon", NULL };
	static const char *const lion_keys[] = { "beta_1", "beta_2", NULL };
	switch (kind) {
	case DT_OPT_SGD: return sgd_keys;
	case DT_OPT_ADAM:
	case DT_OPT_ADAMW: return adam_keys;
	case DT_OPT_RMSPROP: return rms_keys;
	case DT_OPT_ADAGRAD: return adagrad_keys;
	case DT_OPT_ADADELTA: return adadelta_keys;
	case DT_OPT_ADAMAX:
	case DT_OPT_NADAM: return adamax_keys;
	case DT_OPT_LION: return lion_keys;
	default: DT_BUG("optimizer %d", (int)kind);
	}
}

/* The common keys then the optimizer's own, into keys (room for 16). */
static void allowed_keys(enum dt_opt_kind kind, const char **keys)
{
	static const char *const common_keys[] = { "learning_rate", "weight_decay", "clipnorm", "global_clipnorm",
					      "clipvalue", "use_ema", "ema_momentum", "ema_overwrite_frequency",
					      NULL };
	const char *const *own = own_keys(kind);
	int n = 0;
	for (int i = 0; common_keys[i]; i++)
		keys[n++] = common_keys[i];
	for (int i = 0; own[i]; i++)
		keys[n++] = own[i];
	keys[n] = NULL;
}

/* Keras takes one of clipnorm, global_clipnorm and clipvalue. */
static int check_one_clip(const struct dt_node *args)
{
	static const char *const clips[] = { "clipnorm", "global_clipnorm", "clipvalue" };
	const char *first = NULL;
	for (int i = 0; i < 3; i++) {
		const struct dt_node *v = dt_node_get(args, clips[i]);
		if (!v)
			continue;
		if (first)
			return dt_node_error(v, "'%s' and '%s' are both set; an optimizer takes one of clipnorm, "
					     "global_clipnorm and clipvalue", first, clips[i]);
		first = clips[i];
	}
	return 0;
}

int dt_optimizer_config_read(struct dt_optimizer_config *c, const struct dt_node *compile)
{
	const struct dt_node *n = dt_node_get(compile, "optimizer"), *args = NULL;
	const char *name, *keys[16];
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
		const char *close = dt_did_you_mean_config(name, dt_optimizer_names);
		const struct dt_node *at = n->kind == DT_NODE_MAP ? n->key_nodes[0] : n;
		char call[256];
		if (close)
			return dt_node_error(at, "unknown optimizer '%s'; did you mean '%s'?", name,
					     dt_python_call(name, close, call, sizeof(call)));
		return dt_node_error(at, "unknown optimizer '%s' (expected one of: sgd, adam, adamw, rmsprop, adagrad, "
				     "adadelta, adamax, nadam, lion)", name);
	}
	defaults(c, (enum dt_opt_kind)kind);
	allowed_keys((enum dt_opt_kind)kind, keys);
	if (dt_cfg_check_keys(args, name, keys) < 0 || check_one_clip(args) < 0 ||
	    dt_schedule_read(&c->schedule, dt_node_get(args, "learning_rate"), c->learning_rate) < 0 ||
	    dt_cfg_float(args, "momentum", 0, 0, 1, &c->momentum) < 0 ||
	    dt_cfg_bool(args, "nesterov", 0, &c->nesterov) < 0 ||
	    dt_cfg_float(args, "rho", c->rho, 0, 1, &c->rho) < 0 ||
	    dt_cfg_float(args, "beta_1", c->beta_1, 0, 0.999999, &c->beta_1) < 0 ||
	    dt_cfg_float(args, "beta_2", c->beta_2, 0, 0.999999999, &c->beta_2) < 0 ||
	    dt_cfg_bool(args, "amsgrad", 0, &c->amsgrad) < 0 ||
	    dt_cfg_float(args, "initial_accumulator_value", c->initial_accumulator_value, 0, 1e30,
			 &c->initial_accumulator_value) < 0 ||
	    dt_cfg_float(args, "epsilon", c->epsilon, 0, 1, &c->epsilon) < 0 ||
	    dt_cfg_float(args, "weight_decay", c->weight_decay, 0, 1e6, &c->weight_decay) < 0 ||
	    dt_cfg_float(args, "clipnorm", 0, 0, 1e30, &c->clipnorm) < 0 ||
	    dt_cfg_float(args, "global_clipnorm", 0, 0, 1e30, &c->global_clipnorm) < 0 ||
	    dt_cfg_float(args, "clipvalue", 0, 0, 1e30, &c->clipvalue) < 0 ||
	    dt_cfg_bool(args, "use_ema", 0, &c->use_ema) < 0 ||
	    dt_cfg_float(args, "ema_momentum", c->ema_momentum, 0, 1, &c->ema_momentum) < 0 ||
	    dt_cfg_int(args, "ema_overwrite_frequency", 0, 0, INT64_MAX, &c->ema_overwrite_frequency) < 0)
		return -1;
	for (int i = 0; i < 2 && !c->use_ema; i++) {
		const char *const need_ema[] = { "ema_momentum", "ema_overwrite_frequency" };
		if (dt_node_get(args, need_ema[i]))
			return dt_node_error(dt_node_get(args, need_ema[i]), "'%s' needs 'use_ema: true'", need_ema[i]);
	}
	c->learning_rate = dt_schedule_value(&c->schedule, 0);
	/* For dtrain config: the rate a name alone gives; 0 (no clipping) and the EMA keys without use_ema are no values to print. */
	if (c->schedule.kind == DT_SCHEDULE_CONSTANT)
		dt_cfg_note_float(args, "learning_rate", c->learning_rate);
	for (int i = 0; i < 3; i++)
		dt_cfg_no_default(args, (const char *const[]){ "clipnorm", "global_clipnorm", "clipvalue" }[i]);
	if (!c->use_ema) {
		dt_cfg_no_default(args, "ema_momentum");
		dt_cfg_no_default(args, "ema_overwrite_frequency");
	}
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
		if (cfg->amsgrad)
			o->slot_names[o->nslots++] = "vhat";
		break;
	case DT_OPT_ADAGRAD:
		o->slot_names[o->nslots++] = "accumulator";
		break;
	case DT_OPT_ADADELTA:
		o->slot_names[o->nslots++] = "accumulated_grad";
		o->slot_names[o->nslots++] = "accumulated_delta_var";
		break;
	case DT_OPT_ADAMAX:
		o->slot_names[o->nslots++] = "m";
		o->slot_names[o->nslots++] = "u";
		break;
	case DT_OPT_NADAM:
		o->slot_names[o->nslots++] = "m";
		o->slot_names[o->nslots++] = "v";
		break;
	case DT_OPT_LION:
		o->slot_names[o->nslots++] = "m";
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
	if (cfg->use_ema) {
		o->slot_names[DT_OPT_EMA_SLOT] = "ema";
		o->nslots = DT_OPT_MAX_SLOTS;
	}
	o->nadam_product = 1;
	for (int i = 0; m && i < o->nslots; i++) {
		struct dt_tensor t;
		if (!o->slot_names[i])
			continue;
		o->slots[i] = dt_device_alloc(m->dev, m->ntrainable);
		t = dt_tensor_flat(o->slots[i], m->dev, m->ntrainable);
		/* Keras starts every slot at 0, adagrad's accumulator at initial_accumulator_value. */
		dt_op_fill(&t, cfg->kind == DT_OPT_ADAGRAD && i == 0 ? (float)cfg->initial_accumulator_value : 0);
	}
}

struct dt_tensor dt_optimizer_slot(const struct dt_optimizer *o, int slot, const struct dt_param *p, struct dt_device dev)
{
	struct dt_tensor t = { o->slots[slot] + p->offset, p->shape, dev };
	DT_ASSERT(o->slots[slot]);
	return t;
}

/*
 * Nadam's u_1 ... u_t for t = o->iterations, each factor multiplied in turn
 * in double: from the previous step's product, or from u_1 again after a
 * resume, the same operations either way (so resume stays exact without
 * the product in the checkpoint).
 */
static double nadam_product(struct dt_optimizer *o)
{
	if (o->nadam_product_t != o->iterations && o->nadam_product_t + 1 != o->iterations) {
		o->nadam_product = 1;
		o->nadam_product_t = 0;
	}
	while (o->nadam_product_t < o->iterations)
		o->nadam_product *= dt_nadam_u(o->cfg.beta_1, ++o->nadam_product_t);
	return o->nadam_product;
}

static struct dt_opt_step step_of(struct dt_optimizer *o, float grad_scale)
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
		.amsgrad = o->cfg.amsgrad,
		.clipvalue = (float)o->cfg.clipvalue,
		.nadam_product = o->cfg.kind == DT_OPT_NADAM ? nadam_product(o) : 0,
	};
	return s;
}

void dt_optimizer_set_learning_rate(struct dt_optimizer *o, double lr) { o->learning_rate = (float)lr; }

double dt_optimizer_lr(const struct dt_optimizer *o)
{
	return dt_schedule_varies(&o->cfg.schedule) ? dt_schedule_value(&o->cfg.schedule, o->iterations)
						    : o->learning_rate;
}

/* The update of one parameter (or the flat range w, g at offset `at`) with its slots' views. */
static void update(struct dt_optimizer *o, const struct dt_opt_step *s, struct dt_tensor *w,
		   const struct dt_tensor *g, int64_t at, struct dt_device dev)
{
	struct dt_tensor slot[DT_OPT_MAX_SLOTS];
	for (int i = 0; i < DT_OPT_MAX_SLOTS; i++)
		if (o->slots[i])
			slot[i] = (struct dt_tensor){ o->slots[i] + at, w->shape, dev };
	dt_op_optimizer_update(s, w, g, o->slots[0] ? &slot[0] : NULL, o->slots[1] ? &slot[1] : NULL,
			       o->slots[2] ? &slot[2] : NULL);
}

int dt_optimizer_has_ema(const struct dt_optimizer *o) { return o->slots[DT_OPT_EMA_SLOT] != NULL; }

/*
 * After an update of the trainable weights in [lo, hi): the moving average
 * ema = momentum * ema + (1 - momentum) * w, momentum 0 at the first update
 * (Keras: the average starts at the weights), and every
 * ema_overwrite_frequency updates the weights take the average.
 */
static void update_ema(const struct dt_optimizer *o, struct dt_model *m, int64_t lo, int64_t hi)
{
	struct dt_tensor w = dt_tensor_flat(m->params + lo, m->dev, hi - lo);
	struct dt_tensor ema = dt_tensor_flat(o->slots[DT_OPT_EMA_SLOT] + lo, m->dev, hi - lo);
	double momentum = o->iterations > 1 ? o->cfg.ema_momentum : 0;
	dt_op_scale(&ema, (float)momentum);
	dt_op_axpy((float)(1 - momentum), &w, &ema);
	if (o->cfg.ema_overwrite_frequency > 0 && o->iterations % o->cfg.ema_overwrite_frequency == 0)
		dt_op_copy(&ema, &w);
}

void dt_optimizer_use_ema(const struct dt_optimizer *o, struct dt_model *m)
{
	struct dt_tensor w = dt_tensor_flat(m->params, m->dev, m->ntrainable);
	struct dt_tensor ema = dt_tensor_flat(o->slots[DT_OPT_EMA_SLOT], m->dev, m->ntrainable);
	DT_ASSERT(dt_optimizer_has_ema(o));
	dt_op_copy(&ema, &w);
}

/* clipnorm's factor for a gradient of that norm (Keras' clip_by_norm), or global_clipnorm's. */
static float clip_scale(double clip, double norm) { return norm > clip ? (float)(clip / norm) : 1; }

void dt_optimizer_apply(struct dt_optimizer *o, struct dt_model *m)
{
	/* Keras: the schedule is called with the count of updates before this one. */
	if (dt_schedule_varies(&o->cfg.schedule))
		dt_optimizer_set_learning_rate(o, dt_schedule_value(&o->cfg.schedule, o->iterations));
	o->iterations++;
	if (o->cfg.clipnorm <= 0) {
		struct dt_tensor w = dt_model_params(m), g = dt_model_grads(m);
		float scale = 1;
		if (o->cfg.global_clipnorm > 0)
			scale = clip_scale(o->cfg.global_clipnorm, sqrt(dt_op_sum_squares(&g)));
		struct dt_opt_step s = step_of(o, scale);
		update(o, &s, &w, &g, 0, m->dev);
		if (dt_optimizer_has_ema(o))
			update_ema(o, m, 0, m->ntrainable);
		return;
	}
	for (int i = 0; i < m->nlayers; i++) {
		struct dt_layer *l = &m->layers[i];
		for (int p = 0; p < l->nparams; p++) {
			struct dt_param *pr = &l->params[p];
			if (!pr->trainable)
				continue;
			struct dt_opt_step s = step_of(o, clip_scale(o->cfg.clipnorm, sqrt(dt_op_sum_squares(&pr->grad))));
			update(o, &s, &pr->value, &pr->grad, pr->offset, m->dev);
		}
	}
	if (dt_optimizer_has_ema(o))
		update_ema(o, m, 0, m->ntrainable);
}

void dt_optimizer_apply_range(struct dt_optimizer *o, struct dt_model *m, int64_t lo, int64_t hi)
{
	float global = 1;
	int64_t top = hi < m->ntrainable ? hi : m->ntrainable; /* the trainable end of the range */
	o->iterations++;
	if (o->cfg.global_clipnorm > 0 && top > lo) {
		struct dt_tensor g = dt_tensor_flat(m->grads + lo, m->dev, top - lo);
		global = clip_scale(o->cfg.global_clipnorm, sqrt(dt_op_sum_squares(&g)));
	}
	for (int i = 0; i < m->nlayers; i++) {
		struct dt_layer *l = &m->layers[i];
		for (int p = 0; p < l->nparams; p++) {
			struct dt_param *pr = &l->params[p];
			int64_t n = dt_shape_count(&pr->shape);
			double norm;
			if (!pr->trainable || pr->offset < lo || pr->offset >= hi)
				continue;
			DT_ASSERT(pr->offset + n <= hi);
			norm = o->cfg.clipnorm > 0 ? sqrt(dt_op_sum_squares(&pr->grad)) : 0;
			struct dt_opt_step s = step_of(o, o->cfg.clipnorm > 0 ? clip_scale(o->cfg.clipnorm, norm) : global);
			update(o, &s, &pr->value, &pr->grad, pr->offset, m->dev);
		}
	}
	if (dt_optimizer_has_ema(o) && top > lo)
		update_ema(o, m, lo, top);
}

void dt_optimizer_release(struct dt_optimizer *o, const struct dt_model *m)
{
	for (int i = 0; i < DT_OPT_MAX_SLOTS; i++)
		if (o->slots[i])
			dt_device_free(m->dev, o->slots[i]);
	memset(o, 0, sizeof(*o));
}
