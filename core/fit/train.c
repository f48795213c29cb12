#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>

#include "core/error.h"
#include "core/rng.h"
#include "core/testhook.h"
#include "core/fit/train.h"

/* ---- signals: the handlers set these, the loop reads them between steps ---- */

static volatile sig_atomic_t stop_signal; /* SIGINT or SIGTERM received */
static volatile sig_atomic_t save_request; /* SIGUSR1 received */

static void on_signal(int sig)
{
	if (sig == SIGUSR1) {
		save_request = 1;
		return;
	}
	if (stop_signal) { /* the second one: die now, as the user asks */
		signal(sig, SIG_DFL);
		raise(sig);
		return;
	}
	stop_signal = sig;
}

void dt_fit_signals_install(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	/* A signal the parent set to be ignored (a background job's SIGINT) stays ignored. */
	for (int i = 0; i < 3; i++) {
		int sig = i == 0 ? SIGINT : i == 1 ? SIGTERM : SIGUSR1;
		struct sigaction old;
		if (sigaction(sig, NULL, &old) == 0 && old.sa_handler == SIG_IGN)
			continue;
		sigaction(sig, &sa, NULL);
	}
}

/*
 * The signal flags, the same on every process (a SIGINT may reach only some
 * of an MPI job): [0] stop signal, [1] save request. Clears save_request.
 * With pos (after a training step), also pos->all_sums and pos->all_stats,
 * in the same all-reduce.
 */
static void poll_signals(struct dt_trainer *t, double flags[2], struct dt_fit_pos *pos)
{
	double *v = t->reduce_buf;
	int64_t nstats = t->metrics.nstats;
	int n = pos ? 2 + DT_NSUMS + (int)nstats : 2;
	v[0] = stop_signal;
	v[1] = save_request;
	save_request = 0;
	if (pos) {
		memcpy(v + 2, pos->sums, sizeof(pos->sums));
		if (nstats)
			memcpy(v + 2 + DT_NSUMS, pos->stats, (size_t)nstats * sizeof(double));
	}
	if (t->strategy->world > 1)
		t->strategy->type->reduce_sum(t->strategy, v, n);
	flags[0] = v[0];
	flags[1] = v[1];
	if (pos) {
		memcpy(pos->all_sums, v + 2, sizeof(pos->all_sums));
		if (nstats)
			memcpy(pos->all_stats, v + 2 + DT_NSUMS, (size_t)nstats * sizeof(double));
	}
}

/* Writes pos with every saver, or with those that keep latest.safetensors (the resumable ones). */
static int save_all(struct dt_trainer *t, const struct dt_fit_pos *pos, int resumable_only)
{
	for (int i = 0; i < t->nsavers; i++)
		if ((resumable_only ? t->savers[i]->resumable : !pos->epoch_end || t->savers[i]->at_epoch_end) &&
		    t->savers[i]->save(t->savers[i], t, pos) < 0)
			return -1;
	return 0;
}

double dt_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void dt_trainer_init(struct dt_trainer *t)
{
	if (t->strategy->global_replicas == 0) /* a strategy made by hand (tests): this process's replicas only */
		t->strategy->global_replicas = t->strategy->nreplicas;
	struct dt_strategy *s = t->strategy;
	int max = t->models[0].max_batch;
	t->label = t->train->label;
	t->ready_replica = -1;
	dt_batch_alloc(&t->batch, t->train);
	t->labels = dt_calloc(s->nreplicas, sizeof(float *));
	for (int r = 0; r < s->nreplicas; r++)
		t->labels[r] = dt_device_alloc(s->devices[r], (int64_t)max * dt_shape_count(&t->label));
	if (t->train->src && t->train->src->sample_weight) {
		t->sample_weights = dt_calloc(s->nreplicas, sizeof(float *));
		for (int r = 0; r < s->nreplicas; r++)
			t->sample_weights[r] = dt_device_alloc(s->devices[r], max);
		t->weight_host = dt_calloc((size_t)t->batch.capacity, sizeof(float));
	}
	t->reduce_buf = dt_calloc(2 + DT_NSUMS + (size_t)t->metrics.nstats, sizeof(double));
	if (t->metrics.nstats) {
		int64_t n = dt_metric_scratch(&t->metrics);
		t->metric_scratch = dt_calloc(s->nreplicas, sizeof(float *));
		t->metric_host = dt_calloc(s->nreplicas, sizeof(float *));
		for (int r = 0; r < s->nreplicas; r++) {
			t->metric_scratch[r] = dt_device_alloc(s->devices[r], n);
			t->metric_host[r] = dt_calloc((size_t)n, sizeof(float));
		}
	}
	if (t->accumulate_steps < 1)
		t->accumulate_steps = 1;
	if (t->accumulate_steps > 1) {
		t->accum = dt_calloc(s->nreplicas, sizeof(float *));
		for (int r = 0; r < s->nreplicas; r++)
			t->accum[r] = dt_device_alloc(s->devices[r], t->models[r].ntrainable);
	}
}

