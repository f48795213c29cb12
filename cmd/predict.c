/*
 * dtrain predict: the class of every sample of an input, for a multi-label
 * model (dt_loss_is_multi_label) every label's probability and the labels
 * above --threshold, or for a regression model (dt_loss_is_regression) the
 * values of its outputs, one line each on stdout, streaming (man
 * dtrain-predict).
 *
 * The input is read through a stream reader (data/reader.h) a batch at a
 * time, so memory stays bounded whatever its length; the model is built from
 * the config alone, the YAML's or a checkpoint's (model.input_shape, or the
 * shape the input file tells, or the checkpoint's input_shape, or else the
 * training data's) and takes its
 * weights from the checkpoint (cmd/app_ckpt.c). The
 * preprocessing is training's: data.rescale and the normalization that fit
 * saved in the checkpoint (dt_app_preprocess).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cmd.h"
#include "core/error.h"
#include "core/checkpoint/snapshot.h"
#include "data/png.h"
#include "data/reader.h"
#include "layers/layers.h"

static const char usage[] =
	"usage: dtrain predict [options] MODEL.yaml|CHECKPOINT [INPUT|-]\n"
	"\n"
	"Predicts the class of every sample of INPUT (a CSV, .npy or IDX file, a list\n"
	"of PNG paths, one per line, or one .png image; '-' or nothing: standard input)\n"
	"with a checkpoint of the model; one line per sample on stdout, as it goes:\n"
	"index,class,probability (PNG paths: index,path,class,probability). A\n"
	"regression model (loss mean_squared_error) prints its outputs' values instead:\n"
	"index,value, or index,y_0,y_1,... for several outputs. A multi-label model\n"
	"(binary_crossentropy on several sigmoid outputs) prints\n"
	"index,labels,p_LABEL,...: the labels whose probability is above --threshold,\n"
	"joined by ';', then every label's probability. Given a checkpoint (a\n"
	"safetensors file, or a run directory: its best, else latest), the config it\n"
	"stored stands in for the model file.\n"
	"\n"
	"  --checkpoint FILE      the weights (default: CHECKPOINT_DIR/best.safetensors,\n"
	"                         else latest.safetensors)\n"
	"  --format FORMAT        the input's format: csv, npy, idx or png (default: from\n"
	"                         its name, else data.train's format, else csv)\n"
	"  --all                  every class's probability too (classifiers)\n"
	"  --json                 one JSON object per sample instead of CSV\n"
	"  --header               a header line first (CSV output)\n"
	"  --threshold P          a label is predicted above probability P (default 0.5;\n"
	"                         multi-label and single-output binary models)\n"
	"  -q, --quiet            no notes on stderr (how a CSV's first row was read)\n"
	"  --set KEY=VALUE        override a config key (repeatable)\n"
	"  -h, --help             this help\n";

struct predict_out {
	int json, all, ncls; /* ncls: classes in the output lines (values for a regression model) */
	int named;           /* samples have names (PNG paths): a path column / field */
	int values;          /* a regression model: the outputs' values, not a class */
	int multi;           /* a multi-label model: every label above threshold */
	float threshold;     /* multi-label and single-output binary: a label is predicted above it */
	char **names;        /* ncls labels, ready to print (CSV-quoted, or JSON strings) */
	char **raw;          /* multi-label: the ncls names as they are, joined into the labels field */
};

/* s as one CSV field (quoted when it holds a comma, quote or newline) or as a JSON string. */
static char *quote(const char *s, int json)
{
	size_t n = strlen(s);
	char *out = dt_malloc(6 * n + 3), *w = out;
	if (json) {
		*w++ = '"';
		for (; *s; s++) {
			unsigned char c = (unsigned char)*s;
			if (c == '"' || c == '\\')
				*w++ = '\\', *w++ = (char)c;
			else if (c < 0x20)
				w += sprintf(w, "\\u%04x", c);
			else
				*w++ = (char)c;
		}
		*w++ = '"';
	} else if (strpbrk(s, ",\"\n\r")) {
		*w++ = '"';
		for (; *s; s++) {
			if (*s == '"')
				*w++ = '"';
			*w++ = *s;
		}
		*w++ = '"';
	} else {
		memcpy(w, s, n);
		w += n;
	}
	*w = 0;
	return out;
}

