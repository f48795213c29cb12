#include <math.h>
#include <string.h>

#include "core/error.h"
#include "core/model/schedule.h"

const char *const dt_schedule_names[] = { "constant", "piecewise_constant", "exponential_decay", "cosine_decay",
					  "cosine_decay_restarts", "polynomial_decay", NULL };

static int read_pieces(struct dt_schedule *s, const struct dt_node *args)
{
	const struct dt_node *b = dt_node_get(args, "boundaries"), *v = dt_node_get(args, "values");
	if (dt_cfg_require(args, "boundaries", "piecewise_constant") < 0 ||
	    dt_cfg_require(args, "values", "piecewise_constant") < 0 ||
	    dt_node_expect(b, DT_NODE_SEQ, "boundaries") < 0 || dt_node_expect(v, DT_NODE_SEQ, "values") < 0)
		return -1;
	if (v->n != b->n + 1)
		return dt_node_error(v, "'values' needs one more entry than 'boundaries' (%d), got %d", b->n, v->n);
	if (v->n > DT_SCHEDULE_MAX_PIECES)
		return dt_node_error(v, "at most %d values", DT_SCHEDULE_MAX_PIECES);
	s->npieces = v->n;
	for (int i = 0; i < v->n; i++)
		if (dt_node_float(v->items[i], 0, DT_MAX_LEARNING_RATE, &s->values[i]) < 0)
			return -1;
	for (int i = 0; i < b->n; i++) {
		if (dt_node_int(b->items[i], 0, INT64_MAX, &s->boundaries[i]) < 0)
			return -1;
		if (i > 0 && s->boundaries[i] <= s->boundaries[i - 1])
			return dt_node_error(b->items[i], "'boundaries' must increase strictly");
	}
	return 0;
}

