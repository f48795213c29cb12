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
	case DT_ACT_RELU: return v < 0 ? 0 : v; /* NaN stays NaN, as in Keras and PyTorch (it was 0: a NaN input trained silently) */
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

/* Keras' label smoothing of a target value: towards 1/k (k classes; 2 for binary). */
static inline DT_HOST_DEVICE float dt_smooth_label(float t, float ls, int64_t k)
{
	return ls > 0 ? t * (1 - ls) + ls / (float)k : t;
}

/*
 * Cross-entropy of one row p (c entries) against the target row t, or, when
 * t is NULL, against class cls (-1: none), the target smoothed by ls (Keras'
 * label_smoothing, 0: off). With dp, writes the gradient times scale into dp
 * (c entries).
 */
static inline DT_HOST_DEVICE double dt_xent_row(enum dt_loss_input input, const float *p, const float *t, int cls,
						int64_t c, float *dp, float scale, float ls)
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
			float tj = t ? dt_smooth_label(t[j], ls, c) : (float)(j == cls);
			if (t)
				tsum += tj;
			loss += tj * (lse - p[j]);
		}
		if (dp)
			for (int64_t j = 0; j < c; j++)
				dp[j] = scale * (expf(p[j] - lse) * tsum - (t ? dt_smooth_label(t[j], ls, c) : (float)(j == cls)));
		return loss;
	}
	float tsum = 0;
	for (int64_t j = 0; j < c; j++) {
		float tj = t ? dt_smooth_label(t[j], ls, c) : (float)(j == cls);
		tsum += tj;
		if (tj != 0)
			loss -= tj * logf(dt_clip_prob(p[j]));
	}
	if (!dp)
		return loss;
	for (int64_t j = 0; j < c; j++) {
		float tj = t ? dt_smooth_label(t[j], ls, c) : (float)(j == cls);
		if (input == DT_LOSS_FUSED)
			dp[j] = scale * (p[j] * tsum - tj);
		else
			dp[j] = dt_in_clip(p[j]) ? -scale * tj / p[j] : 0;
	}
	return loss;
}

static inline DT_HOST_DEVICE float dt_signf(float x) { return x > 0 ? 1.0f : x < 0 ? -1.0f : 0.0f; }

/* Keras' hinge labels: a row of 0s and 1s becomes -1s and 1s; other rows are used as they are. */
static inline DT_HOST_DEVICE int dt_hinge_binary_row(const float *t, int64_t c)
{
	for (int64_t j = 0; j < c; j++)
		if (t[j] != 0 && t[j] != 1)
			return 0;
	return 1;
}

/*
 * The elementwise losses, Keras' mean over the row's c values: the loss of
 * prediction z against target y, and its derivative d/dz into *d. input
 * matters to the binary focal crossentropy only (z is a logit or a
 * probability); a holds the losses' arguments.
 */
static inline DT_HOST_DEVICE float dt_elem_loss(enum dt_loss loss, const struct dt_loss_args *a,
						enum dt_loss_input input, float z, float y, float *d)
{
	float e = z - y, ae = fabsf(e);
	switch (loss) {
	case DT_LOSS_MEAN_ABSOLUTE_ERROR:
		*d = dt_signf(e);
		return ae;
	case DT_LOSS_HUBER:
		*d = ae <= a->delta ? e : a->delta * dt_signf(e);
		return ae <= a->delta ? 0.5f * e * e : a->delta * ae - 0.5f * a->delta * a->delta;
	case DT_LOSS_LOG_COSH:
		/* log(cosh(e)) = e + softplus(-2e) - log(2) */
		*d = tanhf(e);
		return e + (fmaxf(-2 * e, 0) + log1pf(expf(-fabsf(2 * e)))) - 0.6931471805599453f;
	case DT_LOSS_POISSON:
		*d = 1 - y / (z + DT_CLIP_EPS);
		return z - y * logf(z + DT_CLIP_EPS);
	case DT_LOSS_HINGE:
	case DT_LOSS_SQUARED_HINGE: {
		float m = fmaxf(1 - y * z, 0);
		*d = loss == DT_LOSS_HINGE ? (m > 0 ? -y : 0) : -2 * y * m;
		return loss == DT_LOSS_HINGE ? m : m * m;
	}
	case DT_LOSS_BINARY_FOCAL_CROSSENTROPY: {
		/* focal factor (1 - p_t)^gamma, p_t = y p + (1 - y)(1 - p), times the binary crossentropy */
		float t = dt_smooth_label(y, a->label_smoothing, 2), p, bce, dbce, dpdz;
		if (input == DT_LOSS_LOGITS) {
			p = 1 / (1 + expf(-z));
			bce = fmaxf(z, 0) - z * t + log1pf(expf(-fabsf(z)));
			dbce = p - t;
			dpdz = p * (1 - p);
		} else {
			float q = dt_clip_prob(z);
			p = z;
			bce = -(t * logf(q) + (1 - t) * logf(1 - q));
			dbce = dt_in_clip(z) ? (z - t) / (z * (1 - z)) : 0;
			dpdz = 1;
		}
		float u = 1 - (t * p + (1 - t) * (1 - p)); /* 1 - p_t */
		float f = powf(u, a->gamma);
		float df = u > 0 && a->gamma != 0 ? -a->gamma * powf(u, a->gamma - 1) * (2 * t - 1) : 0; /* d f / d p */
		float w = a->apply_class_balancing ? t * a->alpha + (1 - t) * (1 - a->alpha) : 1;
		*d = w * (df * dpdz * bce + f * dbce);
		return w * f * bce;
	}
	default: /* not an elementwise loss (dt_loss_row does not ask) */
		*d = 0;
		return 0;
	}
}

