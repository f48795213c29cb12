/*
 * The objective: a loss, how the model's output feeds it, and the accuracy
 * metric Keras would pick for it ("accuracy" means sparse categorical accuracy
 * for sparse_categorical_crossentropy, binary accuracy for
 * binary_crossentropy or a single output, categorical accuracy otherwise).
 *
 * Whether a model is a regression model is decided here, by its loss alone
 * (dt_loss_is_regression): its outputs are values, not class scores, so
 * predict prints them and fit and evaluate report MAE and RMSE.
 *
 * YAML: `loss: huber` or `loss: {huber: {delta: 2.0}}`, the arguments as
 * Keras 3 names them (dt_loss_config_read).
 *
 * When the model ends in softmax (or sigmoid) and the loss is the matching
 * crossentropy on probabilities, the gradient is taken w.r.t. the logits
 * (p - y), as TensorFlow does: the last layer is told to skip its
 * activation's backward (dt_layer.fused_act).
 */
#ifndef DT_LOSS_H
#define DT_LOSS_H

#include "core/model/model.h"

struct dt_objective {
	enum dt_loss loss;
	struct dt_loss_args args; /* the loss's arguments (delta, gamma, alpha, label_smoothing, ...) */
	enum dt_loss_input input;
	enum dt_accuracy accuracy;
	float threshold;       /* binary accuracy: 0.5 on probabilities, 0 on logits */
	int per_sample;        /* accuracy counts per sample: 1, or C for binary */
	int outputs;           /* values per sample: the mean of MAE and RMSE is over N * outputs */
};

/*
 * Reads the `loss` key of the compile mapping: a name, or one name with its
 * arguments. Errors name the key or value (an argument the loss does not
 * take, one out of range). 0 or -1.
 */
int dt_loss_config_read(enum dt_loss *loss, struct dt_loss_args *args, const struct dt_node *compile);

/* The dtrain name of a Keras alias of a loss (mse: mean_squared_error), else name itself. */
const char *dt_loss_canonical(const char *name);

/*
 * 1 when loss is a regression loss (mean_squared_error, mean_absolute_error,
 * huber, log_cosh, poisson, cosine_similarity), 0 for a classification loss.
 */
int dt_loss_is_regression(enum dt_loss loss);

/*
 * 1 when a model of `outputs` outputs trained with loss is a multi-label
 * classifier: binary_crossentropy or binary_focal_crossentropy on more
 * than one output (sigmoid outputs against multi-hot labels, each output a
 * label of its own), 0 otherwise.
 */
int dt_loss_is_multi_label(enum dt_loss loss, int64_t outputs);

/*
 * Checks that labels of shape `label` (num_classes for class indices) fit the
 * model's output and the loss, and marks the model's last layer fused when it
 * pays. args are the loss's arguments (NULL: Keras' defaults). Errors are
 * printed naming `where` (the YAML position of the loss), such as
 * from_logits on a loss that is not a crossentropy.
 */
int dt_objective_init(struct dt_objective *o, enum dt_loss loss, const struct dt_loss_args *args, int from_logits,
		      struct dt_model *m, const struct dt_shape *label, int num_classes, const struct dt_node *where);

/*
 * Warns (at the last layer's activation in the model file) where the output
 * activation and the loss disagree as they almost never should: softmax over
 * one output; softmax or sigmoid under from_logits; a crossentropy on
 * probabilities over outputs without softmax (sigmoid for the binary ones).
 * Keras accepts these (it warns of the second); they train badly or not at all.
 */
void dt_objective_warn(const struct dt_objective *o, int from_logits, const struct dt_model *m);

/*
 * Loss sum over the batch and, when dpred is not NULL, its gradient scaled by
 * grad_scale (1/global batch) written to dpred.
 */
double dt_objective_loss(const struct dt_objective *o, const struct dt_tensor *pred,
			 const struct dt_tensor *target, struct dt_tensor *dpred, float grad_scale);
/*
 * dt_objective_loss with per-class weights (see dt_op_loss_weighted) and
 * per-row weights (Keras' sample_weight: one float per row of pred, on its
 * device); either may be NULL. A row's loss and gradient are multiplied by
 * both.
 */
double dt_objective_loss_weighted(const struct dt_objective *o, const struct dt_tensor *pred,
				  const struct dt_tensor *target, const struct dt_tensor *class_weight,
				  const struct dt_tensor *sample_weight, struct dt_tensor *dpred, float grad_scale);
/*
 * The classes class weights index for model m: its output width, or 2 for a
 * single output (binary).
 */
int dt_objective_num_classes(const struct dt_model *m);
/*
 * Reads Keras' class_weight, a mapping `{0: 1.0, 3: 2.5}` of class index to
 * weight, into w (k floats, 1 for classes it leaves out). Errors name the
 * key or value (an index outside [0, k), a negative weight). 0 or -1.
 */
int dt_class_weight_read(const struct dt_node *map, int k, float *w);

/* Correct predictions in the batch (elements for binary accuracy). */
int64_t dt_objective_correct(const struct dt_objective *o, const struct dt_tensor *pred,
			     const struct dt_tensor *target);

#endif
