/*
 * Formulas written once: the arithmetic of one element or one row that the
 * CPU backend's loops (core/cpu/ops_cpu.c) and the CUDA backend's kernels
 * (core/cuda/kernels.cu) both compute. Elementwise activations and their
 * derivatives, the dropout mask, the loss of one row (cross-entropy, binary
 * cross-entropy, mean squared error, class weights) with its gradient, the
 * correct predictions of one row, the confusion cell and AUC bucket of
 * a prediction (metrics), the update of one parameter by each
 * optimizer with its per-step coefficients, and the l1/l2 penalty.
 *
 * Both compilers include this header. DT_HOST_DEVICE (core/rng.h) makes a
 * function __host__ __device__ under nvcc and a plain static inline one in
 * C, so both devices run the same operations in the same order on the same
 * types; a backend only chooses how to spread the elements or rows over its
 * threads. A caller that passes a constant `act` or `kind` gets the one
 * formula after inlining. Softmax and the column sums are not here: each
 * backend reduces a row or a column its own way.
 *
 * Arrays are row-major (rows, c) floats on the caller's device; nothing here
 * allocates or calls into dtrain (libdtrain_cuda.so may not).
 */
#ifndef DT_ROWS_H
#define DT_ROWS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "core/ops.h"
#include "core/rng.h"

/* Probabilities are clipped to [eps, 1 - eps] before a log, as Keras' backend epsilon. */
#define DT_CLIP_EPS 1e-7f
/* Keras' leaky_relu activation. */
#define DT_LEAKY_SLOPE 0.2f

/* ---- activations (elementwise; softmax is a row op of each backend) ---- */

/* act(v). */
static inline DT_HOST_DEVICE float dt_act_value(enum dt_activation act, float v)
{
	switch (act) {
	case DT_ACT_RELU: return v > 0 ? v : 0;
	case DT_ACT_SIGMOID: return 1 / (1 + expf(-v));
	case DT_ACT_TANH: return tanhf(v);
	case DT_ACT_LEAKY_RELU: return v > 0 ? v : DT_LEAKY_SLOPE * v;
	case DT_ACT_ELU: return v > 0 ? v : expm1f(v);
	case DT_ACT_GELU: return 0.5f * v * (1 + erff(v * (float)M_SQRT1_2));
	case DT_ACT_SWISH: return v / (1 + expf(-v));
	case DT_ACT_SOFTPLUS: return fmaxf(v, 0) + log1pf(expf(-fabsf(v)));
	default: return v;
	}
}

/*
 * dx[i] from dy[i] through the activation, whose output is y[i]. Only gelu
 * and swish read the input x[i] (dt_act_needs_input); x may be NULL for
 * the others.
 */
static inline DT_HOST_DEVICE float dt_act_grad(enum dt_activation act, const float *x, const float *y,
					       const float *dy, int64_t i)
{
	float d = dy[i];
	switch (act) {
	case DT_ACT_RELU: return y[i] > 0 ? d : 0;
	case DT_ACT_SIGMOID: return d * y[i] * (1 - y[i]);
	case DT_ACT_TANH: return d * (1 - y[i] * y[i]);
	case DT_ACT_LEAKY_RELU: return y[i] > 0 ? d : DT_LEAKY_SLOPE * d;
	case DT_ACT_ELU: return y[i] > 0 ? d : d * (y[i] + 1);
	case DT_ACT_GELU: {
		float v = x[i];
		float cdf = 0.5f * (1 + erff(v * (float)M_SQRT1_2));
		float pdf = expf(-0.5f * v * v) * 0.3989422804014327f;
		return d * (cdf + v * pdf);
	}
	case DT_ACT_SWISH: {
		float sg = 1 / (1 + expf(-x[i]));
		return d * (sg + x[i] * sg * (1 - sg));
	}
	case DT_ACT_SOFTPLUS: return d * -expm1f(-y[i]); /* sigmoid(x) = 1 - exp(-y) */
	default: return d;
	}
}

