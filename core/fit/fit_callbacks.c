#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/error.h"
#include "core/fit/fit_callbacks.h"
#include "core/fit/progress.h"
#include "core/checkpoint/checkpoint.h"
#include "core/checkpoint/snapshot.h"

/* The one table of callback names fit.callbacks takes. */
static const char *const names[] = { "early_stopping", "reduce_lr_on_plateau", "terminate_on_nan", "csv_logger",
				     "model_checkpoint", "tensorboard", NULL };
enum { CB_EARLY_STOPPING, CB_REDUCE_LR, CB_TERMINATE_ON_NAN, CB_CSV_LOGGER, CB_MODEL_CHECKPOINT, CB_TENSORBOARD };

static int read_early_stopping(struct dt_early_stopping_config *e, const struct dt_node *args)
{
	static const char *const early_stopping_keys[] = { "monitor", "min_delta", "patience", "mode", "baseline",
							   "restore_best_weights", "start_from_epoch", NULL };
	if (dt_cfg_check_keys(args, "early_stopping", early_stopping_keys) < 0 ||
	    dt_monitor_read(args, "val_loss", &e->monitor, &e->mode) < 0 ||
	    dt_cfg_float(args, "min_delta", 0, -1e30, 1e30, &e->min_delta) < 0 ||
	    dt_cfg_int(args, "patience", 0, 0, INT32_MAX, &e->patience) < 0 ||
	    (e->has_baseline = dt_cfg_float(args, "baseline", 0, -1e30, 1e30, &e->baseline)) < 0 ||
	    dt_cfg_bool(args, "restore_best_weights", 0, &e->restore_best_weights) < 0 ||
	    dt_cfg_int(args, "start_from_epoch", 0, 0, INT32_MAX, &e->start_from_epoch) < 0)
		return -1;
	dt_cfg_no_default(args, "baseline"); /* absent: no baseline */
	return 0;
}

static int read_reduce_lr(struct dt_reduce_lr_config *p, const struct dt_node *args)
{
	static const char *const reduce_lr_on_plateau_keys[] = { "monitor", "factor", "patience", "mode", "min_delta",
								 "cooldown", "min_lr", NULL };
	if (dt_cfg_check_keys(args, "reduce_lr_on_plateau", reduce_lr_on_plateau_keys) < 0 ||
	    dt_monitor_read(args, "val_loss", &p->monitor, &p->mode) < 0 ||
	    dt_cfg_float_range(args, "factor", 0.1, 0, 1, DT_OPEN_MAX, &p->factor) < 0 ||
	    dt_cfg_int(args, "patience", 10, 0, INT32_MAX, &p->patience) < 0 ||
	    dt_cfg_float(args, "min_delta", 1e-4, -1e30, 1e30, &p->min_delta) < 0 ||
	    dt_cfg_int(args, "cooldown", 0, 0, INT32_MAX, &p->cooldown) < 0 ||
	    dt_cfg_float(args, "min_lr", 0, 0, 1e6, &p->min_lr) < 0)
		return -1;
	return 0;
}

static int read_csv_logger(struct dt_csv_logger_config *c, const struct dt_node *args)
{
	static const char *const csv_logger_keys[] = { "filename", "separator", "append", NULL };
	if (dt_cfg_check_keys(args, "csv_logger", csv_logger_keys) < 0 ||
	    dt_cfg_string(args, "filename", "history.csv", &c->filename) < 0 ||
	    dt_cfg_string(args, "separator", ",", &c->separator) < 0 || dt_cfg_bool(args, "append", 0, &c->append) < 0)
		return -1;
	if (!c->filename[0])
		return dt_node_error(dt_node_get(args, "filename"), "'filename' is empty");
	if (!c->separator[0] || strlen(c->separator) > 8 || strpbrk(c->separator, "\"\r\n"))
		return dt_node_error(dt_node_get(args, "separator"), "'separator' must be 1 to 8 characters, no quote or newline");
	return 0;
}

