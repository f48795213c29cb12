/*
 * fit.callbacks: the list's errors, early_stopping and reduce_lr_on_plateau
 * on scripted metric sequences (patience, min_delta, baseline, start_from_epoch,
 * cooldown, min_lr, modes), mode: auto for every monitored name in the four
 * monitoring items, restore_best_weights, state_save -> state_load
 * round trips that continue identically, csv_logger's file and numbers, and
 * tensorboard's arguments.
 */
#include <math.h>

#include "helpers.h"

#include "core/checkpoint/checkpointer.h"
#include "core/config/run_config.h"
#include "core/fit/fit_callbacks.h"
#include "core/model/model.h"
#include "core/model/optimizer.h"
#include "layers/layers.h"

static struct dt_doc *doc;

/* Reads `callbacks: ...` YAML into c; the document stays alive until the next call. */
static int parse(struct dt_callbacks_config *c, const char *yaml)
{
	dt_doc_free(doc);
	doc = dt_doc_parse("m.yaml", yaml, ".");
	assert_non_null(doc);
	return dt_callbacks_config_read(c, dt_node_get(dt_doc_root(doc), "callbacks"));
}

static void test_config(void **state)
{
	struct dt_callbacks_config c;
	assert_int_equal(parse(&c, "callbacks:\n"
				   "  - early_stopping: {monitor: val_accuracy, patience: 3, restore_best_weights: true}\n"
				   "  - reduce_lr_on_plateau: {factor: 0.5, patience: 2, min_lr: 1e-5}\n"
				   "  - terminate_on_nan\n"
				   "  - csv_logger: {filename: h.csv, append: true, separator: ';'}\n"
				   "  - model_checkpoint: {anything: 1}\n"), 0);
	assert_true(c.early_stopping && c.reduce_lr_on_plateau && c.terminate_on_nan && c.csv_logger);
	assert_int_equal(c.model_checkpoint, 1);
	assert_string_equal(c.early.monitor, "val_accuracy");
	assert_int_equal(c.early.patience, 3);
	assert_true(c.early.restore_best_weights);
	assert_float_equal(c.plateau.factor, 0.5, 0);
	assert_float_equal(c.plateau.min_delta, 1e-4, 0); /* Keras' default */
	assert_int_equal(c.plateau.patience, 2);
	assert_string_equal(c.plateau.monitor, "val_loss");
	assert_string_equal(c.csv.filename, "h.csv");
	assert_string_equal(c.csv.separator, ";");
	assert_true(c.csv.append);
	/* Defaults. */
	assert_int_equal(parse(&c, "callbacks: [early_stopping, csv_logger, reduce_lr_on_plateau]\n"), 0);
	assert_int_equal(c.early.patience, 0);
	assert_string_equal(c.csv.filename, "history.csv");
	assert_int_equal(c.plateau.patience, 10);
	assert_float_equal(c.plateau.factor, 0.1, 0);
	assert_int_equal(parse(&c, "other: 1\n"), 0);
	assert_false(c.early_stopping || c.csv_logger);
}

static void test_config_errors(void **state)
{
	struct dt_callbacks_config c;
	dt_error_set_quiet(1);
	assert_int_equal(parse(&c, "callbacks:\n  - early_stoping: {patience: 3}\n"), -1);
	assert_error_contains("unknown callback 'early_stoping'; did you mean 'early_stopping'?");
	assert_string_equal(dt_cfg_last_where(), "m.yaml:2:5");
	assert_int_equal(parse(&c, "callbacks: [terminate_on_nan, terminate_on_nan]\n"), -1);
	assert_error_contains("listed twice");
	assert_int_equal(parse(&c, "callbacks: [{early_stopping: {patiense: 3}}]\n"), -1);
	assert_error_contains("did you mean 'patience'");
	assert_int_equal(parse(&c, "callbacks: [{early_stopping: {monitor: val_los}}]\n"), -1);
	assert_error_contains("did you mean 'val_loss'");
	assert_int_equal(parse(&c, "callbacks: [{reduce_lr_on_plateau: {factor: 1}}]\n"), -1);
	assert_int_equal(parse(&c, "callbacks: [{early_stopping: {mode: maximum}}]\n"), -1);
	assert_int_equal(parse(&c, "callbacks: [{terminate_on_nan: {x: 1}}]\n"), -1);
	assert_int_equal(parse(&c, "callbacks: {early_stopping: {}}\n"), -1);
	assert_int_equal(parse(&c, "callbacks: [{csv_logger: {separator: ''}}]\n"), -1);
	/* A monitored metric fit will not report. */
	assert_int_equal(parse(&c, "callbacks: [early_stopping]\n"), 0);
	assert_int_equal(dt_callbacks_config_check(&c, 1, 0, 0, NULL), -1);
	assert_error_contains("no validation data");
	assert_int_equal(dt_callbacks_config_check(&c, 0, 0, 1, NULL), 0);
	assert_int_equal(parse(&c, "callbacks: [{reduce_lr_on_plateau: {monitor: accuracy}}]\n"), 0);
	assert_int_equal(dt_callbacks_config_check(&c, 0, 0, 1, NULL), -1);
	assert_error_contains("'accuracy'");
	/* MAE and RMSE: only for a regression loss or with metrics: [mae] or [rmse]. */
	assert_int_equal(parse(&c, "callbacks: [{early_stopping: {monitor: val_rmse}}]\n"), 0);
	assert_int_equal(dt_callbacks_config_check(&c, 1, 0, 1, NULL), -1);
	assert_error_contains("monitors 'val_rmse'");
	assert_int_equal(dt_callbacks_config_check(&c, 0, 1, 1, NULL), 0);
	assert_int_equal(parse(&c, "callbacks: [{reduce_lr_on_plateau: {monitor: val_acuracy}}]\n"), -1);
	assert_error_contains("did you mean 'val_accuracy'");
	dt_error_set_quiet(0);
}

