/*
 * The types of the backend ops: activations, losses, accuracies, optimizer
 * steps and the geometry of convolution and pooling plans. Both sides of the
 * backend interface use them: core/ops.h (what layers call) and
 * core/backend.h (what each backend fills), so neither includes the other.
 */
#ifndef DT_OP_TYPES_H
#define DT_OP_TYPES_H

#include <stdint.h>

/*
 * compile.precision: the arithmetic of matrix products and convolutions.
 * fp32 everywhere; tf32 on GPUs only; bf16 on GPUs and on CPUs whose oneDNN
 * ISA has bfloat16 instructions (dt_ops_set_cpu_precision, core/ops.h).
 */
enum dt_precision { DT_PRECISION_FP32, DT_PRECISION_TF32, DT_PRECISION_BF16, DT_PRECISION_COUNT };
extern const char *const dt_precision_names[]; /* "fp32", "tf32", "bf16", NULL (core/ops.c) */

/* Keras' activations with Keras' constants. */
enum dt_activation {
	DT_ACT_LINEAR,
	DT_ACT_RELU,
	DT_ACT_SIGMOID,
	DT_ACT_TANH,
	DT_ACT_SOFTMAX,    /* over the last dimension */
	DT_ACT_LEAKY_RELU, /* x > 0 ? x : 0.2 x (Keras' negative_slope) */
	DT_ACT_ELU,        /* x > 0 ? x : exp(x) - 1 */
	DT_ACT_GELU,       /* x * Phi(x), the exact form (Keras' approximate=False) */
	DT_ACT_SWISH,      /* x * sigmoid(x) */
	DT_ACT_SOFTPLUS,   /* log(1 + exp(x)) */
	DT_ACT_COUNT
};

enum dt_loss {
	DT_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,
	DT_LOSS_CATEGORICAL_CROSSENTROPY,
	DT_LOSS_BINARY_CROSSENTROPY,
	DT_LOSS_MEAN_SQUARED_ERROR,
	DT_LOSS_MEAN_ABSOLUTE_ERROR,
	DT_LOSS_HUBER,
	DT_LOSS_LOG_COSH,
	DT_LOSS_KL_DIVERGENCE,
	DT_LOSS_POISSON,
	DT_LOSS_COSINE_SIMILARITY,
	DT_LOSS_HINGE,
	DT_LOSS_SQUARED_HINGE,
	DT_LOSS_CATEGORICAL_HINGE,
	DT_LOSS_BINARY_FOCAL_CROSSENTROPY,
	DT_LOSS_CATEGORICAL_FOCAL_CROSSENTROPY,
	DT_LOSS_COUNT
};

/*
 * A loss's arguments, with Keras 3's names and defaults (dt_loss_args_default
 * in core/ops.h). Each loss reads only its own; the others keep their
 * defaults.
 */
struct dt_loss_args {
	float delta;               /* huber: 1.0 */
	float gamma;               /* the focal losses: 2.0 */
	float alpha;               /* the focal losses: 0.25 */
	int apply_class_balancing; /* binary_focal_crossentropy: 0 */
	float label_smoothing;     /* categorical, binary and the focal crossentropies: 0 */
	/*
	 * Keras' sample_weight: one weight per row of the prediction, on its
	 * device, multiplied with the row's class weight; NULL: every row weighs 1.
	 */
	const float *sample_weight;
};

/* How the prediction handed to dt_op_loss relates to the loss. */
enum dt_loss_input {
	DT_LOSS_PROBS,  /* probabilities (from_logits: false); gradient w.r.t. them */
	DT_LOSS_LOGITS, /* logits (from_logits: true); gradient w.r.t. them */
	DT_LOSS_FUSED,  /* probabilities from the model's own softmax/sigmoid; the gradient
			   is returned w.r.t. the logits before it (p - y), so the layer
			   skips its activation's backward: stable and cheaper */
};

enum dt_accuracy {
	DT_ACC_SPARSE,      /* argmax(pred) == target class */
	DT_ACC_CATEGORICAL, /* argmax(pred) == argmax(target) */
	DT_ACC_BINARY,      /* (pred > threshold) == (target > 0.5), per element */
	DT_ACC_MULTI_LABEL, /* DT_ACC_BINARY per element; its confusion counts are per column (multi-label) */
};

