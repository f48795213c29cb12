/*
 * dtrain time: Caffe's `time` for a model file (man dtrain-time). Builds the
 * model as fit does, on the strategy's first replica, feeds it one batch of
 * random inputs and valid random labels, and times every layer's forward and
 * backward pass, the loss and the optimizer update over a number of training
 * steps; then measures the machine's peak with a large GEMM (in bf16 under
 * compile.precision bf16 on the CPU, else fp32) and says which fraction of
 * it the training step reaches.
 *
 * CPU ops are synchronous, so the wall time around a call is its cost; a GPU
 * backend will need a device sync before each reading.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cmd.h"
#include "core/error.h"
#include "core/rng.h"
#include "layers/layers.h"

static const char usage[] =
	"usage: dtrain time [options] MODEL.yaml\n"
	"\n"
	"Times each layer's forward and backward pass, the loss and the optimizer\n"
	"update on a batch of random data (data.batch_size samples), in training\n"
	"mode, and compares the step's GFLOP/s with the machine's measured peak.\n"
	"\n"
	"  --iterations N         timed training steps, averaged (default: 20, or more\n"
	"                         until they take a second)\n"
	"  --warmup N             untimed steps first (default 5)\n"
	"  --data                 also read one epoch of the training data through the\n"
	"                         pipeline alone and print data/training throughput\n"
	"  --set KEY=VALUE        override a config key (repeatable)\n"
	"  --json                 one JSON object on stdout instead of the table\n"
	"  -h, --help             this help\n";

#define MAX_STEPS 1000000

/* Mean milliseconds per timed step, and forward flops of one sample. */
struct layer_time {
	double fwd_ms, bwd_ms;
	int has_flops;        /* the layer type has a flops hook */
	int ran_backward;     /* 0 before the first layer with parameters */
	int64_t fwd_flops;    /* per sample */
	int64_t bwd_flops;    /* per sample, by the convention of dtrain-time(1) */
};

struct report {
	const char *model;
	const char *optimizer;
	int batch, global_batch, replicas, threads, iterations, warmup;
	double min_seconds;   /* without --iterations: more steps until they take this long */
	int nlayers;
	struct layer_time *layers;
	double forward_ms, loss_ms, backward_ms, update_ms, step_ms;
	int64_t flops;        /* forward and backward, per sample */
	double peak_gflops, peak_before; /* measured after the steps, and before them */
	double round_trip_ns, round_trip_before; /* dt_ops_thread_round_trip_ns, after and before the steps */
	int round_trip_thread;			 /* the thread of the slowest pair with thread 0 */
	const char *precision; /* compile.precision: the peak GEMM's too */
	/* --data */
	int data;
	int64_t data_samples;
	double data_seconds;
	int prefetch;
};

/* Reads `value` of --opt as a whole number in [min, MAX_STEPS]. 0, or -1 after the error. */
static int parse_count(const char *opt, const char *value, int min, int def, int *out)
{
	char *end;
	long v;
	*out = def;
	if (!value)
		return 0;
	errno = 0;
	v = strtol(value, &end, 10);
	if (errno || end == value || *end || v < min || v > MAX_STEPS)
		return dt_error("option '--%s' needs a whole number from %d to %d, got '%s'", opt, min, MAX_STEPS,
				value);
	*out = (int)v;
	return 0;
}

/*
 * Backward flops of layer i: its forward flops once for each gradient it
 * computes, dW when it has parameters and dx when a layer before its input
 * has parameters (in a plain sequence: any layer after the first with
 * parameters; a residual add also counts its shortcut's gradient).
 */
static int64_t backward_flops(const struct dt_model *m, int i, int64_t fwd)
{
	int grads = (m->layers[i].nparams > 0) + m->needs_grad[m->from[i]];
	if (m->shortcut[i] >= 0)
		grads += m->needs_grad[m->shortcut[i]];
	return m->needs_grad[i + 1] ? fwd * grads : 0;
}

