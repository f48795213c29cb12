/*
 * dtrain inspect: one training step to look at, TensorFlow's eager mode for
 * a command line (man dtrain-inspect). Builds the run as fit does, runs the
 * first global batch of epoch 1 through forward, loss and backward
 * (core/fit/inspect.c), optionally one optimizer step, and prints per
 * replica every layer's output statistics and every parameter's norms, the
 * loss beside a uniform guess's, and warnings in words.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cmd.h"
#include "core/checkpoint/snapshot.h"
#include "core/error.h"
#include "core/fit/inspect.h"

static const char usage[] =
	"usage: dtrain inspect [options] MODEL.yaml\n"
	"\n"
	"Runs the first batch of epoch 1 (the one fit trains on first) through the\n"
	"forward pass, the loss and the backward pass, and prints every layer's output\n"
	"statistics, every parameter's norm and gradient norm, the loss, and warnings.\n"
	"\n"
	"  --set KEY=VALUE        override a config key (repeatable)\n"
	"  --checkpoint FILE      start from the weights in FILE (a .safetensors checkpoint)\n"
	"  --step                 also apply one optimizer step: the update/weight ratios,\n"
	"                         and a check that every replica holds the same weights\n"
	"  --dump LAYER           write LAYER's outputs for the batch (or 'input') ...\n"
	"  -o, --output FILE      ... to FILE, a NumPy .npy file\n"
	"  --json                 print everything as one JSON object on stdout\n"
	"  -q, --quiet            no notes on stderr\n"
	"  -h, --help             this help\n";

/* The activation index of --dump's name: 0 for "input", i + 1 for layer i; -1 after the error. */
static int dump_index(const struct dt_model *m, const char *name)
{
	char list[512] = "input";
	if (!strcmp(name, "input"))
		return 0;
	for (int i = 0; i < m->nlayers; i++) {
		if (!strcmp(m->layers[i].name, name))
			return i + 1;
		snprintf(list + strlen(list), sizeof(list) - strlen(list), ", %s", m->layers[i].name);
	}
	return dt_error("--dump: model '%s' has no layer '%s' (it has: %s)", m->name, name, list);
}

/* --checkpoint FILE: every replica's weights (the optimizer starts fresh). 0 or -1. */
static int load_weights(struct dt_app *a, const char *path)
{
	struct dt_ckpt *c = dt_checkpoint_load(path);
	int rc = c ? 0 : -1;
	for (int r = 0; c && r < a->nreplicas && rc == 0; r++)
		rc = dt_snapshot_load(c, &a->models[r], NULL);
	dt_checkpoint_free(c);
	if (rc == 0)
		a->strategy.type->broadcast(&a->strategy, a->models, a->opts);
	return rc;
}

/* Writes n rows of `sample`-shaped float32 values as a NumPy .npy file (format 1.0). 0 or -1. */
static int write_npy(const char *path, const float *x, int n, const struct dt_shape *sample)
{
	char head[256];
	int len = snprintf(head, sizeof(head), "{'descr': '<f4', 'fortran_order': False, 'shape': (%d,", n);
	int64_t count = (int64_t)n * dt_shape_count(sample);
	FILE *f = fopen(path, "wb");
	if (!f)
		return dt_error("cannot write '%s': %s", path, strerror(errno));
	for (int d = 0; d < sample->ndim; d++)
		len += snprintf(head + len, sizeof(head) - len, "%s%d", d ? ", " : " ", sample->dim[d]);
	len += snprintf(head + len, sizeof(head) - len, "), }");
	while ((10 + len + 1) % 64)
		head[len++] = ' ';
	head[len++] = '\n';
	fwrite("\x93NUMPY\x01\x00", 1, 8, f);
	fputc(len & 0xff, f);
	fputc(len >> 8, f);
	fwrite(head, 1, (size_t)len, f);
	if (fwrite(x, sizeof(float), (size_t)count, f) != (size_t)count || fclose(f) != 0)
		return dt_error("cannot write '%s': %s", path, strerror(errno));
	return 0;
}