static int read_kind(struct dt_schedule *s, const char *name, const struct dt_node *key, const struct dt_node *args)
{
	static const char *const piecewise_keys[] = { "boundaries", "values", NULL };
	static const char *const exponential_keys[] = { "initial_learning_rate", "decay_steps", "decay_rate", "staircase", NULL };
	static const char *const cosine_keys[] = { "initial_learning_rate", "decay_steps", "alpha", "warmup_target",
						   "warmup_steps", NULL };
	static const char *const restarts_keys[] = { "initial_learning_rate", "first_decay_steps", "t_mul", "m_mul",
						     "alpha", NULL };
	static const char *const polynomial_keys[] = { "initial_learning_rate", "decay_steps", "end_learning_rate",
						       "power", "cycle", NULL };
	int64_t steps = 0, wsteps;
	int kind;

	for (kind = 0; dt_schedule_names[kind]; kind++)
		if (!strcmp(dt_schedule_names[kind], name))
			break;
	if (!dt_schedule_names[kind]) {
		const char *close = dt_did_you_mean_config(name, dt_schedule_names);
		if (close)
			return dt_node_error(key, "unknown learning-rate schedule '%s'; did you mean '%s'?", name, close);
		return dt_node_error(key, "unknown learning-rate schedule '%s' (expected one of: piecewise_constant, "
				     "exponential_decay, cosine_decay, cosine_decay_restarts, polynomial_decay)", name);
	}
	s->kind = (enum dt_schedule_kind)kind;
	if (kind == DT_SCHEDULE_CONSTANT)
		return dt_node_float_key(args, name, 0, DT_MAX_LEARNING_RATE, &s->initial);
	if (dt_node_expect(args, DT_NODE_MAP, name) < 0)
		return -1;
	switch (s->kind) {
	case DT_SCHEDULE_PIECEWISE_CONSTANT:
		return dt_cfg_check_keys(args, name, piecewise_keys) < 0 ? -1 : read_pieces(s, args);
	case DT_SCHEDULE_EXPONENTIAL_DECAY:
		if (dt_cfg_check_keys(args, name, exponential_keys) < 0 ||
		    dt_cfg_require(args, "initial_learning_rate", name) < 0 || dt_cfg_require(args, "decay_steps", name) < 0 ||
		    dt_cfg_require(args, "decay_rate", name) < 0 ||
		    dt_cfg_float(args, "initial_learning_rate", 0, 0, DT_MAX_LEARNING_RATE, &s->initial) < 0 ||
		    dt_cfg_int(args, "decay_steps", 1, 1, INT64_MAX, &steps) < 0 ||
		    dt_cfg_float(args, "decay_rate", 1, 0, 1e6, &s->decay_rate) < 0 ||
		    dt_cfg_bool(args, "staircase", 0, &s->staircase) < 0)
			return -1;
		break;
	case DT_SCHEDULE_COSINE_DECAY:
		if (dt_cfg_check_keys(args, name, cosine_keys) < 0 ||
		    dt_cfg_require(args, "initial_learning_rate", name) < 0 || dt_cfg_require(args, "decay_steps", name) < 0 ||
		    dt_cfg_float(args, "initial_learning_rate", 0, 0, DT_MAX_LEARNING_RATE, &s->initial) < 0 ||
		    dt_cfg_int(args, "decay_steps", 1, 1, INT64_MAX, &steps) < 0 ||
		    dt_cfg_float(args, "alpha", 0, 0, 1, &s->alpha) < 0 ||
		    (s->has_warmup_target =
			     dt_cfg_float(args, "warmup_target", 0, 0, DT_MAX_LEARNING_RATE, &s->warmup_target)) < 0 ||
		    dt_cfg_int(args, "warmup_steps", 0, 0, INT64_MAX, &wsteps) < 0)
			return -1;
		s->cos_warmup_steps = (double)wsteps;
		break;
	case DT_SCHEDULE_COSINE_DECAY_RESTARTS:
		if (dt_cfg_check_keys(args, name, restarts_keys) < 0 ||
		    dt_cfg_require(args, "initial_learning_rate", name) < 0 ||
		    dt_cfg_require(args, "first_decay_steps", name) < 0 ||
		    dt_cfg_float(args, "initial_learning_rate", 0, 0, DT_MAX_LEARNING_RATE, &s->initial) < 0 ||
		    dt_cfg_int(args, "first_decay_steps", 1, 1, INT64_MAX, &steps) < 0 ||
		    dt_cfg_float_range(args, "t_mul", 2, 0, 1e6, DT_OPEN_MIN, &s->t_mul) < 0 ||
		    dt_cfg_float(args, "m_mul", 1, 0, 1e6, &s->m_mul) < 0 ||
		    dt_cfg_float(args, "alpha", 0, 0, 1, &s->alpha) < 0)
			return -1;
		break;
	case DT_SCHEDULE_POLYNOMIAL_DECAY:
		if (dt_cfg_check_keys(args, name, polynomial_keys) < 0 ||
		    dt_cfg_require(args, "initial_learning_rate", name) < 0 || dt_cfg_require(args, "decay_steps", name) < 0 ||
		    dt_cfg_float(args, "initial_learning_rate", 0, 0, DT_MAX_LEARNING_RATE, &s->initial) < 0 ||
		    dt_cfg_int(args, "decay_steps", 1, 1, INT64_MAX, &steps) < 0 ||
		    dt_cfg_float(args, "end_learning_rate", 0.0001, 0, DT_MAX_LEARNING_RATE, &s->end) < 0 ||
		    dt_cfg_float(args, "power", 1, 0, 1e6, &s->power) < 0 || dt_cfg_bool(args, "cycle", 0, &s->cycle) < 0)
			return -1;
		break;
	default:
		DT_BUG("schedule %d", kind);
	}
	s->decay_steps = (double)steps;
	return 0;
}

static int read_warmup(struct dt_schedule *s, const struct dt_node *w)
{
	static const char *const warmup_keys[] = { "steps", "initial", NULL };
	if (dt_node_expect(w, DT_NODE_MAP, "warmup") < 0 || dt_cfg_check_keys(w, "warmup", warmup_keys) < 0 ||
	    dt_cfg_require(w, "steps", "warmup") < 0 ||
	    dt_cfg_int(w, "steps", 0, 1, INT64_MAX, &s->warmup_steps) < 0 ||
	    dt_cfg_float(w, "initial", 0, 0, DT_MAX_LEARNING_RATE, &s->warmup_initial) < 0)
		return -1;
	return 0;
}

