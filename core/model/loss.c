#include <string.h>

#include "core/error.h"
#include "core/model/loss.h"

/* The arguments each loss takes, as Keras names them; NULL: none. */
static const char *const *loss_keys(enum dt_loss loss)
{
	static const char *const smoothing_keys[] = { "label_smoothing", NULL };
	static const char *const huber_keys[] = { "delta", NULL };
	static const char *const binary_focal_keys[] = { "apply_class_balancing", "alpha", "gamma", "label_smoothing", NULL };
	static const char *const categorical_focal_keys[] = { "alpha", "gamma", "label_smoothing", NULL };
	switch (loss) {
	case DT_LOSS_CATEGORICAL_CROSSENTROPY:
	case DT_LOSS_BINARY_CROSSENTROPY:
		return smoothing_keys;
	case DT_LOSS_HUBER:
		return huber_keys;
	case DT_LOSS_BINARY_FOCAL_CROSSENTROPY:
		return binary_focal_keys;
	case DT_LOSS_CATEGORICAL_FOCAL_CROSSENTROPY:
		return categorical_focal_keys;
	default:
		return NULL;
	}
}

/*
 * Keras 3's short names of its losses (keras.losses' ALL_OBJECTS_DICT), as
 * model files copied from Keras spell them. A NULL name: a loss dtrain does
 * not have, and what to say instead of "unknown loss".
 */
static const struct { const char *alias, *name, *missing; } keras_aliases[] = {
	{ "mse", "mean_squared_error", NULL },
	{ "mae", "mean_absolute_error", NULL },
	{ "bce", "binary_crossentropy", NULL },
	{ "kld", "kl_divergence", NULL },
	{ "mape", NULL, "Keras' mean_absolute_percentage_error, which dtrain has as a metric, not as a loss" },
	{ "msle", NULL, "Keras' mean_squared_logarithmic_error, which dtrain does not have" },
};

/* The index of name in keras_aliases, or -1. */
static int alias_index(const char *name)
{
	for (int i = 0; i < (int)(sizeof(keras_aliases) / sizeof(keras_aliases[0])); i++)
		if (!strcmp(keras_aliases[i].alias, name))
			return i;
	return -1;
}

const char *dt_loss_canonical(const char *name)
{
	int i = alias_index(name);
	return i >= 0 && keras_aliases[i].name ? keras_aliases[i].name : name;
}

/*
 * The loss called name, or a Keras alias of it, into *kind: 0; 1 when there
 * is none (no error printed: the caller words it); -1 after an error at `at`
 * for a Keras loss that dtrain does not have.
 */
static int loss_by_name(const struct dt_node *at, const char *name, int *kind)
{
	int i = alias_index(name);
	if (i >= 0 && !keras_aliases[i].name)
		return dt_node_error(at, "unknown loss '%s': %s (dtrain.yaml(5) lists the losses)", name,
				     keras_aliases[i].missing);
	*kind = dt_name_index(dt_loss_names, dt_loss_canonical(name));
	return *kind >= 0 ? 0 : 1;
}

