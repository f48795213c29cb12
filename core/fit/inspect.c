#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/rng.h"
#include "core/fit/inspect.h"

void dt_stats_compute(const float *x, int64_t n, struct dt_stats *s)
{
	double sum = 0, sq = 0, var = 0;
	int64_t finite = 0;

	memset(s, 0, sizeof(*s));
	s->count = n;
	for (int64_t i = 0; i < n; i++) {
		sq += (double)x[i] * x[i];
		if (!isfinite(x[i])) {
			s->nonfinite++;
			continue;
		}
		s->zeros += x[i] == 0;
		if (finite == 0 || x[i] < s->min)
			s->min = x[i];
		if (finite == 0 || x[i] > s->max)
			s->max = x[i];
		sum += x[i];
		finite++;
	}
	s->norm = sqrt(sq);
	if (finite == 0)
		return;
	s->mean = sum / (double)finite;
	for (int64_t i = 0; i < n; i++)
		if (isfinite(x[i]))
			var += (x[i] - s->mean) * (x[i] - s->mean);
	s->std = sqrt(var / (double)finite);
}

/* The statistics of tensor t, copied to host (at least t's count floats). */
static void tensor_stats(const struct dt_tensor *t, float *host, struct dt_stats *s)
{
	dt_op_to_host(t, host);
	dt_stats_compute(host, dt_shape_count(&t->shape), s);
}

/* ---- the reduce: every replica's numbers as doubles, each process filling its own ---- */

#define STATS_DOUBLES 8
#define HEAD_DOUBLES 6
#define PARAM_DOUBLES (2 * STATS_DOUBLES + 2)

static void pack_stats(const struct dt_stats *s, double *v)
{
	double a[STATS_DOUBLES] = { (double)s->count, (double)s->zeros, (double)s->nonfinite, s->mean,
				    s->std, s->min, s->max, s->norm };
	memcpy(v, a, sizeof(a));
}

static void unpack_stats(const double *v, struct dt_stats *s)
{
	*s = (struct dt_stats){ (int64_t)v[0], (int64_t)v[1], (int64_t)v[2], v[3], v[4], v[5], v[6], v[7] };
}

static int replica_doubles(const struct dt_inspect *o)
{
	return HEAD_DOUBLES + STATS_DOUBLES * (1 + o->nlayers) + PARAM_DOUBLES * o->nparams;
}

/* Replica g's entries, into v or (back) from v. */
static void pack_replica(struct dt_inspect *o, int g, double *v, int into)
{
	struct dt_inspect_replica *rp = &o->replicas[g];
	double *h = v;
	v += HEAD_DOUBLES;
	if (into) {
		double head[HEAD_DOUBLES] = { rp->rank, rp->dev.kind, rp->dev.index, rp->begin, rp->end, rp->loss_sum };
		memcpy(h, head, sizeof(head));
		pack_stats(&rp->input, v);
	} else {
		rp->rank = (int)h[0];
		rp->dev = (struct dt_device){ (enum dt_device_kind)h[1], (int)h[2] };
		rp->begin = (int)h[3];
		rp->end = (int)h[4];
		rp->loss_sum = h[5];
		unpack_stats(v, &rp->input);
	}
	v += STATS_DOUBLES;
	for (int i = 0; i < o->nlayers; i++, v += STATS_DOUBLES)
		into ? pack_stats(&rp->layers[i], v) : unpack_stats(v, &rp->layers[i]);
	for (int p = 0; p < o->nparams; p++, v += PARAM_DOUBLES) {
		struct dt_inspect_param *q = &rp->params[p];
		if (into) {
			pack_stats(&q->value, v);
			pack_stats(&q->grad, v + STATS_DOUBLES);
			v[2 * STATS_DOUBLES] = q->update_norm;
			v[2 * STATS_DOUBLES + 1] = (double)q->after_nonfinite;
		} else {
			unpack_stats(v, &q->value);
			unpack_stats(v + STATS_DOUBLES, &q->grad);
			q->update_norm = v[2 * STATS_DOUBLES];
			q->after_nonfinite = (int64_t)v[2 * STATS_DOUBLES + 1];
		}
	}
}

