/*
 * Dispatch of every dt_op_* to the backend of its tensors' device, with the
 * shape checks that are the same on every backend.
 */
#include "core/backend.h"
#include "core/cuda/cuda.h"
#include "core/error.h"
#include "core/ops.h"

const char *const dt_precision_names[] = { "fp32", "tf32", "bf16", NULL };
const char *const dt_activation_names[] = { "linear", "relu", "sigmoid", "tanh", "softmax", "leaky_relu",
					     "elu", "gelu", "swish", "softplus", NULL };

int dt_act_needs_input(enum dt_activation act) { return act == DT_ACT_GELU || act == DT_ACT_SWISH; }
const char *const dt_loss_names[] = { "sparse_categorical_crossentropy", "categorical_crossentropy",
				      "binary_crossentropy", "mean_squared_error", "mean_absolute_error", "huber",
				      "log_cosh", "kl_divergence", "poisson", "cosine_similarity", "hinge",
				      "squared_hinge", "categorical_hinge", "binary_focal_crossentropy",
				      "categorical_focal_crossentropy", NULL };
const char *const dt_optimizer_names[] = { "sgd", "adam", "adamw", "rmsprop", "adagrad", "adadelta",
					   "adamax", "nadam", "lion", NULL };

struct dt_loss_args dt_loss_args_default(void)
{
	struct dt_loss_args a = { .delta = 1.0f, .gamma = 2.0f, .alpha = 0.25f };
	return a;
}

static const struct dt_backend *backend_of(struct dt_device dev)
{
	if (dev.kind == DT_DEVICE_CPU)
		return &dt_cpu_backend;
	/* CUDA tensors exist only once the backend has loaded (dt_device_alloc). */
	if (dev.kind == DT_DEVICE_CUDA && dt_cuda())
		return dt_cuda()->backend;
	DT_BUG("no backend for device kind %d in this build", (int)dev.kind);
}

static const struct dt_backend *backend(const struct dt_tensor *t) { return backend_of(t->dev); }

static void same_device(const struct dt_tensor *a, const struct dt_tensor *b)
{
	DT_ASSERT(a->dev.kind == b->dev.kind && a->dev.index == b->dev.index);
}

static void same_count(const struct dt_tensor *a, const struct dt_tensor *b)
{
	DT_ASSERT(dt_tensor_count(a) == dt_tensor_count(b));
	same_device(a, b);
}

void dt_op_mul(const struct dt_tensor *a, const struct dt_tensor *b, struct dt_tensor *c)
{
	same_count(a, c);
	same_count(b, c);
	backend(c)->mul(a, b, c);
}

void dt_op_axpy(float alpha, const struct dt_tensor *x, struct dt_tensor *y)
{
	same_count(x, y);
	backend(y)->axpy(alpha, x, y);
}

void dt_op_scale(struct dt_tensor *x, float alpha) { backend(x)->scale(x, alpha); }
void dt_op_fill(struct dt_tensor *x, float value) { backend(x)->fill(x, value); }

void dt_op_copy(const struct dt_tensor *src, struct dt_tensor *dst)
{
	same_count(src, dst);
	backend(dst)->copy(src, dst);
}

void dt_op_from_host(struct dt_tensor *dst, const float *src) { backend(dst)->from_host(dst, src); }
void dt_op_to_host(const struct dt_tensor *src, float *dst) { backend(src)->to_host(src, dst); }
double dt_op_sum_squares(const struct dt_tensor *x) { return backend(x)->sum_squares(x); }

void dt_op_gemm(int trans_a, int trans_b, float alpha, const struct dt_tensor *a,
		const struct dt_tensor *b, float beta, struct dt_tensor *c)
{
	int64_t m = trans_a ? dt_tensor_cols(a) : dt_tensor_rows(a);
	int64_t ka = trans_a ? dt_tensor_rows(a) : dt_tensor_cols(a);
	int64_t kb = trans_b ? dt_tensor_cols(b) : dt_tensor_rows(b);
	int64_t n = trans_b ? dt_tensor_rows(b) : dt_tensor_cols(b);
	if (ka != kb || m != dt_tensor_rows(c) || n != dt_tensor_cols(c))
		DT_BUG("gemm shapes: op(a) (%lld, %lld), op(b) (%lld, %lld), c (%lld, %lld)",
		       (long long)m, (long long)ka, (long long)kb, (long long)n,
		       (long long)dt_tensor_rows(c), (long long)dt_tensor_cols(c));
	same_device(a, c);
	same_device(b, c);
	backend(c)->gemm(trans_a, trans_b, alpha, a, b, beta, c);
}

