/*
 * Optimizers over the flat parameter buffer, with Keras 3's defaults and
 * update rules: sgd (momentum, nesterov), adam and adamw (amsgrad), rmsprop,
 * adagrad, adadelta, adamax, nadam, lion; every one takes learning_rate,
 * weight_decay (decoupled, w -= lr*wd*w) and one of clipnorm (each
 * parameter's gradient clipped to that norm), global_clipnorm (all gradients
 * scaled together to that norm) and clipvalue (each element clipped to
 * [-clipvalue, clipvalue]), as Keras' options of those names; use_ema
 * keeps a moving average of the weights (Keras' use_ema, ema_momentum,
 * ema_overwrite_frequency) in the slot "ema", which the checkpoints hold
 * beside the weights and which evaluate and predict use.
 *
 * YAML: `optimizer: adam` or `optimizer: {sgd: {learning_rate: 0.1, momentum: 0.9}}`.
 * State (slots) lives in flat buffers laid out like the parameters, so one
 * fused pass updates everything and a checkpoint stores named views.
 */
#ifndef DT_OPTIMIZER_H
#define DT_OPTIMIZER_H

#include "core/config/config.h"
#include "core/model/model.h"
#include "core/model/schedule.h"

struct dt_optimizer_config {
	enum dt_opt_kind kind;
	double learning_rate;   /* the schedule's value at step 0 */
	struct dt_schedule schedule; /* learning_rate: a number or a schedule (core/model/schedule.h) */
	double momentum;     /* sgd, rmsprop */
	int nesterov;        /* sgd */
	double rho;          /* rmsprop, adadelta */
	double beta_1, beta_2;
	int amsgrad;         /* adam, adamw */
	double initial_accumulator_value; /* adagrad */
	double epsilon;
	double weight_decay;
	double clipnorm;     /* 0: off; at most one of the three clips is set */
	double global_clipnorm;
	double clipvalue;
	int use_ema;
	double ema_momentum;
	int64_t ema_overwrite_frequency; /* 0: never */
};

/* Reads the `optimizer` key of the compile mapping (absent: rmsprop, Keras' default). */
int dt_optimizer_config_read(struct dt_optimizer_config *c, const struct dt_node *compile);

struct dt_optimizer {
	struct dt_optimizer_config cfg;
	float learning_rate;      /* of the latest update; schedules and callbacks change it */
	int64_t iterations;       /* updates applied */
	int nslots;
	const char *slot_names[DT_OPT_MAX_SLOTS];
	float *slots[DT_OPT_MAX_SLOTS]; /* (nparams) each on the model's device */
	double nadam_product;     /* nadam: u_1 ... u_t for t = nadam_product_t, a cache of dt_opt_step's */
	int64_t nadam_product_t;
};

/* Floats of state (slots) the optimizer keeps per trainable parameter: 0 to DT_OPT_MAX_SLOTS. */
int dt_optimizer_state_count(const struct dt_optimizer_config *cfg);
void dt_optimizer_init(struct dt_optimizer *o, const struct dt_optimizer_config *cfg, const struct dt_model *m);
/* Applies the model's gradient buffer to its parameters: one step. */
void dt_optimizer_apply(struct dt_optimizer *o, struct dt_model *m);
/*
 * One step on the trainable parameters in [lo, hi) of the flat buffer only,
 * from the gradient buffer's same range (a parameter server's shard). lo and
 * hi must fall on parameter boundaries, so that clipnorm sees whole tensors;
 * global_clipnorm sees the range's norm only (each server clips its shard).
 */
void dt_optimizer_apply_range(struct dt_optimizer *o, struct dt_model *m, int64_t lo, int64_t hi);
/*
 * The learning rate the next update will use: the schedule's value at
 * `iterations` when the rate is scheduled, else learning_rate (which
 * reduce_lr_on_plateau may lower).
 */
double dt_optimizer_lr(const struct dt_optimizer *o);
/*
 * Sets the rate of the next update (as a float, the rate's precision); the
 * one place it is written. Schedules call it at each update, the trainer's
 * dt_trainer_set_learning_rate for callbacks, strategies and resume.
 */
void dt_optimizer_set_learning_rate(struct dt_optimizer *o, double lr);
void dt_optimizer_release(struct dt_optimizer *o, const struct dt_model *m);
/*
 * 1 when o keeps the moving average of the weights (use_ema: slot
 * DT_OPT_EMA_SLOT).
 */
int dt_optimizer_has_ema(const struct dt_optimizer *o);
/*
 * Copies the moving average into m's trainable weights, as Keras'
 * finalize_variable_values at the end of fit. Needs dt_optimizer_has_ema.
 */
void dt_optimizer_use_ema(const struct dt_optimizer *o, struct dt_model *m);
/* The slot view of parameter p: same shape, same offset as its value. */
struct dt_tensor dt_optimizer_slot(const struct dt_optimizer *o, int slot, const struct dt_param *p, struct dt_device dev);

#endif