/* "(128, 26, 26, 32)": n rows of sample. */
static const char *rows_shape(int n, const struct dt_shape *sample, char *buf, size_t size)
{
	int len = snprintf(buf, size, "(%d", n);
	for (int d = 0; d < sample->ndim; d++)
		len += snprintf(buf + len, size - (size_t)len, ", %d", sample->dim[d]);
	snprintf(buf + len, size - (size_t)len, ")");
	return buf;
}

/* v as %.4g in a buffer of 16, "nan" (not "-nan") for NaN. */
static const char *num(double v, char *buf)
{
	if (isnan(v))
		return "nan";
	snprintf(buf, 16, "%.4g", v);
	return buf;
}

static void stats_row(const char *name, int wn, const char *shape, const struct dt_stats *s)
{
	printf("%-*s %-20s", wn, name, shape);
	if (s->count == s->nonfinite)
		printf(" %10s %10s %10s %10s", "-", "-", "-", "-");
	else
		printf(" %10.4g %10.4g %10.4g %10.4g", s->mean, s->std, s->min, s->max); /* finite */
	printf(" %6.1f%% %10lld\n", s->count ? 100.0 * s->zeros / s->count : 0, (long long)s->nonfinite);
}

/* Replica g's two tables: layer outputs, then parameters. */
static void print_replica(const struct dt_app *a, const struct dt_inspect *ins, int g, int wn)
{
	const struct dt_model *m = &a->models[0];
	const struct dt_inspect_replica *rp = &ins->replicas[g];
	int n = rp->end - rp->begin;
	char shape[64], name[160], dev[32], a1[16], a2[16];

	if (ins->nreplicas > 1)
		printf("\nreplica %d on %s (rank %d), rows %d-%d of the batch\n", g, dt_device_format(rp->dev, dev, sizeof(dev)),
		       rp->rank, rp->begin, rp->end - 1);
	printf("\n%-*s %-20s %10s %10s %10s %10s %7s %10s\n", wn, "layer", "output", "mean", "std", "min", "max", "zeros",
	       "non-finite");
	stats_row("input", wn, rows_shape(n, &m->input, shape, sizeof(shape)), &rp->input);
	for (int i = 0; i < m->nlayers; i++)
		stats_row(m->layers[i].name, wn, rows_shape(n, &m->layers[i].out, shape, sizeof(shape)), &rp->layers[i]);
	printf("\n%-*s %-20s %10s %10s %13s\n", wn, "parameter", "shape", "norm", "grad norm", "update/weight");
	for (int p = 0; p < ins->nparams; p++) {
		const struct dt_inspect_param *q = &rp->params[p];
		const struct dt_param *pr = &m->layers[q->layer].params[q->index];
		snprintf(name, sizeof(name), "%s/%s", m->layers[q->layer].name, pr->name);
		printf("%-*s %-20s %10s %10s", wn, name, dt_shape_format(&pr->shape, 0, shape, sizeof(shape)),
		       num(q->value.norm, a1), num(q->grad.norm, a2));
		if (ins->stepped && q->value.norm > 0)
			printf(" %13s\n", num(q->update_norm / q->value.norm, a1));
		else
			printf(" %13s\n", "-");
	}
}

static void print_text(const struct dt_app *a, const struct dt_inspect *ins)
{
	const struct dt_model *m = &a->models[0];
	char line[512], a1[16], a2[16];
	int wn = 9;

	for (int i = 0; i < m->nlayers; i++)
		for (int k = 0; k < m->layers[i].nparams; k++) {
			int w = (int)(strlen(m->layers[i].name) + 1 + strlen(m->layers[i].params[k].name));
			wn = w > wn ? w : wn;
		}
	dt_strategy_describe(&a->strategy, line, sizeof(line));
	printf("model '%s': the first batch of epoch 1 (%d samples), training mode\nstrategy: %s\n", m->name,
	       ins->rows, line);
	printf("loss: %s", num(ins->loss, a1));
	if (ins->classes)
		printf(" (a uniform guess over %d classes: ln %d = %s)", ins->classes, ins->classes, num(ins->uniform_loss, a2));
	putchar('\n');
	for (int g = 0; g < ins->nreplicas; g++)
		print_replica(a, ins, g, wn);
	if (ins->stepped)
		printf("\nafter one %s step (learning rate %s)%s\n", dt_optimizer_names[a->cfg.optimizer.kind],
		       num(dt_trainer_learning_rate(&a->trainer), a1),
		       ins->differing ? ": the replicas' weights DIFFER" : ins->nreplicas > 1 ? ": every replica holds the same weights"
											   : "");
	printf(ins->nwarnings ? "\nwarnings:\n" : "\nno warnings\n");
	for (int i = 0; i < ins->nwarnings; i++)
		printf("  %s\n", ins->warnings[i]);
}