/* update_freq: 'epoch', 'batch' (1) or a number of batches. */
static int read_tensorboard(struct dt_tensorboard_config *c, const struct dt_node *args)
{
	static const char *const tensorboard_keys[] = { "log_dir", "update_freq", NULL };
	const struct dt_node *f = dt_node_get(args, "update_freq");
	if (dt_cfg_check_keys(args, "tensorboard", tensorboard_keys) < 0 ||
	    dt_cfg_string(args, "log_dir", "logs", &c->log_dir) < 0)
		return -1;
	if (!c->log_dir[0])
		return dt_node_error(dt_node_get(args, "log_dir"), "'log_dir' is empty");
	c->update_freq = 0;
	if (!f || (f->kind == DT_NODE_SCALAR && !strcmp(f->value, "epoch")))
		return 0;
	if (f->kind == DT_NODE_SCALAR && !strcmp(f->value, "batch")) {
		c->update_freq = 1;
		return 0;
	}
	if (f->kind == DT_NODE_SCALAR) {
		char *end;
		long long v = strtoll(f->value, &end, 10);
		if (!*end && end != f->value && v >= 1) {
			c->update_freq = v;
			return 0;
		}
	}
	return dt_node_error(f, "'update_freq' must be 'epoch', 'batch' or a number of batches (1 or more), not '%s'",
			     f->kind == DT_NODE_SCALAR ? f->value : "a collection");
}

int dt_callbacks_config_read(struct dt_callbacks_config *c, const struct dt_node *list)
{
	memset(c, 0, sizeof(*c));
	if (!list)
		return 0;
	if (dt_node_expect(list, DT_NODE_SEQ, "callbacks") < 0)
		return -1;
	for (int i = 0; i < list->n; i++) {
		const struct dt_node *it = list->items[i], *at = it, *args = NULL;
		const char *name;
		int k, *seen, rc = 0;
		if (it->kind == DT_NODE_SCALAR) {
			name = it->value;
		} else if (it->kind == DT_NODE_MAP && it->n == 1) {
			name = it->keys[0];
			at = it->key_nodes[0];
			args = it->items[0];
			if (args->kind == DT_NODE_SCALAR && !args->value[0])
				args = NULL;
		} else {
			return dt_node_error(it, "a callback is a name ('terminate_on_nan') or one name with its arguments "
					     "('early_stopping: {patience: 3}')");
		}
		for (k = 0; names[k]; k++)
			if (!strcmp(names[k], name))
				break;
		if (!names[k]) {
			const char *close = dt_did_you_mean_config(name, names);
			if (close)
				return dt_node_error(at, "unknown callback '%s'; did you mean '%s'?", name, close);
			return dt_node_error(at, "unknown callback '%s' (expected one of: early_stopping, reduce_lr_on_plateau, "
					     "terminate_on_nan, csv_logger, model_checkpoint, tensorboard)", name);
		}
		if (k == CB_MODEL_CHECKPOINT) {
			c->model_checkpoint++;
			continue;
		}
		seen = k == CB_EARLY_STOPPING ? &c->early_stopping
		     : k == CB_REDUCE_LR ? &c->reduce_lr_on_plateau
		     : k == CB_TERMINATE_ON_NAN ? &c->terminate_on_nan
		     : k == CB_CSV_LOGGER ? &c->csv_logger : &c->tensorboard;
		if (*seen)
			return dt_node_error(at, "callback '%s' is listed twice", name);
		*seen = 1;
		if (args && dt_node_expect(args, DT_NODE_MAP, name) < 0)
			return -1;
		switch (k) {
		case CB_EARLY_STOPPING:
			rc = read_early_stopping(&c->early, args);
			c->early.where = at;
			break;
		case CB_REDUCE_LR:
			rc = read_reduce_lr(&c->plateau, args);
			c->plateau.where = at;
			break;
		case CB_TERMINATE_ON_NAN:
			if (args && args->n)
				return dt_node_error(args, "'terminate_on_nan' takes no arguments");
			break;
		case CB_CSV_LOGGER:
			rc = read_csv_logger(&c->csv, args);
			c->csv.where = at;
			break;
		case CB_TENSORBOARD:
			rc = read_tensorboard(&c->tensorboard_cfg, args);
			c->tensorboard_cfg.where = at;
			break;
		}
		if (rc < 0)
			return -1;
	}
	return 0;
}

