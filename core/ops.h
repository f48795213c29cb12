/*
 * Backend ops: every numeric operation a layer, loss or optimizer needs.
 *
 * Layers, losses and optimizers call these and nothing else: no BLAS, oneDNN,
 * cuBLAS or CUDA launch outside the backend rooms (core/cpu/, core/cuda/). Each op takes tensors, which know their device, and dispatches on
 * it; all tensors of one call are on the same device. Ops never allocate.
 *
 * Shapes: "2-d view" means rows = dim[0], cols = product of the other dims.
 * Outputs may alias inputs only where a comment says so.
 */
#ifndef DT_OPS_H
#define DT_OPS_H

#include <stdint.h>

#include "core/op_types.h"
#include "core/tensor.h"

/* Names as in Keras: "linear", "relu", ...; NULL-terminated, indexed by enum. */
extern const char *const dt_activation_names[];
/* 1 when act's derivative needs its input x, not only its output y (gelu, swish). */
int dt_act_needs_input(enum dt_activation act);

extern const char *const dt_loss_names[];
/* Keras' defaults of the losses' arguments: delta 1, gamma 2, alpha 0.25, no smoothing or balancing. */
struct dt_loss_args dt_loss_args_default(void);


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
 * dx = dy * act'(x). From the output y for most activations; x is needed (and
 * may be NULL otherwise) when dt_act_needs_input(act). dx may alias dy.
 */
void dt_op_act_backward(enum dt_activation act, const struct dt_tensor *x, const struct dt_tensor *y,
			const struct dt_tensor *dy, struct dt_tensor *dx);

/*
 * Inverted dropout: mask[i] = 0 with probability rate, else 1/(1-rate), from
 * dt_hash_uniform(key, first + i); y = x*mask. y may alias x; mask may be
 * NULL (not kept: the same call on dy gives the gradient, dx = dy*mask). first
 * is the number of x's element 0 in the whole global batch (a replica's
 * first row times the row's size), so that a sample draws the same mask on
 * whichever replica computes it; first + count(x) is at most 2^32.
 */
void dt_op_dropout(const struct dt_tensor *x, struct dt_tensor *y, struct dt_tensor *mask,
		   float rate, uint64_t key, int64_t first);

/*
 * Loss over a batch: pred (N, C); target (N, 1) class indices for the sparse
 * loss, else (N, C). Returns the sum of the per-sample losses (the mean over C
 * for the elementwise losses: mse, mae, huber, log_cosh, poisson, the hinges
 * and the binary crossentropies, as Keras; the sum over C for the others).
 * When dpred is not NULL it gets grad_scale * d(sum)/d(pred), or d/d(logits)
 * for DT_LOSS_FUSED. Probabilities are clipped to [1e-7, 1-1e-7] inside logs,
 * as Keras does. The losses' arguments are Keras' defaults
 * (dt_loss_args_default); dt_op_loss_args takes others.
 */
double dt_op_loss(enum dt_loss loss, enum dt_loss_input input, const struct dt_tensor *pred,
		  const struct dt_tensor *target, struct dt_tensor *dpred, float grad_scale);
/*
 * dt_op_loss with Keras' class_weight: each sample's loss and gradient are
 * multiplied by class_weight[k] (K floats on pred's device), k being the
 * sample's class: the index for the sparse loss, the argmax of a target row
 * of several columns, the rounded target of a single column; classes outside
 * [0, K) weigh 1. class_weight NULL is dt_op_loss. The sum is not divided by
 * the weights (Keras' sum_over_batch_size: the caller scales by 1/batch).
 */
double dt_op_loss_weighted(enum dt_loss loss, enum dt_loss_input input, const struct dt_tensor *pred,
			   const struct dt_tensor *target, const struct dt_tensor *class_weight,
			   struct dt_tensor *dpred, float grad_scale);
/*
 * dt_op_loss_weighted with the loss's arguments (core/op_types.h): huber's
 * delta, the focal losses' gamma, alpha and apply_class_balancing, and
 * label_smoothing of the categorical, binary and focal crossentropies.
 * from_logits matters to the crossentropies only: the other losses take
 * input DT_LOSS_PROBS, the prediction as it is.
 */
double dt_op_loss_args(enum dt_loss loss, const struct dt_loss_args *args, enum dt_loss_input input,
		       const struct dt_tensor *pred, const struct dt_tensor *target,
		       const struct dt_tensor *class_weight, struct dt_tensor *dpred, float grad_scale);

