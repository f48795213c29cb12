/*
 * The config: YAML read by libyaml into a tree of nodes that keep their file,
 * line and column, then bound into typed structs (struct dt_config) with
 * validation. Every error names a position: "model.yaml:12:7: error: ...".
 *
 * Ownership: the whole tree belongs to its struct dt_doc; nodes and strings
 * live until dt_doc_free(). Layers and data sources receive nodes of the tree
 * and read their own arguments with the dt_cfg_* getters below.
 *
 * Getters share one contract: the key is looked up in a mapping node; when the
 * key is absent the default is stored and 0 is returned; when present and valid
 * the value is stored and 1 is returned; otherwise an error naming the value's
 * position is printed and -1 returned. dt_cfg_check_keys() rejects keys not
 * in an allowed list with a did-you-mean.
 */
#ifndef DT_CONFIG_H
#define DT_CONFIG_H

#include <stdint.h>

#include "core/error.h"
#include "core/tensor.h"

enum dt_node_kind { DT_NODE_SCALAR, DT_NODE_MAP, DT_NODE_SEQ };

struct dt_node {
	enum dt_node_kind kind;
	const char *file; /* path as given by the user, or "--set" */
	int line, col;    /* 1-based */
	char *value;      /* scalar text (NULL for map and seq) */
	int quoted;       /* scalar was quoted in the source: never a number/bool/null */
	int n;            /* number of items (map pairs or sequence entries) */
	char **keys;      /* map: keys[i] names items[i] */
	struct dt_node **key_nodes; /* map: key positions, for "unknown key" errors */
	struct dt_node **items;
	const char *dir;  /* directory of the file the node came from ("." for --set), for relative paths */
};

struct dt_doc;

/* Parses a YAML file. NULL on error (printed: file:line:col for syntax errors). */
struct dt_doc *dt_doc_load(const char *path);
/* Parses YAML text; `name` is used as the file name in positions. */
struct dt_doc *dt_doc_parse(const char *name, const char *text, const char *dir);
void dt_doc_free(struct dt_doc *d);
/*
 * Parses JSON text in dt_node_to_json's form (core/config/run_config.h: every
 * scalar a string), as a checkpoint stores its config: each scalar and each
 * key then reads as the plain YAML scalar it was ("32" a number, "" null;
 * class_weight's key "0" the class 0).
 */
struct dt_doc *dt_doc_parse_json(const char *name, const char *text, const char *dir);
struct dt_node *dt_doc_root(struct dt_doc *d);

/*
 * Applies "a.b.2.c=value": value is parsed as YAML (so "256", "[1, 2]" and
 * "{units: 3}" all work) and replaces or adds the key in the tree. Sequence
 * items are addressed by 0-based index. Errors are reported as "--set:1:COL".
 */
int dt_doc_set(struct dt_doc *d, const char *assignment);
/*
 * dt_doc_set for a value the user gave through an option other than --set
 * (evaluate's --data): its nodes are placed at origin, a string that outlives
 * d, without a line, so that an error in the value reads "origin: error: ...".
 */
int dt_doc_set_from(struct dt_doc *d, const char *origin, const char *assignment);

/*
 * Replaces the scalar node at `key` of `map` by the mapping read from the file
 * it names (relative to the node's dir); used for "data: fashion_data.yaml".
 * The included document stays owned by d. Returns 1 if included, 0 if the
 * key is absent or already a mapping, -1 on error.
 */
int dt_doc_include(struct dt_doc *d, struct dt_node *map, const char *key);

/*
 * Turns the plain scalar n, a name ("adam"), into the mapping {adam: {}} in
 * place, both at n's position: the same meaning for the readers of names
 * with arguments (optimizer, loss, layers, callbacks). Other nodes stay.
 */
void dt_node_name_to_map(struct dt_doc *d, struct dt_node *n);

/* Prints "<file>:<line>:<col>: error: <msg>" and returns -1. */
int dt_node_error(const struct dt_node *n, const char *fmt, ...) DT_PRINTF(2, 3);
/* Prints "<file>:<line>:<col>: warning: <msg>": accepted, but almost surely not what was meant. */
void dt_node_warn(const struct dt_node *n, const char *fmt, ...) DT_PRINTF(2, 3);
/* Formats "file:line:col" into buf. */
const char *dt_node_where(const struct dt_node *n, char *buf, int size);

/* The item at key in a mapping, or NULL when absent or null (~, null, nothing), or when map is NULL or not a mapping. */
struct dt_node *dt_node_get(const struct dt_node *map, const char *key);
/* Error unless n is of this kind ("expected a mapping for 'data', got a sequence"). 0 or -1. */
int dt_node_expect(const struct dt_node *n, enum dt_node_kind kind, const char *what);

/* Rejects keys of map not in allowed (NULL-terminated): "unknown key 'untis' in 'dense'; did you mean 'units'?" 0 or -1. */
int dt_cfg_check_keys(const struct dt_node *map, const char *what, const char *const *allowed);
/*
 * A mapping of the config and the keys it allows (the NULL-terminated list
 * its reader gives dt_cfg_check_keys), by its path: "" for the top level,
 * "data.split". Tables of them end with { NULL, NULL }; `dtrain complete`
 * walks them.
 */
