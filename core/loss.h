/*
 * The objective: a loss, how the model's output feeds it, and the accuracy
 * metric Keras would pick for it ("accuracy" means sparse categorical accuracy
 * for sparse_categorical_crossentropy, binary accuracy for
 * binary_crossentropy or a single output, categorical accuracy otherwise).
 *
 * When the model ends in softmax (or sigmoid) and the loss is the matching
 * crossentropy on probabilities, the gradient is taken w.r.t. the logits
 * (p - y), as TensorFlow does: the last layer is told to skip its
 * activation's backward (dt_layer.fused_act).
 */
#ifndef DT_LOSS_H
#define DT_LOSS_H

#include "model.h"

struct dt_objective {
	enum dt_loss loss;
	enum dt_loss_input input;
	enum dt_accuracy accuracy;
	float threshold;       /* binary accuracy: 0.5 on probabilities, 0 on logits */
	int per_sample;        /* accuracy counts per sample: 1, or C for binary */
};

/*
 * Checks that labels of shape `label` (num_classes for class indices) fit the
 * model's output and the loss, and marks the model's last layer fused when it
 * pays. Errors are printed naming `where` (the YAML position of the loss).
 */
int dt_objective_init(struct dt_objective *o, enum dt_loss loss, int from_logits, struct dt_model *m,
		      const struct dt_shape *label, int num_classes, const struct dt_node *where);

/*
 * Loss sum over the batch and, when dpred is not NULL, its gradient scaled by
 * grad_scale (1/global batch) written to dpred.
 */
double dt_objective_loss(const struct dt_objective *o, const struct dt_tensor *pred,
			 const struct dt_tensor *target, struct dt_tensor *dpred, float grad_scale);
/* Correct predictions in the batch (elements for binary accuracy). */
int64_t dt_objective_correct(const struct dt_objective *o, const struct dt_tensor *pred,
			     const struct dt_tensor *target);

#endif