enum dt_opt_kind {
	DT_OPT_SGD,
	DT_OPT_ADAM,
	DT_OPT_ADAMW,
	DT_OPT_RMSPROP,
	DT_OPT_ADAGRAD,
	DT_OPT_ADADELTA,
	DT_OPT_ADAMAX,
	DT_OPT_NADAM,
	DT_OPT_LION,
	DT_OPT_COUNT
};

/*
 * The most slots (flat state buffers) an optimizer keeps: the update's (adam
 * with amsgrad: m, v and vhat) and, in the last one, the moving average of
 * the weights (use_ema).
 */
#define DT_OPT_MAX_SLOTS 4
#define DT_OPT_EMA_SLOT 3

/*
 * One update's hyper-parameters, resolved by the optimizer for step t. The
 * values a coefficient is computed from (1 - rho, 1 - beta, 1 - beta^t,
 * 1 - lr * weight_decay) stay doubles as configured: core/rows.h computes
 * the coefficients in double and rounds them to float once, as Keras and
 * PyTorch do.
 */
struct dt_opt_step {
	enum dt_opt_kind kind;
	float lr;
	float momentum;          /* sgd, rmsprop */
	double rho;              /* rmsprop, adadelta */
	int nesterov;            /* sgd */
	double beta_1, beta_2;   /* adam, adamw, adamax, nadam, lion */
	float epsilon;
	int64_t t;               /* 1-based step number (adam bias correction) */
	double weight_decay;     /* decoupled: w *= 1 - lr * weight_decay before the update, as Keras 3 */
	float grad_scale;        /* gradients are multiplied by this first (clipnorm, global_clipnorm) */
	float clipvalue;         /* then clipped to [-clipvalue, clipvalue] when > 0 */
	int amsgrad;             /* adam, adamw: the third slot keeps the largest v */
	double nadam_product;    /* nadam: the product of the momentum cache u_1 ... u_t */
};

/*
 * The most positions a kernel dilated by dil covers in one dimension,
 * (k - 1) * dil + 1, that the convolution plans take: the same bound as
 * kernel_size itself. Past it the plans' int sizes and paddings near 2^31,
 * and oneDNN spends minutes a step on the padding (a 20,000-tap kernel
 * dilated by 65,536 over a 4x4 image: over 60 s).
 */
#define DT_CONV_MAX_SPAN 65536

/*
 * How a backend holds an image activation (N, H, W, C) in memory. NHWC is
 * dtrain's own, the one every layer and backend reads. BLOCKED, where a
 * backend has it (dt_op_channel_block), cuts the channels into blocks of B
 * (16 on AVX-512, 8 on AVX2) and stores (N, C/B, H, W, B): oneDNN's
 * nChw16c and nChw8c, the layout its convolutions run fastest in. The model
 * keeps an activation BLOCKED only between two layers that both take it
 * (dt_layer_type.layouts, dt_model_alloc): a run of convolutions and pooling.
 */
enum dt_layout { DT_LAYOUT_NHWC, DT_LAYOUT_BLOCKED };
/* A bit for the pair of layouts (x, y) a layer or plan takes: DT_LAYOUT_PAIR(NHWC, NHWC) always. */
#define DT_LAYOUT_PAIR(x, y) (1u << ((x) * 2 + (y)))

struct dt_conv_geom {
	int in_h, in_w, in_c;          /* one input sample */
	int out_h, out_w, out_c;       /* one output sample */
	int kh, kw;
	int stride_h, stride_w;
	int dil_h, dil_w;              /* 1: no dilation (Keras' dilation_rate) */
	int pad_top, pad_left, pad_bottom, pad_right;
	/*
	 * cnnparts: 0 or 1, an ordinary convolution; G > 1 splits the input and
	 * output channels into G groups (in_c and out_c multiples of G), output
	 * channel o seeing input channels [g * in_c/G, (g+1) * in_c/G) of its
	 * group g = o / (out_c/G). The kernel is then (kh, kw, in_c/G, out_c), as
	 * Keras' Conv2D with groups; a depthwise convolution (G = in_c, out_c =
	 * in_c * multiplier) has the memory of Keras' (kh, kw, in_c, multiplier).
	 */
	int groups;
	/*
	 * The activation the forward applies to its output itself, so that a
	 * backend may fuse it (the CPU's: a oneDNN post-op): DT_ACT_LINEAR (none)
	 * or DT_ACT_RELU. Backward's dy is still the gradient before it.
	 */
	enum dt_activation act;
	/* The layouts of x (and dx) and of y (and dy); block: the channels of a BLOCKED block (0 when neither is). */
	enum dt_layout x_layout, y_layout;
	int block;
};