/* The class labels: the checkpoint's class_names when they fit, else the indices. */
static void class_labels(struct predict_out *p, const struct dt_ckpt *c)
{
	const char *meta = dt_checkpoint_meta(c, "class_names");
	cJSON *names = meta ? cJSON_Parse(meta) : NULL;
	int ok = cJSON_IsArray(names) && cJSON_GetArraySize(names) == p->ncls;
	char buf[32];

	if (meta && !ok)
		dt_warn("the class_names of '%s' do not match the model's %d classes; printing class indices",
			dt_checkpoint_path(c), p->ncls);
	p->names = dt_calloc(p->ncls, sizeof(char *));
	for (int i = 0; i < p->ncls; i++) {
		cJSON *s = ok ? cJSON_GetArrayItem(names, i) : NULL;
		if (cJSON_IsString(s))
			p->names[i] = quote(s->valuestring, p->json);
		else
			p->names[i] = (snprintf(buf, sizeof(buf), "%d", i), dt_strdup(buf));
	}
	cJSON_Delete(names);
}

/* The values' columns: value for one output, y_0, y_1, ... for several. */
static void value_labels(struct predict_out *p)
{
	char buf[32];
	p->names = dt_calloc(p->ncls, sizeof(char *));
	for (int i = 0; i < p->ncls; i++)
		p->names[i] = p->ncls == 1 ? dt_strdup("value") : (snprintf(buf, sizeof(buf), "y_%d", i), dt_strdup(buf));
}

/*
 * A multi-label model's label names: those of data.train's label: [a, b,
 * ...] when they are column names, else the output indices.
 */
static void multi_labels(struct predict_out *p, const struct dt_node *train)
{
	const struct dt_node *label = dt_node_get(train, "label");
	int named = label && label->kind == DT_NODE_SEQ && label->n == p->ncls;
	char buf[32];

	for (int i = 0; named && i < label->n; i++) {
		char *end;
		const struct dt_node *c = label->items[i];
		strtol(c->value, &end, 10);
		named = c->quoted || end == c->value || *end; /* a name, not an index */
	}
	p->names = dt_calloc(p->ncls, sizeof(char *));
	p->raw = dt_calloc(p->ncls, sizeof(char *));
	for (int i = 0; i < p->ncls; i++) {
		p->raw[i] = named ? dt_strdup(label->items[i]->value) : (snprintf(buf, sizeof(buf), "%d", i), dt_strdup(buf));
		p->names[i] = quote(p->raw[i], p->json);
	}
}

/*
 * A probability after a comma (none before the first): %.6g, with NaN
 * and the infinities as null in JSON and NaN as "nan" in CSV (glibc writes
 * a negative NaN "-nan"). A model that diverged gives NaN probabilities.
 */
static void print_prob(float v, int json, int first)
{
	if (!first)
		putchar(',');
	if (json && !isfinite(v))
		fputs("null", stdout);
	else if (isnan(v))
		fputs("nan", stdout);
	else
		printf("%.6g", v);
}

/* A multi-label line: the labels above the threshold and every label's probability (ncls) of sample index. */
static void print_multi(const struct predict_out *p, int64_t index, const char *q, const float *probs)
{
	size_t len = 1;
	char *joined;
	int n = 0;
	if (p->json) {
		printf("{\"index\":%lld", (long long)index);
		if (q)
			printf(",\"path\":%s", q);
		fputs(",\"labels\":[", stdout);
		for (int i = 0; i < p->ncls; i++)
			if (probs[i] > p->threshold)
				printf(n++ ? ",%s" : "%s", p->names[i]);
		fputs("],\"probabilities\":[", stdout);
		for (int i = 0; i < p->ncls; i++)
			print_prob(probs[i], 1, i == 0);
		fputs("]}\n", stdout);
		return;
	}
	for (int i = 0; i < p->ncls; i++)
		len += strlen(p->raw[i]) + 1;
	joined = dt_malloc(len);
	joined[0] = 0;
	for (int i = 0; i < p->ncls; i++)
		if (probs[i] > p->threshold) {
			if (n++)
				strcat(joined, ";");
			strcat(joined, p->raw[i]);
		}
	printf("%lld,", (long long)index);
	if (q)
		printf("%s,", q);
	{
		char *field = quote(joined, 0);
		fputs(field, stdout);
		free(field);
	}
	free(joined);
	for (int i = 0; i < p->ncls; i++)
		print_prob(probs[i], 0, 0);
	putchar('\n');
}