void dt_trainer_set_class_weights(struct dt_trainer *t, const float *w, int num_classes)
{
	struct dt_strategy *s = t->strategy;
	t->num_classes = num_classes;
	t->class_weights = dt_calloc(s->nreplicas, sizeof(float *));
	for (int r = 0; r < s->nreplicas; r++) {
		struct dt_tensor cw = dt_tensor_flat(dt_device_alloc(s->devices[r], num_classes), s->devices[r], num_classes);
		dt_op_from_host(&cw, w);
		t->class_weights[r] = cw.data;
	}
}

void dt_trainer_release(struct dt_trainer *t)
{
	dt_batch_free(&t->batch);
	for (int r = 0; t->labels && r < t->strategy->nreplicas; r++)
		dt_device_free(t->strategy->devices[r], t->labels[r]);
	free(t->labels);
	t->labels = NULL;
	for (int r = 0; t->accum && r < t->strategy->nreplicas; r++)
		dt_device_free(t->strategy->devices[r], t->accum[r]);
	free(t->accum);
	t->accum = NULL;
	for (int r = 0; t->class_weights && r < t->strategy->nreplicas; r++)
		dt_device_free(t->strategy->devices[r], t->class_weights[r]);
	free(t->class_weights);
	t->class_weights = NULL;
	for (int r = 0; t->sample_weights && r < t->strategy->nreplicas; r++)
		dt_device_free(t->strategy->devices[r], t->sample_weights[r]);
	free(t->sample_weights);
	t->sample_weights = NULL;
	free(t->weight_host);
	t->weight_host = NULL;
	for (int r = 0; t->metric_scratch && r < t->strategy->nreplicas; r++)
		dt_device_free(t->strategy->devices[r], t->metric_scratch[r]);
	free(t->metric_scratch);
	t->metric_scratch = NULL;
	for (int r = 0; t->metric_host && r < t->strategy->nreplicas; r++)
		free(t->metric_host[r]);
	free(t->metric_host);
	t->metric_host = NULL;
	free(t->reduce_buf);
	t->reduce_buf = NULL;
	free(t->initial_stats);
	t->initial_stats = NULL;
}

int dt_trainer_add_callback(struct dt_trainer *t, struct dt_callback *cb)
{
	DT_ASSERT(t->ncallbacks < DT_MAX_CALLBACKS);
	t->callbacks[t->ncallbacks++] = cb;
	return 0;
}

int dt_trainer_add_saver(struct dt_trainer *t, struct dt_saver *s)
{
	DT_ASSERT(t->nsavers < DT_MAX_SAVERS);
	t->savers[t->nsavers++] = s;
	return 0;
}

void dt_trainer_set_learning_rate(struct dt_trainer *t, double lr)
{
	for (int r = 0; r < t->strategy->nreplicas; r++)
		dt_optimizer_set_learning_rate(&t->opts[r], lr);
}

double dt_trainer_learning_rate(const struct dt_trainer *t) { return t->opts[0].learning_rate; }