int dt_callbacks_config_check(const struct dt_callbacks_config *c, int has_accuracy, int has_errors, int has_val,
			      const struct dt_metric_set *metrics)
{
	if (c->early_stopping &&
	    dt_monitor_check(c->early.where, "early_stopping", c->early.monitor, has_accuracy, has_errors, has_val,
			     metrics) < 0)
		return -1;
	if (c->reduce_lr_on_plateau &&
	    dt_monitor_check(c->plateau.where, "reduce_lr_on_plateau", c->plateau.monitor, has_accuracy, has_errors,
			     has_val, metrics) < 0)
		return -1;
	return 0;
}

/* State values: a finite number, or null for the initial +-infinity. */
static void add_value(cJSON *o, const char *key, double v)
{
	if (isfinite(v))
		cJSON_AddNumberToObject(o, key, v);
	else
		cJSON_AddNullToObject(o, key);
}

static int get_value(const cJSON *o, const char *key, double inf, double *v)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
	if (cJSON_IsNull(it)) {
		*v = inf;
		return 0;
	}
	if (!cJSON_IsNumber(it))
		return -1;
	*v = it->valuedouble;
	return 0;
}

static int get_count(const cJSON *o, const char *key, int64_t *v)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble != floor(it->valuedouble))
		return -1;
	*v = (int64_t)it->valuedouble;
	return 0;
}

static char *print_state(cJSON *o)
{
	char *s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return s;
}

/* ---- early_stopping ---- */

static int improves(int greater, double a, double b) { return greater ? a > b : a < b; }

int dt_early_stopping_decide(struct dt_early_stopping *e, int64_t epoch, double current)
{
	if (isnan(current) || epoch < e->cfg.start_from_epoch)
		return 0;
	e->wait++;
	if (improves(e->greater, current - e->min_delta, e->best)) {
		e->best = current;
		e->best_epoch = epoch;
		/* Only a value past the baseline as well restarts the wait. */
		if (!e->cfg.has_baseline || improves(e->greater, current - e->min_delta, e->cfg.baseline))
			e->wait = 0;
		return 2;
	}
	if (e->wait >= e->cfg.patience && epoch > 0) {
		e->stopped_epoch = epoch;
		return 1;
	}
	return 0;
}

static struct dt_tensor all_params(const struct dt_model *m)
{
	return dt_tensor_flat(m->params, m->dev, m->nparams);
}

static int keep_weights(struct dt_early_stopping *e, const struct dt_trainer *t)
{
	struct dt_tensor w = all_params(&t->models[0]);
	dt_op_to_host(&w, e->best_weights);
	e->has_best_weights = 1;
	if (e->file[0]) {
		struct dt_ckpt_meta meta[4 + DT_MAX_EXTRA_META] = { { "format", "dtrain" }, { "dtrain_version", DT_VERSION },
								    { "content", "early_stopping best weights" } };
		int n = 3;
		if (e->config_json)
			meta[n++] = (struct dt_ckpt_meta){ "config", e->config_json };
		for (int i = 0; i < e->nmeta; i++)
			meta[n++] = e->meta[i];
		return dt_snapshot_save(e->file, &t->models[0], NULL, meta, n);
	}
	return 0;
}