/* Random labels the loss accepts: class indices below `classes`, one-hot rows, 0/1 or [0, 1). */
static void random_labels(float *y, int n, const struct dt_shape *label, int classes, enum dt_loss loss,
			  struct dt_rng *rng)
{
	int64_t per = dt_shape_count(label);
	for (int s = 0; s < n; s++) {
		float *row = y + (int64_t)s * per;
		switch (loss) {
		case DT_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY:
			row[0] = (float)dt_rng_below(rng, (uint64_t)classes);
			break;
		case DT_LOSS_CATEGORICAL_CROSSENTROPY:
			memset(row, 0, (size_t)per * sizeof(float));
			row[dt_rng_below(rng, (uint64_t)per)] = 1;
			break;
		case DT_LOSS_BINARY_CROSSENTROPY:
			for (int64_t k = 0; k < per; k++)
				row[k] = (float)dt_rng_below(rng, 2);
			break;
		default:
			for (int64_t k = 0; k < per; k++)
				row[k] = (float)dt_rng_uniform(rng);
		}
	}
}

/*
 * Builds replica 0 of the strategy the config names, with its objective and
 * optimizer, into a (which owns it), for batches of *batch samples: the input
 * shape from model.input_shape or else the training data. Fills the label
 * shape and class count. 0 or an exit status.
 */
static int build(struct dt_app *a, int *batch, struct dt_shape *label, int *classes)
{
	struct dt_run_config *c = &a->cfg;
	struct dt_model *m;
	struct dt_shape in;
	int rc;

	if ((rc = dt_app_input_shape(a, &in)))
		return rc;
	if (dt_strategy_create(&a->strategy, c->distribute, &a->sys) < 0)
		return dt_exit_status();
	if ((rc = dt_app_precision(a)))
		return rc;
	a->nreplicas = 1;
	a->models = dt_calloc(1, sizeof(*a->models));
	a->opts = dt_calloc(1, sizeof(*a->opts));
	m = &a->models[0];
	if (dt_model_init(m, c->name, &in, c->layers, dt_layer_types) < 0)
		return dt_exit_status();
	if (a->have_train_src) {
		*label = a->train.label;
		*classes = a->train_src.num_classes;
	} else {
		/* What fit would get from class-index data for the sparse loss, else labels like the output. */
		*label = c->loss == DT_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY ? dt_shape_make(1, (int[]){ 1 })
									    : m->output;
		*classes = 0;
	}
	if (dt_objective_init(&a->trainer.objective, c->loss, &c->loss_args, c->from_logits, m, label, *classes,
			      c->loss_node) < 0)
		return dt_exit_status();
	if (*classes <= 0)
		*classes = (int)dt_shape_count(&m->output);
	*batch = (c->batch_size + a->strategy.nreplicas - 1) / a->strategy.nreplicas;
	if ((rc = dt_app_check_memory(a, m, a->strategy.devices, 1, *batch, dt_optimizer_state_count(&c->optimizer))))
		return rc;
	if (dt_model_alloc(m, a->strategy.devices[0], *batch) < 0)
		return DT_EXIT_FAIL;
	dt_model_init_params(m, c->seed);
	dt_optimizer_init(&a->opts[0], &c->optimizer, m);
	return 0;
}

/*
 * Runs warmup + iterations training steps on the batch in the model, timing
 * every part; more timed steps until they take min_seconds (r->iterations
 * becomes their count): a few milliseconds of steps on a shared machine
 * repeat badly.
 */