/*
 * Which way each of the four monitoring items (checkpoint.save_best,
 * model_checkpoint, early_stopping, reduce_lr_on_plateau) takes a metric,
 * for every metric fit reports, from one model file: 1 when higher is better.
 */
static void monitor_directions(const char *yaml, const char *name, const char *mode, int out[4])
{
	struct dt_run_config cfg;
	struct dt_checkpointer ck = { 0 };
	struct dt_early_stopping e;
	struct dt_reduce_lr p;
	char sets[3][512];
	char *argv[3] = { sets[0], sets[1], sets[2] };

	snprintf(sets[0], sizeof(sets[0]), "checkpoint.save_best={monitor: %s, mode: %s}", name, mode);
	snprintf(sets[1], sizeof(sets[1]),
		 "fit.callbacks=[{early_stopping: {monitor: %s, mode: %s}}, {reduce_lr_on_plateau: {monitor: %s, mode: %s}},"
		 " {model_checkpoint: {filepath: m, monitor: %s, mode: %s}}]", name, mode, name, mode, name, mode);
	snprintf(sets[2], sizeof(sets[2]), "compile.metrics=[accuracy, mae]");
	if (dt_run_config_load(&cfg, yaml, argv, 3) < 0)
		fail_msg("monitor '%s', mode %s: %s", name, mode, dt_error_last());
	dt_checkpointer_configure(&ck, &cfg);
	dt_early_stopping_init(&e, &cfg.callback_cfg.early, NULL, NULL);
	dt_reduce_lr_init(&p, &cfg.callback_cfg.plateau, NULL);
	assert_int_equal(cfg.nmodel_checkpoints, 1);
	out[0] = ck.mode > 0;
	out[1] = cfg.model_checkpoints[0].mode > 0;
	out[2] = e.greater;
	out[3] = p.greater;
	dt_early_stopping_release(&e);
	dt_run_config_release(&cfg);
}

/*
 * mode: auto is Keras' rule for every name fit's logs hold: max for the
 * accuracies, min for losses, errors and the learning rate; the four items
 * agree, and an explicit min or max wins.
 */
static void test_monitor_modes(void **state)
{
	static const struct { const char *name; int greater; } want[] = {
		{ "loss", 0 }, { "accuracy", 1 }, { "mae", 0 }, { "rmse", 0 }, { "val_loss", 0 },
		{ "val_accuracy", 1 }, { "val_mae", 0 }, { "val_rmse", 0 }, { "learning_rate", 0 },
	};
	static const char *const items[] = { "save_best", "model_checkpoint", "early_stopping", "reduce_lr_on_plateau" };
	static const char yaml[] = "model: {input_shape: [2], layers: [{dense: {units: 1}}]}\n"
				   "compile: {optimizer: sgd, loss: mean_squared_error}\n"
				   "data: {train: {format: synthetic, kind: blobs, samples: 10, classes: 2, features: 2},\n"
				   "       validation_split: 0.2}\n";
	struct dt_logs logs = { .has_accuracy = 1, .has_errors = 1, .has_val = 1, .has_learning_rate = 1 };
	char *path = dt_test_write_file(".yaml", yaml, sizeof(yaml) - 1);
	size_t n = sizeof(want) / sizeof(want[0]), names = 0;
	int got[4];

	while (dt_monitor_names[names])
		names++;
	assert_int_equal(names, n); /* a new name needs its line above */
	for (size_t i = 0; i < n; i++) {
		assert_string_equal(dt_monitor_names[i], want[i].name);
		/* Every name is one that fit's logs hold. */
		assert_false(isnan(dt_logs_get(&logs, want[i].name)));
		monitor_directions(path, want[i].name, "auto", got);
		for (int k = 0; k < 4; k++)
			if (got[k] != want[i].greater)
				fail_msg("%s with mode auto takes '%s' as %s is better", items[k], want[i].name,
					 got[k] ? "higher" : "lower");
		monitor_directions(path, want[i].name, "max", got);
		assert_true(got[0] && got[1] && got[2] && got[3]);
		monitor_directions(path, want[i].name, "min", got);
		assert_false(got[0] || got[1] || got[2] || got[3]);
	}
	/* Keras' other accuracy-like names, were they reported. */
	assert_true(dt_monitor_greater(DT_MONITOR_AUTO, "val_auc") && dt_monitor_greater(DT_MONITOR_AUTO, "precision") &&
		    dt_monitor_greater(DT_MONITOR_AUTO, "recall") && dt_monitor_greater(DT_MONITOR_AUTO, "acc"));
	assert_false(dt_monitor_greater(DT_MONITOR_AUTO, NULL));
	unlink(path);
	free(path);
}