/* s (of n rows of sample) as members of o; returns o. */
static cJSON *stats_json(cJSON *o, const struct dt_stats *s, int n, const struct dt_shape *sample)
{
	cJSON *shape = cJSON_AddArrayToObject(o, "shape");
	int none = s->count == s->nonfinite;
	cJSON_AddItemToArray(shape, cJSON_CreateNumber(n));
	for (int d = 0; d < sample->ndim; d++)
		cJSON_AddItemToArray(shape, cJSON_CreateNumber(sample->dim[d]));
	cJSON_AddNumberToObject(o, "mean", none ? NAN : s->mean);
	cJSON_AddNumberToObject(o, "std", none ? NAN : s->std);
	cJSON_AddNumberToObject(o, "min", none ? NAN : s->min);
	cJSON_AddNumberToObject(o, "max", none ? NAN : s->max);
	cJSON_AddNumberToObject(o, "zeros", s->count ? (double)s->zeros / s->count : 0);
	cJSON_AddNumberToObject(o, "nonfinite", (double)s->nonfinite);
	return o;
}

static cJSON *replica_json(const struct dt_app *a, const struct dt_inspect *ins, int g)
{
	const struct dt_model *m = &a->models[0];
	const struct dt_inspect_replica *rp = &ins->replicas[g];
	cJSON *o = cJSON_CreateObject(), *layers, *params, *rows, *x;
	int n = rp->end - rp->begin;
	char buf[160];

	cJSON_AddNumberToObject(o, "replica", g);
	cJSON_AddNumberToObject(o, "rank", rp->rank);
	cJSON_AddStringToObject(o, "device", dt_device_format(rp->dev, buf, sizeof(buf)));
	rows = cJSON_AddArrayToObject(o, "rows");
	cJSON_AddItemToArray(rows, cJSON_CreateNumber(rp->begin));
	cJSON_AddItemToArray(rows, cJSON_CreateNumber(rp->end));
	cJSON_AddNumberToObject(o, "loss_sum", rp->loss_sum);
	cJSON_AddItemToObject(o, "input", stats_json(cJSON_CreateObject(), &rp->input, n, &m->input));
	layers = cJSON_AddArrayToObject(o, "layers");
	for (int i = 0; i < m->nlayers; i++) {
		x = cJSON_CreateObject();
		cJSON_AddStringToObject(x, "name", m->layers[i].name);
		cJSON_AddStringToObject(x, "type", m->layers[i].type->name);
		cJSON_AddItemToArray(layers, stats_json(x, &rp->layers[i], n, &m->layers[i].out));
	}
	params = cJSON_AddArrayToObject(o, "params");
	for (int p = 0; p < ins->nparams; p++) {
		const struct dt_inspect_param *q = &rp->params[p];
		x = cJSON_CreateObject();
		snprintf(buf, sizeof(buf), "%s/%s", m->layers[q->layer].name, m->layers[q->layer].params[q->index].name);
		cJSON_AddStringToObject(x, "name", buf);
		cJSON_AddNumberToObject(x, "norm", q->value.norm);
		cJSON_AddNumberToObject(x, "grad_norm", q->grad.norm);
		cJSON_AddNumberToObject(x, "grad_nonfinite", (double)q->grad.nonfinite);
		cJSON_AddNumberToObject(x, "update_ratio",
					ins->stepped && q->value.norm > 0 ? q->update_norm / q->value.norm : NAN);
		cJSON_AddItemToArray(params, x);
	}
	return o;
}