/*
 * The losses of a whole row that are not a mean of elements: kl_divergence,
 * cosine_similarity, categorical_hinge, categorical_focal_crossentropy, for
 * row pr (c predictions) against tr; with dr, its gradient times scale.
 */
static inline DT_HOST_DEVICE double dt_row_loss(enum dt_loss loss, const struct dt_loss_args *a,
						enum dt_loss_input input, const float *pr, const float *tr, float *dr,
						float scale, int64_t c)
{
	double l = 0;
	switch (loss) {
	case DT_LOSS_KL_DIVERGENCE:
		/* sum y log(y / p), y and p clipped to [eps, 1] */
		for (int64_t j = 0; j < c; j++) {
			float y = fminf(fmaxf(tr[j], DT_CLIP_EPS), 1), p = fminf(fmaxf(pr[j], DT_CLIP_EPS), 1);
			l += y * logf(y / p);
			if (dr)
				dr[j] = pr[j] > DT_CLIP_EPS && pr[j] < 1 ? -scale * y / p : 0;
		}
		break;
	case DT_LOSS_COSINE_SIMILARITY: {
		/* -sum(y/|y| * p/|p|), each norm at least eps (Keras' normalize) */
		float sp = 0, st = 0, dot = 0;
		for (int64_t j = 0; j < c; j++) {
			sp += pr[j] * pr[j];
			st += tr[j] * tr[j];
			dot += pr[j] * tr[j];
		}
		float np = sqrtf(sp), nt = sqrtf(st);
		int pclip = !(np > DT_CLIP_EPS);
		np = pclip ? DT_CLIP_EPS : np;
		nt = nt > DT_CLIP_EPS ? nt : DT_CLIP_EPS;
		l = -dot / (np * nt);
		if (dr)
			for (int64_t j = 0; j < c; j++)
				dr[j] = -scale * (tr[j] / (nt * np) - (pclip ? 0 : dot * pr[j] / (nt * np * np * np)));
		break;
	}
	case DT_LOSS_CATEGORICAL_HINGE: {
		/* max(max((1 - y) p) - sum(y p) + 1, 0) */
		float pos = 0, neg = (1 - tr[0]) * pr[0];
		int64_t at = 0;
		for (int64_t j = 0; j < c; j++) {
			float v = (1 - tr[j]) * pr[j];
			pos += tr[j] * pr[j];
			if (v > neg) {
				neg = v;
				at = j;
			}
		}
		float m = neg - pos + 1;
		l = m > 0 ? m : 0;
		if (dr) {
			for (int64_t j = 0; j < c; j++)
				dr[j] = m > 0 ? -scale * tr[j] : 0;
			if (m > 0)
				dr[at] += scale * (1 - tr[at]);
		}
		break;
	}
	case DT_LOSS_CATEGORICAL_FOCAL_CROSSENTROPY: {
		/*
		 * o = p / sum(p) (softmax(z) from logits) clipped to [eps, 1 - eps];
		 * loss = -sum alpha (1 - o)^gamma y log(o). g_j = dloss/do_j; then
		 * dloss/dp_k = (g_k - sum_j g_j o_j) / sum(p), and from logits
		 * dloss/dz_k = o_k (g_k - sum_j g_j o_j).
		 */
		float sum = 0, m = pr[0], go = 0;
		if (input == DT_LOSS_LOGITS) {
			for (int64_t j = 1; j < c; j++)
				m = pr[j] > m ? pr[j] : m;
			for (int64_t j = 0; j < c; j++)
				sum += expf(pr[j] - m);
		} else {
			for (int64_t j = 0; j < c; j++)
				sum += pr[j];
		}
		for (int64_t pass = 0; pass < 2; pass++) {
			for (int64_t j = 0; j < c; j++) {
				float o = input == DT_LOSS_LOGITS ? expf(pr[j] - m) / sum : pr[j] / sum;
				float y = dt_smooth_label(tr[j], a->label_smoothing, c), q = dt_clip_prob(o);
				float f = powf(1 - q, a->gamma), g = 0;
				if (y != 0 && dt_in_clip(o))
					g = -a->alpha * y * (f / q - (a->gamma != 0 ? a->gamma * powf(1 - q, a->gamma - 1) * logf(q) : 0));
				if (pass == 0) {
					if (y != 0)
						l -= a->alpha * f * y * logf(q);
					go += g * o;
				} else if (dr) {
					dr[j] = scale * (input == DT_LOSS_LOGITS ? o * (g - go) : (g - go) / sum);
				}
			}
			if (!dr)
				break;
		}
		break;
	}
	default:
		break;
	}
	return l;
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
 * r of the gradient times grad_scale and the weight (times a->sample_weight[r]
 * when set). What ops.h says of
 * dt_op_loss_weighted, for one row.
 */
static inline DT_HOST_DEVICE double dt_loss_row(enum dt_loss loss, const struct dt_loss_args *a,
						enum dt_loss_input input, const float *p, const float *t, const float *cw,
						int64_t k, float *dp, float grad_scale, int64_t r, int64_t c, int64_t tc)
{
	const float *pr = p + r * c;
	float *dr = dp ? dp + r * c : NULL;
	float w = cw ? dt_class_weight_row(cw, k, t + r * tc, tc) : 1.0f;
	if (a->sample_weight)
		w *= a->sample_weight[r];
	float scale = grad_scale * w;
	double l = 0;
	switch (loss) {
	case DT_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY: {
		int cls = (int)t[r];
		l = dt_xent_row(input, pr, NULL, cls < 0 || cls >= c ? -1 : cls, c, dr, scale, 0);
		break;
	}
	case DT_LOSS_CATEGORICAL_CROSSENTROPY:
		l = dt_xent_row(input, pr, t + r * c, 0, c, dr, scale, a->label_smoothing);
		break;
	case DT_LOSS_BINARY_CROSSENTROPY:
		for (int64_t j = 0; j < c; j++) {
			float z = pr[j], tj = dt_smooth_label(t[r * c + j], a->label_smoothing, 2);
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
	case DT_LOSS_MEAN_ABSOLUTE_ERROR:
	case DT_LOSS_HUBER:
	case DT_LOSS_LOG_COSH:
	case DT_LOSS_POISSON:
	case DT_LOSS_HINGE:
	case DT_LOSS_SQUARED_HINGE:
	case DT_LOSS_BINARY_FOCAL_CROSSENTROPY: {
		const float *tr = t + r * c;
		int hinge = (loss == DT_LOSS_HINGE || loss == DT_LOSS_SQUARED_HINGE) && dt_hinge_binary_row(tr, c);
		for (int64_t j = 0; j < c; j++) {
			float d, y = hinge ? 2 * tr[j] - 1 : tr[j];
			l += dt_elem_loss(loss, a, input, pr[j], y, &d);
			if (dr)
				dr[j] = scale * d / c;
		}
		l /= c;
		break;
	}
	default:
		l = dt_row_loss(loss, a, input, pr, t + r * c, dr, scale, c);
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
	case DT_ACC_MULTI_LABEL:
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
 * threshold (the label when above 0.5); multi-label: such a 2 x 2 matrix per
 * column j, at 4 j.
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
	case DT_ACC_MULTI_LABEL:
		return 4 * j + (t[r * c + j] > 0.5f) * 2 + (p[r * c + j] > threshold);
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
 * double, in row order, stored as DT_REGRESSION_SUMS floats: sum t and
 * sum t^2 each as a float and the float of what it leaves out (hi + lo
 * holds 48 bits: R^2's SS_tot = sum t^2 - (sum t)^2 / n cancels when the
 * labels' mean is large against their spread, 290 +- 0.5 say), then
 * sum (t - p)^2 and sum |t - p| / max(|t|, epsilon) (Keras'
 * mean_absolute_percentage_error before its factor 100).
 */
static inline DT_HOST_DEVICE void dt_regression_column(const float *p, const float *t, int64_t rows, int64_t c,
						       int64_t j, float out[DT_REGRESSION_SUMS])
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
	out[1] = (float)(s - (double)out[0]);
	out[2] = (float)s2;
	out[3] = (float)(s2 - (double)out[2]);
	out[4] = (float)d2;
	out[5] = (float)ape;
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

/* Adamax's step size: lr / (1 - beta_1^t). */
static inline float dt_adamax_alpha(const struct dt_opt_step *s)
{
	return (float)(s->lr / (1 - pow(s->beta_1, (double)s->t)));
}

/* Nadam's momentum cache u_t = beta_1 (1 - 0.5 * 0.96^(0.004 t)) (Keras, PyTorch). */
static inline double dt_nadam_u(double beta_1, int64_t t) { return beta_1 * (1 - 0.5 * pow(0.96, 0.004 * (double)t)); }

/*
 * Nadam's coefficients of step t (s->nadam_product = u_1 ... u_t): cm of m,
 * cg of g and bc2 = 1 - beta_2^t (dt_nadam_update).
 */
static inline void dt_nadam_coefs(const struct dt_opt_step *s, float *cm, float *cg, float *bc2)
{
	double u = dt_nadam_u(s->beta_1, s->t), u_next = dt_nadam_u(s->beta_1, s->t + 1);
	*cm = (float)(u_next / (1 - s->nadam_product * u_next));
	*cg = (float)((1 - u) / (1 - s->nadam_product));
	*bc2 = (float)(1 - pow(s->beta_2, (double)s->t));
}

/* The gradient an update uses: gs * g[i], clipped to [-cv, cv] when cv > 0 (Keras' clipvalue). */
static inline DT_HOST_DEVICE float dt_opt_grad(const float *g, int64_t i, float gs, float cv)
{
	float gi = gs * g[i];
	return cv > 0 ? fminf(fmaxf(gi, -cv), cv) : gi;
}

/* sgd: w = w * decay - lr * gs * g. */
static inline DT_HOST_DEVICE void dt_sgd_update(float *w, const float *g, int64_t i, float lr, float gs, float cv,
					       float decay)
{
	/* lr * gs * g without clipping, the order the fixtures and checkpoints of sgd were made with */
	w[i] = w[i] * decay - (cv > 0 ? lr * dt_opt_grad(g, i, gs, cv) : lr * gs * g[i]);
}

/* sgd with momentum mu (slot m), Nesterov's form when nesterov. */
static inline DT_HOST_DEVICE void dt_sgd_momentum_update(float *w, const float *g, float *m, int64_t i, float lr,
							 float gs, float cv, float decay, float mu, int nesterov)
{
	float gi = dt_opt_grad(g, i, gs, cv), wi = w[i] * decay;
	m[i] = mu * m[i] - lr * gi;
	w[i] = nesterov ? wi + mu * m[i] - lr * gi : wi + m[i];
}

/*
 * adam and adamw: moments m and v, step size alpha = dt_adam_alpha, c1 = 1 -
 * beta_1, c2 = 1 - beta_2; with amsgrad, vhat (not NULL) keeps the largest v
 * and divides in its place.
 */
static inline DT_HOST_DEVICE void dt_adam_update(float *w, const float *g, float *m, float *v, float *vhat, int64_t i,
						 float alpha, float gs, float cv, float decay, float c1, float c2,
						 float eps)
{
	float gi = dt_opt_grad(g, i, gs, cv), vi;
	m[i] += c1 * (gi - m[i]);
	v[i] += c2 * (gi * gi - v[i]);
	vi = v[i];
	if (vhat) {
		vhat[i] = fmaxf(vhat[i], vi);
		vi = vhat[i];
	}
	w[i] = w[i] * decay - alpha * m[i] / (sqrtf(vi) + eps);
}

/* adagrad: the accumulator a (starting at initial_accumulator_value) sums g^2; w -= lr g / sqrt(a + eps). */
static inline DT_HOST_DEVICE void dt_adagrad_update(float *w, const float *g, float *a, int64_t i, float lr, float gs,
						    float cv, float decay, float eps)
{
	float gi = dt_opt_grad(g, i, gs, cv);
	a[i] += gi * gi;
	w[i] = w[i] * decay - lr * gi / sqrtf(a[i] + eps);
}

/*
 * adadelta: ag and ad are the running means of g^2 and of the update^2 (rho,
 * c = 1 - rho); the update is -sqrt(ad + eps) g / sqrt(ag + eps), times lr.
 */
static inline DT_HOST_DEVICE void dt_adadelta_update(float *w, const float *g, float *ag, float *ad, int64_t i,
						     float lr, float gs, float cv, float decay, float rho, float c,
						     float eps)
{
	float gi = dt_opt_grad(g, i, gs, cv), delta;
	ag[i] = rho * ag[i] + c * gi * gi;
	delta = -sqrtf(ad[i] + eps) * gi / sqrtf(ag[i] + eps);
	ad[i] = rho * ad[i] + c * delta * delta;
	w[i] = w[i] * decay + lr * delta;
}

/*
 * adamax: m as adam's, u the decayed largest |g| (beta_2); alpha = lr / (1 -
 * beta_1^t), c1 = 1 - beta_1.
 */
static inline DT_HOST_DEVICE void dt_adamax_update(float *w, const float *g, float *m, float *u, int64_t i, float alpha,
						   float gs, float cv, float decay, float c1, float b2, float eps)
{
	float gi = dt_opt_grad(g, i, gs, cv);
	m[i] += c1 * (gi - m[i]);
	u[i] = fmaxf(b2 * u[i], fabsf(gi));
	w[i] = w[i] * decay - alpha * m[i] / (u[i] + eps);
}

/*
 * nadam: m and v as adam's; the step divides cm m + cg g (cm = u_{t+1} / (1 -
 * prod u_1..u_{t+1}), cg = (1 - u_t) / (1 - prod u_1..u_t), the momentum
 * cache) by sqrt(v / bc2) + eps (bc2 = 1 - beta_2^t), times lr.
 */
static inline DT_HOST_DEVICE void dt_nadam_update(float *w, const float *g, float *m, float *v, int64_t i, float lr,
						  float gs, float cv, float decay, float c1, float c2, float cm, float cg,
						  float bc2, float eps)
{
	float gi = dt_opt_grad(g, i, gs, cv), m_hat, v_hat;
	m[i] += c1 * (gi - m[i]);
	v[i] += c2 * (gi * gi - v[i]);
	m_hat = cm * m[i] + cg * gi;
	v_hat = v[i] / bc2;
	w[i] = w[i] * decay - m_hat * lr / (sqrtf(v_hat) + eps);
}

/* lion: w -= lr sign(b1 m + (1 - b1) g), then m = b2 m + (1 - b2) g; c1 = 1 - b1, c2 = 1 - b2. */
static inline DT_HOST_DEVICE void dt_lion_update(float *w, const float *g, float *m, int64_t i, float lr, float gs,
						 float cv, float decay, float b1, float c1, float b2, float c2)
{
	float gi = dt_opt_grad(g, i, gs, cv), u = m[i] * b1 + gi * c1;
	w[i] = w[i] * decay - lr * (u > 0 ? 1.0f : u < 0 ? -1.0f : 0.0f);
	m[i] = m[i] * b2 + gi * c2;
}

/* rmsprop: velocity v, c = 1 - rho; momentum mu in slot m, which is NULL without momentum. */
static inline DT_HOST_DEVICE void dt_rmsprop_update(float *w, const float *g, float *m, float *v, int64_t i, float lr,
						    float gs, float cv, float decay, float rho, float c, float eps, float mu)
{
	float gi = dt_opt_grad(g, i, gs, cv), inc;
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