static struct dt_early_stopping_config early_cfg(const char *monitor, int64_t patience)
{
	struct dt_early_stopping_config c = { .monitor = monitor, .patience = patience };
	return c;
}

/* Feeds values from epoch 0; returns the epoch decide() stopped at, or -1. */
static int run_early(struct dt_early_stopping *e, const double *v, int n)
{
	for (int i = 0; i < n; i++)
		if (dt_early_stopping_decide(e, i, v[i]) == 1)
			return i;
	return -1;
}

static void test_early_stopping(void **state)
{
	struct dt_early_stopping e;
	struct dt_early_stopping_config c = early_cfg("val_loss", 2);

	dt_early_stopping_init(&e, &c, NULL, NULL);
	assert_int_equal(run_early(&e, (double[]){ 1.0, 0.9, 0.95, 0.93, 0.92 }, 5), 3);
	assert_float_equal(e.best, 0.9, 0);
	assert_int_equal(e.best_epoch, 1);
	assert_int_equal(e.stopped_epoch, 3);

	/* min_delta: 0.97 is not 0.05 better than 1.0. */
	c.min_delta = 0.05;
	dt_early_stopping_init(&e, &c, NULL, NULL);
	assert_int_equal(run_early(&e, (double[]){ 1.0, 0.97, 0.96, 0.5 }, 4), 2);
	/* Its sign does not matter (Keras takes the absolute value). */
	c.min_delta = -0.05;
	dt_early_stopping_init(&e, &c, NULL, NULL);
	assert_int_equal(run_early(&e, (double[]){ 1.0, 0.97, 0.96, 0.5 }, 4), 2);
	c.min_delta = 0;

	/* patience 0 still never stops at epoch 0. */
	c.patience = 0;
	dt_early_stopping_init(&e, &c, NULL, NULL);
	assert_int_equal(run_early(&e, (double[]){ 1.0, 2.0 }, 2), 1);
	dt_early_stopping_init(&e, &c, NULL, NULL);
	assert_int_equal(run_early(&e, (double[]){ 2.0, 1.0, 0.5, 0.25 }, 4), -1);

	/* start_from_epoch: epochs before it are not judged. */
	c.start_from_epoch = 2;
	dt_early_stopping_init(&e, &c, NULL, NULL);
	assert_int_equal(run_early(&e, (double[]){ 0.1, 0.2, 1.0, 1.1 }, 4), 3);
	c.start_from_epoch = 0;
	dt_early_stopping_init(&e, &c, NULL, NULL);
	assert_int_equal(run_early(&e, (double[]){ 0.1, 0.2, 1.0, 1.1 }, 4), 1);

	/* A value missing from the logs (NAN) is skipped. */
	dt_early_stopping_init(&e, &c, NULL, NULL);
	assert_int_equal(run_early(&e, (double[]){ 1.0, NAN, NAN, 1.5 }, 4), 3);

	/* auto mode: accuracy improves upward; explicit max and min. */
	c = early_cfg("val_accuracy", 1);
	dt_early_stopping_init(&e, &c, NULL, NULL);
	assert_int_equal(run_early(&e, (double[]){ 0.5, 0.6, 0.7, 0.65 }, 4), 3);
	c.mode = DT_MONITOR_MIN;
	dt_early_stopping_init(&e, &c, NULL, NULL);
	assert_int_equal(run_early(&e, (double[]){ 0.5, 0.6, 0.7, 0.65 }, 4), 1);
	c = early_cfg("loss", 1);
	c.mode = DT_MONITOR_MAX;
	dt_early_stopping_init(&e, &c, NULL, NULL);
	assert_int_equal(run_early(&e, (double[]){ 0.5, 0.6, 0.7, 0.65 }, 4), 3);
}

