#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cmd.h"
#include "core/checkpoint/checkpoint.h"
#include "core/cuda/cuda.h"
#include "core/error.h"
#include "core/fit/progress.h"
#include "data/sources.h"
#include "layers/layers.h"

int dt_exit_status(void) { return dt_error_last_is_config() ? DT_EXIT_USAGE : DT_EXIT_FAIL; }

/* After a usage error: the usage line alone, the rest is for -h. */
static void short_usage(const char *usage)
{
	fprintf(stderr, "%.*s", (int)(strchr(usage, '\n') - usage + 1), usage);
}

/* The message for getopt's ':' (missing value) or '?' (unknown option, or a value it does not take). */
static void bad_option(int c, const char *arg, const struct option *longs)
{
	for (int i = 0; optopt && longs[i].name; i++) {
		if (longs[i].val != optopt)
			continue;
		if (c == ':')
			dt_error("option '--%s' needs a value", longs[i].name);
		else
			dt_error("option '--%s' takes no value", longs[i].name);
		return;
	}
	if (optopt && arg[0] == '-' && arg[1] != '-')
		dt_error("unknown option '-%c'", optopt);
	else
		dt_error("unknown option '%s'", arg);
}

/* Whether the space-separated word list `allowed` holds `word`. */
static int has_word(const char *allowed, const char *word)
{
	size_t n = strlen(word);
	for (const char *p = allowed; (p = strstr(p, word)); p += n)
		if ((p == allowed || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
			return 1;
	return 0;
}

/* getopt's short options: -h always, -q and -o FILE where their long forms are allowed. */
static const char *short_options(const char *allowed, char *buf, size_t size)
{
	snprintf(buf, size, ":h%s%s", has_word(allowed, "quiet") ? "q" : "", has_word(allowed, "output") ? "o:" : "");
	return buf;
}

/*
 * The options of one subcommand each (inspect's --step, --dump LAYER, -o
 * FILE; evaluate's --report and --data FILE; predict's --threshold P) into o: 1 when c is one of them.
 */
static int own_option(struct dt_opts *o, int c, const char *arg)
{
	if (c == 'S')
		o->step = 1;
	else if (c == 'D')
		o->dump = arg;
	else if (c == 'o')
		o->output = arg;
	else if (c == 'R')
		o->report = 1;
	else if (c == 'T')
		o->data_file = arg;
	else if (c == 't')
		o->threshold = arg;
	return c == 'S' || c == 'D' || c == 'o' || c == 'R' || c == 'T' || c == 't';
}

/* The options of all (ending with a NULL name) that allowed names, into longs; --help always. */
static void allowed_options(const struct option *all, const char *allowed, struct option *longs)
{
	int n = 0;
	for (int i = 0; all[i].name; i++)
		if (i == 0 || has_word(allowed, all[i].name))
			longs[n++] = all[i];
	if (has_word(allowed, "data-file")) /* evaluate --data FILE (time's --data takes no value) */
		longs[n++] = (struct option){ "data", required_argument, NULL, 'T' };
	memset(&longs[n], 0, sizeof(longs[n]));
}

int dt_opts_list;

/*
 * -h: the usage, or under dt_opts_list the options of longs and the short
 * ones of shorts (getopt's string), one a line. DT_EXIT_OK.
 */
static int show_help(const char *usage, const struct option *longs, const char *shorts)
{
	if (!dt_opts_list) {
		fputs(usage, stdout);
		return DT_EXIT_OK;
	}
	for (int i = 0; longs[i].name; i++)
		printf("--%s%s\n", longs[i].name, longs[i].has_arg == required_argument ? "\tVALUE" : "");
	for (const char *s = shorts; *s; s++)
		if (*s != ':')
			printf("-%c%s\n", *s, s[1] == ':' ? "\tVALUE" : "");
	return DT_EXIT_OK;
}

int dt_opts_parse(struct dt_opts *o, int argc, char **argv, const char *allowed, const char *usage)
{
	static const struct option all[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "set", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "checkpoint", required_argument, NULL, 'c' },
		{ "init-weights", required_argument, NULL, 'i' },
		{ "resume", no_argument, NULL, 'r' },
		{ "iterations", required_argument, NULL, 'n' },
		{ "warmup", required_argument, NULL, 'w' },
		{ "format", required_argument, NULL, 'f' },
		{ "all", no_argument, NULL, 'a' },
		{ "header", no_argument, NULL, 'H' },
		{ "data", no_argument, NULL, 'd' },
		{ "step", no_argument, NULL, 'S' },
		{ "dump", required_argument, NULL, 'D' },
		{ "output", required_argument, NULL, 'o' },
		{ "report", no_argument, NULL, 'R' },
		{ "threshold", required_argument, NULL, 't' },
		{ NULL, 0, NULL, 0 },
	};
	struct option longs[sizeof(all) / sizeof(all[0]) + 1];
	char shorts[8];
	int c;

	memset(o, 0, sizeof(*o));
	allowed_options(all, allowed, longs);
	o->sets = dt_calloc(argc, sizeof(char *));
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, short_options(allowed, shorts, sizeof(shorts)), longs, NULL)) != -1) {
		switch (c) {
		case 'h':
			return show_help(usage, longs, shorts);
		case 's':
			o->sets[o->nsets++] = optarg;
			break;
		case 'j':
			o->json = 1;
			break;
		case 'q':
			o->quiet = 1;
			break;
		case 'c':
			o->checkpoint = optarg;
			break;
		case 'i':
			o->init_weights = optarg;
			break;
		case 'r':
			o->resume = 1;
			break;
		case 'n':
			o->iterations = optarg;
			break;
		case 'w':
			o->warmup = optarg;
			break;
		case 'f':
			o->format = optarg;
			break;
		case 'a':
			o->all = 1;
			break;
		case 'H':
			o->header = 1;
			break;
		case 'd':
			o->data = 1;
			break;
		default:
			if (own_option(o, c, optarg))
				break;
			bad_option(c, argv[optind - 1], longs);
			short_usage(usage);
			return DT_EXIT_USAGE;
		}
	}
	o->checkpoint_first = has_word(allowed, "model-or-checkpoint");
	if (has_word(allowed, "config")) {
		if (optind >= argc) {
			dt_error("missing the model file (a YAML config)");
			short_usage(usage);
			return DT_EXIT_USAGE;
		}
		o->config = argv[optind++];
	}
	if (has_word(allowed, "input")) /* predict: an optional input file, "-" for standard input */
		o->input = optind < argc ? argv[optind++] : "-";
	if (optind < argc) {
		dt_error("unexpected argument '%s'", argv[optind]);
		short_usage(usage);
		return DT_EXIT_USAGE;
	}
	return -1;
}