/*
 * The dropout mask of element i of the global batch (row * features + j):
 * keep (1 / (1 - rate)) or 0, a function of (key, i) alone, so the same for
 * any replica count and on either device.
 */
static inline DT_HOST_DEVICE float dt_dropout_mask(uint64_t key, int64_t i, float rate, float keep)
{
	return dt_hash_uniform(key, (uint32_t)i) >= rate ? keep : 0;
}

/* ---- losses and metrics: one row of c predictions ---- */

static inline DT_HOST_DEVICE float dt_clip_prob(float p)
{
	return p < DT_CLIP_EPS ? DT_CLIP_EPS : p > 1 - DT_CLIP_EPS ? 1 - DT_CLIP_EPS : p;
}

static inline DT_HOST_DEVICE int dt_in_clip(float p) { return p > DT_CLIP_EPS && p < 1 - DT_CLIP_EPS; }

/* The first index of the largest of x[0..c). */
static inline DT_HOST_DEVICE int64_t dt_argmax_row(const float *x, int64_t c)
{
	int64_t best = 0;
	for (int64_t j = 1; j < c; j++)
		if (x[j] > x[best])
			best = j;
	return best;
}

/*
 * Cross-entropy of one row p (c entries) against the target row t, or, when
 * t is NULL, against class cls (-1: none). With dp, writes the gradient
 * times scale into dp (c entries).
 */
static inline DT_HOST_DEVICE double dt_xent_row(enum dt_loss_input input, const float *p, const float *t, int cls,
						int64_t c, float *dp, float scale)
{
	double loss = 0;
	if (input == DT_LOSS_LOGITS) {
		float m = p[0], s = 0, tsum = t ? 0 : 1;
		for (int64_t j = 1; j < c; j++)
			m = p[j] > m ? p[j] : m;
		for (int64_t j = 0; j < c; j++)
			s += expf(p[j] - m);
		float lse = m + logf(s);
		for (int64_t j = 0; j < c; j++) {
			float tj = t ? t[j] : (float)(j == cls);
			if (t)
				tsum += tj;
			loss += tj * (lse - p[j]);
		}
		if (dp)
			for (int64_t j = 0; j < c; j++)
				dp[j] = scale * (expf(p[j] - lse) * tsum - (t ? t[j] : (float)(j == cls)));
		return loss;
	}
	float tsum = 0;
	for (int64_t j = 0; j < c; j++) {
		float tj = t ? t[j] : (float)(j == cls);
		tsum += tj;
		if (tj != 0)
			loss -= tj * logf(dt_clip_prob(p[j]));
	}
	if (!dp)
		return loss;
	for (int64_t j = 0; j < c; j++) {
		float tj = t ? t[j] : (float)(j == cls);
		if (input == DT_LOSS_FUSED)
			dp[j] = scale * (p[j] * tsum - tj);
		else
			dp[j] = dt_in_clip(p[j]) ? -scale * tj / p[j] : 0;
	}
	return loss;
}

/* Keras' class_weight_to_sample_weights for one target row t of tc columns; cw has k entries. */
static inline DT_HOST_DEVICE float dt_class_weight_row(const float *cw, int64_t k, const float *t, int64_t tc)
{
	int64_t cls = tc > 1 ? dt_argmax_row(t, tc) : (int64_t)lrintf(t[0]);
	return cls >= 0 && cls < k ? cw[cls] : 1.0f;
}

/*
 * The loss of row r of p (rows, c) against the targets t (rows, tc), times
 * the row's class weight (cw: k weights, or NULL for 1). With dp, writes row
 * r of the gradient times grad_scale and the weight. What ops.h says of
 * dt_op_loss_weighted, for one row.
 */