void dt_op_bias_add(struct dt_tensor *y, const struct dt_tensor *b)
{
	DT_ASSERT(dt_tensor_count(b) == y->shape.dim[y->shape.ndim - 1]);
	same_device(y, b);
	backend(y)->bias_add(y, b);
}

void dt_op_bias_grad(const struct dt_tensor *dy, float beta, struct dt_tensor *db)
{
	DT_ASSERT(dt_tensor_count(db) == dy->shape.dim[dy->shape.ndim - 1]);
	same_device(dy, db);
	backend(db)->bias_grad(dy, beta, db);
}

void dt_op_act_forward(enum dt_activation act, const struct dt_tensor *x, struct dt_tensor *y)
{
	same_count(x, y);
	backend(y)->act_forward(act, x, y);
}

void dt_op_act_backward(enum dt_activation act, const struct dt_tensor *x, const struct dt_tensor *y,
			const struct dt_tensor *dy, struct dt_tensor *dx)
{
	same_count(y, dx);
	same_count(dy, dx);
	if (dt_act_needs_input(act)) {
		DT_ASSERT(x);
		same_count(x, dx);
	}
	backend(dx)->act_backward(act, x, y, dy, dx);
}

void dt_op_dropout(const struct dt_tensor *x, struct dt_tensor *y, struct dt_tensor *mask,
		   float rate, uint64_t key, int64_t first)
{
	same_count(x, y);
	if (mask)
		same_count(mask, y);
	DT_ASSERT(rate >= 0 && rate < 1);
	/* The mask's counter is 32 bits (dt_hash_uniform): every element of the global batch has its own. */
	DT_ASSERT(first >= 0 && first + dt_tensor_count(y) <= (int64_t)UINT32_MAX + 1);
	backend(y)->dropout(x, y, mask, rate, key, first);
}

double dt_op_loss(enum dt_loss loss, enum dt_loss_input input, const struct dt_tensor *pred,
		  const struct dt_tensor *target, struct dt_tensor *dpred, float grad_scale)
{
	return dt_op_loss_weighted(loss, input, pred, target, NULL, dpred, grad_scale);
}

double dt_op_loss_weighted(enum dt_loss loss, enum dt_loss_input input, const struct dt_tensor *pred,
			   const struct dt_tensor *target, const struct dt_tensor *class_weight,
			   struct dt_tensor *dpred, float grad_scale)
{
	struct dt_loss_args a = dt_loss_args_default();
	return dt_op_loss_args(loss, &a, input, pred, target, class_weight, dpred, grad_scale);
}

double dt_op_loss_args(enum dt_loss loss, const struct dt_loss_args *args, enum dt_loss_input input,
		       const struct dt_tensor *pred, const struct dt_tensor *target,
		       const struct dt_tensor *class_weight, struct dt_tensor *dpred, float grad_scale)
{
	int64_t rows = dt_tensor_rows(pred);
	DT_ASSERT(dt_tensor_rows(target) == rows);
	if (loss == DT_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY)
		DT_ASSERT(dt_tensor_cols(target) == 1);
	else
		DT_ASSERT(dt_tensor_cols(target) == dt_tensor_cols(pred));
	if (dpred)
		same_count(pred, dpred);
	same_device(pred, target);
	if (class_weight)
		same_device(pred, class_weight);
	return backend(pred)->loss(loss, args, input, pred, target, class_weight, dpred, grad_scale);
}

int64_t dt_op_count_correct(enum dt_accuracy kind, const struct dt_tensor *pred,
			    const struct dt_tensor *target, float threshold)
{
	DT_ASSERT(dt_tensor_rows(target) == dt_tensor_rows(pred));
	same_device(pred, target);
	return backend(pred)->count_correct(kind, pred, target, threshold);
}