void dt_opts_release(struct dt_opts *o)
{
	free(o->sets);
	o->sets = NULL;
}

/* fit.class_weight for model m's classes: k weights (the caller frees them), or NULL after an error. */
static float *class_weights(const struct dt_app *a, const struct dt_model *m, int *k)
{
	float *w;
	*k = dt_objective_num_classes(m);
	w = dt_malloc((size_t)*k * sizeof(float));
	if (dt_class_weight_read(a->cfg.class_weight, *k, w) < 0) {
		free(w);
		return NULL;
	}
	return w;
}

/*
 * The layers (and fit.class_weight against their classes) when
 * model.input_shape gives their input without the data. 0 or -1.
 */
static int check_layers(const struct dt_app *a)
{
	const struct dt_run_config *c = &a->cfg;
	struct dt_model m = { 0 };
	float *w = NULL;
	int k, rc;

	if (!c->input_shape.ndim)
		return 0;
	rc = dt_model_init(&m, c->name, &c->input_shape, c->layers, dt_layer_types);
	if (rc == 0 && c->class_weight && !(w = class_weights(a, &m, &k)))
		rc = -1;
	free(w);
	dt_model_release(&m);
	return rc;
}

/*
 * Every section, before any data is read (no file is opened): the layers,
 * each data source's arguments and `distribute:` (with this job's rules
 * when `run`). The config loader has checked the rest. 0 or -1.
 */
static int check_config(const struct dt_app *a, int run)
{
	const struct dt_run_config *c = &a->cfg;
	const struct dt_node *sources[] = { c->train, c->validation, c->test };

	if (check_layers(a) < 0)
		return -1;
	for (int i = 0; i < 3; i++)
		if (sources[i] && dt_source_check(sources[i], dt_source_types) < 0)
			return -1;
	return dt_strategy_check(c->distribute, run ? &a->sys : NULL);
}

int dt_app_config(struct dt_app *a, const struct dt_opts *o, int run)
{
	memset(a, 0, sizeof(*a));
	a->options = o;
	dt_system_detect(&a->sys);
	/* Notes (what dtrain decided, such as a CSV header): not with -q, and once per MPI job. */
	dt_note_set_quiet(o->quiet || a->sys.mpi_rank > 0);
	/* Errors name the rank from the start, as they do once MPI runs: the rank that cannot read its data. */
	if (a->sys.mpi_launched)
		dt_error_set_rank(a->sys.mpi_rank);
	struct dt_doc *doc;
	int rc = dt_app_config_doc(a, o, &doc);

	if (rc) {
		dt_doc_free(doc);
		return rc;
	}
	if (o->resolve) { /* dtrain config: --set first, so that what it adds is prepared too */
		for (int i = 0; i < o->nsets; i++)
			if (dt_doc_set(doc, o->sets[i]) < 0 || dt_doc_include(doc, dt_doc_root(doc), "data") < 0) {
				dt_doc_free(doc);
				return DT_EXIT_USAGE;
			}
		if (dt_config_prepare(doc) < 0) {
			dt_doc_free(doc);
			return DT_EXIT_FAIL;
		}
		dt_cfg_record(1);
	}
	/* A missing, unreadable or invalid model file is a usage error. */
	if (dt_run_config_bind(&a->cfg, doc, a->ckpt ? a->ckpt_path : o->config, o->sets, o->resolve ? 0 : o->nsets) < 0)
		return DT_EXIT_USAGE;
	dt_app_config_name(a);
	if (check_config(a, run) < 0)
		return dt_exit_status();
	dt_ops_set_threads(a->cfg.threads);
	return 0;
}

static int open_source(struct dt_source *s, const struct dt_node *args, const struct dt_class_map *map)
{
	return dt_source_open_classes(s, args, dt_source_types, map) < 0 ? dt_exit_status() : 0;
}

/*
 * The classes of the training source s, by which the other sources number
 * theirs, and its feature names, by which they find their columns; NULL
 * when it has neither. No classes (n 0) when the loss is a regression loss:
 * whole numbers are then values (the diabetes data's targets), and a test
 * target above the training data's largest is no unknown class.
 */
static const struct dt_class_map *source_classes(const struct dt_app *a, const struct dt_source *s,
						 struct dt_class_map *m)
{
	*m = (struct dt_class_map){ 0 };
	if (dt_source_has_classes(s) && !dt_loss_is_regression(a->cfg.loss)) {
		m->n = s->num_classes;
		m->names = s->class_names;
	}
	if (s->feature_names) {
		m->nfeatures = (int)dt_shape_count(&s->sample);
		m->features = s->feature_names;
	}
	return m->n || m->features ? m : NULL;
}

/* Options of a pipeline from the data section; augmentation for training data only. */
static int configure_pipeline(struct dt_app *a, struct dt_pipeline *p, int training)
{
	const struct dt_pipeline_config *pc = &a->cfg.pipeline;
	struct dt_pipeline_options o = { pc->prefetch, pc->cache, pc->on_error,
					 training && pc->has_augment ? &pc->augment : NULL,
					 training ? a->cfg.steps_per_epoch : 0 };
	char shape[64];
	int want = dt_preprocess_channels(&p->sample);

	if (o.augment && p->sample.ndim != 3)
		return dt_node_error(pc->augment_node,
				     "data.augment works on images (height, width, channels), but the samples of '%s' are %s",
				     p->src->name, dt_shape_format(&p->sample, 0, shape, sizeof(shape)));
	if (pc->normalize == DT_NORMALIZE_GIVEN && pc->nnorm != want && pc->nnorm != 1)
		return dt_node_error(pc->normalize_node,
				     "data.normalize gives %d channels but the samples of '%s' %s have %d (or give one value for all)",
				     pc->nnorm, p->src->name, dt_shape_format(&p->sample, 0, shape, sizeof(shape)), want);
	if (dt_pipeline_configure(p, &o) < 0)
		return -1;
	/* A bad row fails before training; a command that wants only the shape reads no record. */
	if (!a->shape_only && dt_pipeline_check_known_bad(p) < 0)
		return -1;
	if (pc->normalize == DT_NORMALIZE_GIVEN && dt_pipeline_set_normalize(p, pc->nnorm, pc->mean, pc->std) < 0)
		return -1;
	return 0;
}