static void test_early_stopping_baseline(void **state)
{
	struct dt_early_stopping e;
	struct dt_early_stopping_config c = early_cfg("val_loss", 2);
	c.has_baseline = 1;
	c.baseline = 0.5;
	/* Improving but never past the baseline: the wait grows; Keras checks it only on an epoch without improvement. */
	dt_early_stopping_init(&e, &c, NULL, NULL);
	assert_int_equal(run_early(&e, (double[]){ 1.0, 0.9, 0.8, 0.7 }, 4), -1);
	assert_int_equal(e.wait, 4);
	dt_early_stopping_init(&e, &c, NULL, NULL);
	assert_int_equal(run_early(&e, (double[]){ 1.0, 0.9, 0.95 }, 3), 2);
	/* Past the baseline: the usual patience. */
	dt_early_stopping_init(&e, &c, NULL, NULL);
	assert_int_equal(run_early(&e, (double[]){ 0.4, 0.45, 0.46, 0.3 }, 4), 2);
}

static void test_early_stopping_state(void **state)
{
	const double v[] = { 1.0, 0.8, 0.85, 0.9, 0.7, 0.75, 0.76, 0.77, 0.78 };
	struct dt_early_stopping_config c = early_cfg("val_loss", 3);
	struct dt_early_stopping a, b;
	for (int cut = 0; cut < 8; cut++) {
		dt_early_stopping_init(&a, &c, NULL, NULL);
		dt_early_stopping_init(&b, &c, NULL, NULL);
		for (int i = 0; i < cut; i++)
			dt_early_stopping_decide(&a, i, v[i]);
		char *json = a.cb.state_save(&a.cb, NULL);
		assert_non_null(json);
		assert_int_equal(b.cb.state_load(&b.cb, NULL, json), 0);
		free(json);
		for (int i = cut; i < 9; i++) {
			int ra = dt_early_stopping_decide(&a, i, v[i]), rb = dt_early_stopping_decide(&b, i, v[i]);
			assert_int_equal(ra, rb);
			assert_true(a.best == b.best && a.wait == b.wait && a.best_epoch == b.best_epoch);
			if (ra == 1)
				break;
		}
	}
	dt_error_set_quiet(1);
	assert_int_equal(a.cb.state_load(&a.cb, NULL, "{\"best\": \"x\"}"), -1);
	assert_int_equal(a.cb.state_load(&a.cb, NULL, "not json"), -1);
	dt_error_set_quiet(0);
}

struct one_model {
	struct dt_doc *doc;
	struct dt_model m;
	struct dt_optimizer o;
	struct dt_strategy s;
	struct dt_trainer t;
};

static void one_model_init(struct one_model *x)
{
	struct dt_shape in = dt_shape_make(1, (int[]){ 3 });
	struct dt_optimizer_config oc;
	memset(x, 0, sizeof(*x));
	x->doc = dt_doc_parse("m.yaml", "layers: [{dense: {units: 2}}]\noptimizer: {sgd: {learning_rate: 0.1}}\n", ".");
	assert_non_null(x->doc);
	assert_int_equal(dt_model_init(&x->m, "t", &in, dt_node_get(dt_doc_root(x->doc), "layers"), dt_layer_types), 0);
	dt_model_alloc(&x->m, DT_CPU, 2);
	assert_int_equal(dt_optimizer_config_read(&oc, dt_doc_root(x->doc)), 0);
	dt_optimizer_init(&x->o, &oc, &x->m);
	x->s.nreplicas = 1;
	x->t.strategy = &x->s;
	x->t.models = &x->m;
	x->t.opts = &x->o;
}

static void one_model_release(struct one_model *x)
{
	dt_optimizer_release(&x->o, &x->m);
	dt_model_release(&x->m);
	dt_doc_free(x->doc);
}

static void fill_params(struct dt_model *m, float v)
{
	struct dt_tensor w = dt_tensor_flat(m->params, m->dev, m->nparams);
	dt_op_fill(&w, v);
}