static inline DT_HOST_DEVICE double dt_loss_row(enum dt_loss loss, enum dt_loss_input input, const float *p,
						const float *t, const float *cw, int64_t k, float *dp, float grad_scale,
						int64_t r, int64_t c, int64_t tc)
{
	const float *pr = p + r * c;
	float *dr = dp ? dp + r * c : NULL;
	float w = cw ? dt_class_weight_row(cw, k, t + r * tc, tc) : 1.0f, scale = grad_scale * w;
	double l = 0;
	switch (loss) {
	case DT_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY: {
		int cls = (int)t[r];
		l = dt_xent_row(input, pr, NULL, cls < 0 || cls >= c ? -1 : cls, c, dr, scale);
		break;
	}
	case DT_LOSS_CATEGORICAL_CROSSENTROPY:
		l = dt_xent_row(input, pr, t + r * c, 0, c, dr, scale);
		break;
	case DT_LOSS_BINARY_CROSSENTROPY:
		for (int64_t j = 0; j < c; j++) {
			float z = pr[j], tj = t[r * c + j];
			if (input == DT_LOSS_LOGITS) {
				l += fmaxf(z, 0) - z * tj + log1pf(expf(-fabsf(z)));
				if (dr)
					dr[j] = scale * (1 / (1 + expf(-z)) - tj) / c;
			} else {
				float q = dt_clip_prob(z);
				l -= tj * logf(q) + (1 - tj) * logf(1 - q);
				if (dr && input == DT_LOSS_FUSED)
					dr[j] = scale * (z - tj) / c;
				else if (dr)
					dr[j] = dt_in_clip(z) ? scale * (z - tj) / (z * (1 - z)) / c : 0;
			}
		}
		l /= c;
		break;
	case DT_LOSS_MEAN_SQUARED_ERROR:
		for (int64_t j = 0; j < c; j++) {
			float d = pr[j] - t[r * c + j];
			l += (double)d * d;
			if (dr)
				dr[j] = scale * 2 * d / c;
		}
		l /= c;
		break;
	default:
		break;
	}
	return l * w;
}

/* The correct predictions of row r of p (rows, c) against t: 0 or 1, or up to c for DT_ACC_BINARY. */
static inline DT_HOST_DEVICE int64_t dt_correct_row(enum dt_accuracy kind, const float *p, const float *t,
						    float threshold, int64_t r, int64_t c)
{
	const float *pr = p + r * c;
	int64_t k = 0;
	switch (kind) {
	case DT_ACC_SPARSE:
		k = dt_argmax_row(pr, c) == (int64_t)t[r];
		break;
	case DT_ACC_CATEGORICAL:
		k = dt_argmax_row(pr, c) == dt_argmax_row(t + r * c, c);
		break;
	case DT_ACC_BINARY:
		for (int64_t j = 0; j < c; j++)
			k += (pr[j] > threshold) == (t[r * c + j] > 0.5f);
		break;
	}
	return k;
}

/*
 * The errors of row r of p (rows, c) against t (rows, c): adds sum|p - t| to
 * *abs_sum and sum (p - t)^2 to *sq_sum (MAE and RMSE).
 */
static inline DT_HOST_DEVICE void dt_error_row(const float *p, const float *t, int64_t r, int64_t c,
					       double *abs_sum, double *sq_sum)
{
	for (int64_t j = r * c; j < (r + 1) * c; j++) {
		double d = (double)p[j] - t[j];
		*abs_sum += fabs(d);
		*sq_sum += d * d;
	}
}

/*
 * The confusion-matrix cell of element j of row r (row-major cell index
 * true * classes + predicted), or -1 for a class label outside [0, classes).
 * Sparse and categorical: one cell per row (j is 0), the prediction the
 * argmax; binary: a 2 x 2 matrix over every element, positive when above
 * threshold (the label when above 0.5).
 */