/* Reads the best weights from a file through replica 0, whose own weights stay as they are. */
static int load_weights(struct dt_early_stopping *e, struct dt_trainer *t, const char *path)
{
	struct dt_model *m = &t->models[0];
	struct dt_tensor w = all_params(m);
	float *now = dt_malloc((size_t)m->nparams * sizeof(float));
	struct dt_ckpt *c = dt_checkpoint_load(path);
	int rc = -1;
	dt_op_to_host(&w, now);
	if (c && dt_snapshot_load(c, m, NULL) == 0) {
		dt_op_to_host(&w, e->best_weights);
		e->has_best_weights = 1;
		rc = 0;
	}
	dt_op_from_host(&w, now);
	dt_checkpoint_free(c);
	free(now);
	return rc;
}

static int early_epoch_end(struct dt_callback *cb, struct dt_trainer *t, const struct dt_logs *logs)
{
	struct dt_early_stopping *e = cb->priv;
	double current = dt_logs_get(logs, e->cfg.monitor);
	int64_t epoch = logs->epoch;
	int rc;
	/* Keras: before the first judged epoch, its weights are the best so far. */
	if (e->best_weights && !e->has_best_weights && !isnan(current) && epoch >= e->cfg.start_from_epoch) {
		if (keep_weights(e, t) < 0)
			return -1;
		e->best_epoch = epoch;
	}
	rc = dt_early_stopping_decide(e, epoch, current);
	if (rc == 2 && e->best_weights && keep_weights(e, t) < 0)
		return -1;
	if (rc == 1 && e->out) {
		fprintf(e->out, "Epoch %lld: early stopping (%s did not improve for %lld epoch%s)\n", (long long)epoch + 1,
			e->cfg.monitor, (long long)e->wait, e->wait == 1 ? "" : "s");
		fflush(e->out);
	}
	return rc == 1;
}

static int early_train_end(struct dt_callback *cb, struct dt_trainer *t)
{
	struct dt_early_stopping *e = cb->priv;
	if (!e->best_weights || !e->has_best_weights)
		return 0;
	if (e->out) {
		fprintf(e->out, "Restoring model weights from the end of the best epoch: %lld.\n",
			(long long)e->best_epoch + 1);
		fflush(e->out);
	}
	dt_trainer_set_weights(t, e->best_weights);
	return 0;
}

static char *early_state_save(struct dt_callback *cb, const struct dt_trainer *t)
{
	struct dt_early_stopping *e = cb->priv;
	cJSON *o = cJSON_CreateObject();
	add_value(o, "best", e->best);
	cJSON_AddNumberToObject(o, "wait", (double)e->wait);
	cJSON_AddNumberToObject(o, "stopped_epoch", (double)e->stopped_epoch);
	cJSON_AddNumberToObject(o, "best_epoch", (double)e->best_epoch);
	if (e->file[0] && e->has_best_weights)
		cJSON_AddStringToObject(o, "best_weights_file", e->file);
	return print_state(o);
}

static int early_state_load(struct dt_callback *cb, struct dt_trainer *t, const char *json)
{
	struct dt_early_stopping *e = cb->priv;
	cJSON *o = cJSON_Parse(json);
	const cJSON *file = o ? cJSON_GetObjectItemCaseSensitive(o, "best_weights_file") : NULL;
	char path[4096] = "";
	int bad = !o || get_value(o, "best", e->greater ? -INFINITY : INFINITY, &e->best) < 0 ||
		  get_count(o, "wait", &e->wait) < 0 || get_count(o, "stopped_epoch", &e->stopped_epoch) < 0 ||
		  get_count(o, "best_epoch", &e->best_epoch) < 0 || (file && !cJSON_IsString(file));
	if (!bad && file)
		snprintf(path, sizeof(path), "%s", file->valuestring);
	cJSON_Delete(o);
	if (bad)
		return dt_error("the saved state of 'early_stopping' is not valid: %s", json);
	e->has_best_weights = 0;
	e->take_at_begin = 0;
	if (!e->best_weights || !isfinite(e->best))
		return 0;
	if (path[0])
		return load_weights(e, t, path);
	/*
	 * Without the file the best weights are lost: the weights resumed from
	 * count as the best until a later epoch improves on the saved best value.
	 * They are taken when the next epoch begins, whatever order resume loads in.
	 */
	e->take_at_begin = 1;
	return 0;
}