/* data.normalize: auto: computed on the training records, printed, used by every pipeline. */
static int normalize_auto(struct dt_app *a)
{
	struct dt_preprocess *pp = &a->train.pre;
	double t0 = dt_now();
	int64_t used = dt_pipeline_normalize_auto(&a->train);
	if (used < 0)
		return -1;
	char mean[128] = "", std[128] = "";
	size_t km = 0, ks = 0;
	for (int c = 0; c < pp->nchan && c < 4; c++) {
		km += snprintf(mean + km, sizeof(mean) - km, "%s%.4g", c ? ", " : "", pp->mean[c]);
		ks += snprintf(std + ks, sizeof(std) - ks, "%s%.4g", c ? ", " : "", pp->std[c]);
	}
	/* A note, as the CSV header decision: -q silences it. */
	dt_note("normalize: mean [%s%s] std [%s%s] over %d channel%s of %lld training records (%.1fs)", mean,
		pp->nchan > 4 ? ", ..." : "", std, pp->nchan > 4 ? ", ..." : "", pp->nchan, pp->nchan == 1 ? "" : "s",
		(long long)used, dt_now() - t0);
	if (a->have_val && dt_pipeline_set_normalize(&a->val, pp->nchan, pp->mean, pp->std) < 0)
		return -1;
	return 0;
}

int dt_app_preprocess(struct dt_app *a, const char *json, const char *what, const struct dt_shape *sample,
		      struct dt_preprocess *pp)
{
	const struct dt_pipeline_config *pc = &a->cfg.pipeline;
	struct dt_preprocess got = { 0 };
	int want = dt_preprocess_channels(sample), rc = -1;
	char shape[64];

	memset(pp, 0, sizeof(*pp));
	pp->rescale = (float)a->cfg.rescale;
	if (pc->normalize == DT_NORMALIZE_NONE)
		return 0;
	if (json) {
		if (dt_preprocess_from_json(&got, json, what) < 0)
			return -1;
	} else if (pc->normalize == DT_NORMALIZE_AUTO) {
		return dt_error("'%s' has no preprocessing metadata, which data.normalize: auto needs (write it with dtrain fit)",
				what);
	} else {
		dt_preprocess_set(&got, pc->nnorm, pc->mean, pc->std);
	}
	if (got.nchan == 1 && want > 1) {
		float *m = dt_malloc((size_t)want * sizeof(float)), *s = dt_malloc((size_t)want * sizeof(float));
		for (int c = 0; c < want; c++) {
			m[c] = got.mean[0];
			s[c] = got.std[0];
		}
		dt_preprocess_set(pp, want, m, s);
		free(m);
		free(s);
	} else if (got.nchan == want) {
		dt_preprocess_set(pp, want, got.mean, got.std);
	} else {
		dt_error("the normalization of '%s' has %d channels but samples %s have %d", what, got.nchan,
			 dt_shape_format(sample, 0, shape, sizeof(shape)), want);
		goto out;
	}
	rc = 0;
out:
	dt_preprocess_release(&got);
	return rc;
}

/* Class k of src for a message: its name in quotes, or its number. */
static void class_name(const struct dt_source *src, int k, char *buf, size_t size)
{
	if (src->class_names)
		snprintf(buf, size, "'%.40s'", src->class_names[k]);
	else
		snprintf(buf, size, "%d", k);
}

/*
 * Warns when a part of the training file src (the validation or test
 * records, `what`) lacks classes that its training part has, or holds one
 * class only: the sign of a file sorted by class.
 */
static void warn_part_classes(const struct dt_run_config *c, const struct dt_source *src, const int32_t *labels,
			      const struct dt_split *parts, const int64_t *part, int64_t n, const char *what)
{
	const struct dt_split_config *sc = &c->pipeline.split;
	int k = src->num_classes, ntrain = 0, npart = 0, missing = 0, only = -1;
	uint8_t *in_train = dt_calloc(k, 1), *in_part = dt_calloc(k, 1);
	char list[256] = "", name[64];
	size_t len = 0;
	const char *hint = !sc->shuffle ? "; the split takes the last records: is the file sorted by class? "
					  "data.split: {shuffle: true, stratify: true} puts every class in each part"
			   : !sc->stratify ? "; data.split.stratify: true puts every class in each part"
					   : "";

	for (int64_t i = 0; i < parts->ntrain; i++)
		if (labels[parts->train[i]] >= 0)
			in_train[labels[parts->train[i]]] = 1;
	for (int64_t i = 0; i < n; i++)
		if (labels[part[i]] >= 0)
			in_part[labels[part[i]]] = 1;
	for (int j = 0; j < k; j++) {
		ntrain += in_train[j];
		npart += in_part[j];
		if (in_part[j])
			only = j;
		if (in_train[j] && !in_part[j] && missing++ < 4 && len < sizeof(list)) {
			class_name(src, j, name, sizeof(name));
			len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s", missing > 1 ? ", " : "", name);
		}
	}
	if (npart == 1 && ntrain > 1) {
		class_name(src, only, name, sizeof(name));
		dt_warn("the %s part of '%s' (%lld records) holds one class only, %s%s", what, src->name, (long long)n,
			name, hint);
	} else if (missing) {
		dt_warn("the %s part of '%s' (%lld records) lacks %d of the %d classes of the training part: %s%s%s",
			what, src->name, (long long)n, missing, ntrain, list, missing > 4 ? ", ..." : "", hint);
	}
	free(in_train);
	free(in_part);
}