static void run_steps(struct dt_app *a, const struct dt_tensor *labels, struct report *r)
{
	struct dt_model *m = &a->models[0];
	int n = r->batch, first = dt_model_first_trainable(m), it;
	double t0, t1, start = 0;

	for (it = 0;; it++) {
		struct dt_step_ctx ctx = { .training = 1, .key = dt_hash64(a->cfg.seed, (uint64_t)it) };
		int timed = it >= r->warmup, done = it - r->warmup;
		struct dt_tensor pred, dpred;

		if (done >= r->iterations && (done >= MAX_STEPS || dt_now() - start >= r->min_seconds))
			break;
		if (it == r->warmup)
			start = dt_now();
		for (int i = 0; i < m->nlayers; i++) {
			t0 = dt_now();
			pred = dt_model_forward_layer(m, i, n, &ctx);
			dt_device_synchronize(m->dev); /* a GPU runs asynchronously */
			t1 = dt_now();
			if (timed)
				r->layers[i].fwd_ms += t1 - t0;
		}
		dpred = dt_model_output_grad(m, n);
		t0 = dt_now();
		dt_objective_loss(&a->trainer.objective, &pred, labels, &dpred, 1.0f / n);
		dt_device_synchronize(m->dev);
		t1 = dt_now();
		if (timed)
			r->loss_ms += t1 - t0;
		for (int i = m->nlayers - 1; i >= first; i--) {
			t0 = dt_now();
			dt_model_backward_layer(m, i, n);
			dt_device_synchronize(m->dev);
			t1 = dt_now();
			if (timed)
				r->layers[i].bwd_ms += t1 - t0;
		}
		t0 = dt_now();
		dt_model_regularize(m, 1.0f);
		dt_optimizer_apply(&a->opts[0], m);
		dt_device_synchronize(m->dev);
		t1 = dt_now();
		if (timed)
			r->update_ms += t1 - t0;
	}
	r->iterations = it - r->warmup;
	r->step_ms = (dt_now() - start) * 1e3 / r->iterations;
	r->loss_ms *= 1e3 / r->iterations;
	r->update_ms *= 1e3 / r->iterations;
	for (int i = 0; i < m->nlayers; i++) {
		struct layer_time *lt = &r->layers[i];
		lt->fwd_ms *= 1e3 / r->iterations;
		lt->bwd_ms *= 1e3 / r->iterations;
		lt->ran_backward = i >= first;
		r->forward_ms += lt->fwd_ms;
		r->backward_ms += lt->bwd_ms;
		r->flops += lt->fwd_flops + lt->bwd_flops;
	}
}

/* GFLOP/s of `flops` per sample over a batch in ms; 0 when either is 0. */
static double gflops(int64_t flops, int batch, double ms)
{
	return flops > 0 && ms > 0 ? (double)flops * batch / (ms * 1e6) : 0;
}

static double samples_per_sec(const struct report *r) { return r->step_ms > 0 ? r->batch * 1e3 / r->step_ms : 0; }

/*
 * --data: reads every batch of one training epoch (steps_per_epoch when set)
 * through the configured pipeline (prefetch, cache, augmentation,
 * normalization) without training, and times it.
 */
static int time_data(struct dt_app *a, struct report *r)
{
	struct dt_pipeline *p = &a->train;
	struct dt_batch b;
	int64_t steps;
	double start;
	int rc = 0;

	if (!a->have_train_src && (rc = dt_app_data(a, 1, 0)))
		return rc;
	/* Opened for the input shape only: the normalization fit would compute, untimed. */
	if (a->cfg.pipeline.normalize == DT_NORMALIZE_AUTO && !p->pre.nchan && dt_pipeline_normalize_auto(p) < 0)
		return DT_EXIT_FAIL;
	steps = dt_pipeline_steps(p);
	if (a->cfg.steps_per_epoch > 0 && a->cfg.steps_per_epoch < steps)
		steps = a->cfg.steps_per_epoch;
	dt_batch_alloc(&b, p);
	start = dt_now();
	for (int64_t step = 0; step < steps; step++) {
		if (dt_pipeline_read(p, 0, step, &b) < 0) {
			rc = DT_EXIT_FAIL;
			break;
		}
		r->data_samples += b.n;
	}
	r->data_seconds = dt_now() - start;
	dt_pipeline_report_skipped(p, -1);
	dt_batch_free(&b);
	r->data = 1;
	r->prefetch = p->prefetch;
	return rc;
}

static double data_rate(const struct report *r) { return r->data_seconds > 0 ? r->data_samples / r->data_seconds : 0; }