/* Number of correct predictions (elements for binary). */
int64_t dt_op_count_correct(enum dt_accuracy kind, const struct dt_tensor *pred,
			    const struct dt_tensor *target, float threshold);
/*
 * Errors of pred against target (both (N, C)), to the host in double
 * precision: sums[0] = sum|pred - target|, sums[1] = sum (pred - target)^2
 * over every element (the sums behind MAE and RMSE).
 */
void dt_op_error_sums(const struct dt_tensor *pred, const struct dt_tensor *target, double sums[2]);
/*
 * Rows of pred (N, C) whose true class (target (N, 1) class indices with
 * sparse, else the argmax of target (N, C)) is among the k highest outputs
 * (dt_top_k_row): top_k_categorical_accuracy's count.
 */
int64_t dt_op_count_top_k(const struct dt_tensor *pred, const struct dt_tensor *target, int sparse, int64_t k);
/*
 * Per column j of pred and target (both (N, C)), the batch's sums behind
 * r2_score, mean_squared_error and mean_absolute_percentage_error into
 * sums[6j .. 6j+5] (DT_REGRESSION_SUMS * C floats on pred's device,
 * overwritten; see dt_regression_column in core/rows.h).
 */
#define DT_REGRESSION_SUMS 6
void dt_op_regression_sums(const struct dt_tensor *pred, const struct dt_tensor *target, struct dt_tensor *sums);
/*
 * The batch's confusion matrix into counts (floats on pred's device, whole
 * numbers, overwritten): (C, C) for sparse and categorical kinds, C the
 * columns of pred (N, C), row the true class and column the argmax; (2, 2)
 * over every element for binary (pred > threshold against target > 0.5);
 * (C, 2, 2) for multi-label, binary's matrix per column.
 * Sparse labels outside [0, C) count nowhere.
 */
void dt_op_confusion(enum dt_accuracy kind, const struct dt_tensor *pred, const struct dt_tensor *target,
		     float threshold, struct dt_tensor *counts);
/*
 * The batch's histogram behind Keras' AUC of num_thresholds thresholds into
 * hist (2 * (num_thresholds + 1) floats on pred's device, overwritten):
 * negatives by bucket, then positives by bucket (dt_auc_slot in
 * core/rows.h). column: the column of pred (N, C) scored, or -1 for every
 * column (Keras' multi_label: false flattening); sparse: target holds class
 * indices (N, 1); sigmoid: pred holds logits.
 */
void dt_op_auc_histogram(const struct dt_tensor *pred, const struct dt_tensor *target, int64_t column, int sparse,
			 int sigmoid, int num_thresholds, struct dt_tensor *hist);

extern const char *const dt_optimizer_names[];

/*
 * Fused update of w (n) from g (n) with slots s1, s2, s3 (n each, NULL when
 * the optimizer has fewer): momentum/m/accumulator for s1, v/velocity/u for
 * s2, vhat (adam's amsgrad) for s3; core/model/optimizer.c names each.
 */
void dt_op_optimizer_update(const struct dt_opt_step *s, struct dt_tensor *w, const struct dt_tensor *g,
			    struct dt_tensor *s1, struct dt_tensor *s2, struct dt_tensor *s3);

/*
 * Weight regularization: g += scale * (l1 * sign(w) + 2 * l2 * w). Returns the
 * penalty l1 * sum|w| + l2 * sum(w^2) (unscaled), as Keras' L1L2.
 */
double dt_op_regularize(const struct dt_tensor *w, struct dt_tensor *g, float l1, float l2, float scale);

/*
 * Convolution, pooling and batch normalization run through a plan: backend
 * state (oneDNN primitives, workspaces) made when the model is built for
 * max_batch, and on the first use of each other batch size (an epoch's short
 * last batch, a replica's slice), then kept by the layer. Set the thread
 * count (dt_ops_set_threads) before making plans: oneDNN fixes it then. Tensors are channels
 * last: x (N, H, W, C); conv kernels (kh, kw, in, out) as Keras stores them.
 */
struct dt_plan;
void dt_plan_free(struct dt_plan *p);

/*
 * The channels of a block of DT_LAYOUT_BLOCKED (core/op_types.h) on dev: 0
 * where the backend keeps every activation NHWC (a GPU's, a CPU below AVX2).
 * A backend that blocks runs pooling plans in every pair of layouts when c
 * is a multiple of the block.
 */
int dt_op_channel_block(struct dt_device dev);
/*
 * Whether the backend runs convolution g in g's layouts, at its speed (not
 * in a slow reference loop): always for NHWC in and out. with_dx: the
 * backward computes dx too.
 */
