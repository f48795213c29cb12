#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <yaml.h>

#include "core/config/config.h"

/* Deeper nesting is refused rather than risking the stack. */
#define MAX_DEPTH 256

/* ---- memory: everything a doc allocates is a chunk freed by dt_doc_free() ---- */

struct chunk {
	struct chunk *next;
	max_align_t data[];
};

struct dt_doc {
	struct dt_node *root;
	struct chunk *chunks;
};

static void *doc_alloc(struct dt_doc *d, size_t n)
{
	struct chunk *c = dt_calloc(1, sizeof(*c) + n);
	c->next = d->chunks;
	d->chunks = c;
	return c->data;
}

static char *doc_strndup(struct dt_doc *d, const char *s, size_t n)
{
	char *p = doc_alloc(d, n + 1);
	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

static struct dt_node *node_new(struct dt_doc *d, enum dt_node_kind kind, const char *file, const char *dir,
				int line, int col)
{
	struct dt_node *n = doc_alloc(d, sizeof(*n));
	n->kind = kind;
	n->file = file;
	n->dir = dir;
	n->line = line;
	n->col = col;
	return n;
}

/* Copies an array of n pointers into a new one of room for cap. */
static void *grow(struct dt_doc *d, void *old, int n, int cap)
{
	void **p = doc_alloc(d, (size_t)cap * sizeof(void *));
	if (n)
		memcpy(p, old, (size_t)n * sizeof(void *));
	return p;
}

/*
 * Appends to a map (key given) or a sequence (key NULL). Room is not stored:
 * the arrays hold 4 items, then double whenever n reaches a power of two.
 */
static void node_append(struct dt_doc *d, struct dt_node *parent, struct dt_node *key, struct dt_node *item)
{
	int n = parent->n;
	if (n == 0 || (n >= 4 && (n & (n - 1)) == 0)) {
		int cap = n ? 2 * n : 4;
		parent->items = grow(d, parent->items, n, cap);
		if (key) {
			parent->keys = grow(d, parent->keys, n, cap);
			parent->key_nodes = grow(d, parent->key_nodes, n, cap);
		}
	}
	parent->items[n] = item;
	if (key) {
		parent->keys[n] = key->value;
		parent->key_nodes[n] = key;
	}
	parent->n = n + 1;
}

/* ---- errors ---- */

static char last_where[512] = "dtrain";

const char *dt_cfg_last_where(void) { return last_where; }

static int error_atv(const char *file, int line, int col, const char *fmt, va_list ap)
{
	if (line > 0)
		snprintf(last_where, sizeof(last_where), "%s:%d:%d", file, line, col);
	else
		snprintf(last_where, sizeof(last_where), "%s", file);
	return dt_error_atv(last_where, fmt, ap);
}

static int DT_PRINTF(4, 5) error_at(const char *file, int line, int col, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	error_atv(file, line, col, fmt, ap);
	va_end(ap);
	return -1;
}

const char *dt_node_where(const struct dt_node *n, char *buf, int size)
{
	if (n && n->line > 0)
		snprintf(buf, size, "%s:%d:%d", n->file, n->line, n->col);
	else if (n)
		snprintf(buf, size, "%s", n->file);
	else
		snprintf(buf, size, "dtrain");
	return buf;
}

int dt_node_error(const struct dt_node *n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (n)
		error_atv(n->file, n->line, n->col, fmt, ap);
	else
		error_atv("dtrain", 0, 0, fmt, ap);
	va_end(ap);
	return -1;
}

void dt_node_warn(const struct dt_node *n, const char *fmt, ...)
{
	char where[512];
	va_list ap;
	va_start(ap, fmt);
	dt_warn_atv(dt_node_where(n, where, sizeof(where)), fmt, ap);
	va_end(ap);
}

static const char *kind_name(enum dt_node_kind kind)
{
	switch (kind) {
	case DT_NODE_SCALAR: return "scalar";
	case DT_NODE_MAP: return "mapping";
	case DT_NODE_SEQ: return "sequence";
	}
	return "?";
}

/* A plain ~, null or empty scalar: YAML's null, which the getters treat as absent. */
static int is_null(const struct dt_node *n)
{
	if (n->kind != DT_NODE_SCALAR || n->quoted)
		return 0;
	return !strcmp(n->value, "") || !strcmp(n->value, "~") || !strcmp(n->value, "null") ||
	       !strcmp(n->value, "Null") || !strcmp(n->value, "NULL");
}

/* A plain scalar "(3, 3)" of at most 80 characters: Python's tuple, which YAML reads as a string. */
static int is_tuple(const struct dt_node *n)
{
	size_t len = n->kind == DT_NODE_SCALAR && !n->quoted ? strlen(n->value) : 0;
	return len >= 2 && len <= 80 && n->value[0] == '(' && n->value[len - 1] == ')';
}

/* What a node is, for "got ..." in messages: 'abc', the quoted string "5", a mapping. */
static const char *describe(const struct dt_node *n, char *buf, size_t size)
{
	const char *dots = "";
	int len;
	if (n->kind != DT_NODE_SCALAR)
		return n->kind == DT_NODE_MAP ? "a mapping" : "a sequence";
	if (is_null(n))
		return "nothing";
	len = (int)strlen(n->value);
	if (len > 80) {
		len = 80;
		dots = "...";
	}
	if (n->quoted)
		snprintf(buf, size, "the quoted string \"%.*s%s\"", len, n->value, dots);
	else if (is_tuple(n))
		snprintf(buf, size, "'%s' (a Python tuple; YAML writes a list: [%.*s])", n->value, len - 2, n->value + 1);
	else
		snprintf(buf, size, "'%.*s%s'", len, n->value, dots);
	return buf;
}

/* ---- parsing: libyaml events to nodes ---- */

struct parser {
	struct dt_doc *d;
	yaml_parser_t yp;
	const char *file, *dir;
	const char *text;
	size_t len;
	int col_offset; /* added to the columns of line 1 (values of --set) */
	yaml_mark_t end; /* see find_end() */
};

/*
 * libyaml puts the end of a text that lacks a final newline on a line of its
 * own; parse_text() records where that text really ends, and such marks are
 * moved back there.
 */
static void find_end(struct parser *p)
{
	p->end.line = SIZE_MAX;
	if (p->len == 0 || p->text[p->len - 1] == '\n')
		return;
	p->end.line = 0;
	for (size_t i = 0; i < p->len; i++) {
		if (p->text[i] == '\n')
			p->end.line++, p->end.column = 0;
		else if (((unsigned char)p->text[i] & 0xc0) != 0x80)
			p->end.column++;
	}
}

static yaml_mark_t clamp_mark(const struct parser *p, const yaml_mark_t *m)
{
	return m->line > p->end.line ? p->end : *m;
}

static int mark_line(const struct parser *p, const yaml_mark_t *m)
{
	yaml_mark_t c = clamp_mark(p, m);
	return c.line < INT_MAX ? (int)c.line + 1 : INT_MAX;
}

static int mark_col(const struct parser *p, const yaml_mark_t *m)
{
	yaml_mark_t c = clamp_mark(p, m);
	int col = c.column < INT_MAX / 2 ? (int)c.column + 1 : INT_MAX / 2;
	return c.line == 0 ? col + p->col_offset : col;
}

/* The character at a 0-based line and column (columns count characters, as libyaml's do). */
static const char *text_at(const struct parser *p, size_t line, size_t col)
{
	const char *s = p->text, *end = p->text + p->len;
	for (; line > 0 && s < end; s++)
		if (*s == '\n')
			line--;
	for (; col > 0 && s < end && *s != '\n'; col--)
		do
			s++;
		while (s < end && ((unsigned char)*s & 0xc0) == 0x80);
	return s < end ? s : NULL;
}

/* The spaces that indent a 0-based line; -1 for a line of spaces or a comment, or past the end. */
static int line_indent(const struct parser *p, size_t line)
{
	const char *s = text_at(p, line, 0), *end = p->text + p->len;
	int n = 0;
	if (!s)
		return -1;
	for (; s < end && *s == ' '; s++)
		n++;
	return s < end && *s != '\n' && *s != '\r' && *s != '#' ? n : -1;
}

/*
 * The ':' that YAML refused at a 0-based line and column: a second one on the
 * line ("name: a: b") wants quotes; the line's first, a line that YAML read
 * as the rest of the plain value above it ("loss: mse" over "   optimizer: adam").
 */
static const char *mapping_value_hint(const struct parser *p, size_t line, size_t col, char *buf, size_t size)
{
	const char *s = text_at(p, line, 0), *colon = text_at(p, line, col), *end = p->text + p->len;
	size_t above = line;
	for (; s && s < colon; s++)
		if (*s == ':' && (s + 1 == end || s[1] == ' ' || s[1] == '\n' || s[1] == '\r'))
			return "; a value that holds ': ' needs quotes";
	while (above > 0 && line_indent(p, above - 1) < 0)
		above--;
	if (above == 0)
		return "";
	snprintf(buf, size, "; this line is indented deeper than line %zu, so it continues that line's value: "
		 "indent it as deep as the keys it goes with", above);
	return buf;
}

static int syntax_error(struct parser *p)
{
	yaml_parser_t *y = &p->yp;
	const char *problem = y->problem ? y->problem : "cannot parse";
	const char *at, *hint = "";
	char buf[160];
	char context[160] = "";

	if (y->error == YAML_MEMORY_ERROR)
		DT_BUG("out of memory in libyaml");
	if (y->error == YAML_READER_ERROR) {
		/* Reader errors carry a byte offset, not a mark. */
		int line = 1, col = 1;
		for (size_t i = 0; i < y->problem_offset && i < p->len; i++, col++)
			if (p->text[i] == '\n')
				line++, col = 0;
		if (line == 1)
			col += p->col_offset;
		if (y->problem_value >= 0)
			return error_at(p->file, line, col, "%s (0x%02x)", problem, (unsigned)y->problem_value);
		return error_at(p->file, line, col, "%s", problem);
	}
	/* "did not find expected key while parsing a block mapping that started at line 3" */
	if (y->context && y->context_mark.line != y->problem_mark.line)
		snprintf(context, sizeof(context), " %s that started at line %d", y->context,
			 mark_line(p, &y->context_mark));
	else if (y->context)
		snprintf(context, sizeof(context), " %s", y->context);
	at = text_at(p, y->problem_mark.line, y->problem_mark.column);
	if (at && *at == '\t')
		hint = " (tabs cannot indent yaml; use spaces)";
	else if (!strcmp(problem, "did not find expected key") ||
		 !strcmp(problem, "did not find expected '-' indicator"))
		hint = "; is this line indented as deep as the keys or items it belongs with?";
	else if (!strcmp(problem, "mapping values are not allowed in this context"))
		hint = mapping_value_hint(p, y->problem_mark.line, y->problem_mark.column, buf, sizeof(buf));
	return error_at(p->file, mark_line(p, &y->problem_mark), mark_col(p, &y->problem_mark), "%s%s%s", problem,
			context, hint);
}

static int next_event(struct parser *p, yaml_event_t *ev)
{
	if (!yaml_parser_parse(&p->yp, ev))
		return syntax_error(p);
	return 0;
}

static struct dt_node *parse_node(struct parser *p, yaml_event_t *ev, int depth);

static struct dt_node *parse_scalar(struct parser *p, yaml_event_t *ev)
{
	size_t len = ev->data.scalar.length;
	const char *value = (const char *)ev->data.scalar.value;
	const char *tag = (const char *)ev->data.scalar.tag;
	struct dt_node *n = node_new(p->d, DT_NODE_SCALAR, p->file, p->dir, mark_line(p, &ev->start_mark),
				     mark_col(p, &ev->start_mark));

	if (memchr(value, '\0', len)) {
		dt_node_error(n, "a null character inside a value is not supported");
		return NULL;
	}
	n->value = doc_strndup(p->d, value, len);
	/* Quoted, block (| and >) and !!str scalars are strings, never numbers. */
	n->quoted = ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE || (tag && !strcmp(tag, YAML_STR_TAG));
	return n;
}

static struct dt_node *parse_seq(struct parser *p, struct dt_node *seq, int depth)
{
	for (;;) {
		yaml_event_t ev;
		struct dt_node *item;
		if (next_event(p, &ev))
			return NULL;
		if (ev.type == YAML_SEQUENCE_END_EVENT) {
			yaml_event_delete(&ev);
			return seq;
		}
		item = parse_node(p, &ev, depth + 1);
		if (!item)
			return NULL;
		node_append(p->d, seq, NULL, item);
	}
}

static struct dt_node *parse_map(struct parser *p, struct dt_node *map, int depth)
{
	for (;;) {
		yaml_event_t ev;
		struct dt_node *key, *value;
		if (next_event(p, &ev))
			return NULL;
		if (ev.type == YAML_MAPPING_END_EVENT) {
			yaml_event_delete(&ev);
			return map;
		}
		key = parse_node(p, &ev, depth + 1);
		if (!key)
			return NULL;
		if (key->kind != DT_NODE_SCALAR) {
			dt_node_error(key, "a key must be a scalar, got a %s", kind_name(key->kind));
			return NULL;
		}
		for (int i = 0; i < map->n; i++) {
			if (!strcmp(map->keys[i], key->value)) {
				dt_node_error(key, "duplicate key '%s' (first at line %d)", key->value,
					      map->key_nodes[i]->line);
				return NULL;
			}
		}
		if (next_event(p, &ev))
			return NULL;
		value = parse_node(p, &ev, depth + 1);
		if (!value)
			return NULL;
		node_append(p->d, map, key, value);
	}
}

/* Builds the node that starts with event ev (which it deletes), reading its children. */
static struct dt_node *parse_node(struct parser *p, yaml_event_t *ev, int depth)
{
	int line = mark_line(p, &ev->start_mark), col = mark_col(p, &ev->start_mark);
	enum yaml_event_type_e type = ev->type;
	struct dt_node *n = NULL;

	if (type == YAML_SCALAR_EVENT)
		n = parse_scalar(p, ev);
	else if (type == YAML_ALIAS_EVENT)
		error_at(p->file, line, col, "aliases are not supported ('*%s'); write the value out",
			 (const char *)ev->data.alias.anchor);
	else if (depth >= MAX_DEPTH)
		error_at(p->file, line, col, "nesting deeper than %d levels is not supported", MAX_DEPTH);
	else if (type == YAML_SEQUENCE_START_EVENT || type == YAML_MAPPING_START_EVENT)
		n = node_new(p->d, type == YAML_SEQUENCE_START_EVENT ? DT_NODE_SEQ : DT_NODE_MAP, p->file, p->dir,
			     line, col);
	else
		error_at(p->file, line, col, "unexpected yaml event %d", (int)type);
	yaml_event_delete(ev);

	if (n && n->kind == DT_NODE_SEQ)
		return parse_seq(p, n, depth);
	if (n && n->kind == DT_NODE_MAP)
		return parse_map(p, n, depth);
	return n;
}

/*
 * Parses one YAML document of text into nodes owned by d. *root is NULL when
 * the text holds no document (empty or only comments). Returns 0 or -1.
 */
static int parse_text(struct dt_doc *d, const char *file, const char *dir, const char *text, size_t len,
		      int col_offset, struct dt_node **root)
{
	struct parser p = { .d = d, .file = file, .dir = dir, .text = text, .len = len, .col_offset = col_offset };
	yaml_event_t ev;
	int rc = -1;

	*root = NULL;
	find_end(&p);
	if (!yaml_parser_initialize(&p.yp))
		DT_BUG("out of memory in libyaml");
	yaml_parser_set_input_string(&p.yp, (const unsigned char *)text, len);

	/* STREAM-START, then DOCUMENT-START node DOCUMENT-END, or STREAM-END at once. */
	if (next_event(&p, &ev))
		goto out;
	yaml_event_delete(&ev);
	if (next_event(&p, &ev))
		goto out;
	if (ev.type == YAML_STREAM_END_EVENT) {
		yaml_event_delete(&ev);
		rc = 0;
		goto out;
	}
	yaml_event_delete(&ev);
	if (next_event(&p, &ev))
		goto out;
	*root = parse_node(&p, &ev, 0);
	if (!*root)
		goto out;
	if (next_event(&p, &ev)) /* DOCUMENT-END */
		goto out;
	yaml_event_delete(&ev);
	if (next_event(&p, &ev))
		goto out;
	if (ev.type == YAML_DOCUMENT_START_EVENT) {
		error_at(file, mark_line(&p, &ev.start_mark), mark_col(&p, &ev.start_mark),
			 "a second document is not supported (only one '---' section per file)");
		yaml_event_delete(&ev);
		goto out;
	}
	yaml_event_delete(&ev);
	rc = 0;
out:
	yaml_parser_delete(&p.yp);
	if (rc)
		*root = NULL;
	return rc;
}

/* Parses a whole file or text: its root must be a mapping. NULL on error. */
static struct dt_node *parse_root(struct dt_doc *d, const char *file, const char *dir, const char *text, size_t len)
{
	struct dt_node *root;
	file = doc_strndup(d, file, strlen(file));
	dir = doc_strndup(d, dir ? dir : ".", strlen(dir ? dir : "."));
	if (parse_text(d, file, dir, text, len, 0, &root))
		return NULL;
	if (!root || is_null(root)) {
		error_at(file, 1, 1, "'%s' is empty (expected a mapping of keys)", file);
		return NULL;
	}
	if (root->kind != DT_NODE_MAP) {
		dt_node_error(root, "expected a mapping at the top level, got a %s", kind_name(root->kind));
		return NULL;
	}
	return root;
}

/*
 * The whole file in a malloc'd buffer; NULL with *why saying what went wrong
 * when it cannot be read. A device, socket or directory is refused: only a
 * regular file or a pipe ends (/dev/zero never does).
 */
static char *read_file(const char *path, size_t *len, const char **why)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t n = 0, cap = 0;
	struct stat st;
	int err;

	if (!f) {
		*why = strerror(errno);
		return NULL;
	}
	if (fstat(fileno(f), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode)) {
		*why = S_ISDIR(st.st_mode) ? "it is a directory" : "it is a device or socket, not a file";
		fclose(f);
		return NULL;
	}
	for (;;) {
		if (n == cap) {
			cap = cap ? 2 * cap : 4096;
			buf = dt_realloc(buf, cap);
		}
		size_t got = fread(buf + n, 1, cap - n, f);
		n += got;
		if (got == 0)
			break;
	}
	err = ferror(f) ? errno : 0;
	fclose(f);
	if (err) {
		free(buf);
		*why = strerror(err);
		return NULL;
	}
	*len = n;
	return buf;
}

