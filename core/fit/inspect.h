/*
 * One training step to look at, for dtrain inspect (man dtrain-inspect): the
 * first global batch of epoch 1, read and sliced as fit would train on it
 * first (same pipeline, seed, dropout keys and replica slices), through every
 * replica's forward pass layer by layer, the loss and the backward pass.
 * Statistics of the input, of every layer's output and of every trainable
 * parameter and its gradient are taken on the host (a GPU tensor is copied
 * there first), so this runs on any backend. Optionally the strategy then
 * applies one optimizer step, and the update's size and whether every
 * replica holds the same weights are measured. Under mpirun every process
 * runs its replicas and the statistics are summed into every process (each
 * fills only the entries of its own replicas), so the chief can print all.
 *
 * The warnings (dt_inspect_warn) read the numbers with the thresholds below,
 * which man/dtrain-inspect.1 lists.
 */
#ifndef DT_INSPECT_H
#define DT_INSPECT_H

#include "core/fit/train.h"

/* Warning thresholds (dtrain-inspect(1), WARNINGS). */
#define DT_INSPECT_GRAD_RATIO 1e3        /* consecutive layers' gradient norms differ by more: explode or vanish */
#define DT_INSPECT_INPUT_MEAN 5.0        /* |mean| of the input over this: not normalized */
#define DT_INSPECT_INPUT_STD_HI 5.0      /* input std over this: not normalized */
#define DT_INSPECT_INPUT_STD_LO 1e-3     /* input std under this: a (nearly) constant input */
#define DT_INSPECT_LOSS_FACTOR 2.0       /* loss over this times a uniform guess's: bad initialization */
#define DT_INSPECT_UPDATE_HI 1e-1        /* update/weight norm ratio over this: step too large */
#define DT_INSPECT_UPDATE_LO 1e-7        /* update/weight norm ratio under this: step too small */

#define DT_INSPECT_MAX_WARNINGS 32

/* Statistics of a tensor's values; mean, std, min and max are over its finite values (0 when none). */
struct dt_stats {
	int64_t count;      /* values */
	int64_t zeros;      /* exact zeros */
	int64_t nonfinite;  /* NaN or +-inf */
	double mean, std, min, max;
	double norm;        /* sqrt(sum of squares) over every value: NaN or inf when one is */
};

/* One trainable parameter of one replica. */
struct dt_inspect_param {
	int layer, index;   /* models[r].layers[layer].params[index] */
	struct dt_stats value, grad;
	double update_norm; /* |w after the step - w before| (NaN without a step) */
	int64_t after_nonfinite; /* non-finite values after the step */
};

/* One replica (global numbering: under mpirun, every process's). */
struct dt_inspect_replica {
	int rank;                 /* its process */
	struct dt_device dev;
	int begin, end;           /* its rows of the global batch */
	double loss_sum;          /* the loss summed over its rows, with its share of the penalty */
	struct dt_stats input;    /* the batch rows as the first layer gets them */
	struct dt_stats *layers;  /* nlayers: each layer's output */
	struct dt_inspect_param *params; /* nparams */
};

struct dt_inspect {
	int nlayers, nparams;     /* nparams: trainable parameter tensors */
	int nreplicas;            /* every process's replicas */
	int rows;                 /* samples in the batch */
	double loss;              /* the batch's mean loss, with the regularizers' penalty, as fit logs it */
	int classes;              /* a classifier's class count (2 per output for binary), 0 for regression */
	double uniform_loss;      /* the loss of a uniform prediction: ln(classes), ln 2 per output for binary; NaN: none */
	int stepped;              /* one optimizer step was applied */
	int differing;            /* after the step: replicas whose trainable weights differ from the chief's replica 0 */
	struct dt_inspect_replica *replicas;
	/* The activation asked for by dump_act: this process's rows [dump_begin, dump_end) of it, on the host. */
	float *dump;
	int dump_begin, dump_end;
	int nwarnings;
	char warnings[DT_INSPECT_MAX_WARNINGS][320];
};

/*
 * Runs the step on t (built as fit builds it: dt_trainer_init done): reads
 * global batch 0 of epoch 0 from t->train, and with `step` applies the
 * strategy's apply_gradients once. dump_act: -1, or the activation to hand
 * back in out->dump (0: the model's input, i + 1: layer i's output; the
 * caller frees it). Every process of an MPI job must call it. 0, or -1 after
 * a read error.
 */
int dt_inspect_run(struct dt_trainer *t, int step, int dump_act, struct dt_inspect *out);
/* Fills out->warnings from the numbers (replica 0 of the model m; every replica's for non-finite values). */
void dt_inspect_warn(struct dt_inspect *out, const struct dt_model *m);
void dt_inspect_release(struct dt_inspect *ins);

/* The statistics of x[0..n) (host memory). */
void dt_stats_compute(const float *x, int64_t n, struct dt_stats *s);

#endif