int dt_plan_conv_runs(struct dt_device dev, const struct dt_conv_geom *g, int with_dx);
/*
 * Host memory: n images of `pixels` pixels of c channels from the channel
 * blocks of `block` (DT_LAYOUT_BLOCKED) at src to NHWC at dst.
 */
void dt_layout_to_nhwc(const float *src, float *dst, int64_t n, int64_t pixels, int c, int block);
struct dt_plan *dt_plan_conv(struct dt_device dev, const struct dt_conv_geom *g, int max_batch);
/*
 * y (N, out_h, out_w, out_c) = act(x (N, in_h, in_w, in_c) * w (kh, kw, in_c,
 * out_c) + b (out_c) or no bias), act the geometry's (linear: none).
 */
void dt_op_conv_forward(struct dt_plan *p, const struct dt_tensor *x, const struct dt_tensor *w,
			const struct dt_tensor *b, struct dt_tensor *y);
/*
 * From dy, the gradient of the convolution's output before act (the caller
 * applies act's gradient, dt_op_act_backward): dw (overwritten), db (when not
 * NULL), dx (when not NULL).
 */
void dt_op_conv_backward(struct dt_plan *p, const struct dt_tensor *x, const struct dt_tensor *w,
			 const struct dt_tensor *dy, struct dt_tensor *dw, struct dt_tensor *db,
			 struct dt_tensor *dx);

struct dt_plan *dt_plan_pool(struct dt_device dev, const struct dt_pool_geom *g, int max_batch);
/* y (N, out_h, out_w, c) from x (N, in_h, in_w, c); training keeps what backward needs. */
void dt_op_pool_forward(struct dt_plan *p, const struct dt_tensor *x, struct dt_tensor *y, int training);
/* dx from dy, after a training forward of the same batch. */
void dt_op_pool_backward(struct dt_plan *p, const struct dt_tensor *dy, struct dt_tensor *dx);

/*
 * Batch normalization over the last dimension (channels) of x (N, ..., C), as
 * Keras' BatchNormalization: training normalizes with the batch's mean and
 * biased variance and updates moving = momentum * moving + (1 - momentum) *
 * batch; inference uses the moving statistics. gamma (C) NULL means 1, beta
 * NULL means 0.
 */
struct dt_plan *dt_plan_batchnorm(struct dt_device dev, int channels, int64_t spatial, float epsilon,
				  int max_batch);
void dt_op_batchnorm_forward(struct dt_plan *p, int training, float momentum, const struct dt_tensor *x,
			     const struct dt_tensor *gamma, const struct dt_tensor *beta,
			     struct dt_tensor *moving_mean, struct dt_tensor *moving_var, struct dt_tensor *y);
/* After a training forward of the same batch: dx, and dgamma / dbeta when not NULL. */
void dt_op_batchnorm_backward(struct dt_plan *p, const struct dt_tensor *x, const struct dt_tensor *dy,
			      const struct dt_tensor *gamma, struct dt_tensor *dgamma, struct dt_tensor *dbeta,
			      struct dt_tensor *dx);

/*
 * Embedding (issue 14): token indices into rows of a table.
 * idx (N, steps) holds whole numbers as floats; table (V, D); y (N, steps, D)
 * gets table[idx] row by row, zeros where an index is not in [0, V) (or not
 * a number: see core/gather.h; the pipeline refuses those first).
 */
void dt_op_gather(const struct dt_tensor *idx, const struct dt_tensor *table, struct dt_tensor *y);
/* dtable (V, D) += the rows of dy (N, steps, D) at idx (N, steps); bad indices add nothing. */
void dt_op_scatter_add(const struct dt_tensor *idx, const struct dt_tensor *dy, struct dt_tensor *dtable);
/* ---- recurrent layers (rnn) ---- */

/* Gates of a cell: 1 (SimpleRNN), 4 (LSTM), 3 (GRU). */
int dt_rnn_gates(enum dt_rnn_cell cell);
/* Rows of the bias: 2 for GRU reset_after (input and recurrent biases, as Keras), else 1. */
int dt_rnn_bias_rows(enum dt_rnn_cell cell);
/*
 * One recurrent layer over a batch of sequences, from a zero initial state,
 * through a plan (oneDNN's RNN primitives on the CPU, cuDNN's RNN API on the
 * GPU). Tensors in Keras' layout and gate order: x (N, steps, in); kernel w
 * (in, G*units); recurrent kernel u (units, G*units); bias b (G*units) or,
 * GRU reset_after, (2, 3*units), or NULL without bias; y (N, steps, units)
 * with return_sequences (in the order the steps were read: reversed when
 * go_backwards, as Keras), else (N, units), the last state. A training
 * forward keeps in the plan what the next backward needs.
 */