/* The directory part of a path: "models" for "models/a.yaml", "." for "a.yaml". Caller frees. */
static char *dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	char *dir;
	if (!slash)
		return dt_strdup(".");
	if (slash == path)
		return dt_strdup("/");
	dir = dt_malloc((size_t)(slash - path) + 1);
	memcpy(dir, path, (size_t)(slash - path));
	dir[slash - path] = '\0';
	return dir;
}

/* dir/path, or path itself when it is absolute or dir is ".". Caller frees. */
static char *join_path(const char *dir, const char *path)
{
	size_t nd;
	char *s;
	if (path[0] == '/' || !dir || !strcmp(dir, "."))
		return dt_strdup(path);
	nd = strlen(dir);
	s = dt_malloc(nd + strlen(path) + 2);
	sprintf(s, "%s%s%s", dir, dir[nd - 1] == '/' ? "" : "/", path);
	return s;
}

struct dt_doc *dt_doc_parse(const char *name, const char *text, const char *dir)
{
	struct dt_doc *d = dt_calloc(1, sizeof(*d));
	d->root = parse_root(d, name, dir, text, strlen(text));
	if (!d->root) {
		dt_doc_free(d);
		return NULL;
	}
	return d;
}

void dt_node_name_to_map(struct dt_doc *d, struct dt_node *n)
{
	struct dt_node *key, *args;
	if (!n || n->kind != DT_NODE_SCALAR || n->quoted || is_null(n))
		return;
	key = node_new(d, DT_NODE_SCALAR, n->file, n->dir, n->line, n->col);
	args = node_new(d, DT_NODE_MAP, n->file, n->dir, n->line, n->col);
	key->value = n->value;
	n->kind = DT_NODE_MAP;
	n->n = 1;
	n->keys = doc_alloc(d, sizeof(char *));
	n->keys[0] = n->value;
	n->key_nodes = doc_alloc(d, sizeof(struct dt_node *));
	n->key_nodes[0] = key;
	n->items = doc_alloc(d, sizeof(struct dt_node *));
	n->items[0] = args;
	n->value = NULL;
}