void dt_op_error_sums(const struct dt_tensor *pred, const struct dt_tensor *target, double sums[2])
{
	DT_ASSERT(dt_tensor_rows(target) == dt_tensor_rows(pred));
	same_count(pred, target);
	same_device(pred, target);
	backend(pred)->error_sums(pred, target, sums);
}

int64_t dt_op_count_top_k(const struct dt_tensor *pred, const struct dt_tensor *target, int sparse, int64_t k)
{
	DT_ASSERT(dt_tensor_rows(target) == dt_tensor_rows(pred));
	DT_ASSERT(sparse ? dt_tensor_cols(target) == 1 : dt_tensor_cols(target) == dt_tensor_cols(pred));
	same_device(pred, target);
	return backend(pred)->count_top_k(pred, target, sparse, k);
}

void dt_op_regression_sums(const struct dt_tensor *pred, const struct dt_tensor *target, struct dt_tensor *sums)
{
	DT_ASSERT(dt_tensor_rows(target) == dt_tensor_rows(pred));
	same_count(pred, target);
	DT_ASSERT(dt_tensor_count(sums) == DT_REGRESSION_SUMS * dt_tensor_cols(pred));
	same_device(pred, target);
	same_device(pred, sums);
	backend(pred)->regression_sums(pred, target, sums);
}

void dt_op_confusion(enum dt_accuracy kind, const struct dt_tensor *pred, const struct dt_tensor *target,
		     float threshold, struct dt_tensor *counts)
{
	int64_t c = kind == DT_ACC_BINARY ? 2 : dt_tensor_cols(pred);
	DT_ASSERT(dt_tensor_rows(target) == dt_tensor_rows(pred));
	DT_ASSERT(dt_tensor_count(counts) == (kind == DT_ACC_MULTI_LABEL ? 4 * c : c * c));
	same_device(pred, target);
	same_device(pred, counts);
	backend(pred)->confusion(kind, pred, target, threshold, counts);
}

void dt_op_auc_histogram(const struct dt_tensor *pred, const struct dt_tensor *target, int64_t column, int sparse,
			 int sigmoid, int num_thresholds, struct dt_tensor *hist)
{
	DT_ASSERT(dt_tensor_rows(target) == dt_tensor_rows(pred));
	DT_ASSERT(column < dt_tensor_cols(pred) && num_thresholds > 1);
	DT_ASSERT(dt_tensor_count(hist) == 2 * ((int64_t)num_thresholds + 1));
	same_device(pred, target);
	same_device(pred, hist);
	backend(pred)->auc_histogram(pred, target, column, sparse, sigmoid, num_thresholds, hist);
}

void dt_op_optimizer_update(const struct dt_opt_step *s, struct dt_tensor *w, const struct dt_tensor *g,
			    struct dt_tensor *s1, struct dt_tensor *s2, struct dt_tensor *s3)
{
	same_count(w, g);
	if (s1)
		same_count(w, s1);
	if (s2)
		same_count(w, s2);
	if (s3)
		same_count(w, s3);
	backend(w)->optimizer_update(s, w, g, s1, s2, s3);
}

double dt_op_regularize(const struct dt_tensor *w, struct dt_tensor *g, float l1, float l2, float scale)
{
	same_count(w, g);
	return backend(g)->regularize(w, g, l1, l2, scale);
}

/* A backend without plans of a kind has NULL there: using one is a bug, not an input error. */
static const struct dt_backend *plan_backend(const struct dt_plan *p)
{
	DT_ASSERT(p);
	return p->backend;
}

void dt_plan_free(struct dt_plan *p)
{
	if (p)
		p->backend->plan_free(p);
}

int dt_op_channel_block(struct dt_device dev)
{
	const struct dt_backend *b = backend_of(dev);
	return b->channel_block ? b->channel_block() : 0;
}

/* A geometry's layouts: NHWC, or BLOCKED in the blocks of dev's backend. */
static int layouts_valid(struct dt_device dev, enum dt_layout x, enum dt_layout y, int block)
{
	if (x == DT_LAYOUT_NHWC && y == DT_LAYOUT_NHWC)
		return 1;
	return block > 0 && block == dt_op_channel_block(dev);
}