struct dt_cfg_section {
	const char *path;
	const char *const *keys;
};
/* Error at map unless key is present with a non-null value: "missing required key 'units' in 'dense'". 0 or -1. */
int dt_cfg_require(const struct dt_node *map, const char *key, const char *what);

/*
 * Ranges are closed: [min, max]. INT64_MIN / INT64_MAX, -INFINITY / INFINITY
 * leave a side unbounded. Integers also accept whole float forms ("1e6", "2.0").
 * An explicit null value (~, null, or nothing) counts as absent.
 */
int dt_cfg_int(const struct dt_node *map, const char *key, int64_t def, int64_t min, int64_t max, int64_t *out);
/* Accepts decimal, exponent and "a/b" forms ("1/255"); never nan or inf. */
int dt_cfg_float(const struct dt_node *map, const char *key, double def, double min, double max, double *out);
/* Bounds excluded by dt_cfg_float_range() and dt_node_float_range(). */
enum { DT_OPEN_MIN = 1, DT_OPEN_MAX = 2 };
/* dt_cfg_float with open bounds: (map, "rate", 0, 0, 1, DT_OPEN_MAX, &r) takes [0, 1). */
int dt_cfg_float_range(const struct dt_node *map, const char *key, double def, double min, double max,
		       int open, double *out);
int dt_cfg_bool(const struct dt_node *map, const char *key, int def, int *out);
/* *out points into the tree (or is def). */
int dt_cfg_string(const struct dt_node *map, const char *key, const char *def, const char **out);
/* A path: relative ones are resolved against the directory of the file that holds them. Caller frees *out (NULL when absent). */
int dt_cfg_path(const struct dt_node *map, const char *key, char **out);
/* One of names (NULL-terminated), exact case; *out is its index: "unknown loss 'mse2' (expected one of: mse, mae); did you mean 'mse'?" */
int dt_cfg_enum(const struct dt_node *map, const char *key, const char *const *names, int def, int *out);
/* A sequence of 1..DT_MAX_DIMS positive ints, e.g. input_shape: [28, 28, 1]. *out is left alone when absent. */
int dt_cfg_shape(const struct dt_node *map, const char *key, struct dt_shape *out);

/* Parse a scalar node itself (for sequence items): same rules as the getters, but 0 or -1, messages say "value". */
int dt_node_int(const struct dt_node *n, int64_t min, int64_t max, int64_t *out);
int dt_node_float(const struct dt_node *n, double min, double max, double *out);
/* dt_node_float for the value of `key` read from its node (not its map): messages name the key. */
int dt_node_float_key(const struct dt_node *n, const char *key, double min, double max, double *out);
int dt_node_float_range(const struct dt_node *n, double min, double max, int open, double *out);

/* The index of s among names (NULL-terminated, exact case), or -1. */
int dt_name_index(const char *const *names, const char *s);

/*
 * The closest of names to s by edit distance (a swap of neighbours counts as
 * one edit, case is ignored), or NULL if none is close: a name is close when
 * the distance is at most max(1, len/3) and less than len, len being the
 * name's length. Ties go to the first name.
 */
const char *dt_did_you_mean(const char *s, const char *const *names);
/*
 * The same for a name of dtrain's own vocabulary (a layer, loss, optimizer,
 * schedule, metric, callback or key): also tries s as Keras or PyTorch spell
 * it ("keras.layers.Dense", "nn.Linear", "Adam()", "lr"). Not for the
 * user's data names (columns, class folders), which it would misread.
 */
const char *dt_did_you_mean_config(const char *s, const char *const *names);
/*
 * A Python call such as "Adam(learning_rate=1e-3)" written as dtrain's
 * mapping of name: "{adam: {learning_rate: 1e-3}}" in buf; name itself when
 * s has no keyword arguments (or they do not fit in size bytes).
 */
const char *dt_python_call(const char *s, const char *name, char *buf, size_t size);

/*
 * The recorder behind `dtrain config` (core/config/resolved.h prints what it
 * noted). While on, each getter notes, for a key absent from its mapping (or
 * null), the default it stored when that is a value the key takes (not a
 * sentinel), and dt_cfg_path the absolute path it resolved. A note is
 * {mapping, key, value text, replace}: replace 1 for a resolved path, which
 * stands in for the value written; the first note of a key stands.
 */
struct dt_cfg_note {
	const struct dt_node *map;
	const char *key;
	char *value;
	int replace;
};
/* Starts (on: forgetting earlier notes) or stops noting. */
void dt_cfg_record(int on);
void dt_cfg_record_release(void);
/* The notes so far; their count. */
int dt_cfg_notes(const struct dt_cfg_note **notes);
/* Notes a value by hand (a default a reader computes, such as model.name), while recording. */
void dt_cfg_note(const struct dt_node *map, const char *key, const char *value, int replace);
/* Notes v as the default of an absent key, in the form the float getters note (the reader computed it). */
void dt_cfg_note_float(const struct dt_node *map, const char *key, double v);
/* 1 unless a dt_cfg_check_keys of map (while recording) did not allow key: a noted default it may print. */
int dt_cfg_note_allowed(const struct dt_node *map, const char *key);
/* The key of map has no default: its getter's default is a sentinel ("not given"), not to be printed. */
void dt_cfg_no_default(const struct dt_node *map, const char *key);

/* "file:line:col" of the latest error printed by this module ("dtrain" when it had none); for tests. */
const char *dt_cfg_last_where(void);

#endif