static void early_epoch_begin(struct dt_callback *cb, struct dt_trainer *t, int epoch)
{
	struct dt_early_stopping *e = cb->priv;
	if (e->take_at_begin)
		keep_weights(e, t);
	e->take_at_begin = 0;
}

void dt_early_stopping_init(struct dt_early_stopping *e, const struct dt_early_stopping_config *cfg,
			    const struct dt_trainer *t, FILE *out)
{
	memset(e, 0, sizeof(*e));
	e->cfg = *cfg;
	e->out = out;
	e->greater = dt_monitor_greater(cfg->mode, cfg->monitor);
	e->min_delta = e->greater ? fabs(cfg->min_delta) : -fabs(cfg->min_delta);
	e->best = e->greater ? -INFINITY : INFINITY;
	if (cfg->restore_best_weights && t)
		e->best_weights = dt_malloc((size_t)t->models[0].nparams * sizeof(float));
	e->cb.name = "early_stopping";
	e->cb.priv = e;
	e->cb.on_epoch_begin = early_epoch_begin;
	e->cb.on_epoch_end = early_epoch_end;
	e->cb.on_train_end = early_train_end;
	e->cb.state_save = early_state_save;
	e->cb.state_load = early_state_load;
}

void dt_early_stopping_keep_file(struct dt_early_stopping *e, const char *path, const char *config_json,
				 const struct dt_ckpt_meta *meta, int nmeta)
{
	DT_ASSERT(nmeta <= DT_MAX_EXTRA_META);
	if (!e->best_weights)
		return;
	snprintf(e->file, sizeof(e->file), "%s", path);
	e->config_json = config_json;
	e->meta = meta;
	e->nmeta = nmeta;
}

void dt_early_stopping_release(struct dt_early_stopping *e)
{
	free(e->best_weights);
	e->best_weights = NULL;
}

/* ---- reduce_lr_on_plateau ---- */

static int plateau_improves(const struct dt_reduce_lr *p, double current)
{
	return p->greater ? current > p->best + p->cfg.min_delta : current < p->best - p->cfg.min_delta;
}

int dt_reduce_lr_decide(struct dt_reduce_lr *p, double current, double *lr)
{
	if (isnan(current))
		return 0;
	if (p->cooldown_counter > 0) {
		p->cooldown_counter--;
		p->wait = 0;
	}
	if (plateau_improves(p, current)) {
		p->best = current;
		p->wait = 0;
		return 0;
	}
	if (p->cooldown_counter > 0 || ++p->wait < p->cfg.patience)
		return 0;
	/* Keras compares the float32 rate with float32(min_lr). */
	if ((float)*lr <= (float)p->cfg.min_lr)
		return 0;
	*lr = fmax(*lr * p->cfg.factor, p->cfg.min_lr);
	p->cooldown_counter = p->cfg.cooldown;
	p->wait = 0;
	return 1;
}

static int plateau_epoch_end(struct dt_callback *cb, struct dt_trainer *t, const struct dt_logs *logs)
{
	struct dt_reduce_lr *p = cb->priv;
	double lr = dt_trainer_learning_rate(t);
	if (dt_reduce_lr_decide(p, dt_logs_get(logs, p->cfg.monitor), &lr)) {
		dt_trainer_set_learning_rate(t, lr);
		if (p->out) {
			char v[40];
			dt_format_repr((float)lr, v, sizeof(v));
			fprintf(p->out, "Epoch %d: ReduceLROnPlateau reducing learning rate to %s.\n", logs->epoch + 1, v);
			fflush(p->out);
		}
	}
	return 0;
}