void dt_layout_to_nhwc(const float *src, float *dst, int64_t n, int64_t pixels, int c, int block)
{
	DT_ASSERT(block > 0 && c % block == 0);
	for (int64_t b = 0; b < n; b++)
		for (int k = 0; k < c / block; k++)
			for (int64_t px = 0; px < pixels; px++)
				for (int j = 0; j < block; j++)
					dst[(b * pixels + px) * c + k * block + j] =
						src[((b * (c / block) + k) * pixels + px) * block + j];
}

int dt_plan_conv_runs(struct dt_device dev, const struct dt_conv_geom *g, int with_dx)
{
	const struct dt_backend *b = backend_of(dev);
	if (g->x_layout == DT_LAYOUT_NHWC && g->y_layout == DT_LAYOUT_NHWC)
		return 1;
	return layouts_valid(dev, g->x_layout, g->y_layout, g->block) && b->conv_runs(g, with_dx);
}

struct dt_plan *dt_plan_conv(struct dt_device dev, const struct dt_conv_geom *g, int max_batch)
{
	const struct dt_backend *b = backend_of(dev);
	DT_ASSERT(b->plan_conv);
	DT_ASSERT(layouts_valid(dev, g->x_layout, g->y_layout, g->block));
	DT_ASSERT(g->act == DT_ACT_LINEAR || g->act == DT_ACT_RELU);
	return b->plan_conv(dev, g, max_batch);
}

void dt_op_conv_forward(struct dt_plan *p, const struct dt_tensor *x, const struct dt_tensor *w,
			const struct dt_tensor *b, struct dt_tensor *y)
{
	plan_backend(p)->conv_forward(p, x, w, b, y);
}

void dt_op_conv_backward(struct dt_plan *p, const struct dt_tensor *x, const struct dt_tensor *w,
			 const struct dt_tensor *dy, struct dt_tensor *dw, struct dt_tensor *db,
			 struct dt_tensor *dx)
{
	plan_backend(p)->conv_backward(p, x, w, dy, dw, db, dx);
}

struct dt_plan *dt_plan_pool(struct dt_device dev, const struct dt_pool_geom *g, int max_batch)
{
	const struct dt_backend *b = backend_of(dev);
	DT_ASSERT(b->plan_pool);
	DT_ASSERT(layouts_valid(dev, g->x_layout, g->y_layout, g->block));
	DT_ASSERT((g->x_layout == DT_LAYOUT_NHWC && g->y_layout == DT_LAYOUT_NHWC) || g->c % g->block == 0);
	return b->plan_pool(dev, g, max_batch);
}

void dt_op_pool_forward(struct dt_plan *p, const struct dt_tensor *x, struct dt_tensor *y, int training)
{
	plan_backend(p)->pool_forward(p, x, y, training);
}

void dt_op_pool_backward(struct dt_plan *p, const struct dt_tensor *dy, struct dt_tensor *dx)
{
	plan_backend(p)->pool_backward(p, dy, dx);
}

struct dt_plan *dt_plan_batchnorm(struct dt_device dev, int channels, int64_t spatial, float epsilon,
				  int max_batch)
{
	const struct dt_backend *b = backend_of(dev);
	DT_ASSERT(b->plan_batchnorm);
	return b->plan_batchnorm(dev, channels, spatial, epsilon, max_batch);
}

void dt_op_batchnorm_forward(struct dt_plan *p, int training, float momentum, const struct dt_tensor *x,
			     const struct dt_tensor *gamma, const struct dt_tensor *beta,
			     struct dt_tensor *moving_mean, struct dt_tensor *moving_var, struct dt_tensor *y)
{
	same_count(x, y);
	plan_backend(p)->batchnorm_forward(p, training, momentum, x, gamma, beta, moving_mean, moving_var, y);
}