static void print_json(const struct dt_app *a, const struct dt_inspect *ins)
{
	cJSON *o = cJSON_CreateObject(), *reps, *warns;
	char *text;

	cJSON_AddStringToObject(o, "model", a->models[0].name);
	cJSON_AddStringToObject(o, "strategy", a->strategy.type->name);
	cJSON_AddNumberToObject(o, "epoch", 1);
	cJSON_AddNumberToObject(o, "samples", ins->rows);
	cJSON_AddNumberToObject(o, "loss", ins->loss);
	cJSON_AddNumberToObject(o, "classes", ins->classes);
	cJSON_AddNumberToObject(o, "uniform_loss", ins->uniform_loss);
	reps = cJSON_AddArrayToObject(o, "replicas");
	for (int g = 0; g < ins->nreplicas; g++)
		cJSON_AddItemToArray(reps, replica_json(a, ins, g));
	cJSON_AddBoolToObject(o, "stepped", ins->stepped);
	if (ins->stepped)
		cJSON_AddBoolToObject(o, "replicas_identical", !ins->differing);
	warns = cJSON_AddArrayToObject(o, "warnings");
	for (int i = 0; i < ins->nwarnings; i++)
		cJSON_AddItemToArray(warns, cJSON_CreateString(ins->warnings[i]));
	text = cJSON_PrintUnformatted(o);
	printf("%s\n", text);
	free(text);
	cJSON_Delete(o);
}

/* The run after the model is built: checkpoint, step, report, dump. The exit status. */
static int inspect(struct dt_app *a, const struct dt_opts *o)
{
	struct dt_inspect ins;
	const struct dt_model *m = &a->models[0];
	int act = -1, rc = DT_EXIT_FAIL;

	if (a->strategy.type->serve) {
		dt_error("dtrain inspect runs under one_device, mirrored and multi_worker_mirrored, not '%s'",
			 a->strategy.type->name);
		return DT_EXIT_USAGE;
	}
	if (o->dump && (act = dump_index(m, o->dump)) < 0)
		return DT_EXIT_USAGE;
	if (o->checkpoint && load_weights(a, o->checkpoint) < 0)
		return DT_EXIT_FAIL;
	if (dt_inspect_run(&a->trainer, o->step, act, &ins) < 0)
		goto out;
	rc = DT_EXIT_OK;
	if (!a->strategy.is_chief)
		goto out; /* under mpirun, the chief prints every replica */
	dt_inspect_warn(&ins, m);
	if (o->json)
		print_json(a, &ins);
	else
		print_text(a, &ins);
	if (o->dump && write_npy(o->output, ins.dump, ins.dump_end - ins.dump_begin,
				 act ? &m->layers[act - 1].out : &m->input) < 0)
		rc = DT_EXIT_FAIL;
out:
	dt_inspect_release(&ins);
	return rc;
}

int cmd_inspect(int argc, char **argv)
{
	struct dt_opts o;
	struct dt_app a;
	int rc;

	memset(&a, 0, sizeof(a));
	if ((rc = dt_opts_parse(&o, argc, argv, "config set json quiet checkpoint step dump output", usage)) >= 0)
		goto out_opts;
	if (!o.dump != !o.output) {
		dt_error(o.dump ? "--dump needs -o FILE.npy, the file to write" : "-o needs --dump LAYER, what to write");
		rc = DT_EXIT_USAGE;
		goto out_opts;
	}
	if ((rc = dt_app_config(&a, &o, 1)) || (rc = dt_app_data(&a, 1, 0)) || (rc = dt_app_build(&a)))
		goto out;
	rc = inspect(&a, &o);
out:
	a.strategy.failed = rc;
	dt_app_release(&a);
out_opts:
	dt_opts_release(&o);
	return rc;
}