/*
 * Every scalar under n reads as plain YAML would: dt_node_to_json stored them
 * all as strings. Keys too, since JSON quotes every key: class_weight's
 * {0: 3.0} comes back as {"0": "3.0"}, and its reader takes the key 0 for a
 * class number only when it is not a quoted string.
 */
static void unquote(struct dt_node *n)
{
	n->quoted = 0;
	for (int i = 0; n->kind == DT_NODE_MAP && i < n->n; i++)
		n->key_nodes[i]->quoted = 0;
	for (int i = 0; n->kind != DT_NODE_SCALAR && i < n->n; i++)
		unquote(n->items[i]);
}

struct dt_doc *dt_doc_parse_json(const char *name, const char *text, const char *dir)
{
	struct dt_doc *d = dt_doc_parse(name, text, dir);
	if (d)
		unquote(d->root);
	return d;
}

struct dt_doc *dt_doc_load(const char *path)
{
	struct dt_doc *d;
	size_t len;
	const char *why = NULL;
	char *text = read_file(path, &len, &why);
	char *dir;

	if (!text) {
		error_at("dtrain", 0, 0, "cannot open '%s': %s", path, why);
		return NULL;
	}
	dir = dir_of(path);
	d = dt_calloc(1, sizeof(*d));
	d->root = parse_root(d, path, dir, text, len);
	free(dir);
	free(text);
	if (!d->root) {
		dt_doc_free(d);
		return NULL;
	}
	return d;
}