static void test_restore_best_weights(void **state)
{
	struct one_model x;
	struct dt_early_stopping e;
	struct dt_early_stopping_config c = early_cfg("val_loss", 1);
	struct dt_logs logs = { .has_val = 1 };
	const float vals[] = { 1, 2, 3, 4 };
	const double losses[] = { 0.9, 0.5, 0.7, 0.8 };
	int stopped = -1;

	one_model_init(&x);
	c.restore_best_weights = 1;
	dt_early_stopping_init(&e, &c, &x.t, NULL);
	for (int i = 0; i < 4 && stopped < 0; i++) {
		fill_params(&x.m, vals[i]); /* the weights at the end of epoch i */
		logs.epoch = i;
		logs.val_loss = losses[i];
		if (e.cb.on_epoch_end(&e.cb, &x.t, &logs) == 1)
			stopped = i;
	}
	assert_int_equal(stopped, 2);
	assert_float_equal(x.m.params[0], 3, 0);
	assert_int_equal(e.cb.on_train_end(&e.cb, &x.t), 0);
	/* Epoch 1 was the best: its weights are back, all of them. */
	for (int64_t i = 0; i < x.m.nparams; i++)
		assert_float_equal(x.m.params[i], 2, 0);
	dt_early_stopping_release(&e);

	/* Without a stop the best weights are restored too (Keras 3's on_train_end). */
	c.patience = 10;
	dt_early_stopping_init(&e, &c, &x.t, NULL);
	for (int i = 0; i < 4; i++) {
		fill_params(&x.m, vals[i]);
		logs.epoch = i;
		logs.val_loss = losses[i];
		assert_int_equal(e.cb.on_epoch_end(&e.cb, &x.t, &logs), 0);
	}
	e.cb.on_train_end(&e.cb, &x.t);
	assert_float_equal(x.m.params[0], 2, 0);
	dt_early_stopping_release(&e);

	/* Resumed after epoch 1 (the best): the weights resumed from stand for the best ones. */
	{
		struct dt_early_stopping r;
		char *json;
		dt_early_stopping_init(&e, &c, &x.t, NULL);
		for (int i = 0; i < 2; i++) {
			fill_params(&x.m, vals[i]);
			logs.epoch = i;
			logs.val_loss = losses[i];
			e.cb.on_epoch_end(&e.cb, &x.t, &logs);
		}
		json = e.cb.state_save(&e.cb, &x.t);
		dt_early_stopping_init(&r, &c, &x.t, NULL);
		fill_params(&x.m, 0); /* the order of loading must not matter */
		assert_int_equal(r.cb.state_load(&r.cb, &x.t, json), 0);
		free(json);
		fill_params(&x.m, 2); /* the resumed weights */
		r.cb.on_epoch_begin(&r.cb, &x.t, 2);
		for (int i = 2; i < 4; i++) {
			fill_params(&x.m, vals[i]);
			logs.epoch = i;
			logs.val_loss = losses[i];
			r.cb.on_epoch_end(&r.cb, &x.t, &logs);
		}
		r.cb.on_train_end(&r.cb, &x.t);
		assert_float_equal(x.m.params[0], 2, 0);
		dt_early_stopping_release(&r);
		dt_early_stopping_release(&e);
	}

	/* With the file, a resumed run restores the best weights themselves. */
	{
		struct dt_early_stopping r;
		char dir[] = "/tmp/dtrain-es-XXXXXX", path[4096], *json;
		assert_non_null(mkdtemp(dir));
		snprintf(path, sizeof(path), "%s/best.safetensors", dir);
		dt_early_stopping_init(&e, &c, &x.t, NULL);
		dt_early_stopping_keep_file(&e, path, NULL, NULL, 0);
		for (int i = 0; i < 3; i++) {
			fill_params(&x.m, vals[i]);
			logs.epoch = i;
			logs.val_loss = losses[i];
			e.cb.on_epoch_end(&e.cb, &x.t, &logs);
		}
		json = e.cb.state_save(&e.cb, &x.t);
		assert_non_null(strstr(json, "best_weights_file"));
		dt_early_stopping_init(&r, &c, &x.t, NULL);
		fill_params(&x.m, 7);
		assert_int_equal(r.cb.state_load(&r.cb, &x.t, json), 0);
		free(json);
		assert_float_equal(x.m.params[0], 7, 0); /* loading left the model's weights alone */
		r.cb.on_epoch_begin(&r.cb, &x.t, 3);
		fill_params(&x.m, vals[3]);
		logs.epoch = 3;
		logs.val_loss = losses[3];
		r.cb.on_epoch_end(&r.cb, &x.t, &logs);
		r.cb.on_train_end(&r.cb, &x.t);
		for (int64_t i = 0; i < x.m.nparams; i++)
			assert_float_equal(x.m.params[i], 2, 0);
		/* A file that went missing is an error. */
		unlink(path);
		rmdir(dir);
		dt_error_set_quiet(1);
		json = e.cb.state_save(&e.cb, &x.t);
		assert_int_equal(r.cb.state_load(&r.cb, &x.t, json), -1);
		dt_error_set_quiet(0);
		free(json);
		dt_early_stopping_release(&r);
		dt_early_stopping_release(&e);
	}

	/* Off: the last weights stay. */
	c.restore_best_weights = 0;
	dt_early_stopping_init(&e, &c, &x.t, NULL);
	for (int i = 0; i < 4; i++) {
		fill_params(&x.m, vals[i]);
		logs.epoch = i;
		logs.val_loss = losses[i];
		e.cb.on_epoch_end(&e.cb, &x.t, &logs);
	}
	e.cb.on_train_end(&e.cb, &x.t);
	assert_float_equal(x.m.params[0], 4, 0);
	dt_early_stopping_release(&e);
	one_model_release(&x);
}