/*
 * Every process's replicas into every process: this one's entries and its
 * share of the differing count, summed over processes.
 */
static void gather(struct dt_strategy *s, struct dt_inspect *o)
{
	int k = replica_doubles(o), n = o->nreplicas * k + 1;
	double *v;
	if (s->world <= 1)
		return;
	v = dt_calloc(n, sizeof(double));
	for (int r = 0; r < s->nreplicas; r++)
		pack_replica(o, s->first_replica + r, v + (int64_t)(s->first_replica + r) * k, 1);
	v[n - 1] = o->differing;
	s->type->reduce_sum(s, v, n);
	for (int g = 0; g < o->nreplicas; g++)
		pack_replica(o, g, v + (int64_t)g * k, 0);
	o->differing = (int)v[n - 1];
	free(v);
}

/* ---- the step ---- */

/* Floats of host scratch that hold any activation of a batch of max_batch, or the trainable parameters. */
static int64_t scratch_floats(const struct dt_model *m)
{
	int64_t most = dt_shape_count(&m->input);
	for (int i = 0; i < m->nlayers; i++)
		if (dt_shape_count(&m->layers[i].out) > most)
			most = dt_shape_count(&m->layers[i].out);
	most *= m->max_batch;
	return most > m->ntrainable ? most : m->ntrainable;
}

/* Every trainable parameter's value and gradient statistics of replica model m, from host copies. */
static void param_stats(const struct dt_model *m, struct dt_inspect_replica *rp, float *w, float *g)
{
	struct dt_tensor tw = dt_model_params(m), tg = dt_model_grads(m);
	int p = 0;
	dt_op_to_host(&tw, w);
	dt_op_to_host(&tg, g);
	for (int i = 0; i < m->nlayers; i++)
		for (int k = 0; k < m->layers[i].nparams; k++) {
			const struct dt_param *pr = &m->layers[i].params[k];
			int64_t n = dt_shape_count(&pr->shape);
			if (!pr->trainable)
				continue;
			dt_stats_compute(w + pr->offset, n, &rp->params[p].value);
			dt_stats_compute(g + pr->offset, n, &rp->params[p].grad);
			p++;
		}
}

/* What the observe hook of a replica's model needs: where its statistics and dump rows go. */
struct observer {
	struct dt_inspect *o;
	struct dt_inspect_replica *rp;
	int dump_act;
	float *host;
};

/* The model's observe hook: the statistics of the input (layer -1) or of layer i's output, and the dump. */
static void observe(void *arg, const struct dt_model *m, int layer, const struct dt_tensor *y)
{
	struct observer *ob = arg;
	int64_t n = y->shape.dim[0], per = dt_shape_count(&y->shape) / (n ? n : 1);
	const struct dt_layer *l = layer < 0 ? NULL : &m->layers[layer];
	float *dump;
	tensor_stats(y, ob->host, layer < 0 ? &ob->rp->input : &ob->rp->layers[layer]);
	if (layer + 1 != ob->dump_act)
		return;
	dump = ob->o->dump + (int64_t)(ob->rp->begin - ob->o->dump_begin) * per;
	if (l && l->y_layout == DT_LAYOUT_BLOCKED) /* a run of convolutions keeps it in channel blocks */
		dt_layout_to_nhwc(ob->host, dump, n, (int64_t)l->out.dim[0] * l->out.dim[1], l->out.dim[2], l->block);
	else
		memcpy(dump, ob->host, (size_t)(n * per) * sizeof(float));
}

/*
 * Replica r's part of the batch b, fit's training step of it (epoch 0, step
 * 0's key) with the model's observe hook on: every layer's statistics and
 * the activation dump_act into o->dump.
 */