struct dt_plan *dt_plan_rnn(struct dt_device dev, const struct dt_rnn_geom *g, int max_batch);
void dt_op_rnn_forward(struct dt_plan *p, int training, const struct dt_tensor *x, const struct dt_tensor *w,
		       const struct dt_tensor *u, const struct dt_tensor *b, struct dt_tensor *y);
/*
 * After a training forward of the same batch, from dy (y's shape): dw, du
 * and db (overwritten; db ignored without bias) and dx (when not NULL).
 */
void dt_op_rnn_backward(struct dt_plan *p, const struct dt_tensor *x, const struct dt_tensor *w,
			const struct dt_tensor *u, const struct dt_tensor *b, const struct dt_tensor *y,
			const struct dt_tensor *dy, struct dt_tensor *dw, struct dt_tensor *du, struct dt_tensor *db,
			struct dt_tensor *dx);

/*
 * Bidirectional's merge of its forward and backward layers' outputs yf and
 * yb, both (N, steps, units) (steps 1 for last states): the backward one's
 * steps are taken in reverse order (Keras turns them back into input
 * order), so y[n, t] joins yf[n, t] and yb[n, steps-1-t]; y is
 * (N, steps, 2*units) for concat (forward first), else (N, steps, units).
 */
void dt_op_rnn_merge(enum dt_rnn_merge mode, int steps, const struct dt_tensor *yf, const struct dt_tensor *yb,
		     struct dt_tensor *y);
/* Its backward: dyf and dyb (overwritten) from dy, with yf and yb for mul. */
void dt_op_rnn_merge_backward(enum dt_rnn_merge mode, int steps, const struct dt_tensor *dy,
			      const struct dt_tensor *yf, const struct dt_tensor *yb, struct dt_tensor *dyf,
			      struct dt_tensor *dyb);

/*
 * Layer normalization (issue 14, resnet) over the last dimension of x
 * (N, ..., C), as Keras' LayerNormalization with axis -1: each of the
 * rows = N x (positions per sample) rows gets y = (x - mean) / sqrt(var +
 * epsilon) * gamma + beta, with its own mean and biased variance, in training
 * and inference alike. gamma (C) NULL means 1, beta NULL means 0. The plan
 * keeps the last forward's statistics for the backward of the same batch.
 */
struct dt_plan *dt_plan_layernorm(struct dt_device dev, int channels, int64_t rows_per_sample, float epsilon,
				  int max_batch);
void dt_op_layernorm_forward(struct dt_plan *p, const struct dt_tensor *x, const struct dt_tensor *gamma,
			     const struct dt_tensor *beta, struct dt_tensor *y);
/* After the forward of the same batch: dx (when not NULL), dgamma / dbeta (overwritten, when not NULL). */
void dt_op_layernorm_backward(struct dt_plan *p, const struct dt_tensor *x, const struct dt_tensor *dy,
			      const struct dt_tensor *gamma, struct dt_tensor *dgamma, struct dt_tensor *dbeta,
			      struct dt_tensor *dx);

/*
 * Threads the CPU backend uses (OpenMP and oneDNN); 0 = all cores. It also
 * makes the caller and those threads flush denormal floats to zero, as
 * TensorFlow does: on x86 an operation on a denormal costs some hundred
 * cycles, and Adam's first moments of units whose gradients are 0 decay into
 * them within two epochs (the MLP's fit fell from 15.4k to 9.3k samples/s
 * over 5 epochs without it).
 */
void dt_ops_set_threads(int n);
int dt_ops_get_threads(void);
/* The ISA oneDNN dispatches to, e.g. "Intel AVX-512" (static string). */
const char *dt_ops_cpu_isa(void);
/* Whether that ISA has bfloat16 instructions (avx512_bf16, AMX): precision bf16 runs. */
int dt_ops_cpu_has_bf16(void);
/*
 * compile.precision on the CPU, set before plans are made (they read it
 * then; dt_op_gemm reads it at each call). bf16: matrix products and
 * convolutions on bfloat16 copies of their inputs with float32 accumulation
 * and float32 outputs; every other op, the weights, the gradients and the
 * optimizer stay float32. -1 with the reason in err: tf32 (a GPU format),
 * bf16 where dt_ops_cpu_has_bf16 is 0.
 */