static struct dt_reduce_lr_config plateau_cfg(void)
{
	struct dt_reduce_lr_config c = { .monitor = "val_loss", .factor = 0.5, .patience = 2, .min_delta = 0,
					 .cooldown = 1, .min_lr = 0.01 };
	return c;
}

static void test_reduce_lr(void **state)
{
	struct dt_reduce_lr_config c = plateau_cfg();
	struct dt_reduce_lr p;
	/* A flat metric: reductions at epochs 2, 4, 6, 8 (cooldown 1 lets the wait restart at 1), floored at min_lr. */
	const double expect[] = { 0.1, 0.1, 0.05, 0.05, 0.025, 0.025, 0.0125, 0.0125, 0.01, 0.01, 0.01, 0.01 };
	double lr = 0.1;
	dt_reduce_lr_init(&p, &c, NULL);
	for (int i = 0; i < 12; i++) {
		int changed = dt_reduce_lr_decide(&p, 1.0, &lr);
		assert_float_equal(lr, expect[i], 1e-12);
		assert_int_equal(changed, i > 0 && expect[i] != expect[i - 1]);
	}

	/* Without cooldown: every `patience` epochs. */
	c.cooldown = 0;
	c.min_lr = 0;
	lr = 1;
	dt_reduce_lr_init(&p, &c, NULL);
	for (int i = 0; i < 7; i++)
		dt_reduce_lr_decide(&p, 1.0, &lr);
	assert_float_equal(lr, 0.125, 1e-12); /* epochs 2, 4, 6 */

	/* min_delta: improvements below it do not count (Keras' default 1e-4). */
	c.min_delta = 1e-4;
	lr = 1;
	dt_reduce_lr_init(&p, &c, NULL);
	dt_reduce_lr_decide(&p, 1.0, &lr);
	dt_reduce_lr_decide(&p, 0.99995, &lr); /* less than 1e-4 better: wait 1 */
	assert_int_equal(p.wait, 1);
	assert_float_equal(p.best, 1.0, 0);
	assert_int_equal(dt_reduce_lr_decide(&p, 0.9998, &lr), 0); /* 2e-4 better: an improvement */
	assert_float_equal(lr, 1, 0);
	assert_int_equal(p.wait, 0);
	assert_float_equal(p.best, 0.9998, 0);
	dt_reduce_lr_decide(&p, 0.99975, &lr);
	assert_int_equal(dt_reduce_lr_decide(&p, 0.9997, &lr), 1); /* two epochs without 1e-4 of progress */
	assert_float_equal(lr, 0.5, 0);

	/* auto: "acc" in the name means max. */
	c = plateau_cfg();
	c.monitor = "val_accuracy";
	c.cooldown = 0;
	lr = 1;
	dt_reduce_lr_init(&p, &c, NULL);
	dt_reduce_lr_decide(&p, 0.5, &lr);
	dt_reduce_lr_decide(&p, 0.6, &lr);
	dt_reduce_lr_decide(&p, 0.7, &lr);
	assert_float_equal(lr, 1, 0);
	dt_reduce_lr_decide(&p, 0.6, &lr);
	dt_reduce_lr_decide(&p, 0.6, &lr);
	assert_float_equal(lr, 0.5, 0);
	/* NAN (not in the logs): nothing happens. */
	assert_int_equal(dt_reduce_lr_decide(&p, NAN, &lr), 0);
}

static void test_reduce_lr_state_and_optimizer(void **state)
{
	struct one_model x;
	struct dt_reduce_lr_config c = plateau_cfg();
	struct dt_reduce_lr a, b;
	struct dt_logs logs = { .has_val = 1, .val_loss = 1 };
	char *json;

	one_model_init(&x);
	dt_reduce_lr_init(&a, &c, NULL);
	for (int i = 0; i < 4; i++) {
		logs.epoch = i;
		a.cb.on_epoch_end(&a.cb, &x.t, &logs);
	}
	assert_float_equal(x.o.learning_rate, 0.05f, 0);
	json = a.cb.state_save(&a.cb, &x.t);
	/* A fresh run (the optimizer back at its configured rate) resumes from the state. */
	x.o.learning_rate = 0.1f;
	dt_reduce_lr_init(&b, &c, NULL);
	assert_int_equal(b.cb.state_load(&b.cb, &x.t, json), 0);
	free(json);
	assert_float_equal(x.o.learning_rate, 0.05f, 0);
	assert_int_equal(b.wait, a.wait);
	assert_int_equal(b.cooldown_counter, a.cooldown_counter);
	assert_float_equal(b.best, a.best, 0);
	/* Both continue alike: the next reduction at epoch 4. */
	for (int i = 4; i < 8; i++) {
		double la = 0.05, lb = 0.05;
		int ra = dt_reduce_lr_decide(&a, 1, &la), rb = dt_reduce_lr_decide(&b, 1, &lb);
		assert_int_equal(ra, rb);
		assert_float_equal(la, lb, 0);
	}
	one_model_release(&x);
}