void dt_trainer_stop(struct dt_trainer *t, int how) { t->stop_training = how; }

void dt_trainer_set_weights(struct dt_trainer *t, const float *host)
{
	for (int r = 0; r < t->strategy->nreplicas; r++) {
		struct dt_model *m = &t->models[r];
		struct dt_tensor w = dt_tensor_flat(m->params, m->dev, m->nparams);
		dt_op_from_host(&w, host);
	}
}

double dt_logs_get(const struct dt_logs *logs, const char *name)
{
	if (!strcmp(name, "loss"))
		return logs->loss;
	if (!strcmp(name, "accuracy"))
		return logs->has_accuracy ? logs->accuracy : NAN;
	if (!strcmp(name, "val_loss"))
		return logs->has_val ? logs->val_loss : NAN;
	if (!strcmp(name, "val_accuracy"))
		return logs->has_val && logs->has_accuracy ? logs->val_accuracy : NAN;
	if (!strcmp(name, "mae"))
		return logs->has_errors ? logs->mae : NAN;
	if (!strcmp(name, "rmse"))
		return logs->has_errors ? logs->rmse : NAN;
	if (!strcmp(name, "val_mae"))
		return logs->has_val && logs->has_errors ? logs->val_mae : NAN;
	if (!strcmp(name, "val_rmse"))
		return logs->has_val && logs->has_errors ? logs->val_rmse : NAN;
	if (!strcmp(name, "learning_rate"))
		return logs->has_learning_rate ? logs->learning_rate : NAN;
	{
		int val = !strncmp(name, "val_", 4), i;
		if (dt_metric_find(logs->metrics, val ? name + 4 : name, &i))
			return !val ? logs->metric[i] : logs->has_val ? logs->val_metric[i] : NAN;
	}
	return NAN;
}

void dt_trainer_replica_step(struct dt_trainer *t, int r, const struct dt_batch *b, int begin, int end,
			     int train, const struct dt_step_ctx *ctx, double sums[DT_NSUMS], double *stats, int group)
{
	struct dt_model *m = &t->models[r];
	int n = end - begin;
	int R = t->strategy->global_replicas;
	int64_t xs = dt_shape_count(&m->input), ys = dt_shape_count(&t->label);
	struct dt_tensor x, y, pred, dpred;
	/* The strategy's hook, on the replica whose backward finishes the local gradients of an update. */
	void (*ready)(struct dt_strategy *, struct dt_model *, int64_t) =
		train && r == t->ready_replica ? t->strategy->type->grads_ready : NULL;

	if (n == 0) {
		if (train) {
			struct dt_tensor g = dt_model_grads(m);
			dt_op_fill(&g, 0);
			if (ready)
				ready(t->strategy, t->models, 0);
		}
		return;
	}
	x = dt_model_input(m, n);
	dt_op_from_host(&x, b->x + (int64_t)begin * xs);
	y = dt_tensor_batch(t->labels[r], m->dev, n, &t->label);
	dt_op_from_host(&y, b->y + (int64_t)begin * ys);
	pred = dt_model_forward(m, n, ctx);
	dpred = dt_model_output_grad(m, n);
	if (train && (t->class_weights || t->sample_weights)) {
		struct dt_tensor cw, sw;
		if (t->class_weights)
			cw = dt_tensor_flat(t->class_weights[r], m->dev, t->num_classes);
		if (t->sample_weights) {
			/* The weights of the batch's records, as Keras multiplies them with the class weights. */
			const float *by_record = t->train->src->sample_weight;
			for (int i = begin; i < end; i++)
				t->weight_host[i] = by_record[b->records[i]];
			sw = dt_tensor_flat(t->sample_weights[r], m->dev, n);
			dt_op_from_host(&sw, t->weight_host + begin);
		}
		sums[DT_SUM_LOSS] += dt_objective_loss_weighted(&t->objective, &pred, &y,
								t->class_weights ? &cw : NULL,
								t->sample_weights ? &sw : NULL, &dpred,
								1.0f / ((float)b->total * group));
	} else {
		sums[DT_SUM_LOSS] += dt_objective_loss(&t->objective, &pred, &y, train ? &dpred : NULL,
						       1.0f / ((float)b->total * group));
	}
	if (t->accuracy)
		sums[DT_SUM_CORRECT] += (double)dt_objective_correct(&t->objective, &pred, &y);
	if (t->errors) {
		double err[2];
		dt_op_error_sums(&pred, &y, err);
		sums[DT_SUM_ABS_ERROR] += err[0];
		sums[DT_SUM_SQ_ERROR] += err[1];
	}
	if (stats && t->metrics.nstats) {
		struct dt_tensor scratch = dt_tensor_flat(t->metric_scratch[r], m->dev, dt_metric_scratch(&t->metrics));
		dt_metric_accumulate(&t->metrics, &pred, &y, &scratch, t->metric_host[r], stats);
	}
	if (train) {
		/* Every replica adds 1/R of the penalty's gradient: the sum is one penalty. */
		double penalty = 0;
		for (int i = m->nlayers - 1, first = dt_model_first_trainable(m); i >= 0; i--) {
			if (i >= first)
				dt_model_backward_layer(m, i, n);
			penalty += dt_model_regularize_layer(m, i, 1.0f / ((float)R * group));
			if (ready)
				ready(t->strategy, t->models, dt_model_grad_offset(m, i));
		}
		sums[DT_SUM_LOSS] += penalty * b->total / R;
	}
}