static char *plateau_state_save(struct dt_callback *cb, const struct dt_trainer *t)
{
	struct dt_reduce_lr *p = cb->priv;
	cJSON *o = cJSON_CreateObject();
	add_value(o, "best", p->best);
	cJSON_AddNumberToObject(o, "wait", (double)p->wait);
	cJSON_AddNumberToObject(o, "cooldown_counter", (double)p->cooldown_counter);
	if (t)
		cJSON_AddNumberToObject(o, "learning_rate", dt_trainer_learning_rate(t));
	return print_state(o);
}

static int plateau_state_load(struct dt_callback *cb, struct dt_trainer *t, const char *json)
{
	struct dt_reduce_lr *p = cb->priv;
	cJSON *o = cJSON_Parse(json);
	const cJSON *lr = o ? cJSON_GetObjectItemCaseSensitive(o, "learning_rate") : NULL;
	int bad = !o || get_value(o, "best", p->greater ? -INFINITY : INFINITY, &p->best) < 0 ||
		  get_count(o, "wait", &p->wait) < 0 || get_count(o, "cooldown_counter", &p->cooldown_counter) < 0 ||
		  (lr && !cJSON_IsNumber(lr));
	if (!bad && lr && t)
		dt_trainer_set_learning_rate(t, lr->valuedouble);
	cJSON_Delete(o);
	if (bad)
		return dt_error("the saved state of 'reduce_lr_on_plateau' is not valid: %s", json);
	return 0;
}

void dt_reduce_lr_init(struct dt_reduce_lr *p, const struct dt_reduce_lr_config *cfg, FILE *out)
{
	memset(p, 0, sizeof(*p));
	p->cfg = *cfg;
	p->out = out;
	p->greater = dt_monitor_greater(cfg->mode, cfg->monitor);
	p->best = p->greater ? -INFINITY : INFINITY;
	p->cb.name = "reduce_lr_on_plateau";
	p->cb.priv = p;
	p->cb.on_epoch_end = plateau_epoch_end;
	p->cb.state_save = plateau_state_save;
	p->cb.state_load = plateau_state_load;
}

/* ---- terminate_on_nan ---- */

static int finite_tensor(const struct dt_tensor *x) { return isfinite(dt_op_sum_squares(x)); }

/*
 * After a non-finite loss: the first layer, in model order, whose output on
 * this batch is not finite; failing that, the first with a non-finite
 * parameter or gradient. Writes "the output of layer 2 'dense_1' (dense)".
 */
static void find_bad_layer(const struct dt_trainer *t, char *buf, size_t size)
{
	const struct dt_model *m = &t->models[0];
	int n = (int)((int64_t)t->batch.n / t->strategy->nreplicas);
	for (int i = 0; i < m->nlayers && n > 0; i++) {
		const struct dt_layer *l = &m->layers[i];
		struct dt_tensor y = dt_tensor_flat(m->acts[i + 1], m->dev, (int64_t)n * dt_shape_count(&l->out));
		if (!finite_tensor(&y)) {
			snprintf(buf, size, "the output of layer %d '%s' (%s)", i + 1, l->name, l->type->name);
			return;
		}
	}
	for (int i = 0; i < m->nlayers; i++) {
		const struct dt_layer *l = &m->layers[i];
		for (int p = 0; p < l->nparams; p++) {
			const struct dt_param *pr = &l->params[p];
			const char *what = !finite_tensor(&pr->value) ? "parameter"
					 : pr->trainable && !finite_tensor(&pr->grad) ? "gradient of" : NULL;
			if (what) {
				snprintf(buf, size, "the %s '%s/%s' of layer %d (%s)", what, l->name, pr->name, i + 1,
					 l->type->name);
				return;
			}
		}
	}
	snprintf(buf, size, "no layer (outputs, parameters and gradients are finite)");
}