/* terminate_on_nan's diagnosis: the first layer, in model order, with a non-finite output, else parameter or gradient. */
static void test_terminate_on_nan(void **state)
{
	struct dt_doc *d = dt_doc_parse("m.yaml", "layers: [{dense: {units: 4}}, {dense: {units: 2}}, {dense: {units: 2}}]\n", ".");
	struct dt_shape in = dt_shape_make(1, (int[]){ 3 });
	struct dt_step_ctx ctx = { .training = 1 };
	struct dt_strategy s = { .nreplicas = 1 };
	struct dt_trainer t = { .strategy = &s };
	struct dt_terminate_on_nan n;
	struct dt_logs logs = { .epoch = 1, .step = 7, .loss = 0.5 };
	struct dt_model m;
	struct dt_tensor x;

	assert_non_null(d);
	assert_int_equal(dt_model_init(&m, "t", &in, dt_node_get(dt_doc_root(d), "layers"), dt_layer_types), 0);
	dt_model_alloc(&m, DT_CPU, 2);
	dt_model_init_params(&m, 1);
	t.models = &m;
	t.batch.n = 2;
	x = dt_model_input(&m, 2);
	dt_op_fill(&x, 1);
	dt_terminate_on_nan_init(&n);

	/* A finite loss: nothing happens. */
	dt_model_forward(&m, 2, &ctx);
	n.cb.on_batch_end(&n.cb, &t, &logs);
	assert_int_equal(t.stop_training, 0);

	/* The second layer's kernel is NaN: its output is the first non-finite one, not the third's. */
	m.layers[1].params[0].value.data[3] = NAN;
	dt_model_forward(&m, 2, &ctx);
	logs.loss = NAN;
	dt_error_set_quiet(1);
	n.cb.on_batch_end(&n.cb, &t, &logs);
	assert_int_equal(t.stop_training, -1);
	assert_error_contains("epoch 2, batch 7: the loss is nan (terminate_on_nan)");
	assert_error_contains("the output of layer 2 'dense_1' (dense)");

	/* Finite outputs, a parameter gone bad after the update. */
	m.layers[1].params[0].value.data[3] = 0;
	dt_model_forward(&m, 2, &ctx);
	m.layers[2].params[1].value.data[0] = INFINITY;
	logs.loss = INFINITY;
	n.cb.on_batch_end(&n.cb, &t, &logs);
	assert_error_contains("the loss is infinite");
	assert_error_contains("the parameter 'dense_2/bias' of layer 3 (dense)");
	dt_error_set_quiet(0);
	dt_model_release(&m);
	dt_doc_free(d);
}

static void test_repr(void **state)
{
	static const struct {
		double v;
		const char *s;
	} cases[] = {
		{ 0.5, "0.5" },
		{ 1.0, "1.0" },
		{ 0.0, "0.0" },
		{ -2.5, "-2.5" },
		{ 0.1, "0.1" },
		{ 1e-05, "1e-05" },
		{ 0.0001, "0.0001" },
		{ 123.0, "123.0" },
		{ 1e16, "1e+16" },
		{ 1.5e16, "1.5e+16" },
		{ 1234567890123456.0, "1234567890123456.0" },
		{ 1.0 / 3, "0.3333333333333333" },
		{ 2.5e-07, "2.5e-07" },
		{ 1e100, "1e+100" },
		{ (double)0.001f, "0.0010000000474974513" },
	};
	char buf[40];
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		dt_format_repr(cases[i].v, buf, sizeof(buf));
		assert_string_equal(buf, cases[i].s);
	}
	dt_format_repr(NAN, buf, sizeof(buf));
	assert_string_equal(buf, "nan");
	dt_format_repr(-INFINITY, buf, sizeof(buf));
	assert_string_equal(buf, "-inf");
}