int dt_schedule_read(struct dt_schedule *s, const struct dt_node *n, double def)
{
	const struct dt_node *kind = NULL;
	int kind_at = -1;

	memset(s, 0, sizeof(*s));
	s->kind = DT_SCHEDULE_CONSTANT;
	s->initial = def;
	if (!n)
		return 0;
	if (n->kind == DT_NODE_SCALAR)
		return dt_node_float_key(n, "learning_rate", 0, DT_MAX_LEARNING_RATE, &s->initial);
	if (dt_node_expect(n, DT_NODE_MAP, "learning_rate") < 0)
		return -1;
	for (int i = 0; i < n->n; i++) {
		if (!strcmp(n->keys[i], "warmup")) {
			if (read_warmup(s, n->items[i]) < 0)
				return -1;
			continue;
		}
		if (kind)
			return dt_node_error(n->key_nodes[i], "'learning_rate' takes one schedule, '%s' is a second one",
					     n->keys[i]);
		kind = n->items[i];
		kind_at = i;
	}
	if (!kind)
		return dt_node_error(n, "'learning_rate' needs a schedule (e.g. 'cosine_decay: {...}') or a number");
	return read_kind(s, n->keys[kind_at], n->key_nodes[kind_at], kind);
}

static double piecewise(const struct dt_schedule *s, double step)
{
	for (int i = 0; i < s->npieces - 1; i++)
		if (step <= (double)s->boundaries[i])
			return s->values[i];
	return s->values[s->npieces - 1];
}

static double cosine(double step, double decay_steps, double from, double alpha)
{
	double decayed = 0.5 * (1 + cos(M_PI * step / decay_steps));
	return from * ((1 - alpha) * decayed + alpha);
}

static double restarts(const struct dt_schedule *s, double step)
{
	double frac = step / s->decay_steps, i;
	if (s->t_mul == 1) {
		i = floor(frac);
		frac -= i;
	} else {
		double sum;
		i = floor(log(1 - frac * (1 - s->t_mul)) / log(s->t_mul));
		sum = (1 - pow(s->t_mul, i)) / (1 - s->t_mul);
		frac = (frac - sum) / pow(s->t_mul, i);
	}
	double decayed = 0.5 * pow(s->m_mul, i) * (1 + cos(M_PI * frac));
	return s->initial * ((1 - s->alpha) * decayed + s->alpha);
}

static double value(const struct dt_schedule *s, double step)
{
	double d = s->decay_steps;
	switch (s->kind) {
	case DT_SCHEDULE_CONSTANT:
		return s->initial;
	case DT_SCHEDULE_PIECEWISE_CONSTANT:
		return piecewise(s, step);
	case DT_SCHEDULE_EXPONENTIAL_DECAY:
		return s->initial * pow(s->decay_rate, s->staircase ? floor(step / d) : step / d);
	case DT_SCHEDULE_COSINE_DECAY:
		if (!s->has_warmup_target)
			return cosine(fmin(step, d), d, s->initial, s->alpha);
		step = fmin(step, d + s->cos_warmup_steps);
		if (step < s->cos_warmup_steps)
			return (s->warmup_target - s->initial) * (step / s->cos_warmup_steps) + s->initial;
		return cosine(step - s->cos_warmup_steps, d, s->warmup_target, s->alpha);
	case DT_SCHEDULE_COSINE_DECAY_RESTARTS:
		return restarts(s, step);
	case DT_SCHEDULE_POLYNOMIAL_DECAY:
		if (s->cycle)
			d *= step == 0 ? 1 : ceil(step / d);
		else
			step = fmin(step, d);
		return (s->initial - s->end) * pow(1 - step / d, s->power) + s->end;
	default:
		DT_BUG("schedule %d", (int)s->kind);
	}
}

double dt_schedule_value(const struct dt_schedule *s, int64_t step)
{
	if (step < s->warmup_steps) {
		double target = value(s, 0);
		return s->warmup_initial + (target - s->warmup_initial) * (double)step / (double)s->warmup_steps;
	}
	return value(s, (double)(step - s->warmup_steps));
}

int dt_schedule_varies(const struct dt_schedule *s)
{
	return s->kind != DT_SCHEDULE_CONSTANT || s->warmup_steps > 0;
}