static void nan_batch_end(struct dt_callback *cb, struct dt_trainer *t, const struct dt_logs *logs)
{
	struct dt_strategy *s = t->strategy;
	double bad = !isfinite(logs->loss);
	char where[256];
	/* The running loss is this worker's: the workers agree on the decision by a sum. */
	if (s->type && s->type->reduce_sum)
		s->type->reduce_sum(s, &bad, 1);
	if (bad == 0)
		return;
	if (isfinite(logs->loss)) {
		dt_error("epoch %d, batch %lld: the loss is not finite on another worker (terminate_on_nan)",
			 logs->epoch + 1, (long long)logs->step);
	} else {
		find_bad_layer(t, where, sizeof(where));
		dt_error("epoch %d, batch %lld: the loss is %s (terminate_on_nan); first non-finite value: %s",
			 logs->epoch + 1, (long long)logs->step, isnan(logs->loss) ? "nan" : "infinite", where);
	}
	dt_trainer_stop(t, -1);
}

void dt_terminate_on_nan_init(struct dt_terminate_on_nan *n)
{
	memset(n, 0, sizeof(*n));
	n->cb.name = "terminate_on_nan";
	n->cb.priv = n;
	n->cb.on_batch_end = nan_batch_end;
}

/* ---- csv_logger ---- */

void dt_format_repr(double v, char *buf, size_t size)
{
	char e[40], digits[24];
	int p, exp, nd = 0, neg = signbit(v);
	size_t k = 0;
	if (isnan(v) || isinf(v)) {
		snprintf(buf, size, "%s", isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
		return;
	}
	for (p = 1; p < 17; p++) {
		snprintf(e, sizeof(e), "%.*e", p - 1, v);
		if (strtod(e, NULL) == v)
			break;
	}
	snprintf(e, sizeof(e), "%.*e", p - 1, fabs(v));
	for (const char *s = e; *s && *s != 'e'; s++)
		if (*s >= '0' && *s <= '9')
			digits[nd++] = *s;
	while (nd > 1 && digits[nd - 1] == '0')
		nd--;
	digits[nd] = '\0';
	exp = atoi(strchr(e, 'e') + 1);
	if (v == 0)
		exp = 0;
#define PUT(...) (k += (size_t)snprintf(buf + (k < size ? k : size), k < size ? size - k : 0, __VA_ARGS__))
	if (neg)
		PUT("-");
	if (exp < -4 || exp >= 16) {
		PUT("%c", digits[0]);
		if (nd > 1)
			PUT(".%s", digits + 1);
		PUT("e%c%02d", exp < 0 ? '-' : '+', abs(exp));
	} else if (exp < 0) {
		PUT("0.%.*s%s", -exp - 1, "0000", digits);
	} else {
		for (int i = 0; i <= exp; i++)
			PUT("%c", i < nd ? digits[i] : '0');
		PUT(".%s", nd > exp + 1 ? digits + exp + 1 : "0");
	}
#undef PUT
}

static int csv_open(struct dt_csv_logger *c, int *header)
{
	*header = 1;
	if (c->resumed) {
		/*
		 * Rows after the checkpoint resumed from are dropped: the run writes
		 * them again. A run killed before its first row left no file.
		 */
		if (truncate(c->path, c->offset) < 0 && !(errno == ENOENT && c->offset == 0))
			return dt_error("cannot truncate '%s': %s", c->path, strerror(errno));
		*header = c->offset == 0;
	} else if (c->append) {
		FILE *f = fopen(c->path, "r");
		if (f) {
			*header = fgetc(f) == EOF;
			fclose(f);
		}
	}
	c->f = fopen(c->path, c->resumed || c->append ? "a" : "w");
	if (!c->f)
		return dt_error("cannot open '%s': %s", c->path, strerror(errno));
	return 0;
}

static void csv_field(struct dt_csv_logger *c, const char *name, int has, double v, int header)
{
	char num[40];
	if (!has)
		return;
	fputs(c->sep, c->f);
	if (header) {
		fputs(name, c->f);
		return;
	}
	dt_format_repr(v, num, sizeof(num));
	fputs(num, c->f);
}

/* Keras' columns: epoch, then the logs' keys sorted. */
static void csv_row(struct dt_csv_logger *c, const struct dt_logs *l, int header)
{
	if (header)
		fputs("epoch", c->f);
	else
		fprintf(c->f, "%d", l->epoch);
	struct dt_metric_pair pairs[DT_MAX_PAIRS];
	int n = dt_logs_pairs(l, 1, pairs);
	for (int i = 0; i < n; i++) {
		/* The rate as the float the optimizer uses. */
		int lr = !strcmp(pairs[i].name, "learning_rate");
		csv_field(c, pairs[i].name, 1, lr ? (float)pairs[i].value : pairs[i].value, header);
	}
	fputc('\n', c->f);
}

static int csv_epoch_end(struct dt_callback *cb, struct dt_trainer *t, const struct dt_logs *logs)
{
	struct dt_csv_logger *c = cb->priv;
	int header;
	if (!c->f) {
		if (csv_open(c, &header) < 0)
			return -1;
		if (header)
			csv_row(c, logs, 1);
	}
	csv_row(c, logs, 0);
	if (fflush(c->f) != 0 || ferror(c->f))
		return dt_error("cannot write '%s': %s", c->path, strerror(errno));
	c->offset = ftell(c->f);
	return 0;
}

static int csv_train_end(struct dt_callback *cb, struct dt_trainer *t)
{
	struct dt_csv_logger *c = cb->priv;
	int rc = 0;
	if (c->f && fclose(c->f) != 0)
		rc = dt_error("cannot write '%s': %s", c->path, strerror(errno));
	c->f = NULL;
	return rc;
}

static char *csv_state_save(struct dt_callback *cb, const struct dt_trainer *t)
{
	struct dt_csv_logger *c = cb->priv;
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "offset", (double)c->offset);
	return print_state(o);
}

