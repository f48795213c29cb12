/*
 * Learning-rate schedules, Keras' LearningRateSchedule classes: a schedule is
 * a pure function of the optimizer's iteration count (updates applied so
 * far), so a run resumed with the same count continues with the same rates.
 *
 * YAML: `compile.optimizer.ARGS.learning_rate` is a number (constant) or a
 * mapping with one schedule and an optional linear warmup in front of it:
 *
 *   learning_rate:
 *     cosine_decay: {initial_learning_rate: 0.1, decay_steps: 1000}
 *     warmup: {steps: 100, initial: 0}
 *
 * Kinds and their arguments (Keras' names and defaults):
 *   piecewise_constant      boundaries, values
 *   exponential_decay       initial_learning_rate, decay_steps, decay_rate, staircase
 *   cosine_decay            initial_learning_rate, decay_steps, alpha, warmup_target, warmup_steps
 *   cosine_decay_restarts   initial_learning_rate, first_decay_steps, t_mul, m_mul, alpha
 *   polynomial_decay        initial_learning_rate, decay_steps, end_learning_rate, power, cycle
 * The warmup rises linearly from `initial` to the schedule's value at its
 * step 0 over `steps` updates; the schedule then runs from its own step 0.
 */
#ifndef DT_SCHEDULE_H
#define DT_SCHEDULE_H

#include <stdint.h>

#include "core/config/config.h"

enum dt_schedule_kind {
	DT_SCHEDULE_CONSTANT,
	DT_SCHEDULE_PIECEWISE_CONSTANT,
	DT_SCHEDULE_EXPONENTIAL_DECAY,
	DT_SCHEDULE_COSINE_DECAY,
	DT_SCHEDULE_COSINE_DECAY_RESTARTS,
	DT_SCHEDULE_POLYNOMIAL_DECAY,
	DT_SCHEDULE_COUNT
};
/* YAML names indexed by kind ("constant" is the plain number); NULL-terminated. */
extern const char *const dt_schedule_names[];

#define DT_SCHEDULE_MAX_PIECES 32
/* The largest learning rate a config (and a checkpoint resumed) may give. */
#define DT_MAX_LEARNING_RATE 1e6

struct dt_schedule {
	enum dt_schedule_kind kind;
	double initial;          /* initial_learning_rate, or the constant */
	double decay_steps;      /* decay_steps, first_decay_steps */
	double decay_rate;       /* exponential */
	int staircase;           /* exponential */
	double alpha;            /* cosine, cosine restarts */
	int has_warmup_target;   /* cosine: Keras 3's warmup_target given */
	double warmup_target;
	double cos_warmup_steps; /* cosine: Keras 3's warmup_steps */
	double t_mul, m_mul;     /* cosine restarts */
	double end;              /* polynomial: end_learning_rate */
	double power;            /* polynomial */
	int cycle;               /* polynomial */
	int npieces;             /* piecewise: npieces - 1 boundaries, npieces values */
	int64_t boundaries[DT_SCHEDULE_MAX_PIECES];
	double values[DT_SCHEDULE_MAX_PIECES];
	int64_t warmup_steps;    /* dtrain's `warmup:` in front of any kind; 0: none */
	double warmup_initial;
};

/*
 * Reads a `learning_rate` node: a number (a constant schedule) or a mapping
 * as above. def is the optimizer's default rate when n is NULL. 0, or -1
 * after printing an error at the offending node.
 */
int dt_schedule_read(struct dt_schedule *s, const struct dt_node *n, double def);
/* The learning rate for the update that follows `step` applied updates. */
double dt_schedule_value(const struct dt_schedule *s, int64_t step);
/* 1 when the rate changes with the step (anything but a constant without warmup). */
int dt_schedule_varies(const struct dt_schedule *s);

#endif