void dt_doc_free(struct dt_doc *d)
{
	if (!d)
		return;
	while (d->chunks) {
		struct chunk *next = d->chunks->next;
		free(d->chunks);
		d->chunks = next;
	}
	free(d);
}

struct dt_node *dt_doc_root(struct dt_doc *d) { return d ? d->root : NULL; }

/* ---- --set a.b.0.c=value ---- */

static int set_error(int col, const char *fmt, ...) DT_PRINTF(2, 3);
static int set_error(int col, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	error_atv("--set", 1, col, fmt, ap);
	va_end(ap);
	return -1;
}

/* A sequence index: digits only, below n. Returns it, or -1. */
static int parse_index(const char *s, size_t len, int n)
{
	long v = 0;
	if (len == 0 || len > 9)
		return -1;
	for (size_t i = 0; i < len; i++) {
		if (!isdigit((unsigned char)s[i]))
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v < n ? (int)v : -1;
}

/* dt_doc_set, which also gives the node set in *set when set is not NULL. */
static int doc_set(struct dt_doc *d, const char *assignment, struct dt_node **set)
{
	const char *eq = strchr(assignment, '=');
	const char *seg = assignment;
	struct dt_node *value, *cur;
	int keylen;

	if (!d || !d->root)
		return dt_error("--set: no document to change");
	if (!eq)
		return set_error(1, "expected 'key=value', got '%s'", assignment);
	keylen = (int)(eq - assignment);
	if (keylen == 0)
		return set_error(1, "missing key before '=' in '%s'", assignment);
	/* The value first, so that a bad one leaves the tree as it was. */
	if (parse_text(d, "--set", ".", eq + 1, strlen(eq + 1), keylen + 1, &value))
		return -1;
	if (!value) {
		value = node_new(d, DT_NODE_SCALAR, "--set", ".", 1, keylen + 2);
		value->value = "";
	}

	/*
	 * Walk the key path. Missing keys are created as mappings; every error is
	 * raised on a node that existed before, so a failed --set changes nothing.
	 */
	cur = d->root;
	for (;;) {
		const char *end = memchr(seg, '.', (size_t)(eq - seg));
		int col = (int)(seg - assignment) + 1;
		int len, last, i;
		struct dt_node **slot = NULL;

		if (!end)
			end = eq;
		len = (int)(end - seg);
		last = end == eq;
		if (len == 0)
			return set_error(col, "empty name in key '%.*s'", keylen, assignment);

		if (cur->kind == DT_NODE_SCALAR) {
			return set_error(col, "cannot set '%.*s': '%.*s' is a scalar", keylen, assignment,
					 (int)(seg - assignment) - 1, assignment);
		} else if (cur->kind == DT_NODE_SEQ) {
			i = parse_index(seg, (size_t)len, cur->n);
			if (i < 0)
				return set_error(col, "'%.*s' is a sequence of %d items; expected an index from 0 to %d, got '%.*s'",
						 (int)(seg - assignment) - 1, assignment, cur->n, cur->n - 1, len, seg);
			slot = &cur->items[i];
		} else {
			for (i = 0; i < cur->n; i++)
				if ((int)strlen(cur->keys[i]) == len && !strncmp(cur->keys[i], seg, (size_t)len))
					break;
			if (i < cur->n) {
				slot = &cur->items[i];
			} else {
				struct dt_node *key = node_new(d, DT_NODE_SCALAR, "--set", ".", 1, col);
				key->value = doc_strndup(d, seg, (size_t)len);
				node_append(d, cur, key, last ? value : node_new(d, DT_NODE_MAP, "--set", ".", 1, col));
				slot = &cur->items[cur->n - 1];
			}
		}
		if (last) {
			*slot = value;
			if (set)
				*set = value;
			return 0;
		}
		if (is_null(*slot)) /* "layers:" with nothing yet */
			*slot = node_new(d, DT_NODE_MAP, "--set", ".", 1, col);
		cur = *slot;
		seg = end + 1;
	}
}

int dt_doc_set(struct dt_doc *d, const char *assignment) { return doc_set(d, assignment, NULL); }

/* Gives n and the nodes under it the place origin, without a line. */
static void node_place(struct dt_node *n, const char *origin)
{
	n->file = origin;
	n->line = 0;
	n->col = 0;
	for (int i = 0; i < n->n; i++) {
		if (n->key_nodes && n->key_nodes[i])
			node_place(n->key_nodes[i], origin);
		node_place(n->items[i], origin);
	}
}

int dt_doc_set_from(struct dt_doc *d, const char *origin, const char *assignment)
{
	struct dt_node *value;
	if (doc_set(d, assignment, &value) < 0)
		return -1;
	node_place(value, origin);
	return 0;
}

/* ---- include ---- */

static int map_find(const struct dt_node *map, const char *key)
{
	if (!map || map->kind != DT_NODE_MAP)
		return -1;
	for (int i = 0; i < map->n; i++)
		if (!strcmp(map->keys[i], key))
			return i;
	return -1;
}

int dt_doc_include(struct dt_doc *d, struct dt_node *map, const char *key)
{
	int i = map_find(map, key);
	struct dt_node *n = i < 0 ? NULL : map->items[i], *root;
	const char *why = NULL;
	size_t len;
	char *path, *text, *dir;

	if (!n || n->kind == DT_NODE_MAP || is_null(n))
		return 0;
	if (n->kind != DT_NODE_SCALAR)
		return dt_node_error(n, "expected a file name or a mapping for '%s', got a sequence", key);
	path = join_path(n->dir, n->value);
	text = read_file(path, &len, &why);
	if (!text) {
		dt_node_error(n, "cannot open '%s': %s", path, why);
		free(path);
		return -1;
	}
	dir = dir_of(path);
	root = parse_root(d, path, dir, text, len);
	free(dir);
	free(text);
	free(path);
	if (!root)
		return -1;
	map->items[i] = root;
	return 1;
}

/* ---- lookups ---- */

struct dt_node *dt_node_get(const struct dt_node *map, const char *key)
{
	int i = map_find(map, key);
	return i < 0 || is_null(map->items[i]) ? NULL : map->items[i];
}

int dt_node_expect(const struct dt_node *n, enum dt_node_kind kind, const char *what)
{
	static const char *const article[] = { "a scalar", "a mapping", "a sequence" };
	char buf[256];
	if (!n)
		return dt_node_error(NULL, "missing '%s'", what);
	if (n->kind == kind)
		return 0;
	if (n->kind == DT_NODE_SCALAR && kind == DT_NODE_SEQ && !is_null(n) && !is_tuple(n))
		return dt_node_error(n, "expected %s for '%s', got %s; a list of one is [%.80s]", article[kind], what,
				     describe(n, buf, sizeof(buf)), n->value);
	if (n->kind == DT_NODE_SCALAR)
		return dt_node_error(n, "expected %s for '%s', got %s", article[kind], what, describe(n, buf, sizeof(buf)));
	return dt_node_error(n, "expected %s for '%s', got %s", article[kind], what, article[n->kind]);
}

/* "a, b, c": the names of a NULL-terminated list. Caller frees. */
static char *join_names(const char *const *names)
{
	size_t len = 1;
	char *s;
	for (int i = 0; names[i]; i++)
		len += strlen(names[i]) + 2;
	s = dt_malloc(len);
	s[0] = '\0';
	for (int i = 0; names[i]; i++) {
		if (i)
			strcat(s, ", ");
		strcat(s, names[i]);
	}
	return s;
}

static void note_allowed(const struct dt_node *map, const char *const *allowed);

int dt_name_index(const char *const *names, const char *s)
{
	for (int i = 0; names[i]; i++)
		if (!strcmp(names[i], s))
			return i;
	return -1;
}

/*
 * {kernel_size: (3, 3)}: YAML splits Python's tuple at its commas into the
 * value "(3" and the keys "3)". For the unknown key i, the index of the key
 * whose value opens such a tuple (every key from it to one ending in ')'
 * without a value), with the tuple written out in tuple; else -1.
 */
static int split_tuple(const struct dt_node *map, int i, char *tuple, size_t size)
{
	const struct dt_node *open;
	int j = i - 1, end = i;
	size_t len;
	while (j >= 0 && is_null(map->items[j]))
		j--;
	if (j < 0)
		return -1;
	open = map->items[j];
	len = open->kind == DT_NODE_SCALAR && !open->quoted ? strlen(open->value) : 0;
	if (!len || open->value[0] != '(' || open->value[len - 1] == ')')
		return -1;
	while (end < map->n && is_null(map->items[end]) && !strchr(map->keys[end], ')'))
		end++;
	if (end == map->n || !is_null(map->items[end]))
		return -1;
	snprintf(tuple, size, "%s", open->value);
	for (int k = j + 1; k <= end; k++)
		snprintf(tuple + strlen(tuple), size - strlen(tuple), ", %s", map->keys[k]);
	return j;
}

int dt_cfg_check_keys(const struct dt_node *map, const char *what, const char *const *allowed)
{
	if (!map)
		return 0;
	if (dt_node_expect(map, DT_NODE_MAP, what))
		return -1;
	note_allowed(map, allowed);
	for (int i = 0; i < map->n; i++) {
		const char *key = map->keys[i], *guess;
		char *list;
		char tuple[256];
		int j;
		if (dt_name_index(allowed, key) >= 0)
			continue;
		j = split_tuple(map, i, tuple, sizeof(tuple));
		if (j >= 0 && strlen(tuple) > 2)
			return dt_node_error(map->items[j], "'%s' is a Python tuple, %s, which YAML does not have (inside "
					     "{...} its commas split it into keys); write a list: [%.*s]", map->keys[j],
					     tuple, (int)strlen(tuple) - 2, tuple + 1);
		guess = dt_did_you_mean_config(key, allowed);
		if (guess)
			return dt_node_error(map->key_nodes[i], "unknown key '%s' in '%s'; did you mean '%s'?", key, what,
					     guess);
		list = join_names(allowed);
		dt_node_error(map->key_nodes[i], "unknown key '%s' in '%s' (expected one of: %s)", key, what, list);
		free(list);
		return -1;
	}
	return 0;
}

int dt_cfg_require(const struct dt_node *map, const char *key, const char *what)
{
	int i = map_find(map, key);
	if (i < 0)
		return dt_node_error(map, "missing required key '%s' in '%s'", key, what);
	if (is_null(map->items[i]))
		return dt_node_error(map->key_nodes[i], "'%s' in '%s' needs a value", key, what);
	return 0;
}

/* ---- numbers ---- */

/* Strict decimal: [+-] digits [. digits] [e [+-] digits], also ".5" and "5.". 0 or -1. */
static int parse_decimal(const char *s, double *out)
{
	const char *p = s;
	int digits = 0;
	if (*p == '+' || *p == '-')
		p++;
	for (; isdigit((unsigned char)*p); p++)
		digits++;
	if (*p == '.')
		for (p++; isdigit((unsigned char)*p); p++)
			digits++;
	if (!digits)
		return -1;
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '+' || *p == '-')
			p++;
		if (!isdigit((unsigned char)*p))
			return -1;
		while (isdigit((unsigned char)*p))
			p++;
	}
	if (*p)
		return -1;
	*out = strtod(s, NULL);
	return 0;
}

