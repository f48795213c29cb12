/*
 * The backend interface behind ops.h: one table of function pointers per
 * device kind (ggml's habit). ops.c dispatches each dt_op_* on the device of
 * its output tensor; core/cpu/ops_cpu.c fills dt_cpu_backend, and
 * core/cuda/kernels.cu fills the CUDA backend's table in libdtrain_cuda.so,
 * which core/cuda/cuda.c loads on first GPU use. Only ops.c and the backend files include this header.
 * Arguments have the meaning documented in ops.h.
 */
#ifndef DT_BACKEND_H
#define DT_BACKEND_H

#include "core/op_types.h"
#include "core/tensor.h"

struct dt_backend {
	const char *name;
	void (*mul)(const struct dt_tensor *a, const struct dt_tensor *b, struct dt_tensor *c);
	void (*axpy)(float alpha, const struct dt_tensor *x, struct dt_tensor *y);
	void (*scale)(struct dt_tensor *x, float alpha);
	void (*fill)(struct dt_tensor *x, float value);
	void (*copy)(const struct dt_tensor *src, struct dt_tensor *dst);
	void (*from_host)(struct dt_tensor *dst, const float *src);
	void (*to_host)(const struct dt_tensor *src, float *dst);
	double (*sum_squares)(const struct dt_tensor *x);
	void (*gemm)(int trans_a, int trans_b, float alpha, const struct dt_tensor *a,
		     const struct dt_tensor *b, float beta, struct dt_tensor *c);
	void (*bias_add)(struct dt_tensor *y, const struct dt_tensor *b);
	void (*bias_grad)(const struct dt_tensor *dy, float beta, struct dt_tensor *db);
	void (*act_forward)(enum dt_activation act, const struct dt_tensor *x, struct dt_tensor *y);
	void (*act_backward)(enum dt_activation act, const struct dt_tensor *x, const struct dt_tensor *y,
			     const struct dt_tensor *dy, struct dt_tensor *dx);
	void (*dropout)(const struct dt_tensor *x, struct dt_tensor *y, struct dt_tensor *mask,
			float rate, uint64_t key, int64_t first);
	double (*loss)(enum dt_loss loss, const struct dt_loss_args *args, enum dt_loss_input input,
		       const struct dt_tensor *pred, const struct dt_tensor *target,
		       const struct dt_tensor *class_weight, struct dt_tensor *dpred, float grad_scale);
	int64_t (*count_correct)(enum dt_accuracy kind, const struct dt_tensor *pred,
				 const struct dt_tensor *target, float threshold);
	void (*error_sums)(const struct dt_tensor *pred, const struct dt_tensor *target, double sums[2]);
	int64_t (*count_top_k)(const struct dt_tensor *pred, const struct dt_tensor *target, int sparse, int64_t k);
	void (*regression_sums)(const struct dt_tensor *pred, const struct dt_tensor *target, struct dt_tensor *sums);
	void (*confusion)(enum dt_accuracy kind, const struct dt_tensor *pred, const struct dt_tensor *target,
			  float threshold, struct dt_tensor *counts);
	void (*auc_histogram)(const struct dt_tensor *pred, const struct dt_tensor *target, int64_t column,
			      int sparse, int sigmoid, int num_thresholds, struct dt_tensor *hist);
	void (*optimizer_update)(const struct dt_opt_step *s, struct dt_tensor *w, const struct dt_tensor *g,
				 struct dt_tensor *s1, struct dt_tensor *s2, struct dt_tensor *s3);
	double (*regularize)(const struct dt_tensor *w, struct dt_tensor *g, float l1, float l2, float scale);

	/* Plans: each backend's plan struct starts with struct dt_plan. */
	int (*channel_block)(void);                                           /* NULL: NHWC only */
	int (*conv_runs)(const struct dt_conv_geom *g, int with_dx);          /* with channel_block */
	struct dt_plan *(*plan_conv)(struct dt_device dev, const struct dt_conv_geom *g, int max_batch);
	void (*conv_forward)(struct dt_plan *p, const struct dt_tensor *x, const struct dt_tensor *w,
			     const struct dt_tensor *b, struct dt_tensor *y);
	void (*conv_backward)(struct dt_plan *p, const struct dt_tensor *x, const struct dt_tensor *w,
			      const struct dt_tensor *dy, struct dt_tensor *dw, struct dt_tensor *db,
			      struct dt_tensor *dx);
	struct dt_plan *(*plan_pool)(struct dt_device dev, const struct dt_pool_geom *g, int max_batch);
	void (*pool_forward)(struct dt_plan *p, const struct dt_tensor *x, struct dt_tensor *y, int training);
	void (*pool_backward)(struct dt_plan *p, const struct dt_tensor *dy, struct dt_tensor *dx);
	struct dt_plan *(*plan_batchnorm)(struct dt_device dev, int channels, int64_t spatial, float epsilon,
					  int max_batch);
	void (*batchnorm_forward)(struct dt_plan *p, int training, float momentum, const struct dt_tensor *x,
				  const struct dt_tensor *gamma, const struct dt_tensor *beta,
				  struct dt_tensor *moving_mean, struct dt_tensor *moving_var, struct dt_tensor *y);
	void (*batchnorm_backward)(struct dt_plan *p, const struct dt_tensor *x, const struct dt_tensor *dy,
				   const struct dt_tensor *gamma, struct dt_tensor *dgamma, struct dt_tensor *dbeta,
				   struct dt_tensor *dx);
	void (*plan_free)(struct dt_plan *p);