uint64_t dt_trainer_step_key(const struct dt_trainer *t, int epoch, int64_t step)
{
	/* step * DT_MAX_REPLICAS is the key replica 0 always had: one_device's masks did not change. */
	return dt_hash64(dt_hash64(t->seed, (uint64_t)epoch), (uint64_t)step * DT_MAX_REPLICAS);
}

static void fill_logs(const struct dt_trainer *t, struct dt_logs *logs, const double sums[DT_NSUMS],
		      const double *stats)
{
	logs->metrics = &t->metrics;
	for (int i = 0; i < t->metrics.n; i++)
		logs->metric[i] = dt_metric_value(&t->metrics, i, stats);
	double n = sums[DT_SUM_SAMPLES], values = n * t->objective.outputs;
	logs->loss = n > 0 ? sums[DT_SUM_LOSS] / n : 0;
	logs->has_accuracy = t->accuracy;
	logs->accuracy = n > 0 ? sums[DT_SUM_CORRECT] / (n * t->objective.per_sample) : 0;
	logs->has_errors = t->errors;
	logs->mae = values > 0 ? sums[DT_SUM_ABS_ERROR] / values : 0;
	logs->rmse = values > 0 ? sqrt(sums[DT_SUM_SQ_ERROR] / values) : 0;
}

int dt_evaluate(struct dt_trainer *t, struct dt_pipeline *p, struct dt_metrics *out)
{
	struct dt_batch *b = &t->batch; /* every pipeline has the training batch size and label shape */
	struct dt_step_ctx ctx = { .training = 0 };
	double sums[DT_NSUMS] = { 0 };
	double *stats = dt_calloc((size_t)t->metrics.nstats + 1, sizeof(double));
	int64_t steps = dt_pipeline_steps(p);
	struct dt_model *m = &t->models[0];
	struct dt_logs logs = { 0 };

	DT_ASSERT(p->batch_size == t->train->batch_size && dt_shape_equal(&p->label, &t->label));
	for (int64_t step = 0; step < steps; step++) {
		if (dt_pipeline_read(p, 0, step, b) < 0) {
			free(stats);
			return -1;
		}
		/* Inference on replica 0, in chunks of its batch capacity. */
		for (int k = 0; k < b->n; k += m->max_batch)
			dt_trainer_replica_step(t, 0, b, k, b->n - k < m->max_batch ? b->n : k + m->max_batch, 0, &ctx, sums,
						stats, 1);
		sums[DT_SUM_SAMPLES] += b->n;
		if (step == 0) {
			dt_test_crash_point("evaluate");
			dt_test_raise_in("evaluate");
		}
		if (stop_signal) {
			free(stats);
			return 1;
		}
	}
	dt_pipeline_report_skipped(p, -1);
	fill_logs(t, &logs, sums, stats);
	out->loss = logs.loss;
	out->accuracy = logs.accuracy;
	out->mae = logs.mae;
	out->rmse = logs.rmse;
	out->samples = (int64_t)sums[DT_SUM_SAMPLES];
	memcpy(out->metric, logs.metric, sizeof(out->metric));
	if (out->stats)
		memcpy(out->stats, stats, (size_t)t->metrics.nstats * sizeof(double));
	free(stats);
	return 0;
}