/* The groups of g: 1 for an ordinary convolution (groups 0 or 1). */
static inline int dt_conv_groups(const struct dt_conv_geom *g) { return g->groups > 1 ? g->groups : 1; }
/* Floats of g's kernel: kh * kw * in_c/groups * out_c. */
static inline int64_t dt_conv_kernel_count(const struct dt_conv_geom *g)
{
	return (int64_t)g->kh * g->kw * (g->in_c / dt_conv_groups(g)) * g->out_c;
}

enum dt_pool { DT_POOL_MAX, DT_POOL_AVG };
/*
 * Max pooling keeps, for backward, which window position won, in 16 bits on
 * both backends: its windows hold at most this many positions (kh * kw).
 * Average pooling keeps nothing and takes any window.
 */
#define DT_POOL_MAX_WINDOW 65536
struct dt_pool_geom {
	enum dt_pool kind;
	int in_h, in_w, c;
	int out_h, out_w;
	int kh, kw;
	int stride_h, stride_w;
	int pad_top, pad_left, pad_bottom, pad_right; /* average pooling leaves padding out of the mean */
	enum dt_layout x_layout, y_layout; /* as dt_conv_geom's */
	int block;
	/*
	 * Max pooling of relu's output, a window of fewer than DT_POOL_MAX_WINDOW
	 * positions: where a window's max is not positive its position is
	 * DT_POOL_NONE and no gradient passes, which is relu's derivative there,
	 * so the layer leaves dy as it is (dt_layer.act_before).
	 */
	int after_relu;
};
#define DT_POOL_NONE 0xFFFF

/* The size of the square GEMMs dt_ops_peak_gflops times. */
#define DT_PEAK_GEMM_SIZE 2048

/* ---- recurrent layers (rnn) ---- */

/*
 * The recurrent cells behind SimpleRNN, LSTM and GRU. Gates and their order
 * are Keras': SimpleRNN 1; LSTM 4 (i, f, c, o); GRU 3 (z, r, h), reset_after
 * applying the reset gate after the recurrent product (oneDNN's
 * linear-before-reset GRU, cuDNN's GRU), else before it.
 */
enum dt_rnn_cell { DT_RNN_SIMPLE, DT_RNN_LSTM, DT_RNN_GRU, DT_RNN_GRU_RESET_AFTER };
struct dt_rnn_geom {
	enum dt_rnn_cell cell;
	int steps, in, units;
	enum dt_activation act;  /* SimpleRNN's: DT_ACT_TANH or DT_ACT_RELU; the others' are fixed */
	int use_bias;
	int go_backwards;        /* the sequence is read from its last step to its first */
	int return_sequences;    /* y is every step's h (steps, units), else the last h (units) */
};

/* How Bidirectional joins its two directions: concatenated on the last axis, summed, multiplied, averaged. */
enum dt_rnn_merge { DT_RNN_MERGE_CONCAT, DT_RNN_MERGE_SUM, DT_RNN_MERGE_MUL, DT_RNN_MERGE_AVE };

/* Backend state of one convolution, pooling or batch-norm layer (core/ops.h). */
struct dt_plan;

/* ---- cnnparts: up_sampling2d's interpolation (dt_op_upsample2d) ---- */
enum dt_interp {
	DT_INTERP_NEAREST,  /* each value repeated size times (Keras' ops.repeat) */
	DT_INTERP_BILINEAR, /* half-pixel centres, clamped at the edges (tf.image.resize, antialias off) */
};

#endif