void dt_op_batchnorm_backward(struct dt_plan *p, const struct dt_tensor *x, const struct dt_tensor *dy,
			      const struct dt_tensor *gamma, struct dt_tensor *dgamma, struct dt_tensor *dbeta,
			      struct dt_tensor *dx)
{
	same_count(dy, dx);
	plan_backend(p)->batchnorm_backward(p, x, dy, gamma, dgamma, dbeta, dx);
}

/* ---- cnnparts: spatial copies and resampling ---- */

/* x and y channels last (N, H, W, C) with the same N and C. */
static void same_images(const struct dt_tensor *x, const struct dt_tensor *y)
{
	DT_ASSERT(x->shape.ndim == 4 && y->shape.ndim == 4);
	DT_ASSERT(x->shape.dim[0] == y->shape.dim[0] && x->shape.dim[3] == y->shape.dim[3]);
	same_device(x, y);
}

void dt_op_shift2d(const struct dt_tensor *x, struct dt_tensor *y, int top, int left)
{
	same_images(x, y);
	backend(y)->shift2d(x, y, top, left);
}

/* small (N, H, W, C) and large (N, H*sh, W*sw, C), sh and sw >= 1. */
static void upsampled(const struct dt_tensor *small, const struct dt_tensor *large)
{
	same_images(small, large);
	DT_ASSERT(small->shape.dim[1] > 0 && small->shape.dim[2] > 0);
	DT_ASSERT(large->shape.dim[1] % small->shape.dim[1] == 0 && large->shape.dim[1] >= small->shape.dim[1]);
	DT_ASSERT(large->shape.dim[2] % small->shape.dim[2] == 0 && large->shape.dim[2] >= small->shape.dim[2]);
}

void dt_op_upsample2d(enum dt_interp mode, const struct dt_tensor *x, struct dt_tensor *y)
{
	upsampled(x, y);
	backend(y)->upsample2d(mode, x, y);
}

void dt_op_upsample2d_backward(enum dt_interp mode, const struct dt_tensor *dy, struct dt_tensor *dx)
{
	upsampled(dx, dy);
	backend(dx)->upsample2d_backward(mode, dy, dx);
}

/* Embedding (issue 14). */
void dt_op_gather(const struct dt_tensor *idx, const struct dt_tensor *table, struct dt_tensor *y)
{
	DT_ASSERT(table->shape.ndim == 2 && dt_tensor_count(y) == dt_tensor_count(idx) * table->shape.dim[1]);
	same_device(y, idx);
	same_device(y, table);
	if (dt_tensor_count(y))
		backend(y)->gather(idx, table, y);
}

void dt_op_scatter_add(const struct dt_tensor *idx, const struct dt_tensor *dy, struct dt_tensor *dtable)
{
	DT_ASSERT(dtable->shape.ndim == 2 && dt_tensor_count(dy) == dt_tensor_count(idx) * dtable->shape.dim[1]);
	same_device(dtable, idx);
	same_device(dtable, dy);
	if (dt_tensor_count(dy))
		backend(dtable)->scatter_add(idx, dy, dtable);
}

void dt_op_mul_channels(const struct dt_tensor *x, const struct dt_tensor *m, struct dt_tensor *y)
{
	same_count(x, y);
	same_device(m, y);
	DT_ASSERT(x->shape.ndim >= 2 && m->shape.ndim == 2 && m->shape.dim[0] == x->shape.dim[0]);
	DT_ASSERT(m->shape.dim[1] == x->shape.dim[x->shape.ndim - 1]);
	backend(y)->mul_channels(x, m, y);
}

struct dt_plan *dt_plan_deconv(struct dt_device dev, const struct dt_conv_geom *g, int max_batch)
{
	const struct dt_backend *b = backend_of(dev);
	DT_ASSERT(b->plan_deconv);
	DT_ASSERT(g->act == DT_ACT_LINEAR); /* the transposed convolution's layer applies its own */
	return b->plan_deconv(dev, g, max_batch);
}

void dt_op_deconv_forward(struct dt_plan *p, const struct dt_tensor *x, const struct dt_tensor *w,
			  const struct dt_tensor *b, struct dt_tensor *y)
{
	plan_backend(p)->deconv_forward(p, x, w, b, y);
}