static inline DT_HOST_DEVICE int64_t dt_confusion_cell(enum dt_accuracy kind, const float *p, const float *t,
							float threshold, int64_t r, int64_t c, int64_t j)
{
	int64_t truth;
	switch (kind) {
	case DT_ACC_SPARSE:
		truth = (int64_t)t[r];
		if (truth < 0 || truth >= c)
			return -1;
		return truth * c + dt_argmax_row(p + r * c, c);
	case DT_ACC_CATEGORICAL:
		return dt_argmax_row(t + r * c, c) * c + dt_argmax_row(p + r * c, c);
	case DT_ACC_BINARY:
		return (t[r * c + j] > 0.5f) * 2 + (p[r * c + j] > threshold);
	}
	return -1;
}

/*
 * 1 when the true class of row r (a class index with sparse, else the
 * argmax of the target row) is among the k highest of pred's row: fewer
 * than k columns score strictly higher (ties count in, as tf.math.in_top_k).
 * A class index outside [0, c) is not.
 */
static inline DT_HOST_DEVICE int64_t dt_top_k_row(const float *p, const float *t, int sparse, int64_t k, int64_t r,
						  int64_t c)
{
	const float *pr = p + r * c;
	int64_t truth = sparse ? (int64_t)t[r] : dt_argmax_row(t + r * c, c), above = 0;
	if (truth < 0 || truth >= c)
		return 0;
	for (int64_t j = 0; j < c; j++)
		above += pr[j] > pr[truth];
	return above < k;
}

/*
 * The sums behind R^2, MSE and MAPE of column j of p and t (rows, c), in
 * double, in row order, stored as float: out[0] sum t, out[1] sum t^2,
 * out[2] sum (t - p)^2, out[3] sum |t - p| / max(|t|, epsilon) (Keras'
 * mean_absolute_percentage_error before its factor 100).
 */
static inline DT_HOST_DEVICE void dt_regression_column(const float *p, const float *t, int64_t rows, int64_t c,
						       int64_t j, float out[4])
{
	double s = 0, s2 = 0, d2 = 0, ape = 0;
	for (int64_t r = 0; r < rows; r++) {
		double y = t[r * c + j], d = y - p[r * c + j], a = fabs(y);
		s += y;
		s2 += y * y;
		d2 += d * d;
		ape += fabs(d) / (a > DT_CLIP_EPS ? a : DT_CLIP_EPS);
	}
	out[0] = (float)s;
	out[1] = (float)s2;
	out[2] = (float)d2;
	out[3] = (float)ape;
}

/*
 * Keras' AUC thresholds: n of them, -epsilon, i / (n - 1) for 0 < i < n - 1,
 * 1 + epsilon, as float32. The bucket of a prediction v is the number of
 * thresholds it exceeds (0 .. n): the histogram of buckets gives the
 * confusion counts at every threshold.
 */
static inline DT_HOST_DEVICE float dt_auc_threshold(int i, int n)
{
	if (i == 0)
		return -DT_CLIP_EPS;
	if (i == n - 1)
		return 1.0f + DT_CLIP_EPS;
	return (float)((double)i / (n - 1));
}