enum { NUM_OK = 0, NUM_BAD = -1, NUM_OVERFLOW = -2, NUM_NOT_FINITE = -3, NUM_DIV_ZERO = -4 };

/*
 * A whole number: "-12", or a float form without a fraction ("1e6", "2.0").
 * One past 64 bits is NUM_OVERFLOW with *out INT64_MAX or INT64_MIN: the
 * side it passed.
 */
static int parse_int(const char *s, int64_t *out)
{
	const char *p = s;
	uint64_t v = 0;
	double x;
	int neg = 0, overflow = 0;

	if (*p == '+' || *p == '-')
		neg = *p++ == '-';
	if (isdigit((unsigned char)*p)) {
		for (; isdigit((unsigned char)*p); p++) {
			unsigned digit = (unsigned)(*p - '0');
			if (v > (UINT64_MAX - digit) / 10)
				overflow = 1;
			else
				v = v * 10 + digit;
		}
		if (*p == '\0') {
			if (overflow || v > (uint64_t)INT64_MAX + (uint64_t)neg) {
				*out = neg ? INT64_MIN : INT64_MAX;
				return NUM_OVERFLOW;
			}
			*out = neg ? (int64_t)(0 - v) : (int64_t)v;
			return NUM_OK;
		}
	}
	if (parse_decimal(s, &x) || x != floor(x))
		return NUM_BAD;
	if (x < -9223372036854775808.0 || x >= 9223372036854775808.0) {
		*out = x < 0 ? INT64_MIN : INT64_MAX;
		return NUM_OVERFLOW;
	}
	*out = (int64_t)x;
	return NUM_OK;
}

static int is_inf_or_nan(const char *s)
{
	static const char *const words[] = { "inf", ".inf", "infinity", "nan", ".nan" };
	if (*s == '+' || *s == '-')
		s++;
	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (!strcasecmp(s, words[i]))
			return 1;
	return 0;
}

/* Copies s[0..n) without surrounding spaces into buf (size > n). */
static void trim_copy(char *buf, const char *s, size_t n)
{
	while (n && isspace((unsigned char)*s))
		s++, n--;
	while (n && isspace((unsigned char)s[n - 1]))
		n--;
	memcpy(buf, s, n);
	buf[n] = '\0';
}