static void print_json(const struct report *r, const struct dt_model *m)
{
	cJSON *j = cJSON_CreateObject(), *layers = cJSON_CreateArray();
	char *text;

	cJSON_AddStringToObject(j, "model", r->model);
	cJSON_AddNumberToObject(j, "batch", r->batch);
	cJSON_AddNumberToObject(j, "global_batch", r->global_batch);
	cJSON_AddNumberToObject(j, "replicas", r->replicas);
	cJSON_AddNumberToObject(j, "threads", r->threads);
	cJSON_AddNumberToObject(j, "iterations", r->iterations);
	cJSON_AddNumberToObject(j, "warmup", r->warmup);
	for (int i = 0; i < r->nlayers; i++) {
		const struct layer_time *lt = &r->layers[i];
		cJSON *l = cJSON_CreateObject();
		cJSON_AddStringToObject(l, "name", m->layers[i].name);
		cJSON_AddStringToObject(l, "type", m->layers[i].type->class_name);
		cJSON_AddNumberToObject(l, "forward_ms", lt->fwd_ms);
		cJSON_AddNumberToObject(l, "backward_ms", lt->bwd_ms);
		cJSON_AddBoolToObject(l, "backward_run", lt->ran_backward);
		cJSON_AddNumberToObject(l, "forward_flops", (double)lt->fwd_flops);
		cJSON_AddNumberToObject(l, "backward_flops", (double)lt->bwd_flops);
		if (lt->has_flops) {
			cJSON_AddNumberToObject(l, "forward_gflops", gflops(lt->fwd_flops, r->batch, lt->fwd_ms));
			cJSON_AddNumberToObject(l, "backward_gflops", gflops(lt->bwd_flops, r->batch, lt->bwd_ms));
		} else {
			cJSON_AddNullToObject(l, "forward_gflops");
			cJSON_AddNullToObject(l, "backward_gflops");
		}
		cJSON_AddItemToArray(layers, l);
	}
	cJSON_AddItemToObject(j, "layers", layers);
	cJSON_AddNumberToObject(j, "forward_ms", r->forward_ms);
	cJSON_AddNumberToObject(j, "loss_ms", r->loss_ms);
	cJSON_AddNumberToObject(j, "backward_ms", r->backward_ms);
	cJSON_AddNumberToObject(j, "update_ms", r->update_ms);
	cJSON_AddNumberToObject(j, "step_ms", r->step_ms);
	cJSON_AddNumberToObject(j, "samples_per_sec", samples_per_sec(r));
	cJSON_AddNumberToObject(j, "flops_per_sample", (double)r->flops);
	cJSON_AddNumberToObject(j, "gflops", gflops(r->flops, r->batch, r->step_ms));
	cJSON_AddNumberToObject(j, "peak_gflops", r->peak_gflops);
	cJSON_AddNumberToObject(j, "peak_gflops_before", r->peak_before);
	cJSON_AddNumberToObject(j, "peak_gemm", DT_PEAK_GEMM_SIZE);
	cJSON_AddStringToObject(j, "precision", r->precision);
	cJSON_AddNumberToObject(j, "peak_fraction",
				r->peak_gflops > 0 ? gflops(r->flops, r->batch, r->step_ms) / r->peak_gflops : 0);
	cJSON_AddNumberToObject(j, "thread_round_trip_ns", r->round_trip_ns);
	cJSON_AddNumberToObject(j, "thread_round_trip_ns_before", r->round_trip_before);
	if (r->data) {
		cJSON_AddNumberToObject(j, "data_samples", (double)r->data_samples);
		cJSON_AddNumberToObject(j, "data_seconds", r->data_seconds);
		cJSON_AddNumberToObject(j, "data_samples_per_sec", data_rate(r));
		cJSON_AddNumberToObject(j, "data_prefetch", r->prefetch);
		cJSON_AddNumberToObject(j, "data_training_ratio",
					samples_per_sec(r) > 0 ? data_rate(r) / samples_per_sec(r) : 0);
	}
	text = cJSON_PrintUnformatted(j);
	printf("%s\n", text);
	free(text);
	cJSON_Delete(j);
}