	/* cnnparts: spatial copies and resampling (core/cpu/resample.c, core/cuda/resample.cu) */
	void (*shift2d)(const struct dt_tensor *x, struct dt_tensor *y, int top, int left);
	void (*upsample2d)(enum dt_interp mode, const struct dt_tensor *x, struct dt_tensor *y);
	void (*upsample2d_backward)(enum dt_interp mode, const struct dt_tensor *dy, struct dt_tensor *dx);

	/* Embedding (issue 14, sequences): core/cpu/embedding.c, core/cuda/embedding.cu. */
	void (*gather)(const struct dt_tensor *idx, const struct dt_tensor *table, struct dt_tensor *y);
	void (*scatter_add)(const struct dt_tensor *idx, const struct dt_tensor *dy, struct dt_tensor *dtable);
	void (*mul_channels)(const struct dt_tensor *x, const struct dt_tensor *m, struct dt_tensor *y);
	/* cnnparts: transposed convolution plans (core/cpu/deconv.c, core/cuda/deconv.cu) */
	struct dt_plan *(*plan_deconv)(struct dt_device dev, const struct dt_conv_geom *g, int max_batch);
	void (*deconv_forward)(struct dt_plan *p, const struct dt_tensor *x, const struct dt_tensor *w,
			       const struct dt_tensor *b, struct dt_tensor *y);
	void (*deconv_backward)(struct dt_plan *p, const struct dt_tensor *x, const struct dt_tensor *w,
				const struct dt_tensor *dy, struct dt_tensor *dw, struct dt_tensor *db,
				struct dt_tensor *dx);
	/* Layer normalization (issue 14, resnet): core/cpu/layernorm.c, core/cuda/layernorm.cu. */
	struct dt_plan *(*plan_layernorm)(struct dt_device dev, int channels, int64_t rows, float epsilon,
					  int max_batch);
	void (*layernorm_forward)(struct dt_plan *p, const struct dt_tensor *x, const struct dt_tensor *gamma,
				  const struct dt_tensor *beta, struct dt_tensor *y);
	void (*layernorm_backward)(struct dt_plan *p, const struct dt_tensor *x, const struct dt_tensor *dy,
				   const struct dt_tensor *gamma, struct dt_tensor *dgamma, struct dt_tensor *dbeta,
				   struct dt_tensor *dx);
	/* recurrent layers (rnn) */
	struct dt_plan *(*plan_rnn)(struct dt_device dev, const struct dt_rnn_geom *g, int max_batch);
	void (*rnn_forward)(struct dt_plan *p, int training, const struct dt_tensor *x, const struct dt_tensor *w,
			    const struct dt_tensor *u, const struct dt_tensor *b, struct dt_tensor *y);
	void (*rnn_backward)(struct dt_plan *p, const struct dt_tensor *x, const struct dt_tensor *w,
			     const struct dt_tensor *u, const struct dt_tensor *b, const struct dt_tensor *y,
			     const struct dt_tensor *dy, struct dt_tensor *dw, struct dt_tensor *du,
			     struct dt_tensor *db, struct dt_tensor *dx);
	void (*rnn_merge)(enum dt_rnn_merge mode, int steps, const struct dt_tensor *yf, const struct dt_tensor *yb,
			  struct dt_tensor *y);
	void (*rnn_merge_backward)(enum dt_rnn_merge mode, int steps, const struct dt_tensor *dy,
				   const struct dt_tensor *yf, const struct dt_tensor *yb, struct dt_tensor *dyf,
				   struct dt_tensor *dyb);
};

/* The head of every backend's plan: which backend made it. */
struct dt_plan {
	const struct dt_backend *backend;
};

extern const struct dt_backend dt_cpu_backend;

#endif