/* A finite float: decimal, exponent or "a/b". */
static int parse_float(const char *s, double *out)
{
	const char *slash = strchr(s, '/');
	double x, den;

	if (is_inf_or_nan(s))
		return NUM_NOT_FINITE;
	if (slash) {
		size_t len = strlen(s);
		char *num = dt_malloc(len + 1), *dnm = dt_malloc(len + 1);
		int bad;
		trim_copy(num, s, (size_t)(slash - s));
		trim_copy(dnm, slash + 1, strlen(slash + 1));
		bad = parse_decimal(num, &x) || parse_decimal(dnm, &den);
		free(num);
		free(dnm);
		if (bad)
			return NUM_BAD;
		if (den == 0)
			return NUM_DIV_ZERO;
		x /= den;
	} else if (parse_decimal(s, &x)) {
		return NUM_BAD;
	}
	if (!isfinite(x))
		return NUM_NOT_FINITE;
	*out = x;
	return NUM_OK;
}

/* The shortest text that reads back as v. */
static const char *format_double(double v, char *buf, size_t size)
{
	snprintf(buf, size, "%.15g", v);
	if (strtod(buf, NULL) != v)
		snprintf(buf, size, "%.17g", v);
	return buf;
}

/* "in [0, 1)", ">= 1" or "< 5" from bound texts (NULL: unbounded). */
static const char *format_range(const char *lo, const char *hi, int open, char *buf, size_t size)
{
	if (lo && hi)
		snprintf(buf, size, "in %c%s, %s%c", open & DT_OPEN_MIN ? '(' : '[', lo, hi,
			 open & DT_OPEN_MAX ? ')' : ']');
	else if (lo)
		snprintf(buf, size, "%s %s", open & DT_OPEN_MIN ? ">" : ">=", lo);
	else if (hi)
		snprintf(buf, size, "%s %s", open & DT_OPEN_MAX ? "<" : "<=", hi);
	else
		snprintf(buf, size, "a number");
	return buf;
}

/* "'units' must be" for getters, "value must be" for dt_node_* on sequence items. */
static const char *subject(const char *what, char *buf, size_t size)
{
	if (what)
		snprintf(buf, size, "'%.120s' must be", what);
	else
		snprintf(buf, size, "value must be");
	return buf;
}

static int node_int(const struct dt_node *n, const char *what, int64_t min, int64_t max, int64_t *out)
{
	char sub[160], got[256], lo[32], hi[32], range[96];
	int64_t v = 0;
	int rc = n->kind == DT_NODE_SCALAR && !n->quoted ? parse_int(n->value, &v) : NUM_BAD;

	subject(what, sub, sizeof(sub));
	if (rc == NUM_BAD)
		return dt_node_error(n, "%s an integer, got %s", sub, describe(n, got, sizeof(got)));
	if (v >= min && v <= max && rc == NUM_OK) {
		*out = v;
		return 0;
	}
	/*
	 * A bound at the end of 64 bits is no bound to tell, unless the number
	 * is past 64 bits on its side: "'seed' must be in [0, 9223372036854775807]".
	 */
	snprintf(lo, sizeof(lo), "%" PRId64, min);
	snprintf(hi, sizeof(hi), "%" PRId64, max);
	format_range(min == INT64_MIN && !(rc == NUM_OVERFLOW && v < 0) ? NULL : lo,
		     max == INT64_MAX && !(rc == NUM_OVERFLOW && v > 0) ? NULL : hi, 0, range, sizeof(range));
	return dt_node_error(n, "%s %s, got %s%s", sub, range, n->value,
			     rc != NUM_OVERFLOW ? "" : v > 0 ? " (too large)" : " (too small)");
}

static int node_float(const struct dt_node *n, const char *what, double min, double max, int open, double *out)
{
	char sub[160], got[256], lo[32], hi[32], range[96];
	double v = 0;
	int rc = n->kind == DT_NODE_SCALAR && !n->quoted ? parse_float(n->value, &v) : NUM_BAD;
	int below, above;

	subject(what, sub, sizeof(sub));
	if (rc == NUM_BAD)
		return dt_node_error(n, "%s a number, got %s", sub, describe(n, got, sizeof(got)));
	if (rc == NUM_NOT_FINITE)
		return dt_node_error(n, "%s a finite number, got %s", sub, describe(n, got, sizeof(got)));
	if (rc == NUM_DIV_ZERO)
		return dt_node_error(n, "%s a number, got %s (division by zero)", sub, describe(n, got, sizeof(got)));
	below = open & DT_OPEN_MIN ? v <= min : v < min;
	above = open & DT_OPEN_MAX ? v >= max : v > max;
	if (below || above) {
		format_range(isinf(min) ? NULL : format_double(min, lo, sizeof(lo)),
			     isinf(max) ? NULL : format_double(max, hi, sizeof(hi)), open, range, sizeof(range));
		return dt_node_error(n, "%s %s, got %s", sub, range, n->value);
	}
	*out = v;
	return 0;
}

int dt_node_int(const struct dt_node *n, int64_t min, int64_t max, int64_t *out)
{
	return node_int(n, NULL, min, max, out);
}

int dt_node_float(const struct dt_node *n, double min, double max, double *out)
{
	return node_float(n, NULL, min, max, 0, out);
}

int dt_node_float_key(const struct dt_node *n, const char *key, double min, double max, double *out)
{
	return node_float(n, key, min, max, 0, out);
}

int dt_node_float_range(const struct dt_node *n, double min, double max, int open, double *out)
{
	return node_float(n, NULL, min, max, open, out);
}

/* ---- the recorder of dtrain config ---- */

static struct {
	int on;
	struct dt_cfg_note *notes;
	int n, cap;
	struct {
		const struct dt_node *map;
		char *keys; /* " a b c ": the keys dt_cfg_check_keys allowed in map */
	} *allowed;
	int nallowed;
} rec;

void dt_cfg_record(int on)
{
	if (on)
		dt_cfg_record_release();
	rec.on = on;
}

void dt_cfg_record_release(void)
{
	for (int i = 0; i < rec.n; i++)
		free(rec.notes[i].value);
	free(rec.notes);
	for (int i = 0; i < rec.nallowed; i++)
		free(rec.allowed[i].keys);
	free(rec.allowed);
	memset(&rec, 0, sizeof(rec));
}

int dt_cfg_notes(const struct dt_cfg_note **notes)
{
	*notes = rec.notes;
	return rec.n;
}

void dt_cfg_note(const struct dt_node *map, const char *key, const char *value, int replace)
{
	if (!rec.on || !map || map->kind != DT_NODE_MAP || !value)
		return;
	for (int i = 0; i < rec.n; i++)
		if (rec.notes[i].map == map && !strcmp(rec.notes[i].key, key))
			return; /* the first reading stands */
	if (rec.n == rec.cap) {
		rec.cap = rec.cap ? 2 * rec.cap : 64;
		rec.notes = dt_realloc(rec.notes, (size_t)rec.cap * sizeof(*rec.notes));
	}
	rec.notes[rec.n++] = (struct dt_cfg_note){ map, key, dt_strdup(value), replace };
}