/* "12.3" or "-" (no flops hook, or a backward that does not run). */
static const char *rate(char *buf, size_t size, int shown, double v)
{
	if (shown)
		snprintf(buf, size, "%.1f", v);
	else
		snprintf(buf, size, "-");
	return buf;
}

static void rule(char c, int width)
{
	for (int i = 0; i < width; i++)
		putchar(c);
	putchar('\n');
}

static void print_table(const struct report *r, const struct dt_model *m)
{
	int w = (int)strlen("Layer (type)"), width;
	char name[160], bwd[32], fr[32], br[32];
	double achieved = gflops(r->flops, r->batch, r->step_ms);

	for (int i = 0; i < r->nlayers; i++) {
		int len = snprintf(name, sizeof(name), "%s (%s)", m->layers[i].name, m->layers[i].type->class_name);
		if (len > w)
			w = len;
	}
	w += 2;
	width = w + 12 + 13 + 17 + 18;
	printf("Model: \"%s\", batch %d", r->model, r->batch);
	if (r->replicas > 1)
		printf(" (replica 0 of %d, global batch %d)", r->replicas, r->global_batch);
	printf(", %d thread%s, training mode, mean of %d step%s after %d warm-up\n", r->threads,
	       r->threads == 1 ? "" : "s", r->iterations, r->iterations == 1 ? "" : "s", r->warmup);
	rule('_', width);
	printf("%-*s%12s%13s%17s%18s\n", w, "Layer (type)", "Forward ms", "Backward ms", "Forward GFLOP/s",
	       "Backward GFLOP/s");
	rule('=', width);
	for (int i = 0; i < r->nlayers; i++) {
		const struct layer_time *lt = &r->layers[i];
		snprintf(name, sizeof(name), "%s (%s)", m->layers[i].name, m->layers[i].type->class_name);
		if (lt->ran_backward)
			snprintf(bwd, sizeof(bwd), "%.3f", lt->bwd_ms);
		else
			snprintf(bwd, sizeof(bwd), "-");
		printf("%-*s%12.3f%13s%17s%18s\n", w, name, lt->fwd_ms, bwd,
		       rate(fr, sizeof(fr), lt->has_flops, gflops(lt->fwd_flops, r->batch, lt->fwd_ms)),
		       rate(br, sizeof(br), lt->has_flops && lt->bwd_flops > 0,
			    gflops(lt->bwd_flops, r->batch, lt->bwd_ms)));
	}
	rule('=', width);
	printf(" Forward:  %9.3f ms\n", r->forward_ms);
	printf(" Loss:     %9.3f ms\n", r->loss_ms);
	printf(" Backward: %9.3f ms\n", r->backward_ms);
	printf(" Update:   %9.3f ms (%s)\n", r->update_ms, r->optimizer);
	printf(" Step:     %9.3f ms, %.0f samples/s\n", r->step_ms, samples_per_sec(r));
	printf(" Work:     %.3f MFLOP per sample, %.3f GFLOP per step\n", r->flops * 1e-6,
	       (double)r->flops * r->batch * 1e-9);
	printf(" Achieved: %.1f GFLOP/s\n", achieved);
	printf(" Peak:     %.1f GFLOP/s (%s GEMM %dx%dx%d, %d thread%s; %.1f before the steps)\n", r->peak_gflops,
	       r->precision, DT_PEAK_GEMM_SIZE, DT_PEAK_GEMM_SIZE, DT_PEAK_GEMM_SIZE, r->threads,
	       r->threads == 1 ? "" : "s", r->peak_before);
	printf(" Fraction: %.1f%% of peak\n", r->peak_gflops > 0 ? 100 * achieved / r->peak_gflops : 0);
	if (r->threads > 1)
		printf(" Threads:  a cache line from thread 0 to thread %d and back in %.0f ns (%.0f before the steps)\n",
		       r->round_trip_thread, r->round_trip_ns, r->round_trip_before);
	if (r->data) {
		printf(" Data:     %.0f samples/s (%lld samples in %.3f s, prefetch %d, no training)\n", data_rate(r),
		       (long long)r->data_samples, r->data_seconds, r->prefetch);
		printf(" data/training = %.1fx\n", samples_per_sec(r) > 0 ? data_rate(r) / samples_per_sec(r) : 0);
	}
}