/* A float's shortest text that reads back as the same float; null in JSON for NaN and infinities, "nan" in CSV. */
static void print_value(float v, int json)
{
	char buf[32];
	if (!isfinite(v) && (json || isnan(v))) {
		fputs(json ? "null" : "nan", stdout);
		return;
	}
	for (int digits = 1; digits <= 9; digits++) {
		snprintf(buf, sizeof(buf), "%.*g", digits, v);
		if (strtof(buf, NULL) == v)
			break;
	}
	fputs(buf, stdout);
}

/* A regression model's line: index, the name, and the values (ncls) of sample index. */
static void print_values(const struct predict_out *p, int64_t index, const char *q, const float *v)
{
	if (p->json) {
		printf("{\"index\":%lld", (long long)index);
		if (q)
			printf(",\"path\":%s", q);
		fputs(",\"values\":[", stdout);
	} else {
		printf("%lld", (long long)index);
		if (q)
			printf(",%s", q);
	}
	for (int i = 0; i < p->ncls; i++) {
		if (i || !p->json)
			putchar(',');
		print_value(v[i], p->json);
	}
	fputs(p->json ? "]}\n" : "\n", stdout);
}

static void print_header(const struct predict_out *p)
{
	if (p->values) {
		fputs(p->named ? "index,path" : "index", stdout);
		for (int i = 0; i < p->ncls; i++)
			printf(",%s", p->names[i]);
		putchar('\n');
		return;
	}
	if (p->multi)
		fputs(p->named ? "index,path,labels" : "index,labels", stdout);
	else
		fputs(p->named ? "index,path,class,probability" : "index,class,probability", stdout);
	for (int i = 0; (p->all || p->multi) && i < p->ncls; i++) /* p_NAME, inside the quotes of a quoted name */
		printf(p->names[i][0] == '"' ? ",\"p_%s" : ",p_%s", p->names[i] + (p->names[i][0] == '"'));
	putchar('\n');
}

/* One line: probs (ncls; a regression model's values) of sample index, named name (or NULL). */
static void print_line(const struct predict_out *p, int64_t index, const char *name, const float *probs)
{
	char *q = p->named ? quote(name ? name : "", p->json) : NULL;
	int best = 0;
	if (p->values || p->multi) {
		(p->values ? print_values : print_multi)(p, index, q, probs);
		free(q);
		return;
	}
	for (int i = 1; i < p->ncls; i++)
		if (probs[i] > probs[best])
			best = i;
	if (p->ncls == 2 && p->threshold != 0.5f) /* a single-output binary model: class 1 above --threshold */
		best = probs[1] > p->threshold;
	if (p->json) {
		printf("{\"index\":%lld", (long long)index);
		if (q)
			printf(",\"path\":%s", q);
		printf(",\"class\":%s,\"probability\":", p->names[best]);
		print_prob(probs[best], 1, 1);
		if (p->all) {
			fputs(",\"probabilities\":[", stdout);
			for (int i = 0; i < p->ncls; i++)
				print_prob(probs[i], 1, i == 0);
			putchar(']');
		}
		fputs("}\n", stdout);
		free(q);
		return;
	}
	printf("%lld,", (long long)index);
	if (q)
		printf("%s,", q);
	fputs(p->names[best], stdout);
	print_prob(probs[best], 0, 0);
	free(q);
	for (int i = 0; p->all && i < p->ncls; i++)
		print_prob(probs[i], 0, 0);
	putchar('\n');
}

/*
 * The model's outputs y (n, C) to class probabilities (n, ncls): softmax or
 * sigmoid on logits, [1-p, p] for one output, a sigmoid per output for a
 * multi-label model.
 */