int dt_loss_config_read(enum dt_loss *loss, struct dt_loss_args *a, const struct dt_node *compile)
{
	const struct dt_node *n = dt_node_get(compile, "loss"), *args = NULL;
	const char *const *keys;
	double delta, gamma, alpha, ls;
	int kind, rc;

	*a = dt_loss_args_default();
	if (!n || n->kind == DT_NODE_SCALAR) {
		/* dt_cfg_enum stores the default for `dtrain config`, and its error lists the names. */
		rc = n ? loss_by_name(n, n->value, &kind) : 1;
		if (rc < 0 || (rc > 0 && dt_cfg_enum(compile, "loss", dt_loss_names, 0, &kind) < 0))
			return -1;
		*loss = (enum dt_loss)kind;
		return 0;
	}
	if (n->kind != DT_NODE_MAP || n->n != 1)
		return dt_node_error(n, "'loss' is a name ('huber') or one key with arguments ('{huber: {delta: 2.0}}')");
	rc = loss_by_name(n->key_nodes[0], n->keys[0], &kind);
	if (rc < 0)
		return -1;
	if (rc > 0) {
		const char *close = dt_did_you_mean_config(n->keys[0], dt_loss_names);
		if (close)
			return dt_node_error(n->key_nodes[0], "unknown loss '%s'; did you mean '%s'?", n->keys[0], close);
		return dt_node_error(n->key_nodes[0], "unknown loss '%s' (dtrain.yaml(5) lists the losses)", n->keys[0]);
	}
	*loss = (enum dt_loss)kind;
	args = n->items[0];
	if (args->kind == DT_NODE_SCALAR && !args->value[0])
		return 0;
	if (dt_node_expect(args, DT_NODE_MAP, n->keys[0]) < 0)
		return -1;
	/* Keras' loss classes take from_logits; dtrain reads it once for the model, beside the loss. */
	for (int i = 0; i < args->n; i++)
		if (!strcmp(args->keys[i], "from_logits"))
			return dt_node_error(args->key_nodes[i], "'%s' takes no argument 'from_logits': it is "
					     "compile.from_logits, a key beside compile.loss", n->keys[0]);
	keys = loss_keys(*loss);
	if (!keys && args->n > 0)
		return dt_node_error(args->key_nodes[0], "'%s' takes no arguments, got '%s'", n->keys[0], args->keys[0]);
	if (dt_cfg_check_keys(args, n->keys[0], keys ? keys : (const char *const[]){ NULL }) < 0)
		return -1;
	if (dt_cfg_float_range(args, "delta", a->delta, 0, 1e30, 1, &delta) < 0 ||
	    dt_cfg_float(args, "gamma", a->gamma, 0, 1e6, &gamma) < 0 ||
	    dt_cfg_float(args, "alpha", a->alpha, 0, 1, &alpha) < 0 ||
	    dt_cfg_float(args, "label_smoothing", 0, 0, 1, &ls) < 0 ||
	    dt_cfg_bool(args, "apply_class_balancing", 0, &a->apply_class_balancing) < 0)
		return -1;
	a->delta = (float)delta;
	a->gamma = (float)gamma;
	a->alpha = (float)alpha;
	a->label_smoothing = (float)ls;
	return 0;
}

/* 1 when the loss takes from_logits (Keras: the crossentropies). */
static int takes_logits(enum dt_loss loss)
{
	return loss == DT_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY || loss == DT_LOSS_CATEGORICAL_CROSSENTROPY ||
	       loss == DT_LOSS_BINARY_CROSSENTROPY || loss == DT_LOSS_BINARY_FOCAL_CROSSENTROPY ||
	       loss == DT_LOSS_CATEGORICAL_FOCAL_CROSSENTROPY;
}

int dt_objective_init(struct dt_objective *o, enum dt_loss loss, const struct dt_loss_args *args, int from_logits,
		      struct dt_model *m, const struct dt_shape *label, int num_classes, const struct dt_node *where)
{
	struct dt_layer *last = &m->layers[m->nlayers - 1];
	char out[64], lab[64];
	int64_t c = dt_shape_count(&m->output);