static inline DT_HOST_DEVICE int dt_auc_bucket(float v, int n)
{
	int lo = 0, hi = n; /* thresholds below lo are exceeded, from hi on not */
	while (lo < hi) {
		int mid = (lo + hi) / 2;
		if (v > dt_auc_threshold(mid, n))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * The histogram slot of column j of row r for an AUC of n thresholds:
 * bucket for a negative, n + 1 + bucket for a positive. The label is
 * positive when above 0.5 (sparse: when the class index is j); with
 * sigmoid the output is a logit.
 */
static inline DT_HOST_DEVICE int64_t dt_auc_slot(const float *p, const float *t, int sparse, int sigmoid, int n,
						 int64_t r, int64_t c, int64_t j)
{
	float v = p[r * c + j];
	int pos = sparse ? (int64_t)t[r] == j : t[r * c + j] > 0.5f;
	if (sigmoid)
		v = 1.0f / (1.0f + expf(-v));
	return (int64_t)pos * (n + 1) + dt_auc_bucket(v, n);
}

/*
 * ---- optimizers: element i of the weights w, gradients g and slots m, v ----
 *
 * A step's coefficients are computed on the host in double from the
 * configured values and rounded to float once, as Keras and PyTorch compute
 * them from Python floats: 1 - 0.999 is 0.001f, where 1 - 0.999f would be
 * 9.99987e-4 and leave Adam's second moment 1.3e-5 low. The per-element
 * updates are float, as theirs are.
 */

/* 1 - x for a coefficient such as 1 - beta_2 or 1 - rho. */
static inline float dt_opt_one_minus(double x) { return (float)(1 - x); }

/* The decoupled weight decay of a step as a factor: w * (1 - lr * weight_decay) before the update (Keras 3). */
static inline float dt_opt_decay(const struct dt_opt_step *s) { return (float)(1 - s->lr * s->weight_decay); }

/* Adam's step size with both bias corrections: lr * sqrt(1 - beta_2^t) / (1 - beta_1^t). */
static inline float dt_adam_alpha(const struct dt_opt_step *s)
{
	return (float)(s->lr * sqrt(1 - pow(s->beta_2, (double)s->t)) / (1 - pow(s->beta_1, (double)s->t)));
}

/* sgd: w = w * decay - lr * gs * g. */
static inline DT_HOST_DEVICE void dt_sgd_update(float *w, const float *g, int64_t i, float lr, float gs, float decay)
{
	w[i] = w[i] * decay - lr * gs * g[i];
}

/* sgd with momentum mu (slot m), Nesterov's form when nesterov. */
static inline DT_HOST_DEVICE void dt_sgd_momentum_update(float *w, const float *g, float *m, int64_t i, float lr,
							 float gs, float decay, float mu, int nesterov)
{
	float gi = gs * g[i], wi = w[i] * decay;
	m[i] = mu * m[i] - lr * gi;
	w[i] = nesterov ? wi + mu * m[i] - lr * gi : wi + m[i];
}

/* adam and adamw: moments m and v, step size alpha = dt_adam_alpha, c1 = 1 - beta_1, c2 = 1 - beta_2. */
static inline DT_HOST_DEVICE void dt_adam_update(float *w, const float *g, float *m, float *v, int64_t i, float alpha,
						 float gs, float decay, float c1, float c2, float eps)
{
	float gi = gs * g[i];
	m[i] += c1 * (gi - m[i]);
	v[i] += c2 * (gi * gi - v[i]);
	w[i] = w[i] * decay - alpha * m[i] / (sqrtf(v[i]) + eps);
}

/* rmsprop: velocity v, c = 1 - rho; momentum mu in slot m, which is NULL without momentum. */
static inline DT_HOST_DEVICE void dt_rmsprop_update(float *w, const float *g, float *m, float *v, int64_t i, float lr,
						    float gs, float decay, float rho, float c, float eps, float mu)
{
	float gi = gs * g[i], inc;
	v[i] = rho * v[i] + c * gi * gi;
	inc = lr * gi / sqrtf(v[i] + eps);
	if (m) {
		m[i] = mu * m[i] + inc;
		inc = m[i];
	}
	w[i] = w[i] * decay - inc;
}

/* Adds the l1/l2 penalty's gradient times scale to g[i]; returns the penalty l1 |w| + l2 w^2 of w[i]. */
static inline DT_HOST_DEVICE float dt_regularize_update(const float *w, float *g, int64_t i, float l1, float l2,
							float scale)
{
	float sign = w[i] > 0 ? 1.0f : w[i] < 0 ? -1.0f : 0.0f;
	float penalty = l1 * fabsf(w[i]) + l2 * w[i] * w[i];
	g[i] += scale * (l1 * sign + 2 * l2 * w[i]);
	return penalty;
}

#endif
