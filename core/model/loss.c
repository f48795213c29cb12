#include "core/error.h"
#include "core/model/loss.h"

int dt_objective_init(struct dt_objective *o, enum dt_loss loss, int from_logits, struct dt_model *m,
		      const struct dt_shape *label, int num_classes, const struct dt_node *where)
{
	struct dt_layer *last = &m->layers[m->nlayers - 1];
	char out[64], lab[64];
	int64_t c = dt_shape_count(&m->output);

	o->loss = loss;
	o->input = from_logits ? DT_LOSS_LOGITS : DT_LOSS_PROBS;
	o->threshold = from_logits ? 0.0f : 0.5f;
	o->per_sample = 1;
	o->outputs = (int)c;
	dt_shape_format(&m->output, 1, out, sizeof(out));
	dt_shape_format(label, 1, lab, sizeof(lab));
	if (m->output.ndim != 1)
		return dt_node_error(where, "the model's output %s is not flat; end the model with a dense layer", out);

	switch (loss) {
	case DT_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY:
		if (label->ndim != 1 || label->dim[0] != 1)
			return dt_node_error(where, "'sparse_categorical_crossentropy' needs class-index labels, but the data's labels are %s; use 'categorical_crossentropy'", lab);
		if (c < 2)
			return dt_node_error(where, "'sparse_categorical_crossentropy' needs an output of 2 or more classes, the model outputs %s", out);
		if (num_classes > c)
			return dt_node_error(where, "the data has %d classes but the model outputs %s", num_classes, out);
		o->accuracy = DT_ACC_SPARSE;
		break;
	case DT_LOSS_CATEGORICAL_CROSSENTROPY:
		if (!dt_shape_equal(label, &m->output))
			return dt_node_error(where, "'categorical_crossentropy' needs one-hot labels %s like the output, but the data's labels are %s%s",
					     out, lab, num_classes ? " (one-hot vectors of the data's classes: give the model as many outputs or use 'sparse_categorical_crossentropy')" : "");
		o->accuracy = DT_ACC_CATEGORICAL;
		break;
	case DT_LOSS_BINARY_CROSSENTROPY:
	case DT_LOSS_MEAN_SQUARED_ERROR:
		if (!dt_shape_equal(label, &m->output))
			return dt_node_error(where, "'%s' needs labels shaped like the output %s, but the data's labels are %s",
					     dt_loss_names[loss], out, lab);
		o->accuracy = loss == DT_LOSS_BINARY_CROSSENTROPY || c == 1 ? DT_ACC_BINARY : DT_ACC_CATEGORICAL;
		if (o->accuracy == DT_ACC_BINARY)
			o->per_sample = (int)c;
		break;
	default:
		DT_BUG("loss %d", (int)loss);
	}

	last->fused_act = 0;
	if (!from_logits &&
	    ((last->act == DT_ACT_SOFTMAX && (loss == DT_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY ||
					       loss == DT_LOSS_CATEGORICAL_CROSSENTROPY)) ||
	     (last->act == DT_ACT_SIGMOID && loss == DT_LOSS_BINARY_CROSSENTROPY))) {
		last->fused_act = 1;
		o->input = DT_LOSS_FUSED;
	}
	return 0;
}

double dt_objective_loss(const struct dt_objective *o, const struct dt_tensor *pred,
			 const struct dt_tensor *target, struct dt_tensor *dpred, float grad_scale)
{
	return dt_op_loss(o->loss, o->input, pred, target, dpred, grad_scale);
}

double dt_objective_loss_weighted(const struct dt_objective *o, const struct dt_tensor *pred,
				  const struct dt_tensor *target, const struct dt_tensor *class_weight,
				  struct dt_tensor *dpred, float grad_scale)
{
	return dt_op_loss_weighted(o->loss, o->input, pred, target, class_weight, dpred, grad_scale);
}

/* The one place that says which losses are regression losses. */
int dt_loss_is_regression(enum dt_loss loss)
{
	return loss == DT_LOSS_MEAN_SQUARED_ERROR;
}

int dt_objective_num_classes(const struct dt_model *m)
{
	int64_t c = dt_shape_count(&m->output);
	return c > 1 ? (int)c : 2;
}

int dt_class_weight_read(const struct dt_node *map, int k, float *w)
{
	for (int i = 0; i < k; i++)
		w[i] = 1;
	if (!map)
		return 0;
	if (dt_node_expect(map, DT_NODE_MAP, "class_weight") < 0)
		return -1;
	for (int i = 0; i < map->n; i++) {
		const struct dt_node *key = map->key_nodes[i];
		int64_t cls;
		double v;
		if (dt_node_int(key, INT64_MIN, INT64_MAX, &cls) < 0)
			return -1;
		if (cls < 0 || cls >= k)
			return dt_node_error(key, "class %lld is not one of the model's %d classes (0 to %d)",
					     (long long)cls, k, k - 1);
		if (dt_node_float(map->items[i], 0, 1e30, &v) < 0)
			return -1;
		w[cls] = (float)v;
	}
	return 0;
}

int64_t dt_objective_correct(const struct dt_objective *o, const struct dt_tensor *pred,
			     const struct dt_tensor *target)
{
	return dt_op_count_correct(o->accuracy, pred, target, o->threshold);
}