static void replica_pass(struct dt_trainer *t, int r, const struct dt_batch *b, int dump_act, float *host,
			 struct dt_inspect *o)
{
	struct dt_strategy *s = t->strategy;
	struct dt_model *m = &t->models[r];
	struct dt_inspect_replica *rp = &o->replicas[s->first_replica + r];
	struct observer ob = { o, rp, dump_act, host };
	struct dt_step_ctx ctx = { .training = 1, .key = dt_trainer_step_key(t, 0, 0), .first_row = rp->begin };
	double sums[DT_NSUMS] = { 0 };

	m->observe = observe;
	m->observe_arg = &ob;
	dt_trainer_replica_step(t, r, b, rp->begin - b->offset, rp->end - b->offset, 1, &ctx, sums, NULL, 1);
	m->observe = NULL;
	m->observe_arg = NULL;
	rp->loss_sum = sums[DT_SUM_LOSS];
}

/* FNV-1a over n floats' bytes: a fingerprint of a replica's weights. */
static uint64_t fingerprint(const float *x, int64_t n)
{
	const unsigned char *p = (const unsigned char *)x;
	uint64_t h = 1469598103934665603ull;
	for (int64_t i = 0; i < n * (int64_t)sizeof(float); i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

/*
 * One optimizer step through the strategy, then each parameter's update
 * norm and non-finite count, and how many of this process's replicas hold
 * weights other than the chief's replica 0 (o->differing, this process's share).
 */
static void apply_step(struct dt_trainer *t, struct dt_inspect *o, float *host)
{
	struct dt_strategy *s = t->strategy;
	int64_t nt = t->models[0].ntrainable;
	float *before = dt_malloc((size_t)(s->nreplicas * nt) * sizeof(float));
	float *first = dt_malloc((size_t)nt * sizeof(float));
	int local = 0;

	for (int r = 0; r < s->nreplicas; r++) {
		struct dt_tensor w = dt_model_params(&t->models[r]);
		dt_op_to_host(&w, before + r * nt);
	}
	s->type->apply_gradients(s, t->models, t->opts);
	for (int r = 0; r < s->nreplicas; r++) {
		struct dt_inspect_replica *rp = &o->replicas[s->first_replica + r];
		struct dt_tensor w = dt_model_params(&t->models[r]);
		dt_op_to_host(&w, host);
		for (int p = 0; p < o->nparams; p++) {
			const struct dt_param *pr = &t->models[r].layers[rp->params[p].layer].params[rp->params[p].index];
			double sq = 0;
			int64_t bad = 0;
			for (int64_t k = pr->offset; k < pr->offset + dt_shape_count(&pr->shape); k++) {
				double d = (double)host[k] - before[r * nt + k];
				sq += d * d;
				bad += !isfinite(host[k]);
			}
			rp->params[p].update_norm = sqrt(sq);
			rp->params[p].after_nonfinite = bad;
		}
		if (r == 0)
			memcpy(first, host, (size_t)nt * sizeof(float));
		else
			local += memcmp(first, host, (size_t)nt * sizeof(float)) != 0;
	}
	o->differing = local;
	if (s->world > 1 && s->type->agree) {
		uint64_t h = fingerprint(first, nt);
		double v[2] = { (double)(h >> 32), (double)(h & 0xffffffffu) }, mine[2] = { v[0], v[1] };
		s->type->agree(s, v, 2);
		if (memcmp(v, mine, sizeof(v)))
			o->differing = s->nreplicas;
	}
	o->stepped = 1;
	free(before);
	free(first);
}

/* The class count and the loss of a uniform prediction, from the objective and the model's output. */
static void uniform_loss(const struct dt_trainer *t, struct dt_inspect *o)
{
	int64_t width = dt_shape_count(&t->models[0].output);
	o->uniform_loss = NAN;
	o->classes = 0;
	if (t->objective.loss == DT_LOSS_BINARY_CROSSENTROPY) {
		o->classes = 2;
		o->uniform_loss = log(2.0);
	} else if (!dt_loss_is_regression(t->objective.loss) && width > 1) {
		o->classes = (int)width;
		o->uniform_loss = log((double)width);
	}
}

int dt_inspect_run(struct dt_trainer *t, int step, int dump_act, struct dt_inspect *o)
{
	struct dt_strategy *s = t->strategy;
	struct dt_model *m = &t->models[0];
	struct dt_batch *b = &t->batch;
	double loss = 0;
	float *host;

	memset(o, 0, sizeof(*o));
	o->nlayers = m->nlayers;
	for (int i = 0; i < m->nlayers; i++)
		for (int k = 0; k < m->layers[i].nparams; k++)
			o->nparams += m->layers[i].params[k].trainable;
	o->nreplicas = s->global_replicas;
	o->replicas = dt_calloc(o->nreplicas, sizeof(*o->replicas));
	for (int g = 0; g < o->nreplicas; g++) {
		o->replicas[g].layers = dt_calloc(o->nlayers, sizeof(struct dt_stats));
		o->replicas[g].params = dt_calloc(o->nparams ? o->nparams : 1, sizeof(struct dt_inspect_param));
		for (int i = 0, p = 0; i < m->nlayers; i++)
			for (int k = 0; k < m->layers[i].nparams; k++)
				if (m->layers[i].params[k].trainable)
					o->replicas[g].params[p++] = (struct dt_inspect_param){ i, k, .update_norm = NAN };
	}
	uniform_loss(t, o);
	if (dt_trainer_read_batch(t, 0, 0) < 0)
		return -1;
	o->rows = b->total;
	/* Activations and parameters in host[0..S), gradients in host[S..S + ntrainable). */
	host = dt_malloc((size_t)(scratch_floats(m) + m->ntrainable + 1) * sizeof(float));
	for (int r = 0; r < s->nreplicas; r++) {
		struct dt_inspect_replica *rp = &o->replicas[s->first_replica + r];
		rp->rank = s->rank;
		rp->dev = s->devices[r];
		/* Rows of the global batch: this process's part (b->offset on) sliced over its replicas. */
		dt_batch_slice(b->n, r, s->nreplicas, &rp->begin, &rp->end);
		rp->begin += b->offset;
		rp->end += b->offset;
	}
	if (dump_act >= 0) {
		int64_t per = dump_act ? dt_shape_count(&m->layers[dump_act - 1].out) : dt_shape_count(&m->input);
		o->dump_begin = o->replicas[s->first_replica].begin;
		o->dump_end = o->replicas[s->first_replica + s->nreplicas - 1].end;
		o->dump = dt_malloc((size_t)((o->dump_end - o->dump_begin) * per + 1) * sizeof(float));
	}
	for (int r = 0; r < s->nreplicas; r++) {
		replica_pass(t, r, b, dump_act, host, o);
		param_stats(&t->models[r], &o->replicas[s->first_replica + r], host, host + scratch_floats(m));
	}
	if (step)
		apply_step(t, o, host);
	gather(s, o);
	for (int g = 0; g < o->nreplicas; g++)
		loss += o->replicas[g].loss_sum;
	o->loss = b->total > 0 ? loss / b->total : NAN;
	free(host);
	return 0;
}

/* ---- warnings ---- */

static void warn(struct dt_inspect *o, const char *fmt, ...) DT_PRINTF(2, 3);
static void warn(struct dt_inspect *o, const char *fmt, ...)
{
	va_list ap;
	if (o->nwarnings >= DT_INSPECT_MAX_WARNINGS)
		return;
	va_start(ap, fmt);
	vsnprintf(o->warnings[o->nwarnings++], sizeof(o->warnings[0]), fmt, ap);
	va_end(ap);
}

/* The statistics of every replica's part together: layer i's output (i >= 0), or the input (i < 0). */
static struct dt_stats pooled(const struct dt_inspect *o, int i)
{
	struct dt_stats all = { 0 };
	double n = 0, sum = 0, sq = 0, norm = 0;
	for (int g = 0; g < o->nreplicas; g++) {
		const struct dt_stats *s = i < 0 ? &o->replicas[g].input : &o->replicas[g].layers[i];
		double f = (double)(s->count - s->nonfinite);
		if (s->count == 0)
			continue;
		if (f > 0 && (n == 0 || s->min < all.min))
			all.min = s->min;
		if (f > 0 && (n == 0 || s->max > all.max))
			all.max = s->max;
		all.count += s->count;
		all.zeros += s->zeros;
		all.nonfinite += s->nonfinite;
		n += f;
		sum += f * s->mean;
		sq += f * (s->std * s->std + s->mean * s->mean);
		norm += s->norm * s->norm;
	}
	all.norm = sqrt(norm);
	if (n > 0) {
		all.mean = sum / n;
		all.std = sqrt(fmax(sq / n - all.mean * all.mean, 0));
	}
	return all;
}

static void param_name(const struct dt_model *m, const struct dt_inspect_param *q, char *buf, size_t size)
{
	snprintf(buf, size, "%s/%s", m->layers[q->layer].name, m->layers[q->layer].params[q->index].name);
}

/* The input's scale, all-zero layers and the first non-finite values of the forward pass. */
static void warn_forward(struct dt_inspect *o, const struct dt_model *m)
{
	struct dt_stats in = pooled(o, -1);
	int zero_before = 0, bad_before = 0;
	int indices = m->nlayers && m->layers[0].type->index_limit; /* token indices: their scale is the vocabulary */

	if (in.nonfinite)
		warn(o, "the input batch holds %lld non-finite values (NaN or inf): check the data", (long long)in.nonfinite);
	else if (!indices && (fabs(in.mean) > DT_INSPECT_INPUT_MEAN || in.std > DT_INSPECT_INPUT_STD_HI))
		warn(o, "the input is not normalized: mean %.4g, std %.4g (data.rescale or data.normalize: auto "
		     "bring it near mean 0 and std 1)", in.mean, in.std);
	else if (!indices && in.std < DT_INSPECT_INPUT_STD_LO)
		warn(o, "the input is (nearly) constant: std %.4g over the batch", in.std);
	bad_before = in.nonfinite > 0;
	zero_before = in.count > 0 && in.zeros == in.count;
	for (int i = 0; i < m->nlayers; i++) {
		struct dt_stats s = pooled(o, i);
		const struct dt_layer *l = &m->layers[i];
		if (s.nonfinite && !bad_before)
			warn(o, "layer '%s' (%s) produced the first non-finite values: %lld of its %lld outputs are "
			     "NaN or inf, from finite inputs", l->name, l->type->name, (long long)s.nonfinite,
			     (long long)s.count);
		if (s.count && s.zeros == s.count && !zero_before)
			warn(o, "every output of layer '%s' (%s) is zero for this batch: %s", l->name, l->type->name,
			     l->act == DT_ACT_RELU ? "its ReLUs are dead (a very negative bias, too large a learning "
						     "rate, or an input of the wrong scale)"
						   : "the layers after it learn nothing from this batch");
		bad_before |= s.nonfinite > 0;
		zero_before = s.count > 0 && s.zeros == s.count;
	}
}

/* Replica 0's gradient norm of layer i's trainable parameters (-1: it has none). */
static double layer_grad_norm(const struct dt_inspect *o, int i)
{
	double sq = -1;
	for (int p = 0; p < o->nparams; p++)
		if (o->replicas[0].params[p].layer == i)
			sq = (sq < 0 ? 0 : sq) + o->replicas[0].params[p].grad.norm * o->replicas[0].params[p].grad.norm;
	return sq < 0 ? -1 : sqrt(sq);
}

/* Gradients: non-finite ones, and norms that grow or shrink by DT_INSPECT_GRAD_RATIO between layers. */
static void warn_gradients(struct dt_inspect *o, const struct dt_model *m)
{
	char list[160] = "", name[140];
	int bad = 0, later = -1;
	double later_norm = 0;

	for (int p = 0; p < o->nparams; p++) {
		int64_t n = 0;
		for (int g = 0; g < o->nreplicas; g++)
			n += o->replicas[g].params[p].grad.nonfinite;
		if (n && bad++ < 3) {
			param_name(m, &o->replicas[0].params[p], name, sizeof(name));
			snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s'%s'", bad > 1 ? ", " : "", name);
		}
	}
	if (bad)
		warn(o, "the gradients of %s%s hold non-finite values (NaN or inf)", list, bad > 3 ? " and more" : "");
	for (int i = m->nlayers - 1; i >= 0; i--) {
		double gn = layer_grad_norm(o, i);
		if (gn < 0 || !isfinite(gn))
			continue;
		if (later >= 0 && later_norm > 0 && gn / later_norm > DT_INSPECT_GRAD_RATIO)
			warn(o, "exploding gradients: the gradient norm grows from %.3g at layer '%s' to %.3g at '%s' "
			     "before it (over %g times)", later_norm, m->layers[later].name, gn, m->layers[i].name,
			     DT_INSPECT_GRAD_RATIO);
		else if (later >= 0 && later_norm > 0 && gn / later_norm < 1 / DT_INSPECT_GRAD_RATIO)
			warn(o, "vanishing gradients: the gradient norm falls from %.3g at layer '%s' to %.3g at '%s' "
			     "before it (under 1/%g)", later_norm, m->layers[later].name, gn, m->layers[i].name,
			     DT_INSPECT_GRAD_RATIO);
		later = i;
		later_norm = gn;
	}
}

/* After the step: non-finite weights, updates far from the usual size, replicas that differ. */
static void warn_step(struct dt_inspect *o, const struct dt_model *m)
{
	char name[140];
	for (int p = 0; p < o->nparams; p++) {
		const struct dt_inspect_param *q = &o->replicas[0].params[p];
		double ratio = q->value.norm > 0 ? q->update_norm / q->value.norm : NAN;
		param_name(m, q, name, sizeof(name));
		if (q->after_nonfinite)
			warn(o, "after the step, '%s' holds %lld non-finite weights", name, (long long)q->after_nonfinite);
		else if (ratio > DT_INSPECT_UPDATE_HI)
			warn(o, "the step changed '%s' by %.3g of its norm (about 1e-3 is usual): the learning rate "
			     "may be too high", name, ratio);
		else if (ratio < DT_INSPECT_UPDATE_LO)
			warn(o, "the step changed '%s' by %.3g of its norm (about 1e-3 is usual): the learning rate "
			     "may be too low, or its gradient vanished", name, ratio);
	}
	if (o->differing)
		warn(o, "after the step %d of the %d replicas hold weights other than the chief's", o->differing,
		     o->nreplicas);
}

void dt_inspect_warn(struct dt_inspect *o, const struct dt_model *m)
{
	warn_forward(o, m);
	if (!isfinite(o->loss))
		warn(o, "the loss is not finite (%s)", isnan(o->loss) ? "nan" : o->loss > 0 ? "inf" : "-inf");
	else if (o->classes && o->loss > DT_INSPECT_LOSS_FACTOR * o->uniform_loss)
		warn(o, "the loss %.4g is over %g times %.4g, that of a uniform guess over %d classes: the initial "
		     "predictions are confidently wrong (too large initial weights or inputs?)", o->loss,
		     DT_INSPECT_LOSS_FACTOR, o->uniform_loss, o->classes);
	warn_gradients(o, m);
	if (o->stepped)
		warn_step(o, m);
}

void dt_inspect_release(struct dt_inspect *o)
{
	for (int g = 0; o->replicas && g < o->nreplicas; g++) {
		free(o->replicas[g].layers);
		free(o->replicas[g].params);
	}
	free(o->replicas);
	free(o->dump);
	memset(o, 0, sizeof(*o));
}