/* Batches in the accumulation group of `step`: k, or fewer for an epoch's last group. */
static int group_size(const struct dt_trainer *t, int64_t step, int64_t steps)
{
	int64_t k = t->accumulate_steps > 1 ? t->accumulate_steps : 1, first = step / k * k;
	return (int)(steps - first < k ? steps - first : k);
}

int dt_trainer_ends_update(const struct dt_trainer *t, int64_t step, int64_t steps)
{
	int64_t k = t->accumulate_steps > 1 ? t->accumulate_steps : 1;
	return step % k == group_size(t, step, steps) - 1;
}

/*
 * After the backward of `step`: keeps the replicas' gradients in the
 * accumulation buffers, or at a group's last batch adds the buffers back.
 * 1 when the gradient buffers now hold a whole group: time to apply them.
 */
static int accumulate(struct dt_trainer *t, int64_t step, int64_t steps)
{
	int64_t k = t->accumulate_steps, pos = step % k;
	int last = dt_trainer_ends_update(t, step, steps);
	if (k == 1 || (last && pos == 0))
		return 1;
	for (int r = 0; r < t->strategy->nreplicas; r++) {
		struct dt_model *m = &t->models[r];
		struct dt_tensor g = dt_model_grads(m), acc = dt_tensor_flat(t->accum[r], m->dev, m->ntrainable);
		if (last)
			dt_op_axpy(1, &acc, &g);
		else if (pos == 0)
			dt_op_copy(&g, &acc);
		else
			dt_op_axpy(1, &g, &acc);
	}
	return last;
}

int dt_trainer_read_batch(struct dt_trainer *t, int epoch, int64_t step)
{
	struct dt_strategy *s = t->strategy;
	struct dt_batch *b = &t->batch;
	double *rows;
	if (dt_pipeline_read(t->train, epoch, step, b) < 0)
		return -1;
	if (t->train->part_total == 0 || t->train->on_error != DT_ON_ERROR_SKIP || s->type->asynchronous)
		return 0;
	rows = dt_calloc((size_t)s->global_replicas, sizeof(*rows));
	rows[s->first_replica] = b->n;
	s->type->reduce_sum(s, rows, s->global_replicas);
	b->offset = b->total = 0;
	for (int g = 0; g < s->global_replicas; g++) {
		b->offset += g < s->first_replica ? (int)rows[g] : 0;
		b->total += (int)rows[g];
	}
	free(rows);
	return 0;
}