/*
 * The parts of the training file src (data.validation_split,
 * data.test_split, data.split: split.h) into parts; warns (rank 0) about
 * parts that lack classes. 0 or an exit status.
 */
static int split_training(struct dt_app *a, struct dt_source *src, struct dt_split *parts)
{
	const struct dt_run_config *c = &a->cfg;
	const struct dt_split_config *sc = &c->pipeline.split;
	int64_t n = src->count, nval = dt_split_size(n, c->validation_split), ntest = dt_split_size(n, sc->test);
	int carve = nval > 0 || ntest > 0;
	/* Class warnings for classifiers only: a regression target's values are no classes. */
	int warn = carve && a->sys.mpi_rank == 0 && !a->shape_only && !dt_loss_is_regression(c->loss);
	int32_t *labels = NULL;

	if ((c->validation_split > 0 && nval == 0) || (sc->test == 0 && n - nval <= 0)) {
		dt_node_error(dt_node_get(c->data_node, "validation_split"),
			      "validation_split %g of %lld records leaves no training or no validation records",
			      c->validation_split, (long long)n);
		return DT_EXIT_USAGE;
	}
	if ((sc->test > 0 && ntest == 0) || n - nval - ntest <= 0) {
		dt_node_error(sc->test_node,
			      "test_split %g (with validation_split %g) of %lld records leaves no training or no "
			      "test records",
			      sc->test, c->validation_split, (long long)n);
		return DT_EXIT_USAGE;
	}
	if (sc->stratify && !dt_source_has_classes(src)) {
		dt_node_error(sc->node,
			      "data.split.stratify needs class labels, but the labels of '%s' are not class indices",
			      src->name);
		return DT_EXIT_USAGE;
	}
	if ((sc->stratify && carve) || (warn && dt_source_has_classes(src))) {
		labels = dt_malloc((size_t)n * sizeof(int32_t));
		if (dt_source_labels(src, labels) < 0) {
			free(labels);
			return DT_EXIT_FAIL;
		}
	}
	dt_split_records(parts, n, nval, ntest, sc, sc->has_seed ? sc->seed : c->seed, labels, src->num_classes);
	if (warn && labels && parts->nval)
		warn_part_classes(c, src, labels, parts, parts->val, parts->nval, "validation");
	if (warn && labels && parts->ntest)
		warn_part_classes(c, src, labels, parts, parts->test, parts->ntest, "test");
	free(labels);
	return 0;
}

/* The one-hot size for labels of s: its classes when asked, or when the loss needs them and s has class indices. */
static int one_hot_size(const struct dt_run_config *c, const struct dt_source *s)
{
	int indices = s->label.ndim == 1 && s->label.dim[0] == 1;
	return c->one_hot || (c->loss == DT_LOSS_CATEGORICAL_CROSSENTROPY && indices) ? s->num_classes : 0;
}

/* The training and validation pipelines: parts of the training file, or data.validation opened with map. */
static int train_pipelines(struct dt_app *a, const struct dt_split *parts, const struct dt_class_map *map)
{
	struct dt_run_config *c = &a->cfg;
	int rc, one_hot = one_hot_size(c, &a->train_src);

	if (c->one_hot && !one_hot) {
		dt_error("data.one_hot needs class-index labels, but '%s' has none", a->train_src.name);
		return DT_EXIT_USAGE;
	}
	if (dt_pipeline_init_list(&a->train, &a->train_src, parts->train, parts->ntrain, c->batch_size, c->shuffle,
				  c->seed, (float)c->rescale, one_hot) < 0)
		return DT_EXIT_FAIL;
	if (parts->nval) {
		if (dt_pipeline_init_list(&a->val, &a->train_src, parts->val, parts->nval, c->batch_size, 0, c->seed,
					  (float)c->rescale, one_hot) < 0)
			return DT_EXIT_FAIL;
		a->have_val = 1;
	} else if (c->validation) {
		if ((rc = open_source(&a->val_src, c->validation, map)))
			return rc;
		a->have_val_src = 1;
		if (dt_pipeline_init(&a->val, &a->val_src, 0, a->val_src.count, c->batch_size, 0, c->seed,
				     (float)c->rescale, one_hot) < 0)
			return DT_EXIT_FAIL;
		a->have_val = 1;
	}
	if (configure_pipeline(a, &a->train, 1) < 0 || (a->have_val && configure_pipeline(a, &a->val, 0) < 0) ||
	    (c->pipeline.normalize == DT_NORMALIZE_AUTO && !a->shape_only && normalize_auto(a) < 0))
		return dt_exit_status();
	return 0;
}

/*
 * The test pipeline: the test part of the training file `whole` (with
 * data.test_split), or data.test opened with map. One-hot as the training
 * labels when there are any.
 */
static int test_pipeline(struct dt_app *a, struct dt_source *whole, const struct dt_split *parts,
			 const struct dt_class_map *map)
{
	struct dt_run_config *c = &a->cfg;
	struct dt_source *src = whole;
	int rc, one_hot;

	if (!src) {
		if (!c->test) {
			dt_error("'%s' has no data.test section (or data.test_split) to evaluate on", c->path);
			return DT_EXIT_USAGE;
		}
		if ((rc = open_source(&a->test_src, c->test, map)))
			return rc;
		a->have_test_src = 1;
		src = &a->test_src;
	}
	one_hot = one_hot_size(c, a->have_train_src ? &a->train_src : src);
	if (whole)
		rc = dt_pipeline_init_list(&a->test, src, parts->test, parts->ntest, c->batch_size, 0, c->seed,
					   (float)c->rescale, one_hot);
	else
		rc = dt_pipeline_init(&a->test, src, 0, src->count, c->batch_size, 0, c->seed, (float)c->rescale,
				      one_hot);
	if (rc < 0)
		return DT_EXIT_FAIL;
	a->have_test = 1;
	if (configure_pipeline(a, &a->test, 0) < 0)
		return dt_exit_status();
	/* Training's statistics, which a pass for the shape alone has not computed. */
	if (a->have_train_src && c->pipeline.normalize == DT_NORMALIZE_AUTO && !a->shape_only &&
	    dt_pipeline_set_normalize(&a->test, a->train.pre.nchan, a->train.pre.mean, a->train.pre.std) < 0)
		return DT_EXIT_FAIL;
	return 0;
}

