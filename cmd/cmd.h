/*
 * The subcommands (git's habit: one file and one man page each, int
 * cmd_x(int argc, char **argv)) and the composition they share: app.c joins
 * the run config, the data sources (data/), the layers (layers/) and the
 * strategy (strategies/) into a trainer. Exit status: 0 ok, 1 runtime
 * failure, 2 usage or config error.
 */
#ifndef DT_CMD_H
#define DT_CMD_H

#include "core/config/run_config.h"
#include "core/fit/train.h"
#include "strategies/strategies.h"

#define DT_EXIT_OK 0
#define DT_EXIT_FAIL 1
#define DT_EXIT_USAGE 2

int cmd_fit(int argc, char **argv);
int cmd_evaluate(int argc, char **argv);
int cmd_summary(int argc, char **argv);
int cmd_devices(int argc, char **argv);
int cmd_time(int argc, char **argv);
int cmd_predict(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_plot(int argc, char **argv);
int cmd_config(int argc, char **argv);
int cmd_export(int argc, char **argv);
/*
 * dtrain config (cmd/config.c), before the config is bound: gives every
 * reader a mapping to note its defaults in, without changing what the
 * config means (absent optional sections as {}, `optimizer: adam` as
 * {adam: {}}, the same for the loss, the layers and the callbacks). 0 or -1.
 */
struct dt_doc;
int dt_config_prepare(struct dt_doc *doc);

/* Options every config-taking subcommand shares. */
struct dt_opts {
	const char *config;     /* the model YAML */
	char **sets;            /* --set assignments */
	int nsets;
	int json;
	int quiet;
	const char *checkpoint; /* evaluate --checkpoint */
	const char *init_weights; /* fit --init-weights */
	int resume;             /* fit --resume */
	const char *iterations; /* time --iterations, unchecked */
	const char *warmup;     /* time --warmup, unchecked */
	const char *input;      /* predict: the input after the model file ("-" when absent) */
	const char *format;     /* predict --format */
	int all;                /* predict --all */
	int header;             /* predict --header */
	const char *threshold;  /* predict --threshold, unchecked */
	int report;             /* evaluate --report */
	int data;               /* time --data */
	int step;               /* inspect --step */
	const char *dump;       /* inspect --dump LAYER */
	const char *output;     /* inspect -o FILE */
	const char *data_file;  /* evaluate --data FILE: the test source */
	int checkpoint_first;   /* the model argument may be a checkpoint (allowed word "model-or-checkpoint") */
	int resolve;            /* config: record every default the readers store (dt_cfg_record) */
};

/*
 * Parses argv with the long options named in `allowed` (a string such as
 * "set json quiet checkpoint"); prints `usage` for -h. Returns -1 to go on,
 * else the exit status to return (0 after -h, 2 on a usage error).
 */
int dt_opts_parse(struct dt_opts *o, int argc, char **argv, const char *allowed, const char *usage);
/*
 * Set by `dtrain complete options COMMAND`, which runs the subcommand with
 * -h: its option parser prints the options it takes instead of the usage,
 * one a line ("--set\tVALUE" for one that takes a value, "--json"), and the
 * subcommand returns 0.
 */
extern int dt_opts_list;
/*
 * dtrain complete keys | values KEY (cmd/complete.c): every config key path,
 * or the names a key takes, one a line, from the tables that check them.
 */
int dt_complete_config(int argc, char **argv);
void dt_opts_release(struct dt_opts *o);

struct dt_app {
	struct dt_run_config cfg;
	struct dt_system sys;
	struct dt_source train_src, val_src, test_src;
	int have_val_src, have_test_src, have_train_src;
	struct dt_pipeline train, val, test;
	int have_val, have_test;
	struct dt_strategy strategy;
	struct dt_model *models;
	struct dt_optimizer *opts;
	struct dt_trainer trainer;
	int nreplicas;
	int shape_only;         /* dt_app_data for dt_app_input_shape: skips normalize: auto and the known-bad check */
	const struct dt_class_map *test_classes; /* evaluate: the checkpoint's classes and features for data.test; NULL: none */
	struct dt_ckpt *ckpt;   /* the checkpoint read (cmd/app_ckpt.c), or NULL */
	char ckpt_path[4096];   /* its path */
	const struct dt_opts *options; /* the command's (dt_app_config): a job's ranks must give the chief's */
};

/*
 * The checkpoint a command reads (cmd/app_ckpt.c). A model argument is a
 * checkpoint when it is a run directory (a directory with best.safetensors,
 * read, else latest.safetensors) or a file that starts as safetensors files do (an
 * 8-byte header length, then '{'); anything else is a model file (YAML).
 */
int dt_app_is_checkpoint(const char *arg);
/*
 * The config document of o->config before --set: the model file with its
 * data file included, or a checkpoint's stored config (loaded into a->ckpt
 * when o->checkpoint_first); then --data FILE as data.test. 0, or an exit
 * status after the error; *doc is the caller's either way (NULL when none).
 */
struct dt_doc;
int dt_app_config_doc(struct dt_app *a, const struct dt_opts *o, struct dt_doc **doc);
/* After the config is bound: a checkpoint's model name is its model file's base name. */
void dt_app_config_name(struct dt_app *a);
/*
 * Loads the checkpoint evaluate and predict read into a->ckpt: the model
 * argument when it was one, else --checkpoint FILE, else the run directory's
 * best.safetensors or latest.safetensors (dt_run_dir_checkpoint). 0 or
 * DT_EXIT_FAIL after the error.
 */
int dt_app_checkpoint(struct dt_app *a, const struct dt_opts *o);
/*
 * The classes fit stored in a->ckpt into map: the class_names metadata (for
 * training data with named classes), the strings owned by *names (free
 * each, then the array), or num_classes (numbered classes: map->names and
 * *names NULL). map->n 0 when it has neither. 0, or -1 when they are not a
 * list of names or a count.
 */
int dt_app_checkpoint_classes(const struct dt_app *a, struct dt_class_map *map, char ***names);
/*
 * The training data's feature column names fit stored in a->ckpt
 * (feature_names metadata, for a CSV with a header) into *names, *n of them
 * (free each, then the array): NULL and 0 when it has none (older
 * checkpoints: columns by position). 0, or -1 when they are not a list of
 * names.
 */
int dt_app_checkpoint_features(const struct dt_app *a, char ***names, int *n);
/* The input shape a->ckpt's model was trained on (fit's input_shape metadata) into *s: 1, or 0 when it has none. */
int dt_app_checkpoint_input_shape(const struct dt_app *a, struct dt_shape *s);
/*
 * a->ckpt's weights into m (one replica), the moving average when the
 * checkpoint holds one (use_ema), said in a note ending with `doing`.
 * 1 when it was the average, 0 the weights, -1 after an error.
 */
int dt_app_checkpoint_weights(struct dt_app *a, struct dt_model *m, const char *doing);

/* Each returns 0 or an exit status (1 or 2) after printing the error. */
/*
 * Loads the config and checks every section before any data is read: the
 * layers (when model.input_shape is given), the data sources' arguments and
 * `distribute:`. run: this subcommand runs the strategy (fit, evaluate,
 * time), so the job's own rules apply too (processes under mpirun).
 */
int dt_app_config(struct dt_app *a, const struct dt_opts *o, int run);
/*
 * Opens the training data (with validation and a test_split part) and, when
 * need_test, the test set; validation and test data number their classes as
 * the training data does (or as a->test_classes says, without training data).
 */
int dt_app_data(struct dt_app *a, int need_train, int need_test);
/*
 * The preprocessing of inputs that fit trained with, for evaluate and
 * predict: data.rescale, and the normalization saved by fit (the
 * checkpoint's "preprocessing" metadata `json`, or NULL when it has none)
 * instead of recomputing it; without metadata the values data.normalize
 * gives (data.normalize: auto then is an error). One value is spread over
 * every channel of `sample`. `what` names the checkpoint in errors. Fills pp
 * (release with dt_preprocess_release). 0, or -1 with an error.
 */
int dt_app_preprocess(struct dt_app *a, const char *json, const char *what, const struct dt_shape *sample,
		      struct dt_preprocess *pp);
/*
 * The metrics m of a pass over the test set that the run reports (loss,
 * accuracy when asked for, mae and rmse when reported): as members of the
 * JSON object o, or as the rest of a line in Keras' alphabetical order,
 * " - accuracy: 0.9012 - loss: 0.2876\n", on f.
 */
struct cJSON;
void dt_app_metrics_json(const struct dt_app *a, const struct dt_metrics *m, struct cJSON *o);
void dt_app_metrics_line(const struct dt_app *a, const struct dt_metrics *m, FILE *f);
/* The per-sample input shape: model.input_shape, else the training data's (opened for it). */
int dt_app_input_shape(struct dt_app *a, struct dt_shape *in);
/* The model of the config, its layers built on that input shape (no weights allocated): 0 or the exit status. */
int dt_app_model(struct dt_app *a, struct dt_model *m);
/* Builds the strategy, one model and optimizer per replica, the objective and trainer. */
int dt_app_build(struct dt_app *a);
/*
 * Before anything is allocated: refuses a model (m, one replica of it) whose
 * buffers for batches of `batch`, with `state` floats per trainable parameter
 * (optimizer slots, accumulation), times the replicas that share a device of
 * devs[0..n), exceed fit.max_memory or else that device's memory. 0, or
 * DT_EXIT_USAGE after the error at the layer that holds the most.
 */
int dt_app_check_memory(const struct dt_app *a, const struct dt_model *m, const struct dt_device *devs, int n,
			int batch, int state);
/*
 * compile.precision for the strategy's devices (after dt_strategy_create,
 * before any plan is made): tf32 needs every replica on a GPU, bf16 a GPU or
 * a CPU with bfloat16 instructions (dt_ops_set_cpu_precision). 0, or
 * an exit status after printing the error at the key.
 */
int dt_app_precision(struct dt_app *a);
void dt_app_release(struct dt_app *a);
/* --resume: refuses a checkpoint written for another model (cmd/resume.c). 0 or -1. */
struct dt_ckpt;
int dt_resume_check(const struct dt_ckpt *f, const struct dt_app *a);
/* A config value as text for a message: a string as it is, "(not set)" for NULL, else JSON. Caller frees. */
struct cJSON;
char *dt_json_text(const struct cJSON *j);
/* The exit status for the last error: 2 if it points into a config file, else 1. */
int dt_exit_status(void);

#endif