void dt_cfg_no_default(const struct dt_node *map, const char *key)
{
	for (int i = 0; i < rec.n; i++) {
		if (rec.notes[i].map != map || strcmp(rec.notes[i].key, key) || rec.notes[i].replace)
			continue;
		free(rec.notes[i].value);
		rec.notes[i] = rec.notes[--rec.n];
		return;
	}
}

/* Keeps the keys map allows, for dt_cfg_note_allowed. */
static void note_allowed(const struct dt_node *map, const char *const *allowed)
{
	size_t len = 2;
	char *keys;
	if (!rec.on || !map)
		return;
	for (int i = 0; allowed[i]; i++)
		len += strlen(allowed[i]) + 1;
	keys = dt_malloc(len);
	strcpy(keys, " ");
	for (int i = 0; allowed[i]; i++) {
		strcat(keys, allowed[i]);
		strcat(keys, " ");
	}
	rec.allowed = dt_realloc(rec.allowed, (size_t)(rec.nallowed + 1) * sizeof(*rec.allowed));
	rec.allowed[rec.nallowed].map = map;
	rec.allowed[rec.nallowed++].keys = keys;
}

int dt_cfg_note_allowed(const struct dt_node *map, const char *key)
{
	char word[256];
	snprintf(word, sizeof(word), " %s ", key);
	for (int i = rec.nallowed - 1; i >= 0; i--)
		if (rec.allowed[i].map == map)
			return strstr(rec.allowed[i].keys, word) != NULL;
	return 1;
}

void dt_cfg_note_float(const struct dt_node *map, const char *key, double v)
{
	char text[32];
	if (rec.on && !dt_node_get(map, key))
		dt_cfg_note(map, key, format_double(v, text, sizeof(text)), 0);
}

/* A number default, when it is a value the key takes (a sentinel outside the range is not). */
static void note_number(const struct dt_node *map, const char *key, double def, double min, double max, int open,
			const char *text)
{
	int below = open & DT_OPEN_MIN ? def <= min : def < min, above = open & DT_OPEN_MAX ? def >= max : def > max;
	if (!below && !above)
		dt_cfg_note(map, key, text, 0);
}

/* ---- getters ---- */

int dt_cfg_int(const struct dt_node *map, const char *key, int64_t def, int64_t min, int64_t max, int64_t *out)
{
	const struct dt_node *n = dt_node_get(map, key);
	char text[32];
	if (!n) {
		*out = def;
		if (rec.on && def >= min && def <= max) {
			snprintf(text, sizeof(text), "%" PRId64, def);
			dt_cfg_note(map, key, text, 0);
		}
		return 0;
	}
	return node_int(n, key, min, max, out) ? -1 : 1;
}

int dt_cfg_float_range(const struct dt_node *map, const char *key, double def, double min, double max, int open,
		       double *out)
{
	const struct dt_node *n = dt_node_get(map, key);
	char text[32];
	if (!n) {
		*out = def;
		if (rec.on)
			note_number(map, key, def, min, max, open, format_double(def, text, sizeof(text)));
		return 0;
	}
	return node_float(n, key, min, max, open, out) ? -1 : 1;
}

int dt_cfg_float(const struct dt_node *map, const char *key, double def, double min, double max, double *out)
{
	return dt_cfg_float_range(map, key, def, min, max, 0, out);
}

int dt_cfg_bool(const struct dt_node *map, const char *key, int def, int *out)
{
	static const char *const yes[] = { "true", "yes", "on" }, *const no[] = { "false", "no", "off" };
	const struct dt_node *n = dt_node_get(map, key);
	char got[256];

	if (!n) {
		*out = def;
		dt_cfg_note(map, key, def ? "true" : "false", 0);
		return 0;
	}
	for (int i = 0; i < 3 && n->kind == DT_NODE_SCALAR && !n->quoted; i++) {
		if (!strcasecmp(n->value, yes[i]) || !strcasecmp(n->value, no[i])) {
			*out = !strcasecmp(n->value, yes[i]);
			return 1;
		}
	}
	return dt_node_error(n, "'%s' must be true or false, got %s", key, describe(n, got, sizeof(got)));
}

int dt_cfg_string(const struct dt_node *map, const char *key, const char *def, const char **out)
{
	const struct dt_node *n = dt_node_get(map, key);
	if (!n) {
		*out = def;
		dt_cfg_note(map, key, def, 0);
		return 0;
	}
	if (n->kind != DT_NODE_SCALAR)
		return dt_node_error(n, "'%s' must be a string, got a %s", key, kind_name(n->kind));
	*out = n->value;
	return 1;
}

int dt_cfg_path(const struct dt_node *map, const char *key, char **out)
{
	const struct dt_node *n = dt_node_get(map, key);
	*out = NULL;
	if (!n)
		return 0;
	if (n->kind != DT_NODE_SCALAR)
		return dt_node_error(n, "'%s' must be a path, got a %s", key, kind_name(n->kind));
	if (!*n->value)
		return dt_node_error(n, "'%s' must not be empty", key);
	*out = join_path(n->dir, n->value);
	if (rec.on && strcmp(n->value, "-")) { /* "-", standard input, stays */
		char *abs = realpath(*out, NULL);
		dt_cfg_note(map, key, abs ? abs : *out, 1);
		free(abs);
	}
	return 1;
}

int dt_cfg_enum(const struct dt_node *map, const char *key, const char *const *names, int def, int *out)
{
	const struct dt_node *n = dt_node_get(map, key);
	const char *guess;
	char *list;

	if (!n) {
		*out = def;
		for (int i = 0; def >= 0 && names[i]; i++)
			if (i == def)
				dt_cfg_note(map, key, names[i], 0);
		return 0;
	}
	list = join_names(names);
	if (n->kind != DT_NODE_SCALAR) {
		dt_node_error(n, "'%s' must be one of: %s, got a %s", key, list, kind_name(n->kind));
		free(list);
		return -1;
	}
	for (int i = 0; names[i]; i++) {
		if (!strcmp(n->value, names[i])) {
			free(list);
			*out = i;
			return 1;
		}
	}
	guess = dt_did_you_mean_config(n->value, names);
	if (guess)
		dt_node_error(n, "unknown %s '%s' (expected one of: %s); did you mean '%s'?", key, n->value, list, guess);
	else
		dt_node_error(n, "unknown %s '%s' (expected one of: %s)", key, n->value, list);
	free(list);
	return -1;
}

int dt_cfg_shape(const struct dt_node *map, const char *key, struct dt_shape *out)
{
	const struct dt_node *n = dt_node_get(map, key);
	struct dt_shape s = { 0 };
	char got[256];

	if (!n)
		return 0;
	if (n->kind != DT_NODE_SEQ)
		return dt_node_error(n, "'%s' must be a sequence of 1 to %d positive integers such as [28, 28, 1], got %s",
				     key, DT_MAX_SAMPLE_DIMS, describe(n, got, sizeof(got)));
	if (n->n < 1 || n->n > DT_MAX_SAMPLE_DIMS)
		return dt_node_error(n, "'%s' must have 1 to %d dimensions, got %d", key, DT_MAX_SAMPLE_DIMS, n->n);
	for (int i = 0; i < n->n; i++) {
		char what[160];
		int64_t v = 0;
		snprintf(what, sizeof(what), "%s[%d]", key, i);
		if (node_int(n->items[i], what, 1, INT_MAX, &v))
			return -1;
		s.dim[i] = (int)v;
	}
	s.ndim = n->n;
	*out = s;
	return 1;
}