int cmd_time(int argc, char **argv)
{
	struct dt_opts o;
	struct dt_app a;
	struct report r = { 0 };
	struct dt_shape label;
	struct dt_tensor x, y;
	struct dt_rng rng;
	float *labels = NULL, *host = NULL;
	struct dt_model *m;
	int rc, classes = 0;

	if ((rc = dt_opts_parse(&o, argc, argv, "config set json iterations warmup data", usage)) >= 0)
		goto out_opts;
	if (parse_count("iterations", o.iterations, 1, 20, &r.iterations) < 0 ||
	    parse_count("warmup", o.warmup, 0, 5, &r.warmup) < 0) {
		fprintf(stderr, "%.*s", (int)(strchr(usage, '\n') - usage + 1), usage);
		rc = DT_EXIT_USAGE;
		goto out_opts;
	}
	r.min_seconds = o.iterations ? 0 : 1;
	if ((rc = dt_app_config(&a, &o, 1)) || (rc = build(&a, &r.batch, &label, &classes)))
		goto out;

	m = &a.models[0];
	r.model = m->name;
	r.optimizer = dt_optimizer_names[a.cfg.optimizer.kind];
	r.global_batch = a.cfg.batch_size;
	r.replicas = a.strategy.nreplicas;
	r.threads = dt_ops_get_threads();
	r.nlayers = m->nlayers;
	r.layers = dt_calloc(m->nlayers, sizeof(*r.layers));
	for (int i = 0; i < m->nlayers; i++) {
		const struct dt_layer *l = &m->layers[i];
		struct layer_time *lt = &r.layers[i];
		lt->has_flops = l->type->flops != NULL;
		lt->fwd_flops = lt->has_flops ? l->type->flops(l) : 0;
		lt->bwd_flops = backward_flops(m, i, lt->fwd_flops);
	}

	/* One batch of random inputs in [0, 1) and labels, placed once: the steps only compute. */
	dt_rng_seed(&rng, a.cfg.seed, 77);
	x = dt_model_input(m, r.batch);
	host = dt_malloc((size_t)dt_tensor_count(&x) * sizeof(float));
	for (int64_t k = 0; k < dt_tensor_count(&x); k++)
		host[k] = (float)dt_rng_uniform(&rng);
	dt_op_from_host(&x, host);
	free(host);
	labels = dt_device_alloc(m->dev, (int64_t)r.batch * dt_shape_count(&label));
	y = dt_tensor_batch(labels, m->dev, r.batch, &label);
	host = dt_malloc((size_t)dt_tensor_count(&y) * sizeof(float));
	random_labels(host, r.batch, &label, classes, a.cfg.loss, &rng);
	dt_op_from_host(&y, host);
	free(host);

	/*
	 * The peak before and after the steps: on a shared or throttled machine
	 * they differ, and so do the steps' figures from one run to the next.
	 */
	r.peak_before = dt_ops_peak_gflops();
	r.round_trip_before = dt_ops_thread_round_trip_ns(&r.round_trip_thread);
	run_steps(&a, &y, &r);
	r.peak_gflops = dt_ops_peak_gflops();
	r.round_trip_ns = dt_ops_thread_round_trip_ns(&r.round_trip_thread);
	/* dt_ops_peak_gflops is the CPU's: in bf16 when the model runs there in bf16. */
	r.precision = dt_precision_names[m->dev.kind == DT_DEVICE_CPU ? a.cfg.precision : DT_PRECISION_FP32];
	if (o.data && (rc = time_data(&a, &r)))
		goto out;
	if (o.json)
		print_json(&r, m);
	else
		print_table(&r, m);
	rc = DT_EXIT_OK;
out:
	if (labels)
		dt_device_free(a.models[0].dev, labels);
	free(r.layers);
	dt_app_release(&a);
out_opts:
	dt_opts_release(&o);
	return rc;
}