	o->loss = loss;
	o->args = args ? *args : dt_loss_args_default();
	if (from_logits && !takes_logits(loss))
		return dt_node_error(where, "'%s' does not take from_logits (the crossentropies do); drop 'from_logits'",
				     dt_loss_names[loss]);
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
	default:
		if (!dt_shape_equal(label, &m->output))
			return dt_node_error(where, "'%s' needs labels shaped like the output %s, but the data's labels are %s%s",
					     dt_loss_names[loss], out, lab,
					     num_classes && label->ndim == 1 && label->dim[0] == 1
						     ? " (class indices: 'data.one_hot: true' makes them one-hot rows)"
						     : "");
		o->accuracy = loss == DT_LOSS_BINARY_CROSSENTROPY || loss == DT_LOSS_BINARY_FOCAL_CROSSENTROPY || c == 1
				      ? DT_ACC_BINARY
				      : DT_ACC_CATEGORICAL;
		if (o->accuracy == DT_ACC_BINARY)
			o->per_sample = (int)c;
		break;
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

/*
 * The layer whose activation the model's outputs come out of: the last one,
 * or before it the last with parameters or an activation (past dropout,
 * flatten, reshape).
 */
static const struct dt_layer *output_layer(const struct dt_model *m)
{
	int i = m->nlayers - 1;
	while (i > 0 && m->layers[i].act == DT_ACT_LINEAR && m->layers[i].nparams == 0)
		i--;
	return &m->layers[i];
}

/* The place to fix l's activation: its `activation` value, else the layer's item. */
static const struct dt_node *activation_node(const struct dt_layer *l)
{
	const struct dt_node *item = l->node, *act;
	act = item && item->kind == DT_NODE_MAP && item->n == 1 ? dt_node_get(item->items[0], "activation") : NULL;
	return act ? act : item;
}

void dt_objective_warn(const struct dt_objective *o, int from_logits, const struct dt_model *m)
{
	const struct dt_layer *l = output_layer(m);
	const struct dt_node *at = activation_node(l);
	const char *loss = dt_loss_names[o->loss], *act = dt_activation_names[l->act], *want;
	int categorical = o->loss == DT_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY ||
			  o->loss == DT_LOSS_CATEGORICAL_CROSSENTROPY || o->loss == DT_LOSS_CATEGORICAL_FOCAL_CROSSENTROPY;
	int binary = o->loss == DT_LOSS_BINARY_CROSSENTROPY || o->loss == DT_LOSS_BINARY_FOCAL_CROSSENTROPY;

	if (l->act == DT_ACT_SOFTMAX && dt_shape_count(&l->out) == 1) {
		dt_node_warn(at, "softmax over the 1 output of layer '%s' is always 1, so the model cannot learn; "
			     "use 'activation: sigmoid' for one output", l->name);
		return;
	}
	if (from_logits && (categorical || binary) && (l->act == DT_ACT_SOFTMAX || l->act == DT_ACT_SIGMOID)) {
		dt_node_warn(at, "'%s' takes logits (compile.from_logits: true), but layer '%s' applies %s, so its "
			     "outputs are probabilities: drop the activation, or from_logits", loss, l->name, act);
		return;
	}
	if (from_logits || !(categorical || binary))
		return;
	want = categorical ? "softmax" : "sigmoid";
	if (l->act == DT_ACT_LINEAR)
		dt_node_warn(at, "'%s' reads the outputs of layer '%s' as probabilities, but it has no activation: "
			     "add 'activation: %s', or set 'compile.from_logits: true' if they are logits", loss, l->name,
			     want);
	else if (categorical && l->act != DT_ACT_SOFTMAX)
		dt_node_warn(at, "'%s' reads the outputs of layer '%s' as probabilities that sum to 1, but its "
			     "activation is %s: use 'activation: softmax'", loss, l->name, act);
	else if (binary && l->act != DT_ACT_SIGMOID && l->act != DT_ACT_SOFTMAX)
		dt_node_warn(at, "'%s' reads the outputs of layer '%s' as probabilities in [0, 1], but its "
			     "activation is %s: use 'activation: sigmoid'", loss, l->name, act);
}

double dt_objective_loss(const struct dt_objective *o, const struct dt_tensor *pred,
			 const struct dt_tensor *target, struct dt_tensor *dpred, float grad_scale)
{
	return dt_op_loss_args(o->loss, &o->args, o->input, pred, target, NULL, dpred, grad_scale);
}

double dt_objective_loss_weighted(const struct dt_objective *o, const struct dt_tensor *pred,
				  const struct dt_tensor *target, const struct dt_tensor *class_weight,
				  const struct dt_tensor *sample_weight, struct dt_tensor *dpred, float grad_scale)
{
	struct dt_loss_args a = o->args;
	if (sample_weight) {
		DT_ASSERT(dt_tensor_count(sample_weight) == dt_tensor_rows(pred));
		a.sample_weight = sample_weight->data;
	}
	return dt_op_loss_args(o->loss, &a, o->input, pred, target, class_weight, dpred, grad_scale);
}

/* The one place that says which losses are regression losses. */
int dt_loss_is_regression(enum dt_loss loss)
{
	return loss == DT_LOSS_MEAN_SQUARED_ERROR || loss == DT_LOSS_MEAN_ABSOLUTE_ERROR || loss == DT_LOSS_HUBER ||
	       loss == DT_LOSS_LOG_COSH || loss == DT_LOSS_POISSON || loss == DT_LOSS_COSINE_SIMILARITY;
}

int dt_loss_is_multi_label(enum dt_loss loss, int64_t outputs)
{
	return outputs > 1 && (loss == DT_LOSS_BINARY_CROSSENTROPY || loss == DT_LOSS_BINARY_FOCAL_CROSSENTROPY);
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