static void probabilities(const float *y, int n, int C, int logits, int multi, float *probs)
{
	if (multi) {
		for (int64_t i = 0; i < (int64_t)n * C; i++)
			probs[i] = logits ? 1 / (1 + expf(-y[i])) : y[i];
		return;
	}
	for (int i = 0; i < n; i++) {
		const float *o = y + (int64_t)i * C;
		if (C == 1) {
			float pr = logits ? 1 / (1 + expf(-o[0])) : o[0];
			probs[2 * i] = 1 - pr;
			probs[2 * i + 1] = pr;
			continue;
		}
		float *q = probs + (int64_t)i * C, max = o[0], sum = 0;
		if (!logits) {
			memcpy(q, o, (size_t)C * sizeof(float));
			continue;
		}
		for (int j = 1; j < C; j++)
			max = o[j] > max ? o[j] : max;
		for (int j = 0; j < C; j++)
			sum += q[j] = expf(o[j] - max);
		for (int j = 0; j < C; j++)
			q[j] /= sum;
	}
}

/* Does the training source read standard input (a path, x or y of "-")? */
static int train_reads_stdin(const struct dt_node *train)
{
	static const char *const keys[] = { "path", "x", "y", "images", "labels", NULL };
	for (int i = 0; keys[i]; i++) {
		const struct dt_node *n = dt_node_get(train, keys[i]);
		if (n && n->kind == DT_NODE_SCALAR && !strcmp(n->value, "-"))
			return 1;
	}
	return 0;
}

/* Does path end in .txt (or .txt.gz)? */
static int is_txt(const char *path)
{
	size_t n = strlen(path);
	if (n >= 3 && !strcasecmp(path + n - 3, ".gz"))
		n -= 3;
	return n >= 4 && !strncasecmp(path + n - 4, ".txt", 4);
}

/* stdout failed: quiet when the reader went away (EPIPE), else an error. 0 or -1. */
static int output_failed(int *quiet)
{
	if (errno == EPIPE) {
		*quiet = 1;
		return 0;
	}
	return dt_error("cannot write to standard output: %s", strerror(errno));
}

/* The input's format: --format, else from the name, else the training data's, else CSV (NULL: CIFAR's). */
static const char *input_format(const struct dt_app *a, const struct dt_opts *o)
{
	const char *format = NULL, *train_format = NULL;
	/* A model trained on a png_folder reads lists of PNG paths (format png). */
	if (dt_cfg_string(a->cfg.train, "format", NULL, &train_format) >= 0 && train_format &&
	    !strcmp(train_format, "png_folder"))
		train_format = "png";
	if (o->format)
		return o->format;
	if (strcmp(o->input, "-")) {
		format = dt_reader_guess(o->input);
		if (format && !strcmp(format, "csv") && is_txt(o->input) && train_format && !strcmp(train_format, "png"))
			format = "png";
	}
	if (!format && train_format && dt_reader_find(train_format))
		format = train_format;
	/* No stream reader reads CIFAR's batch files: NULL, rather than CSV calling them binary. */
	if (!format && train_format && (!strcmp(train_format, "cifar10") || !strcmp(train_format, "cifar100")))
		return NULL;
	return format ? format : "csv";
}