int dt_ops_set_cpu_precision(enum dt_precision p, char *err, size_t errsize);
/*
 * How far apart the CPU backend's threads run: the mean time in ns for one
 * cache line to go from thread 0 to another thread and back, for the
 * slowest such pair (its thread's number in *slowest; of at most 8 pairs,
 * the partners spread over the threads); 0 with one thread.
 * Tens of ns where the cores share a cache (one die, one L3), hundreds where
 * they do not (two dies or sockets, or a virtual machine whose host put
 * its virtual CPUs there): then every line one thread writes and another
 * reads crosses between them, and memory-bound steps slow down. Takes
 * 2-52 ms per pair.
 */
double dt_ops_thread_round_trip_ns(int *slowest);
/*
 * The CPU's measured peak in GFLOP/s: the best of a few GEMMs of
 * DT_PEAK_GEMM_SIZE cubed (core/op_types.h; the backend's own sgemm, or its
 * bfloat16 matmul under precision bf16) with the current thread count. Allocates and frees 48 MiB; takes
 * 0.1-1 s.
 */
double dt_ops_peak_gflops(void);
/*
 * The same for square GEMMs of n (at most DT_PEAK_GEMM_SIZE) in the precision
 * asked (DT_PRECISION_BF16 only where dt_ops_cpu_has_bf16), whatever the
 * current one: the best of two after a first that does not count.
 */
double dt_ops_gemm_gflops(enum dt_precision p, int64_t n);

/*
 * ---- cnnparts: spatial copies and resampling (zero_padding2d, cropping2d,
 * up_sampling2d) ----
 * Channels-last 4-d tensors: x (N, H, W, C), y (N, H', W', C); the sizes
 * come from the tensors' shapes. Element formulas: core/resample.h.
 */
/*
 * y[n, i, j, c] = x[n, i + top, j + left, c] inside x, else 0: a crop when
 * top and left are >= 0 and y is smaller, a zero padding when they are <= 0
 * and y is larger (and each one's gradient: the other, shifted back).
 */
void dt_op_shift2d(const struct dt_tensor *x, struct dt_tensor *y, int top, int left);
/* y (N, H*sh, W*sw, C) from x (N, H, W, C); sh, sw are y's sizes over x's. */
void dt_op_upsample2d(enum dt_interp mode, const struct dt_tensor *x, struct dt_tensor *y);
/* dx (N, H, W, C) = the adjoint of dt_op_upsample2d applied to dy (N, H*sh, W*sw, C) (overwritten). */
void dt_op_upsample2d_backward(enum dt_interp mode, const struct dt_tensor *dy, struct dt_tensor *dx);
/*
 * Spatial dropout's scaling: y[n, s, c] = x[n, s, c] * m[n, c] for x and y
 * (N, ..., C) seen as (N, S, C) and m (N, C), a mask dt_op_dropout drew per
 * sample and channel. y may alias x.
 */
void dt_op_mul_channels(const struct dt_tensor *x, const struct dt_tensor *m, struct dt_tensor *y);

/*
 * ---- cnnparts: transposed convolution (conv2d_transpose) ----
 * A plan as dt_plan_conv's, for g read as the transposed convolution's: x
 * (N, in_h, in_w, in_c) is the layer's input, y (N, out_h, out_w, out_c) its
 * output, the kernel w (kh, kw, out_c, in_c) as Keras' Conv2DTranspose
 * stores it. Input pixel (i, j) adds x * w to the outputs from
 * (i * stride_h - pad_top, j * stride_w - pad_left) on, kernel taps dil
 * apart: y's size is (in - 1) * stride + (k - 1) * dil + 1 - pad_top -
 * pad_bottom (pad_bottom/right may be negative: trailing outputs no tap
 * reaches, which get the bias only). groups must be 0 or 1.
 */
struct dt_plan *dt_plan_deconv(struct dt_device dev, const struct dt_conv_geom *g, int max_batch);
/* y = conv_transpose(x, w) + b (NULL: no bias). */
void dt_op_deconv_forward(struct dt_plan *p, const struct dt_tensor *x, const struct dt_tensor *w,
			  const struct dt_tensor *b, struct dt_tensor *y);
/* From dy: dw (overwritten), db (when not NULL), dx (when not NULL). */
void dt_op_deconv_backward(struct dt_plan *p, const struct dt_tensor *x, const struct dt_tensor *w,
			   const struct dt_tensor *dy, struct dt_tensor *dw, struct dt_tensor *db,
			   struct dt_tensor *dx);

#endif