static char *read_all(const char *path)
{
	static char buf[4096];
	FILE *f = fopen(path, "r");
	size_t n;
	assert_non_null(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static void csv_epoch(struct dt_csv_logger *c, int epoch, double loss)
{
	struct dt_logs logs = { .epoch = epoch, .loss = loss, .has_accuracy = 1, .accuracy = 0.5, .has_val = 1,
				.val_loss = loss * 2, .val_accuracy = 0.25 };
	assert_int_equal(c->cb.on_epoch_end(&c->cb, NULL, &logs), 0);
}

static void test_csv_logger(void **state)
{
	char dir[] = "/tmp/dtrain-csv-XXXXXX", path[4096];
	struct dt_csv_logger_config cfg = { .filename = "history.csv", .separator = ",", .append = 0 };
	struct dt_csv_logger c, d;
	char *json;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/history.csv", dir);
	assert_int_equal(dt_csv_logger_init(&c, &cfg, dir), 0);
	csv_epoch(&c, 0, 0.75);
	csv_epoch(&c, 1, 0.5);
	assert_int_equal(c.cb.on_train_end(&c.cb, NULL), 0);
	assert_string_equal(read_all(path), "epoch,accuracy,loss,val_accuracy,val_loss\n"
					    "0,0.5,0.75,0.25,1.5\n"
					    "1,0.5,0.5,0.25,1.0\n");
	/* append: no second header. */
	cfg.append = 1;
	cfg.separator = ";";
	dt_csv_logger_init(&c, &cfg, dir);
	csv_epoch(&c, 2, 0.25);
	c.cb.on_train_end(&c.cb, NULL);
	assert_string_equal(read_all(path), "epoch,accuracy,loss,val_accuracy,val_loss\n"
					    "0,0.5,0.75,0.25,1.5\n"
					    "1,0.5,0.5,0.25,1.0\n"
					    "2;0.5;0.25;0.25;0.5\n");
	/* Not appending: a new file. A resume truncates the rows after the saved position. */
	cfg.append = 0;
	cfg.separator = ",";
	dt_csv_logger_init(&c, &cfg, dir);
	csv_epoch(&c, 0, 0.75);
	json = c.cb.state_save(&c.cb, NULL);
	csv_epoch(&c, 1, 0.5);
	c.cb.on_train_end(&c.cb, NULL);
	dt_csv_logger_init(&d, &cfg, dir);
	assert_int_equal(d.cb.state_load(&d.cb, NULL, json), 0);
	free(json);
	csv_epoch(&d, 1, 0.125);
	d.cb.on_train_end(&d.cb, NULL);
	assert_string_equal(read_all(path), "epoch,accuracy,loss,val_accuracy,val_loss\n"
					    "0,0.5,0.75,0.25,1.5\n"
					    "1,0.5,0.125,0.25,0.25\n");
	unlink(path);
	rmdir(dir);
}

static void test_tensorboard_config(void **state)
{
	struct dt_callbacks_config c;
	assert_int_equal(parse(&c, "callbacks: [tensorboard]\n"), 0);
	assert_true(c.tensorboard);
	assert_string_equal(c.tensorboard_cfg.log_dir, "logs");
	assert_int_equal(c.tensorboard_cfg.update_freq, 0);
	assert_int_equal(parse(&c, "callbacks: [{tensorboard: {log_dir: tb, update_freq: 50}}]\n"), 0);
	assert_string_equal(c.tensorboard_cfg.log_dir, "tb");
	assert_int_equal(c.tensorboard_cfg.update_freq, 50);
	assert_int_equal(parse(&c, "callbacks: [{tensorboard: {update_freq: batch}}]\n"), 0);
	assert_int_equal(c.tensorboard_cfg.update_freq, 1);
	assert_int_equal(parse(&c, "callbacks: [{tensorboard: {update_freq: epoch}}]\n"), 0);
	assert_int_equal(c.tensorboard_cfg.update_freq, 0);
	dt_error_set_quiet(1);
	assert_int_equal(parse(&c, "callbacks: [{tensorboard: {update_freq: 0}}]\n"), -1);
	assert_error_contains("'update_freq' must be 'epoch', 'batch' or a number of batches");
	assert_string_equal(dt_cfg_last_where(), "m.yaml:1:41");
	assert_int_equal(parse(&c, "callbacks: [{tensorboard: {log_dri: x}}]\n"), -1);
	assert_error_contains("did you mean 'log_dir'");
	assert_int_equal(parse(&c, "callbacks: [tensorboard, tensorboard]\n"), -1);
	assert_error_contains("listed twice");
	assert_int_equal(parse(&c, "callbacks: [tensorbord]\n"), -1);
	assert_error_contains("did you mean 'tensorboard'");
	dt_error_set_quiet(0);
}

static int teardown(void **state)
{
	dt_doc_free(doc);
	doc = NULL;
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_config),
		cmocka_unit_test(test_config_errors),
		cmocka_unit_test(test_monitor_modes),
		cmocka_unit_test(test_early_stopping),
		cmocka_unit_test(test_early_stopping_baseline),
		cmocka_unit_test(test_early_stopping_state),
		cmocka_unit_test(test_restore_best_weights),
		cmocka_unit_test(test_reduce_lr),
		cmocka_unit_test(test_reduce_lr_state_and_optimizer),
		cmocka_unit_test(test_terminate_on_nan),
		cmocka_unit_test(test_repr),
		cmocka_unit_test(test_csv_logger),
		cmocka_unit_test(test_tensorboard_config),
	};
	return cmocka_run_group_tests(tests, NULL, teardown);
}