/* Opens the input with its reader: -1 when open, else the exit status (after the error). */
static int open_input(struct dt_app *a, const struct dt_opts *o, struct dt_reader *r)
{
	struct dt_reader_opts ro = { 0 };
	const char *format = input_format(a, o);
	const struct dt_reader_type *type = format ? dt_reader_find(format) : NULL;
	char **features = NULL;
	int rc;

	if (!format) {
		dt_error("dtrain predict does not read CIFAR batch files ('%s'): give the images as an .npy array "
			 "(N, 32, 32, 3) or a list of PNG paths (--format names the input's format); dtrain evaluate "
			 "scores a CIFAR test split", o->input);
		return DT_EXIT_USAGE;
	}
	if (!type) {
		dt_error("unknown input format '%s' (expected one of: csv, npy, idx, png)", format);
		return DT_EXIT_USAGE;
	}
	ro.train = a->cfg.train;
	ro.skip_bad = a->cfg.pipeline.on_error == DT_ON_ERROR_SKIP;
	ro.sample = a->cfg.input_shape;
	/*
	 * The shape the weights were trained at, which the checkpoint keeps: the
	 * training folder may have changed since (a first image of another size
	 * would resize every input) or be gone.
	 */
	if (!ro.sample.ndim && type->needs_shape) {
		if (dt_app_checkpoint(a, o))
			return DT_EXIT_FAIL;
		if (!dt_app_checkpoint_input_shape(a, &ro.sample))
			ro.sample.ndim = 0;
	}
	if (!ro.sample.ndim && type->needs_shape) {
		/* Else it comes from the training data: it must not be the stream to predict. */
		if (!strcmp(o->input, "-") && train_reads_stdin(a->cfg.train)) {
			dt_error("'%s' trains on standard input; give model.input_shape to predict from it", a->cfg.path);
			return DT_EXIT_USAGE;
		}
		if ((rc = dt_app_input_shape(a, &ro.sample)))
			return rc;
	}
	if (type == &dt_png_reader && dt_png_reader_check(&ro.sample) < 0)
		return DT_EXIT_USAGE; /* a model whose input is not an image: a config error */
	/* A CSV header is read by the training data's column names, which the checkpoint keeps. */
	if (type == &dt_csv_reader &&
	    (dt_app_checkpoint(a, o) || dt_app_checkpoint_features(a, &features, &ro.nfeatures) < 0))
		return DT_EXIT_FAIL;
	ro.features = features;
	rc = dt_reader_open(r, type, o->input, &ro) < 0 ? DT_EXIT_FAIL : -1;
	for (int i = 0; i < ro.nfeatures; i++)
		free(features[i]);
	free(features);
	return rc;
}

/*
 * Reads r to its end in chunks of B samples and prints a line per sample,
 * stopping quietly when stdout's reader went away. 0, or -1 with an error.
 */
static int predict_stream(struct dt_model *m, struct dt_reader *r, const struct dt_preprocess *pp,
			  const struct predict_out *p, int B, int from_logits)
{
	struct dt_step_ctx ctx = { 0 };
	const struct dt_layer *first = &m->layers[0];
	/* An embedding first reads token indices: each must name a row (core/pipeline/indices.c). */
	int64_t limit = m->nlayers && first->type->index_limit ? first->type->index_limit(first) : 0;
	int64_t index = 0, F = dt_shape_count(&r->sample), nonfinite = 0, first_nonfinite = -1;
	int C = (int)dt_shape_count(&m->output), quiet = 0, rc = -1;
	float *x = dt_malloc((size_t)(B * F) * sizeof(float)), *y = dt_malloc((size_t)B * C * sizeof(float));
	float *probs = dt_malloc((size_t)B * p->ncls * sizeof(float));

	for (;;) {
		struct dt_tensor in, out;
		int n = r->type->next(r, B, x);
		if (n < 0)
			goto out;
		if (n == 0)
			break;
		if (limit && dt_index_check(x, n, F, limit, r->name, NULL, index, first->name) < 0)
			goto out;
		dt_preprocess_apply(pp, x, n, F);
		in = dt_model_input(m, n);
		dt_op_from_host(&in, x);
		out = dt_model_forward(m, n, &ctx);
		dt_op_to_host(&out, y);
		for (int i = 0; i < n; i++)
			for (int j = 0; j < C; j++)
				if (!isfinite(y[(int64_t)i * C + j])) {
					if (nonfinite++ == 0)
						first_nonfinite = index + i;
					break;
				}
		if (!p->values)
			probabilities(y, n, C, from_logits, p->multi, probs);
		for (int i = 0; i < n; i++)
			print_line(p, index++, p->named ? r->type->sample_name(r, i) : NULL,
				   (p->values ? y : probs) + (int64_t)i * p->ncls);
		/* Each batch's lines out now, not when a block fills: the input may be a stream that goes on. */
		if (fflush(stdout) != 0 || ferror(stdout)) {
			if (output_failed(&quiet) < 0)
				goto out;
			break;
		}
	}
	if (!quiet && fflush(stdout) != 0 && output_failed(&quiet) < 0)
		goto out;
	/* Never a class without a word: a diverged run leaves NaN weights, and argmax then names class 0. */
	if (nonfinite)
		dt_warn("the model's outputs are NaN or infinite for %lld of %lld samples (the first: sample %lld): "
			"their predictions mean nothing (were the weights of a training that diverged, loss nan?)",
			(long long)nonfinite, (long long)index, (long long)first_nonfinite);
	rc = 0;
out:
	free(x);
	free(y);
	free(probs);
	return rc;
}