/*
 * The sources and pipelines. The training file defines the classes: the
 * validation and test sources are opened with its class map (evaluate,
 * which opens no training data, with a->test_classes, the checkpoint's).
 * With data.test_split the test records are a part of the training file,
 * which evaluate then opens as its test source.
 */
int dt_app_data(struct dt_app *a, int need_train, int need_test)
{
	struct dt_run_config *c = &a->cfg;
	struct dt_class_map classes;
	const struct dt_class_map *map = a->test_classes;
	struct dt_split parts = { 0 };
	struct dt_source *whole = NULL; /* the training file */
	int rc = 0, test_part = c->pipeline.split.test > 0;

	if ((need_train || (need_test && test_part)) && !c->train) {
		dt_error("'%s' has no training data: give data.train (summary and time need only model.input_shape)",
			 c->path);
		return DT_EXIT_USAGE;
	}
	if (need_train || (need_test && test_part)) {
		whole = need_train ? &a->train_src : &a->test_src;
		if ((rc = open_source(whole, c->train, NULL)))
			return rc;
		*(need_train ? &a->have_train_src : &a->have_test_src) = 1;
		rc = split_training(a, whole, &parts);
		map = source_classes(a, whole, &classes);
	}
	if (!rc && need_train)
		rc = train_pipelines(a, &parts, map);
	if (!rc && (need_test || (need_train && test_part)))
		rc = test_pipeline(a, test_part ? whole : NULL, &parts, map);
	dt_split_release(&parts);
	return rc;
}

/*
 * The per-sample input shape: the config's, checked against the data, or the
 * data's. Data whose samples differ from the checkpoint's model is the data's
 * fault, said so before the weights' shapes disagree (or before the
 * model.input_shape that evaluate took from the checkpoint is blamed).
 */
static int input_shape(struct dt_app *a, struct dt_shape *shape, const struct dt_source *src)
{
	char x[64], y[64];
	struct dt_shape trained;
	if (src && a->ckpt && dt_app_checkpoint_input_shape(a, &trained) && !dt_shape_equal(&trained, &src->sample))
		return dt_error("the model of '%s' was trained on samples of %s, but those of '%s' are %s", a->ckpt_path,
				dt_shape_format(&trained, 0, x, sizeof(x)), src->name,
				dt_shape_format(&src->sample, 0, y, sizeof(y)));
	if (a->cfg.input_shape.ndim) {
		*shape = a->cfg.input_shape;
		if (src && !dt_shape_equal(shape, &src->sample))
			return dt_node_error(a->cfg.input_shape_node, "model.input_shape is %s but the samples of '%s' are %s",
					     dt_shape_format(shape, 0, x, sizeof(x)), src->name,
					     dt_shape_format(&src->sample, 0, y, sizeof(y)));
		return 0;
	}
	if (!src)
		return dt_error("'%s' gives no model.input_shape and no data to take it from", a->cfg.path);
	*shape = src->sample;
	return 0;
}

/* m as the logs of an epoch without validation: what dt_logs_pairs lists. */
static int metric_pairs(const struct dt_app *a, const struct dt_metrics *m, struct dt_metric_pair *out)
{
	struct dt_logs logs = { .loss = m->loss, .accuracy = m->accuracy, .has_accuracy = a->trainer.accuracy,
				.mae = m->mae, .rmse = m->rmse, .has_errors = a->trainer.errors,
				.metrics = &a->trainer.metrics };
	memcpy(logs.metric, m->metric, sizeof(logs.metric));
	return dt_logs_pairs(&logs, 0, out);
}

void dt_app_metrics_json(const struct dt_app *a, const struct dt_metrics *m, struct cJSON *o)
{
	struct dt_metric_pair pairs[DT_MAX_PAIRS];
	int n = metric_pairs(a, m, pairs);
	for (int i = 0; i < n; i++)
		cJSON_AddNumberToObject(o, pairs[i].name, pairs[i].value);
}

void dt_app_metrics_line(const struct dt_app *a, const struct dt_metrics *m, FILE *f)
{
	struct dt_metric_pair pairs[DT_MAX_PAIRS];
	int n = metric_pairs(a, m, pairs);
	char buf[DT_MAX_PAIRS * 64] = "";
	size_t k = 0;
	for (int i = 0; i < n; i++)
		k = dt_format_metric(buf, sizeof(buf), k, pairs[i].name, pairs[i].value);
	fprintf(f, "%s\n", buf);
}

int dt_app_input_shape(struct dt_app *a, struct dt_shape *in)
{
	int rc;
	if (a->cfg.input_shape.ndim) {
		*in = a->cfg.input_shape;
		return 0;
	}
	a->shape_only = 1; /* no data.normalize: auto pass for a shape */
	rc = dt_app_data(a, 1, 0);
	a->shape_only = 0;
	if (rc)
		return rc;
	*in = a->train_src.sample;
	return 0;
}

int dt_app_model(struct dt_app *a, struct dt_model *m)
{
	struct dt_shape in;
	int rc = dt_app_input_shape(a, &in);
	if (rc)
		return rc;
	return dt_model_init(m, a->cfg.name, &in, a->cfg.layers, dt_layer_types) < 0 ? dt_exit_status() : 0;
}