/* ---- did you mean ---- */

/* Edit distance (insert, delete, substitute, swap two neighbours), ignoring case. */
static int edit_distance(const char *a, const char *b)
{
	int na = (int)strlen(a), nb = (int)strlen(b), d;
	int *rows = dt_malloc((size_t)(nb + 1) * 3 * sizeof(int));
	int *prev2 = rows, *prev = rows + nb + 1, *cur = prev + nb + 1; /* rows i-2, i-1, i */

	for (int j = 0; j <= nb; j++)
		prev[j] = j;
	for (int i = 1; i <= na; i++) {
		int *t;
		cur[0] = i;
		for (int j = 1; j <= nb; j++) {
			int ca = tolower((unsigned char)a[i - 1]), cb = tolower((unsigned char)b[j - 1]);
			int best = prev[j - 1] + (ca != cb);
			if (prev[j] + 1 < best)
				best = prev[j] + 1;
			if (cur[j - 1] + 1 < best)
				best = cur[j - 1] + 1;
			if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2]) &&
			    tolower((unsigned char)a[i - 2]) == cb && prev2[j - 2] + 1 < best)
				best = prev2[j - 2] + 1;
			cur[j] = best;
		}
		t = prev2;
		prev2 = prev;
		prev = cur;
		cur = t;
	}
	d = prev[nb];
	free(rows);
	return d;
}

/*
 * Keras' and PyTorch's spellings of what dtrain names otherwise, as
 * python_name() writes them: the layer, loss and argument names that no
 * edit of a few letters reaches.
 */
static const char *const foreign_names[][2] = {
	{ "linear", "dense" },
	{ "cross_entropy_loss", "sparse_categorical_crossentropy" },
	{ "nll_loss", "sparse_categorical_crossentropy" },
	{ "bce_loss", "binary_crossentropy" },
	{ "bce_with_logits_loss", "binary_crossentropy" },
	{ "mse_loss", "mean_squared_error" },
	{ "l1_loss", "mean_absolute_error" },
	{ "smooth_l1_loss", "huber" },
	{ "huber_loss", "huber" },
	{ "kl_div_loss", "kl_divergence" },
	{ "avg_pool1d", "average_pooling1d" },
	{ "avg_pool2d", "average_pooling2d" },
	{ "adaptive_avg_pool2d", "global_average_pooling2d" },
	{ "batch_norm1d", "batch_normalization" },
	{ "batch_norm2d", "batch_normalization" },
	{ "layer_norm", "layer_normalization" },
	{ "conv_transpose2d", "conv2d_transpose" },
	{ "silu", "swish" },
	{ "lr", "learning_rate" },
	{ "p", "rate" },
	{ "eps", "epsilon" },
	{ "out_features", "units" },
	{ "hidden_size", "units" },
	{ "out_channels", "filters" },
	{ "num_embeddings", "input_dim" },
	{ "embedding_dim", "output_dim" },
	{ NULL, NULL },
};

/*
 * A Python spelling as dtrain's names are written: the module path and a
 * call's arguments cut ("keras.layers.Dense(10)": "Dense"), then snake case
 * ("MaxPooling2D": "max_pooling2d", "LSTMCell": "lstm_cell").
 */
static void python_name(const char *s, char *out, size_t size)
{
	const char *end = strchr(s, '('), *dot;
	size_t n = 0;
	if (!end)
		end = s + strlen(s);
	for (dot = s; dot < end; dot++)
		if (*dot == '.')
			s = dot + 1;
	for (const char *p = s; p < end && n + 2 < size; p++) {
		int up = isupper((unsigned char)*p);
		if (up && p > s && (islower((unsigned char)p[-1]) ||
				    (isupper((unsigned char)p[-1]) && p + 1 < end && islower((unsigned char)p[1]))))
			out[n++] = '_';
		out[n++] = (char)tolower((unsigned char)*p);
	}
	out[n] = 0;
}

static const char *closest(const char *s, const char *const *names)
{
	const char *best = NULL;
	int best_d = INT_MAX;
	size_t ns = strlen(s);

	for (int i = 0; names[i]; i++) {
		int len = (int)strlen(names[i]);
		int limit = len / 3 > 1 ? len / 3 : 1, d;
		if (limit >= len)
			limit = len - 1;
		if ((int)ns > len + limit || (int)ns < len - limit)
			continue;
		d = edit_distance(s, names[i]);
		if (d <= limit && d < best_d) {
			best = names[i];
			best_d = d;
		}
	}
	return best;
}

const char *dt_python_call(const char *s, const char *name, char *buf, size_t size)
{
	const char *args = strchr(s, '('), *close = strrchr(s, ')');
	size_t n;
	if (!args || !close || close < args + 2 || close[1])
		return name;
	n = (size_t)snprintf(buf, size, "{%s: {", name);
	/* Each "key=value" as "key: value", PyTorch's keys (lr) as Keras names them. */
	for (const char *p = args + 1, *sep = ""; p < close; p++, sep = ", ") {
		const char *key, *eq = strchr(p, '='), *next = strchr(p, ',');
		size_t nk;
		if (!next || next > close)
			next = close;
		if (!eq || eq > next)
			return name; /* a positional argument ("Adam(1e-3)") has no key to write */
		while (*p == ' ')
			p++;
		for (nk = (size_t)(eq - p); nk && p[nk - 1] == ' '; nk--)
			;
		key = p;
		for (int i = 0; foreign_names[i][0]; i++)
			if (strlen(foreign_names[i][0]) == nk && !strncmp(foreign_names[i][0], p, nk))
				key = foreign_names[i][1], nk = strlen(key);
		for (eq++; *eq == ' '; eq++)
			;
		n += (size_t)snprintf(buf + n, n < size ? size - n : 0, "%s%.*s: %.*s", sep, (int)nk, key,
				      (int)(next - eq), eq);
		p = next;
	}
	n += (size_t)snprintf(buf + n, n < size ? size - n : 0, "}}");
	return n < size ? buf : name;
}

const char *dt_did_you_mean(const char *s, const char *const *names) { return closest(s, names); }

/*
 * A name is close when its distance to s is at most a third of its length
 * (at least 1) and less than its length; the closest wins, the first on ties.
 * Else Python's spelling of s is tried, and what Keras or PyTorch call it.
 */
const char *dt_did_you_mean_config(const char *s, const char *const *names)
{
	const char *best = NULL;
	char py[128];
	int python = strchr(s, '(') != NULL; /* "Adam()" is 2 edits from adamax */
	if (!python && (best = closest(s, names)))
		return best;
	if (strlen(s) >= sizeof(py))
		return NULL;
	python_name(s, py, sizeof(py));
	if (!*py)
		return NULL;
	if ((best = closest(py, names)) || (python && (best = closest(s, names))))
		return best;
	for (int i = 0; foreign_names[i][0]; i++)
		if (!strcmp(py, foreign_names[i][0]) && dt_name_index(names, foreign_names[i][1]) >= 0)
			return names[dt_name_index(names, foreign_names[i][1])];
	return NULL;
}