static int cmp_record(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/*
 * The epoch's skipped training records, warned of by the chief: with parts,
 * every process's count and lowest DT_SKIP_LIST records are summed into its
 * slot of one vector, and the chief names the lowest of those records. The
 * count of all processes.
 */
static int64_t report_skipped(struct dt_trainer *t, int epoch)
{
	struct dt_strategy *s = t->strategy;
	struct dt_pipeline *p = t->train;
	const int slot = 1 + DT_SKIP_LIST;
	int64_t all = 0;
	double *v, *list;
	int nlist = 0;

	if (p->part_total == 0)
		return dt_pipeline_report_skipped(p, epoch);
	v = dt_calloc((size_t)s->global_replicas * slot, sizeof(*v));
	list = dt_calloc((size_t)s->global_replicas * DT_SKIP_LIST, sizeof(*list));
	v[s->first_replica * slot] = (double)p->skipped;
	for (int i = 0; i < p->skipped && i < DT_SKIP_LIST; i++)
		v[s->first_replica * slot + 1 + i] = (double)p->skipped_list[i];
	s->type->reduce_sum(s, v, s->global_replicas * slot);
	for (int g = 0; g < s->global_replicas; g++) {
		all += (int64_t)v[g * slot];
		for (int i = 0; i < v[g * slot] && i < DT_SKIP_LIST; i++)
			list[nlist++] = v[g * slot + 1 + i];
	}
	qsort(list, (size_t)nlist, sizeof(*list), cmp_record);
	p->skipped = all;
	for (int i = 0; i < nlist && i < DT_SKIP_LIST; i++)
		p->skipped_list[i] = (int64_t)list[i];
	free(v);
	free(list);
	return dt_pipeline_report_skipped(p, epoch);
}

/*
 * Steps pos->step.. of epoch pos->epoch, updating pos. 0 at the epoch's end
 * (logs has its training metrics), 1 when a stop signal ended it early after
 * a checkpoint, -1 after an error.
 */
static int run_epoch(struct dt_trainer *t, struct dt_fit_pos *pos, struct dt_logs *logs)
{
	struct dt_strategy *s = t->strategy;
	int epoch = pos->epoch;
	int64_t steps = dt_pipeline_steps(t->train);
	double *sums = pos->sums, *stats = pos->stats, start = dt_now(), flags[2], total[DT_NSUMS];
	int64_t nstats = t->metrics.nstats;
	unsigned due = 0;
	int stop = 0, signal_save = 0;

	if (t->steps_per_epoch > 0 && t->steps_per_epoch < steps)
		steps = t->steps_per_epoch;
	memset(logs, 0, sizeof(*logs));
	logs->epoch = epoch;
	logs->steps = steps;
	logs->step = pos->step;
	fill_logs(t, logs, sums, stats);
	pos->logs = logs;
	for (int64_t step = pos->step; step < steps; step++) {
		if (dt_trainer_read_batch(t, epoch, step) < 0)
			return -1;
		/*
		 * An update's gradients may be exchanged as the last replica's
		 * backward makes them: each batch that is applied (below), unless
		 * gradients accumulate over batches.
		 */
		t->ready_replica = t->accumulate_steps <= 1 && t->batch.total > 0 ? s->nreplicas - 1 : -1;
		for (int r = 0; r < s->nreplicas; r++) {
			/*
			 * This process's rows (its part of the global batch) in
			 * slices over its replicas. One key for all replicas, and
			 * each its first row in the global batch: a sample's
			 * dropout mask is the same for any replica count.
			 */
			int begin, end;
			dt_batch_slice(t->batch.n, r, s->nreplicas, &begin, &end);
			struct dt_step_ctx ctx = { .training = 1, .key = dt_trainer_step_key(t, epoch, step),
						   .first_row = t->batch.offset + begin };
			dt_trainer_replica_step(t, r, &t->batch, begin, end, 1, &ctx, sums, stats,
						group_size(t, step, steps));
			sums[DT_SUM_SAMPLES] += end - begin;
			if (t->trace)
				for (int i = begin; i < end; i++)
					fprintf(t->trace, "%d %lld\n", epoch, (long long)t->batch.records[i]);
		}
		t->ready_replica = -1;
		/* A batch whose every record was unreadable (data.on_error: skip) adds no gradient; alone, no update. */
		if (accumulate(t, step, steps) && (t->batch.total > 0 || t->accumulate_steps > 1))
			s->type->apply_gradients(s, t->models, t->opts);
		logs->step = step + 1;
		logs->seconds = dt_now() - start;
		fill_logs(t, logs, sums, stats);
		for (int i = 0; i < t->ncallbacks; i++)
			if (t->callbacks[i]->on_batch_end)
				t->callbacks[i]->on_batch_end(t->callbacks[i], t, logs);
		pos->step = step + 1;
		pos->global_step++;
		dt_test_crash_point("step");
		dt_test_raise_at(pos->global_step);
		if (t->stop_training) /* a callback ends training at this batch (terminate_on_nan) */
			break;
		/* What is due waits for the end of an update: stop, signal checkpoint, each saver's `every`. */
		poll_signals(t, flags, pos);
		stop |= flags[0] != 0;
		signal_save |= flags[1] != 0 || flags[0] != 0;
		/* At the epoch's last step, a writer that also writes at epoch ends waits for that one. */
		for (int i = 0; i < t->nsavers; i++)
			if (t->savers[i]->every && pos->global_step % t->savers[i]->every == 0 &&
			    !(step + 1 == steps && t->savers[i]->at_epoch_end))
				due |= 1u << i;
		/* Step checkpoints and signal stops only where the optimizer has applied every gradient. */
		if (!dt_trainer_ends_update(t, step, steps))
			continue;
		/* A parameter server's chief first gathers the shards: the file holds the whole state. */
		if (s->type->sync_state && (due || (signal_save && t->nsavers)) && s->type->sync_state(s, t->models, t->opts) < 0)
			return -1;
		for (int i = 0; i < t->nsavers; i++)
			if (((due >> i & 1) || (signal_save && t->savers[i]->resumable)) &&
			    t->savers[i]->save(t->savers[i], t, pos) < 0)
				return -1;
		due = 0;
		signal_save = 0;
		if (stop) {
			t->stop_signal = stop_signal ? stop_signal : SIGTERM;
			return 1;
		}
	}
	/* Reduced in a copy: pos keeps this process's sums for a checkpoint taken in validation. */
	memcpy(total, sums, sizeof(total));
	s->type->reduce_sum(s, total, DT_NSUMS);
	memcpy(pos->all_sums, total, sizeof(total));
	if (nstats) {
		memcpy(pos->all_stats, stats, (size_t)nstats * sizeof(double));
		s->type->reduce_sum(s, pos->all_stats, (int)nstats);
	}
	logs->skipped = report_skipped(t, epoch);
	fill_logs(t, logs, total, pos->all_stats);
	logs->seconds = dt_now() - start;
	logs->samples_per_sec = logs->seconds > 0 ? total[DT_SUM_SAMPLES] / logs->seconds : 0;
	return 0;
}

/*
 * The chief's decision (stop: -1 error, 0 go on, 1 stop) and learning rate
 * for every process and replica (strategy agree); returns the decision.
 */
static int agree(struct dt_trainer *t, int stop)
{
	struct dt_strategy *s = t->strategy;
	double v[2] = { stop, dt_trainer_learning_rate(t) };
	if (s->type->agree)
		s->type->agree(s, v, 2);
	dt_trainer_set_learning_rate(t, v[1]);
	return (int)v[0];
}

static int train_end(struct dt_trainer *t, int rc)
{
	for (int i = 0; i < t->ncallbacks; i++)
		if (t->callbacks[i]->on_train_end && t->callbacks[i]->on_train_end(t->callbacks[i], t) < 0)
			rc = -1;
	return rc;
}

static int fit_epochs(struct dt_trainer *t, struct dt_fit_pos *pos_in);

int dt_fit(struct dt_trainer *t)
{
	struct dt_fit_pos pos = { .epoch = t->initial_epoch, .step = t->initial_step,
				  .global_step = t->initial_global_step };
	int64_t nstats = t->metrics.nstats;
	int rc;

	memcpy(pos.sums, t->initial_sums, sizeof(pos.sums));
	pos.stats = dt_calloc((size_t)nstats + 1, sizeof(double));
	pos.all_stats = dt_calloc((size_t)nstats + 1, sizeof(double));
	if (nstats && t->initial_stats)
		memcpy(pos.stats, t->initial_stats, (size_t)nstats * sizeof(double));
	rc = fit_epochs(t, &pos);
	free(pos.stats);
	free(pos.all_stats);
	return rc;
}

/* dt_fit's epochs from pos. */
static int fit_epochs(struct dt_trainer *t, struct dt_fit_pos *pos_in)
{
	struct dt_strategy *s = t->strategy;
	struct dt_fit_pos pos = *pos_in;
	struct dt_logs logs;
	double flags[2];
	int64_t nstats = t->metrics.nstats;
	int rc;

	if (s->type->serve) {
		rc = s->type->serve(s, t->models, t->opts);
		if (rc)
			return rc < 0 ? -1 : 0;
	}
	/* Every training process resumes where the chief does: the same checkpoint (a shared run directory). */
	if (s->world > 1 && s->type->agree) {
		double mine[3] = { pos.epoch, (double)pos.step, (double)pos.global_step }, chief[3];
		memcpy(chief, mine, sizeof(chief));
		s->type->agree(s, chief, 3);
		if (memcmp(mine, chief, sizeof(mine)))
			return dt_error("rank %d would start at epoch %d, step %lld, but the chief at epoch %.0f, step %.0f: "
					"every rank must read the chief's checkpoint (with --resume, the run directory "
					"must be the same on every host, e.g. on a shared filesystem)",
					s->rank, pos.epoch + 1, (long long)pos.step, chief[0] + 1, chief[1]);
	}
	t->stop_training = 0;
	for (; pos.epoch < t->epochs; pos.epoch++) {
		for (int i = 0; i < t->ncallbacks; i++)
			if (t->callbacks[i]->on_epoch_begin)
				t->callbacks[i]->on_epoch_begin(t->callbacks[i], t, pos.epoch);
		agree(t, 0);
		if ((rc = run_epoch(t, &pos, &logs)) != 0)
			return rc < 0 ? -1 : DT_FIT_INTERRUPTED;
		if (t->stop_training < 0)
			return train_end(t, -1);
		if (s->type->epoch_end && s->type->epoch_end(s, t->models, t->opts, pos.epoch) < 0)
			return -1;
		/* The rate of the next update, before callbacks change it (Keras' logs). */
		logs.has_learning_rate = t->log_learning_rate;
		logs.learning_rate = (float)dt_optimizer_lr(&t->opts[0]);
		if (t->val) {
			struct dt_metrics val = { .stats = NULL };
			rc = dt_evaluate(t, t->val, &val);
			if (rc < 0)
				return -1;
			logs.has_val = 1;
			logs.val_loss = val.loss;
			logs.val_accuracy = val.accuracy;
			logs.val_mae = val.mae;
			logs.val_rmse = val.rmse;
			memcpy(logs.val_metric, val.metric, sizeof(logs.val_metric));
		}
		poll_signals(t, flags, NULL);
		if (rc > 0 || flags[0]) {
			/* Stopped during validation: resume at the end of this epoch's steps. */
			t->stop_signal = stop_signal ? stop_signal : SIGTERM;
			return t->nsavers && save_all(t, &pos, 1) < 0 ? -1 : DT_FIT_INTERRUPTED;
		}
		int stop = 0;
		for (int i = 0; i < t->ncallbacks && stop >= 0; i++) {
			int r = t->callbacks[i]->on_epoch_end ? t->callbacks[i]->on_epoch_end(t->callbacks[i], t, &logs) : 0;
			stop = r < 0 ? -1 : stop | (r > 0);
		}
		stop = agree(t, stop ? stop : t->stop_training > 0);
		if (stop < 0)
			return -1;
		{
			struct dt_fit_pos end = { .epoch = pos.epoch + 1, .global_step = pos.global_step, .logs = &logs,
						  .epoch_end = 1, .stopped = stop };
			if (save_all(t, &end, 0) < 0)
				return -1;
		}
		pos.step = 0;
		memset(pos.sums, 0, sizeof(pos.sums));
		if (nstats)
			memset(pos.stats, 0, (size_t)nstats * sizeof(double));
		if (stop)
			break;
	}
	return train_end(t, 0);
}