int cmd_predict(int argc, char **argv)
{
	struct dt_opts o;
	struct dt_app a;
	struct dt_model m = { 0 };
	struct dt_reader r = { 0 };
	struct predict_out p = { 0 };
	struct dt_preprocess pp = { 0 };
	int rc, have_model = 0, B, C;

	if ((rc = dt_opts_parse(&o, argc, argv, "config model-or-checkpoint input set json quiet checkpoint format all header threshold",
				usage)) >= 0)
		goto out_opts;
	if ((rc = dt_app_config(&a, &o, 0)))
		goto out;
	if (o.all && dt_loss_is_regression(a.cfg.loss)) {
		dt_error("--all prints every class's probability, but '%s' is a regression model (loss %s): its lines "
			 "hold every output's value", a.cfg.path, dt_loss_names[a.cfg.loss]);
		rc = DT_EXIT_USAGE;
		goto out;
	}
	p.threshold = 0.5f;
	if (o.threshold) {
		char *end;
		double t = strtod(o.threshold, &end);
		int binary = a.cfg.loss == DT_LOSS_BINARY_CROSSENTROPY || a.cfg.loss == DT_LOSS_BINARY_FOCAL_CROSSENTROPY;
		if (end == o.threshold || *end || !(t >= 0 && t <= 1)) {
			dt_error("--threshold must be a probability from 0 to 1, not '%s'", o.threshold);
			rc = DT_EXIT_USAGE;
			goto out;
		}
		if (!binary) {
			dt_error("--threshold applies to sigmoid outputs, but '%s' is trained with %s (a multi-label or "
				 "binary model uses binary_crossentropy)", a.cfg.path, dt_loss_names[a.cfg.loss]);
			rc = DT_EXIT_USAGE;
			goto out;
		}
		p.threshold = (float)t;
	}
	if ((rc = open_input(&a, &o, &r)) >= 0)
		goto out;
	rc = DT_EXIT_USAGE;
	B = a.cfg.batch_size;
	if (dt_model_init(&m, a.cfg.name, &r.sample, a.cfg.layers, dt_layer_types) < 0) {
		rc = dt_exit_status();
		goto out;
	}
	have_model = 1;
	if ((rc = dt_app_check_memory(&a, &m, &(struct dt_device){ DT_DEVICE_CPU, 0 }, 1, B, 0)))
		goto out;
	rc = DT_EXIT_FAIL;
	if (dt_model_alloc(&m, DT_CPU, B) < 0)
		goto out;
	if (dt_app_checkpoint(&a, &o) || dt_app_checkpoint_weights(&a, &m, "predicting with the average") < 0)
		goto out;
	/* The training's preprocessing: data.rescale and the normalization fit saved. */
	if (dt_app_preprocess(&a, dt_checkpoint_meta(a.ckpt, "preprocessing"), a.ckpt_path, &r.sample, &pp) < 0)
		goto out;
	C = (int)dt_shape_count(&m.output);
	p.json = o.json;
	p.all = o.all;
	p.named = r.type->sample_name != NULL;
	p.values = dt_loss_is_regression(a.cfg.loss);
	p.multi = dt_loss_is_multi_label(a.cfg.loss, C);
	p.ncls = C == 1 && !p.values ? 2 : C;
	if (p.values)
		value_labels(&p);
	else if (p.multi)
		multi_labels(&p, a.cfg.train);
	else
		class_labels(&p, a.ckpt);
	if (o.header && !o.json)
		print_header(&p);
	if (predict_stream(&m, &r, &pp, &p, B, a.cfg.from_logits) == 0)
		rc = DT_EXIT_OK;
out:
	dt_preprocess_release(&pp);
	for (int i = 0; p.names && i < p.ncls; i++)
		free(p.names[i]);
	for (int i = 0; p.raw && i < p.ncls; i++)
		free(p.raw[i]);
	free(p.names);
	free(p.raw);
	if (have_model)
		dt_model_release(&m);
	dt_reader_close(&r);
	dt_app_release(&a);
out_opts:
	dt_opts_release(&o);
	return rc;
}