/* Every pipeline must give samples of the model's input shape and labels of one shape. */
static int check_pipeline(const struct dt_pipeline *p, const struct dt_shape *in, const struct dt_shape *label,
			  const struct dt_shape *out)
{
	char x[64], y[64];
	int64_t classes = dt_shape_count(out);
	if (!p->one_hot && p->src->num_classes > classes && classes > 1 && p->src->label_file[0])
		return dt_error("'%s' record %lld: label %d is out of range (the model outputs %s: classes 0 to %lld)",
				p->src->label_file, (long long)p->src->label_max_record, p->src->num_classes - 1,
				dt_shape_format(out, 1, x, sizeof(x)), (long long)classes - 1);
	if (!p->one_hot && p->src->num_classes > classes && classes > 1)
		return dt_error("'%s' has %d classes but the model outputs %s", p->src->name, p->src->num_classes,
				dt_shape_format(out, 1, x, sizeof(x)));
	if (!dt_shape_equal(&p->sample, in))
		return dt_error("the samples of '%s' are %s but the model's input is %s", p->src->name,
				dt_shape_format(&p->sample, 0, x, sizeof(x)), dt_shape_format(in, 0, y, sizeof(y)));
	/*
	 * Name the file the labels come from (an npy's y, not its x). Class
	 * indices against one-hot training labels are an error, as in Keras: a
	 * file of each kind is more likely a slip than a wish to mix them.
	 */
	if (!dt_shape_equal(&p->label, label)) {
		const char *hint = "";
		if (p->src->num_classes && dt_shape_count(&p->label) == 1 && dt_shape_count(label) > 1)
			hint = ": class indices against one-hot vectors; one-hot these labels too, or give class indices "
			       "in both (categorical_crossentropy or data.one_hot one-hots them)";
		return dt_error("the labels of '%s' are %s but the training labels are %s%s",
				p->src->label_file[0] ? p->src->label_file : p->src->name,
				dt_shape_format(&p->label, 0, x, sizeof(x)), dt_shape_format(label, 0, y, sizeof(y)), hint);
	}
	return 0;
}

/*
 * bf16 on a CPU whose bfloat16 products are slower than its float32 ones:
 * an Intel Xeon with avx512_bf16 and without AMX (or with AMX that a
 * virtual machine hides) runs them at or below fp32's rate, where a Zen 4
 * runs them at twice it. Measured on a Xeon (AVX-512 with BF16, 1 thread):
 * bf16 GEMMs at 78 GFLOP/s against fp32's 190, fashion_mlp 0.64x and
 * fashion_cnn 0.69x fp32's speed. A GEMM of 1024 cubed each way (about 0.1
 * s) tells; the chief warns.
 */
static void warn_slow_bf16(const struct dt_app *a)
{
	const struct dt_run_config *c = &a->cfg;
	double lo, hi;
	char at[256];
	if (c->precision != DT_PRECISION_BF16 || !a->strategy.is_chief)
		return;
	lo = dt_ops_gemm_gflops(DT_PRECISION_BF16, 1024);
	hi = dt_ops_gemm_gflops(DT_PRECISION_FP32, 1024);
	if (lo < hi)
		dt_warn("compile.precision bf16 (%s) runs slower than fp32 on this CPU: its bfloat16 products (oneDNN's %s) "
			"reach %.0f GFLOP/s, float32's %.0f (a 1024x1024x1024 GEMM each, %d thread%s); set precision: "
			"fp32 here",
			dt_node_where(c->precision_node, at, sizeof(at)), dt_ops_cpu_isa(), lo, hi, dt_ops_get_threads(),
			dt_ops_get_threads() == 1 ? "" : "s");
}

int dt_app_precision(struct dt_app *a)
{
	const struct dt_run_config *c = &a->cfg;
	char why[512];
	int gpu = 0, cpu = 0;

	for (int r = 0; r < a->strategy.nreplicas; r++) {
		if (a->strategy.devices[r].kind == DT_DEVICE_CUDA)
			gpu = 1;
		else
			cpu = 1;
	}
	if (gpu && dt_set_precision((enum dt_precision)c->precision, why, sizeof(why)) < 0)
		return dt_node_error(c->precision_node, "%s", why), DT_EXIT_USAGE;
	if (cpu && dt_ops_set_cpu_precision((enum dt_precision)c->precision, why, sizeof(why)) < 0)
		return dt_node_error(c->precision_node, "%s (use fp32, or distribute: {device: gpu:N})", why), DT_EXIT_USAGE;
	if (cpu)
		warn_slow_bf16(a);
	return 0;
}

int dt_app_check_memory(const struct dt_app *a, const struct dt_model *m, const struct dt_device *devs, int n,
			int batch, int state)
{
	struct dt_device dev = devs[0];
	int64_t budget;
	int most = 0;
	char what[128], name[32];

	/* CPU replicas all live in the host's memory; each GPU has its own. */
	for (int i = 0; i < n; i++) {
		int k = 0;
		for (int j = 0; j < n; j++)
			k += devs[j].kind == devs[i].kind &&
			     (devs[i].kind == DT_DEVICE_CPU || devs[j].index == devs[i].index);
		if (k > most) {
			most = k;
			dev = devs[i];
		}
	}
	dt_device_format(dev, name, sizeof(name));
	if (a->cfg.max_memory)
		snprintf(what, sizeof(what), "fit.max_memory (on %s)", name);
	else
		snprintf(what, sizeof(what), "%s's memory (set fit.max_memory to change the limit)",
			 dev.kind == DT_DEVICE_CPU ? "the host" : name);
	budget = a->cfg.max_memory ? a->cfg.max_memory : dt_device_memory(dev);
	return dt_model_check_memory(m, batch, most, state, budget, what) < 0 ? DT_EXIT_USAGE : 0;
}

/*
 * A model that starts with an embedding reads token indices: the data's
 * values as they are, each a whole number below its input_dim. rescale and
 * normalize would change the indices, so they are refused; every pipeline
 * checks its batches (dt_pipeline_set_index_limit).
 */
static int index_inputs(struct dt_app *a, const struct dt_model *m)
{
	const struct dt_run_config *c = &a->cfg;
	const struct dt_layer *l = &m->layers[0];
	int64_t limit = m->nlayers && l->type->index_limit ? l->type->index_limit(l) : 0;

	if (!limit)
		return 0;
	if (c->rescale != 1)
		return dt_node_error(dt_node_get(c->data_node, "rescale"),
				     "data.rescale would scale the token indices that layer '%s' (embedding) reads; "
				     "remove it: token inputs are used as they are",
				     l->name);
	if (c->pipeline.normalize != DT_NORMALIZE_NONE)
		return dt_node_error(c->pipeline.normalize_node ? c->pipeline.normalize_node : c->data_node,
				     "data.normalize would shift the token indices that layer '%s' (embedding) reads; "
				     "remove it: token inputs are used as they are",
				     l->name);
	if (a->have_train_src)
		dt_pipeline_set_index_limit(&a->train, limit, l->name);
	if (a->have_val)
		dt_pipeline_set_index_limit(&a->val, limit, l->name);
	if (a->have_test)
		dt_pipeline_set_index_limit(&a->test, limit, l->name);
	return 0;
}