void dt_op_deconv_backward(struct dt_plan *p, const struct dt_tensor *x, const struct dt_tensor *w,
			   const struct dt_tensor *dy, struct dt_tensor *dw, struct dt_tensor *db,
			   struct dt_tensor *dx)
{
	plan_backend(p)->deconv_backward(p, x, w, dy, dw, db, dx);
}

/* ---- layer normalization (issue 14, resnet) ---- */

struct dt_plan *dt_plan_layernorm(struct dt_device dev, int channels, int64_t rows_per_sample, float epsilon,
				  int max_batch)
{
	const struct dt_backend *b = backend_of(dev);
	DT_ASSERT(b->plan_layernorm);
	return b->plan_layernorm(dev, channels, rows_per_sample, epsilon, max_batch);
}

void dt_op_layernorm_forward(struct dt_plan *p, const struct dt_tensor *x, const struct dt_tensor *gamma,
			     const struct dt_tensor *beta, struct dt_tensor *y)
{
	same_count(x, y);
	plan_backend(p)->layernorm_forward(p, x, gamma, beta, y);
}

void dt_op_layernorm_backward(struct dt_plan *p, const struct dt_tensor *x, const struct dt_tensor *dy,
			      const struct dt_tensor *gamma, struct dt_tensor *dgamma, struct dt_tensor *dbeta,
			      struct dt_tensor *dx)
{
	same_count(x, dy);
	if (dx)
		same_count(dy, dx);
	plan_backend(p)->layernorm_backward(p, x, dy, gamma, dgamma, dbeta, dx);
}

/* ---- recurrent layers (rnn) ---- */

int dt_rnn_gates(enum dt_rnn_cell cell)
{
	return cell == DT_RNN_SIMPLE ? 1 : cell == DT_RNN_LSTM ? 4 : 3;
}

int dt_rnn_bias_rows(enum dt_rnn_cell cell) { return cell == DT_RNN_GRU_RESET_AFTER ? 2 : 1; }

struct dt_plan *dt_plan_rnn(struct dt_device dev, const struct dt_rnn_geom *g, int max_batch)
{
	const struct dt_backend *b = backend_of(dev);
	DT_ASSERT(b->plan_rnn);
	return b->plan_rnn(dev, g, max_batch);
}

void dt_op_rnn_forward(struct dt_plan *p, int training, const struct dt_tensor *x, const struct dt_tensor *w,
		       const struct dt_tensor *u, const struct dt_tensor *b, struct dt_tensor *y)
{
	plan_backend(p)->rnn_forward(p, training, x, w, u, b, y);
}

void dt_op_rnn_backward(struct dt_plan *p, const struct dt_tensor *x, const struct dt_tensor *w,
			const struct dt_tensor *u, const struct dt_tensor *b, const struct dt_tensor *y,
			const struct dt_tensor *dy, struct dt_tensor *dw, struct dt_tensor *du, struct dt_tensor *db,
			struct dt_tensor *dx)
{
	same_count(y, dy);
	if (dx)
		same_count(x, dx);
	plan_backend(p)->rnn_backward(p, x, w, u, b, y, dy, dw, du, db, dx);
}

void dt_op_rnn_merge(enum dt_rnn_merge mode, int steps, const struct dt_tensor *yf, const struct dt_tensor *yb,
		     struct dt_tensor *y)
{
	same_count(yf, yb);
	DT_ASSERT(dt_tensor_count(y) == (mode == DT_RNN_MERGE_CONCAT ? 2 : 1) * dt_tensor_count(yf));
	backend(y)->rnn_merge(mode, steps, yf, yb, y);
}

void dt_op_rnn_merge_backward(enum dt_rnn_merge mode, int steps, const struct dt_tensor *dy,
			      const struct dt_tensor *yf, const struct dt_tensor *yb, struct dt_tensor *dyf,
			      struct dt_tensor *dyb)
{
	same_count(yf, dyf);
	same_count(yb, dyb);
	DT_ASSERT(dt_tensor_count(dy) == (mode == DT_RNN_MERGE_CONCAT ? 2 : 1) * dt_tensor_count(yf));
	backend(dy)->rnn_merge_backward(mode, steps, dy, yf, yb, dyf, dyb);
}