static int csv_state_load(struct dt_callback *cb, struct dt_trainer *t, const char *json)
{
	struct dt_csv_logger *c = cb->priv;
	cJSON *o = cJSON_Parse(json);
	int64_t offset;
	int bad = !o || get_count(o, "offset", &offset) < 0;
	cJSON_Delete(o);
	if (bad)
		return dt_error("the saved state of 'csv_logger' is not valid: %s", json);
	if (c->f) {
		fclose(c->f);
		c->f = NULL;
	}
	c->offset = (long)offset;
	c->resumed = 1;
	return 0;
}

void dt_callback_path(const char *run_dir, const char *name, char *buf, size_t size)
{
	if (name[0] == '/')
		snprintf(buf, size, "%s", name);
	else
		snprintf(buf, size, "%s/%s", run_dir, name);
}

int dt_csv_logger_init(struct dt_csv_logger *c, const struct dt_csv_logger_config *cfg, const char *run_dir)
{
	const char *name = cfg && cfg->filename ? cfg->filename : "history.csv";
	memset(c, 0, sizeof(*c));
	dt_callback_path(run_dir, name, c->path, sizeof(c->path));
	snprintf(c->sep, sizeof(c->sep), "%s", cfg && cfg->separator ? cfg->separator : ",");
	c->append = cfg ? cfg->append : 0;
	c->cb.name = "csv_logger";
	c->cb.priv = c;
	c->cb.on_epoch_end = csv_epoch_end;
	c->cb.on_train_end = csv_train_end;
	c->cb.state_save = csv_state_save;
	c->cb.state_load = csv_state_load;
	return 0;
}

void dt_csv_logger_release(struct dt_csv_logger *c)
{
	if (c->f)
		fclose(c->f);
	c->f = NULL;
}