/*
 * Labels that sparse_categorical_crossentropy reads as class indices are
 * checked against the model's outputs; those of the binary crossentropies
 * against [0, 1].
 */
static void class_labels(struct dt_app *a, const struct dt_model *m)
{
	int limit = (int)dt_shape_count(&m->output);
	if (a->cfg.loss == DT_LOSS_BINARY_CROSSENTROPY || a->cfg.loss == DT_LOSS_BINARY_FOCAL_CROSSENTROPY) {
		if (a->have_train_src)
			dt_pipeline_set_binary_labels(&a->train);
		if (a->have_val)
			dt_pipeline_set_binary_labels(&a->val);
		if (a->have_test)
			dt_pipeline_set_binary_labels(&a->test);
		return;
	}
	if (a->cfg.loss != DT_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY)
		return;
	if (a->have_train_src && !a->train.one_hot)
		dt_pipeline_set_class_limit(&a->train, limit);
	if (a->have_val && !a->val.one_hot)
		dt_pipeline_set_class_limit(&a->val, limit);
	if (a->have_test && !a->test.one_hot)
		dt_pipeline_set_class_limit(&a->test, limit);
}

/*
 * The first place where a and b differ, its key path ("fit.seed",
 * "model.layers.1.dense.units") appended to path, and the two values there
 * (NULL: not set). 0 when they are the same.
 */
static int first_difference(const cJSON *a, const cJSON *b, char *path, size_t size, const cJSON **da,
			    const cJSON **db)
{
	size_t len = strlen(path);
	const cJSON *e;
	int n;
	if (cJSON_Compare(a, b, 1))
		return 0;
	*da = a;
	*db = b;
	if (cJSON_IsObject(a) && cJSON_IsObject(b)) {
		for (int side = 0; side < 2; side++)
			cJSON_ArrayForEach(e, (side ? b : a)) {
				const cJSON *x = cJSON_GetObjectItemCaseSensitive(a, e->string);
				const cJSON *y = cJSON_GetObjectItemCaseSensitive(b, e->string);
				snprintf(path + len, size - len, "%s%s", len ? "." : "", e->string);
				if (!x || !y) {
					*da = x;
					*db = y;
					return 1;
				}
				if (first_difference(x, y, path, size, da, db))
					return 1;
			}
	} else if (cJSON_IsArray(a) && cJSON_IsArray(b) && (n = cJSON_GetArraySize(a)) == cJSON_GetArraySize(b)) {
		for (int i = 0; i < n; i++) {
			snprintf(path + len, size - len, "%s%d", len ? "." : "", i);
			if (first_difference(cJSON_GetArrayItem(a, i), cJSON_GetArrayItem(b, i), path, size, da, db))
				return 1;
		}
	}
	path[len] = '\0';
	return 1;
}

/*
 * What every rank of a job must share with the chief, as JSON text: the
 * config after --set, less the keys that may differ from host to host
 * (devices, threads, memory, the run directory), and the options that change what is trained.
 */
static char *job_text(const struct dt_app *a)
{
	static const char *const local[][2] = {
		{ "distribute", "device" }, { "distribute", "devices" }, { "fit", "threads" }, { "fit", "max_memory" },
		{ "checkpoint", "dir" }, /* the chief's is written; --resume checks the others read the same */
	};
	const struct dt_opts *o = a->options;
	char *json = dt_node_to_json(dt_doc_root(a->cfg.doc)), *s;
	cJSON *j = cJSON_Parse(json);
	free(json);
	for (size_t i = 0; i < sizeof(local) / sizeof(local[0]); i++)
		cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, local[i][0]), local[i][1]);
	if (o && o->resume)
		cJSON_AddStringToObject(j, "--resume", "given");
	if (o && o->init_weights)
		cJSON_AddStringToObject(j, "--init-weights", o->init_weights);
	if (o && o->checkpoint)
		cJSON_AddStringToObject(j, "--checkpoint", o->checkpoint);
	if (o && o->data_file)
		cJSON_AddStringToObject(j, "--data", o->data_file);
	s = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	json = dt_strdup(s);
	cJSON_free(s);
	return json;
}

/*
 * Under mpirun every rank must train what the chief trains: a rank started
 * with another model file, --set or option would break the exchanges (a
 * crash in MPI, a hang) or, worse, train on quietly (another seed reads
 * other batches, another learning rate drifts from the chief's weights).
 * After dt_strategy_create refused the job, names the first key that
 * differs on a rank whose job differs, and how many do on the chief. -1.
 */
static int job_differs(const struct dt_app *a, const char *mine)
{
	char path[256] = "", *here, *there;
	const cJSON *x = NULL, *y = NULL;
	cJSON *m, *c;
	int n = a->strategy.jobs_differing;

	if (!a->strategy.job_differs)
		return a->strategy.is_chief ? dt_error("%d rank%s started with another config than the chief (rank 0): "
						       "%s the first key that differs", n, n == 1 ? " was" : "s were",
						       n == 1 ? "its message names" : "their messages name")
					    : -1;
	m = cJSON_Parse(mine);
	c = cJSON_Parse(a->strategy.chief_job);
	first_difference(m, c, path, sizeof(path), &x, &y);
	here = dt_json_text(x);
	there = dt_json_text(y);
	dt_error("rank %d was started with another config than the chief (rank 0): '%s' is %s here, %s on rank 0; "
		 "start every rank with the same model file, --set and options", a->strategy.rank, path, here, there);
	free(here);
	free(there);
	cJSON_Delete(m);
	cJSON_Delete(c);
	return -1;
}

