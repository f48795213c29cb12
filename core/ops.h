/*
 * Backend ops: every numeric operation a layer, loss or optimizer needs.
 *
 * Layers, losses and optimizers call these and nothing else: no BLAS, oneDNN,
 * cuBLAS or CUDA launch outside the backend files (ops_cpu.c now, ops_cuda.cu
 * later). Each op takes tensors, which know their device, and dispatches on
 * it; all tensors of one call are on the same device. Ops never allocate.
 *
 * Shapes: "2-d view" means rows = dim[0], cols = product of the other dims.
 * Outputs may alias inputs only where a comment says so.
 */
#ifndef DT_OPS_H
#define DT_OPS_H

#include <stdint.h>

#include "tensor.h"

enum dt_activation {
	DT_ACT_LINEAR,
	DT_ACT_RELU,
	DT_ACT_SIGMOID,
	DT_ACT_TANH,
	DT_ACT_SOFTMAX, /* over the last dimension */
	DT_ACT_COUNT
};
/* Names as in Keras: "linear", "relu", ...; NULL-terminated, indexed by enum. */
extern const char *const dt_activation_names[];

enum dt_loss {
	DT_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,
	DT_LOSS_CATEGORICAL_CROSSENTROPY,
	DT_LOSS_BINARY_CROSSENTROPY,
	DT_LOSS_MEAN_SQUARED_ERROR,
	DT_LOSS_COUNT
};
extern const char *const dt_loss_names[];

/* How the prediction handed to dt_op_loss relates to the loss. */
enum dt_loss_input {
	DT_LOSS_PROBS,  /* probabilities (from_logits: false); gradient w.r.t. them */
	DT_LOSS_LOGITS, /* logits (from_logits: true); gradient w.r.t. them */
	DT_LOSS_FUSED,  /* probabilities from the model's own softmax/sigmoid; the gradient
			   is returned w.r.t. the logits before it (p - y), so the layer
			   skips its activation's backward: stable and cheaper */
};

/* Element-wise: c = a*b (c may alias a or b). */
void dt_op_mul(const struct dt_tensor *a, const struct dt_tensor *b, struct dt_tensor *c);
/* y = alpha*x + y. */
void dt_op_axpy(float alpha, const struct dt_tensor *x, struct dt_tensor *y);
void dt_op_scale(struct dt_tensor *x, float alpha);
void dt_op_fill(struct dt_tensor *x, float value);
/* dst = src (same count; shapes may differ, e.g. flatten). */
void dt_op_copy(const struct dt_tensor *src, struct dt_tensor *dst);
/* Between host memory and a tensor of any device. */
void dt_op_from_host(struct dt_tensor *dst, const float *src);
void dt_op_to_host(const struct dt_tensor *src, float *dst);
/* sum(x*x) in double precision, to the host. */
double dt_op_sum_squares(const struct dt_tensor *x);

/*
 * c = alpha * op(a) @ op(b) + beta * c over 2-d views; op transposes when
 * trans_* is set. Shapes: op(a) (M, K), op(b) (K, N), c (M, N).
 */
void dt_op_gemm(int trans_a, int trans_b, float alpha, const struct dt_tensor *a,
		const struct dt_tensor *b, float beta, struct dt_tensor *c);
/* y (rows, C) += b (C) on every row. */
void dt_op_bias_add(struct dt_tensor *y, const struct dt_tensor *b);
/* db (C) = beta*db + sum over rows of dy (rows, C). */
void dt_op_bias_grad(const struct dt_tensor *dy, float beta, struct dt_tensor *db);

/* y = act(x), rows of the 2-d view for softmax. y may alias x. */
void dt_op_act_forward(enum dt_activation act, const struct dt_tensor *x, struct dt_tensor *y);
/*
 * dx = dy * act'(x), computed from the output y (every activation here has its
 * derivative in terms of y). dx may alias dy.
 */
void dt_op_act_backward(enum dt_activation act, const struct dt_tensor *y,
			const struct dt_tensor *dy, struct dt_tensor *dx);

/*
 * Inverted dropout: mask[i] = 0 with probability rate, else 1/(1-rate), from
 * dt_hash_uniform(key, i); y = x*mask. y may alias x.
 */
void dt_op_dropout(const struct dt_tensor *x, struct dt_tensor *y, struct dt_tensor *mask,
		   float rate, uint64_t key);

/*
 * Loss over a batch: pred (N, C); target (N, 1) class indices for the sparse
 * loss, else (N, C). Returns the sum of the per-sample losses (the mean over C
 * for mse and binary crossentropy, as Keras). When dpred is not NULL it gets
 * grad_scale * d(sum)/d(pred), or d/d(logits) for DT_LOSS_FUSED. Probabilities
 * are clipped to [1e-7, 1-1e-7] inside logs, as Keras does.
 */
double dt_op_loss(enum dt_loss loss, enum dt_loss_input input, const struct dt_tensor *pred,
		  const struct dt_tensor *target, struct dt_tensor *dpred, float grad_scale);

enum dt_accuracy {
	DT_ACC_SPARSE,      /* argmax(pred) == target class */
	DT_ACC_CATEGORICAL, /* argmax(pred) == argmax(target) */
	DT_ACC_BINARY,      /* (pred > threshold) == (target > 0.5), per element */
};
/* Number of correct predictions (elements for binary). */
int64_t dt_op_count_correct(enum dt_accuracy kind, const struct dt_tensor *pred,
			    const struct dt_tensor *target, float threshold);

enum dt_opt_kind {
	DT_OPT_SGD,
	DT_OPT_ADAM,
	DT_OPT_ADAMW,
	DT_OPT_RMSPROP,
	DT_OPT_COUNT
};
extern const char *const dt_optimizer_names[];

/* One update's hyper-parameters, resolved by the optimizer for step t. */
struct dt_opt_step {
	enum dt_opt_kind kind;
	float lr;
	float momentum, rho;   /* sgd, rmsprop */
	int nesterov;          /* sgd */
	float beta_1, beta_2, epsilon;
	int64_t t;             /* 1-based step number (adam bias correction) */
	float weight_decay;    /* decoupled: w -= lr*wd*w before the update, as Keras 3 */
	float grad_scale;      /* gradients are multiplied by this first (clipnorm) */
};
/*
 * Fused update of w (n) from g (n) with slots s1, s2 (n each, NULL when the
 * optimizer has fewer): momentum/m for s1, v/velocity for s2.
 */
void dt_op_optimizer_update(const struct dt_opt_step *s, struct dt_tensor *w,
			    const struct dt_tensor *g, struct dt_tensor *s1, struct dt_tensor *s2);

/* Threads the CPU backend uses (OpenMP and oneDNN); 0 = all cores. */
void dt_ops_set_threads(int n);
int dt_ops_get_threads(void);
/* The ISA oneDNN dispatches to, e.g. "Intel AVX-512" (static string). */
const char *dt_ops_cpu_isa(void);

#endif
