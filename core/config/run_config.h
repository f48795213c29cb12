/*
 * The run config: a model file (plus --set overrides) bound into typed,
 * validated settings. Sections: model, compile, data, fit, checkpoint,
 * distribute; `data:` may name a separate YAML file. Layer arguments, data
 * sources and distribution details stay as nodes: the layer, source and
 * strategy that use them read and validate them with their own positions.
 * Every key, its type and default is documented in man/dtrain.yaml.5.
 */
#ifndef DT_RUN_CONFIG_H
#define DT_RUN_CONFIG_H

#include "core/config/config.h"
#include "core/fit/fit_callbacks.h"
#include "core/checkpoint/model_checkpoint.h"
#include "core/ops.h"
#include "core/model/metric.h"
#include "core/model/optimizer.h"
#include "core/pipeline/pipeline.h"

/* The most epochs fit.epochs (and a resumed checkpoint's position) may give. */
#define DT_MAX_EPOCHS 1000000

struct dt_run_config {
	struct dt_doc *doc;
	const char *path;

	/* model */
	const char *name;            /* default: the file's base name */
	char file_name[256];         /* that base name, without its extension */
	struct dt_shape input_shape; /* ndim 0: taken from the training data */
	const struct dt_node *input_shape_node; /* its position, or NULL */
	const struct dt_node *layers;

	/* compile */
	enum dt_loss loss;
	struct dt_loss_args loss_args; /* compile.loss's arguments (Keras' defaults when none) */
	int from_logits;
	int accuracy;                /* metrics: [accuracy] */
	int errors;                  /* metrics: [mae] or [rmse] (Keras' long names too): report both */
	const struct dt_node *errors_node; /* that metric's position, or NULL */
	struct dt_metric_set metrics; /* precision, recall, f1_score, auc (core/model/metric.h); laid out by dt_app_build */
	struct dt_optimizer_config optimizer;
	const struct dt_node *loss_node; /* position for loss/label errors */
	int precision;               /* enum dt_precision (core/cuda.h): fp32, tf32, bf16 */
	const struct dt_node *precision_node; /* its position, or NULL */

	/* data */
	const struct dt_node *train, *validation, *test; /* source mappings or NULL */
	int batch_size;
	double validation_split;
	const struct dt_node *data_node; /* the data mapping, for positions */
	double rescale;
	int shuffle;
	int one_hot;
	struct dt_pipeline_config pipeline; /* prefetch, cache, on_error, normalize, augment */

	/* fit */
	int epochs;
	uint64_t seed;
	int64_t steps_per_epoch;     /* 0: the whole training set */
	int threads;                 /* 0: all cores */
	int plot;                    /* fit.plot: rewrite RUN_DIR/curves.png at each epoch's end */
	int accumulate_steps;        /* 1: an update per batch */
	int64_t max_memory;          /* bytes the model may take on a device; 0: the device's memory */
	const struct dt_node *max_memory_node; /* fit.max_memory or NULL */
	const struct dt_node *class_weight; /* the mapping or NULL; checked against the model by dt_class_weight_read */
	const struct dt_node *callbacks;    /* the list or NULL */
	struct dt_callbacks_config callback_cfg; /* what fit.callbacks asks for */

	/* checkpoint */
	const char *checkpoint_dir;  /* default runs/<name> */
	int checkpoint_enabled;
	int64_t checkpoint_every;    /* 0: at the end of each epoch; N: also every N training steps */
	int checkpoint_keep;         /* 0: keep every file; K: the newest K */
	const char *checkpoint_filename; /* template (core/ckpt_template.h), without .safetensors */
	const char *checkpoint_monitor;  /* save_best.monitor; NULL: val_loss, else loss */
	int checkpoint_mode;         /* save_best.mode: +1 max, -1 min (auto resolved) */
	const struct dt_node *checkpoint_monitor_node; /* its position, or NULL */
	int nmodel_checkpoints;      /* model_checkpoint items of fit.callbacks */
	struct dt_model_checkpoint_cfg model_checkpoints[DT_MAX_MODEL_CHECKPOINTS];

	/* distribute */
	const struct dt_node *distribute; /* the mapping, for the strategies; may be NULL */
	const char *strategy;        /* "auto" by default */
};

/*
 * The mappings this file's readers check, with their keys: the top level,
 * model, compile, data (with split, normalize, augment), fit, checkpoint
 * (with save_best). distribute, the data sources, optimizers, losses and
 * layers check their own. Ends with { NULL, NULL }.
 */
extern const struct dt_cfg_section dt_run_config_sections[];

/* Loads path, applies --set assignments, validates. 0, or -1 after printing the error. */
int dt_run_config_load(struct dt_run_config *c, const char *path, char *const *sets, int nsets);
/*
 * dt_run_config_load for a document already read (a checkpoint's config:
 * dt_doc_parse_json); c owns doc from here on, on failure too. path names it.
 */
int dt_run_config_bind(struct dt_run_config *c, struct dt_doc *doc, const char *path, char *const *sets, int nsets);
void dt_run_config_release(struct dt_run_config *c);

/* The tree under n as JSON text (scalars as strings), for checkpoint metadata. Caller frees. */
char *dt_node_to_json(const struct dt_node *n);

#endif