int dt_app_build(struct dt_app *a)
{
	struct dt_run_config *c = &a->cfg;
	const struct dt_source *src = a->have_train_src ? &a->train_src : a->have_test_src ? &a->test_src : NULL;
	const struct dt_pipeline *labels = a->have_train_src ? &a->train : &a->test;
	struct dt_shape in;
	char *job;
	int per_replica, state, rc;

	if (input_shape(a, &in, src) < 0)
		return DT_EXIT_USAGE;
	job = a->sys.mpi_world > 1 ? job_text(a) : NULL;
	a->strategy.job = job;
	rc = dt_strategy_create(&a->strategy, c->distribute, &a->sys);
	if (rc < 0 && a->strategy.chief_job)
		job_differs(a, job);
	a->strategy.job = NULL;
	free(job);
	if (rc < 0)
		return a->strategy.chief_job ? DT_EXIT_USAGE : dt_exit_status();
	if ((rc = dt_app_precision(a)))
		return rc;
	/*
	 * Each process reads and decodes its part of every global training
	 * batch; every rank reads the whole validation and test batches. The
	 * chief alone names skipped records (the trainer gathers the parts').
	 */
	if (a->have_train_src && a->strategy.global_replicas > a->strategy.nreplicas)
		dt_pipeline_set_part(&a->train, a->strategy.first_replica, a->strategy.nreplicas,
				     a->strategy.global_replicas);
	a->train.quiet_skips = a->val.quiet_skips = a->test.quiet_skips = !a->strategy.is_chief;
	a->nreplicas = a->strategy.nreplicas;
	per_replica = (c->batch_size + a->nreplicas - 1) / a->nreplicas;
	a->models = dt_calloc(a->nreplicas, sizeof(*a->models));
	a->opts = dt_calloc(a->nreplicas, sizeof(*a->opts));
	for (int r = 0; r < a->nreplicas; r++) {
		if (dt_model_init(&a->models[r], c->name, &in, c->layers, dt_layer_types) < 0)
			return dt_exit_status();
		if ((a->have_train_src && check_pipeline(&a->train, &in, &labels->label, &a->models[r].output) < 0) ||
		    (a->have_val && check_pipeline(&a->val, &in, &labels->label, &a->models[r].output) < 0) ||
		    (a->have_test && check_pipeline(&a->test, &in, &labels->label, &a->models[r].output) < 0))
			return DT_EXIT_USAGE;
		if (r == 0 && index_inputs(a, &a->models[0]) < 0)
			return DT_EXIT_USAGE;
		if (r == 0)
			class_labels(a, &a->models[0]);
		if (dt_objective_init(&a->trainer.objective, c->loss, &c->loss_args, c->from_logits, &a->models[r],
				      &labels->label, src->num_classes, c->loss_node) < 0)
			return dt_exit_status();
		if (r == 0 && a->have_train_src && a->strategy.is_chief)
			dt_objective_warn(&a->trainer.objective, c->from_logits, &a->models[0]);
		if (c->errors && !dt_shape_equal(&labels->label, &a->models[r].output)) {
			char out[64], lab[64];
			dt_shape_format(&a->models[r].output, 1, out, sizeof(out));
			dt_shape_format(&labels->label, 1, lab, sizeof(lab));
			dt_node_error(c->errors_node, "'%s' compares the output %s with labels of its shape, but the "
				      "data's labels are %s", c->errors_node->value, out, lab);
			return DT_EXIT_USAGE;
		}
		/* Optimizer slots, and the accumulated gradients, per trainable parameter. */
		state = dt_optimizer_state_count(&c->optimizer) + (c->accumulate_steps > 1);
		if (r == 0 && (rc = dt_app_check_memory(a, &a->models[0], a->strategy.devices, a->nreplicas,
							per_replica, state)))
			return rc;
		if (dt_model_alloc(&a->models[r], a->strategy.devices[r], per_replica) < 0)
			return DT_EXIT_FAIL;
		dt_model_init_params(&a->models[r], c->seed);
		dt_optimizer_init(&a->opts[r], &c->optimizer, &a->models[r]);
	}
	a->strategy.type->broadcast(&a->strategy, a->models, a->opts);
	a->trainer.metrics = c->metrics;
	if (dt_metric_set_layout(&a->trainer.metrics, a->trainer.objective.accuracy, dt_shape_count(&a->models[0].output),
				 a->trainer.objective.threshold, a->trainer.objective.accuracy == DT_ACC_SPARSE,
				 a->trainer.objective.input == DT_LOSS_LOGITS) < 0)
		return DT_EXIT_USAGE;
	a->trainer.strategy = &a->strategy;
	a->trainer.models = a->models;
	a->trainer.opts = a->opts;
	a->trainer.accuracy = c->accuracy;
	a->trainer.errors = c->errors || dt_loss_is_regression(c->loss);
	a->trainer.train = a->have_train_src ? &a->train : &a->test;
	a->trainer.val = a->have_val ? &a->val : NULL;
	a->trainer.epochs = c->epochs;
	a->trainer.seed = c->seed;
	a->trainer.steps_per_epoch = c->steps_per_epoch;
	a->trainer.accumulate_steps = c->accumulate_steps;
	a->trainer.log_learning_rate = dt_schedule_varies(&c->optimizer.schedule) || c->callback_cfg.reduce_lr_on_plateau;
	dt_trainer_init(&a->trainer);
	if (c->class_weight) {
		int k;
		float *w = class_weights(a, &a->models[0], &k);
		if (!w)
			return DT_EXIT_USAGE;
		dt_trainer_set_class_weights(&a->trainer, w, k);
		free(w);
	}
	return 0;
}

void dt_app_release(struct dt_app *a)
{
	if (a->trainer.labels)
		dt_trainer_release(&a->trainer);
	for (int r = 0; a->models && r < a->nreplicas; r++) {
		if (a->opts[r].nslots)
			dt_optimizer_release(&a->opts[r], &a->models[r]);
		dt_model_release(&a->models[r]);
	}
	free(a->models);
	free(a->opts);
	dt_strategy_release(&a->strategy);
	if (a->have_test)
		dt_pipeline_release(&a->test);
	if (a->have_val)
		dt_pipeline_release(&a->val);
	if (a->train.src)
		dt_pipeline_release(&a->train);
	if (a->have_test_src)
		dt_source_close(&a->test_src);
	if (a->have_val_src)
		dt_source_close(&a->val_src);
	if (a->have_train_src)
		dt_source_close(&a->train_src);
	dt_run_config_release(&a->cfg);
	dt_checkpoint_free(a->ckpt);
	a->ckpt = NULL;
}
