/*
 * Unit tests of core/config.c: parsing with positions, syntax errors, the
 * typed getters, did-you-mean, --set and include.
 */
#include <limits.h>
#include <math.h>
#include <sys/stat.h>

#include "helpers.h"

#include "core/config/config.h"

/* Parses text as "m.yaml" (dir "cfg"); fails the test on error. */
static struct dt_doc *parse_ok(const char *text)
{
	struct dt_doc *d = dt_doc_parse("m.yaml", text, "cfg");
	if (!d)
		fail_msg("parse failed: %s at %s", dt_error_last(), dt_cfg_last_where());
	return d;
}

/* Asserts that text does not parse, with this position and message part. */
#define assert_parse_error(text, where, needle) \
	do { \
		struct dt_doc *bad_ = dt_doc_parse("m.yaml", (text), "."); \
		assert_null(bad_); \
		assert_string_equal(dt_cfg_last_where(), (where)); \
		assert_error_contains(needle); \
	} while (0)

#define assert_where(where) assert_string_equal(dt_cfg_last_where(), (where))

static int setup(void **state)
{
	dt_error_set_quiet(1);
	return 0;
}

/* ---- parsing ---- */

static void test_positions(void **state)
{
	struct dt_doc *d = parse_ok("# comment\n"
				    "model:\n"
				    "  units: 128\n"
				    "  shape: [28, 28, 1]\n"
				    "layers:\n"
				    "  - dense: {units: 10}\n");
	struct dt_node *root = dt_doc_root(d), *model, *shape, *layers, *dense;
	char buf[64];

	assert_int_equal(root->kind, DT_NODE_MAP);
	assert_int_equal(root->n, 2);
	assert_string_equal(root->keys[0], "model");
	assert_int_equal(root->key_nodes[0]->line, 2);
	assert_int_equal(root->key_nodes[0]->col, 1);
	model = dt_node_get(root, "model");
	assert_int_equal(model->kind, DT_NODE_MAP);
	assert_int_equal(model->line, 3);
	assert_int_equal(model->col, 3);
	assert_int_equal(dt_node_get(model, "units")->line, 3);
	assert_int_equal(dt_node_get(model, "units")->col, 10);
	assert_string_equal(dt_node_get(model, "units")->value, "128");
	shape = dt_node_get(model, "shape");
	assert_int_equal(shape->kind, DT_NODE_SEQ);
	assert_int_equal(shape->n, 3);
	assert_int_equal(shape->col, 10);
	assert_int_equal(shape->items[2]->col, 19);
	layers = dt_node_get(root, "layers");
	assert_int_equal(layers->kind, DT_NODE_SEQ);
	assert_int_equal(layers->line, 6);
	assert_int_equal(layers->col, 3);
	dense = dt_node_get(layers->items[0], "dense");
	assert_int_equal(dense->kind, DT_NODE_MAP);
	assert_int_equal(dense->col, 12);
	assert_int_equal(dense->key_nodes[0]->col, 13);
	assert_int_equal(dense->items[0]->col, 20);
	assert_string_equal(dense->file, "m.yaml");
	assert_string_equal(dense->dir, "cfg");
	assert_string_equal(dt_node_where(dense->items[0], buf, sizeof(buf)), "m.yaml:6:20");
	assert_null(dt_node_get(root, "nope"));
	assert_null(dt_node_get(shape, "units"));
	assert_null(dt_node_get(NULL, "units"));
	dt_doc_free(d);
}

static void test_many_keys(void **state)
{
	char text[8192] = "";
	struct dt_doc *d;
	struct dt_node *root, *seq;

	for (int i = 0; i < 100; i++)
		sprintf(text + strlen(text), "k%d: %d\n", i, i * 7);
	strcat(text, "seq: [");
	for (int i = 0; i < 70; i++)
		sprintf(text + strlen(text), "%s%d", i ? ", " : "", i);
	strcat(text, "]\n");
	d = parse_ok(text);
	root = dt_doc_root(d);
	assert_int_equal(root->n, 101);
	for (int i = 0; i < 100; i++) {
		char key[16], value[16];
		sprintf(key, "k%d", i);
		sprintf(value, "%d", i * 7);
		assert_string_equal(root->keys[i], key);
		assert_string_equal(root->items[i]->value, value);
		assert_int_equal(root->key_nodes[i]->line, i + 1);
	}
	seq = dt_node_get(root, "seq");
	assert_int_equal(seq->n, 70);
	assert_string_equal(seq->items[69]->value, "69");
	dt_doc_free(d);
}

static void test_quoted(void **state)
{
	struct dt_doc *d = parse_ok("a: 1\nb: \"1\"\nc: '1'\nd: |\n  1\ne: !!str 1\nf: \"\"\n");
	struct dt_node *root = dt_doc_root(d);
	int64_t v;
	const char *s;

	assert_false(dt_node_get(root, "a")->quoted);
	assert_true(dt_node_get(root, "b")->quoted);
	assert_true(dt_node_get(root, "c")->quoted);
	assert_true(dt_node_get(root, "d")->quoted);
	assert_true(dt_node_get(root, "e")->quoted);
	assert_int_equal(dt_cfg_int(root, "a", 0, 0, 10, &v), 1);
	assert_int_equal(v, 1);
	assert_int_equal(dt_cfg_int(root, "b", 0, 0, 10, &v), -1);
	assert_error_contains("'b' must be an integer, got the quoted string \"1\"");
	assert_where("m.yaml:2:4");
	assert_int_equal(dt_cfg_int(root, "c", 0, 0, 10, &v), -1);
	assert_int_equal(dt_cfg_int(root, "e", 0, 0, 10, &v), -1);
	/* A quoted empty string is a value, not null. */
	assert_int_equal(dt_cfg_string(root, "f", "def", &s), 1);
	assert_string_equal(s, "");
	assert_int_equal(dt_cfg_string(root, "b", NULL, &s), 1);
	assert_string_equal(s, "1");
	dt_doc_free(d);
}

static void test_syntax_errors(void **state)
{
	assert_parse_error("a: 1\nb: @x\n", "m.yaml:2:4",
			   "found character that cannot start any token while scanning for the next token");
	assert_parse_error("a: 1\nb: [1, 2\nc: 3\n", "m.yaml:3:2",
			   "did not find expected ',' or ']' while parsing a flow sequence that started at line 2");
	assert_parse_error("a: \"open\n", "m.yaml:2:1", "while scanning a quoted scalar that started at line 1");
	assert_parse_error("a: b: c\n", "m.yaml:1:5",
			   "mapping values are not allowed in this context; a value that holds ': ' needs quotes");
	assert_parse_error("a: 1\n  b: 2\n", "m.yaml:2:4",
			   "mapping values are not allowed in this context; this line is indented deeper than line 1, "
			   "so it continues that line's value");
	assert_parse_error("a: 1\n\n  b: 2\n", "m.yaml:3:4", "indented deeper than line 1,");
	assert_parse_error("a:\n  - 1\n b: 2\n", "m.yaml:3:2",
			   "did not find expected key while parsing a block mapping that started at line 1; is this "
			   "line indented as deep as the keys or items it belongs with?");
	assert_parse_error("a: \xff\n", "m.yaml:1:4", "invalid leading UTF-8 octet (0xff)");
	assert_parse_error("a: 1\nb: x\x01\n", "m.yaml:2:5", "control characters are not allowed");
}

static void test_tabs(void **state)
{
	assert_parse_error("model:\n\tunits: 3\n", "m.yaml:2:1", "tabs cannot indent yaml; use spaces");
	assert_error_contains("found character that cannot start any token");
	/* A tab between a key and its value is fine. */
	struct dt_doc *d = parse_ok("a:\t3\n");
	assert_string_equal(dt_node_get(dt_doc_root(d), "a")->value, "3");
	dt_doc_free(d);
}

static void test_empty(void **state)
{
	assert_parse_error("", "m.yaml:1:1", "'m.yaml' is empty");
	assert_parse_error("# only\n# comments\n\n", "m.yaml:1:1", "'m.yaml' is empty");
	assert_parse_error("---\n", "m.yaml:1:1", "'m.yaml' is empty");
}

static void test_root_not_mapping(void **state)
{
	assert_parse_error("\n- 1\n- 2\n", "m.yaml:2:1", "expected a mapping at the top level, got a sequence");
	assert_parse_error("hello\n", "m.yaml:1:1", "expected a mapping at the top level, got a scalar");
}

static void test_duplicate_key(void **state)
{
	assert_parse_error("units: 1\nrate: 2\nunits: 3\n", "m.yaml:3:1", "duplicate key 'units' (first at line 1)");
	assert_parse_error("a: {x: 1, y: 2, x: 3}\n", "m.yaml:1:17", "duplicate key 'x'");
}

static void test_multiple_documents(void **state)
{
	assert_parse_error("a: 1\n---\nb: 2\n", "m.yaml:2:1", "a second document is not supported");
}

static void test_aliases(void **state)
{
	assert_parse_error("a: &x [1]\nb: *x\n", "m.yaml:2:4", "aliases are not supported ('*x')");
	/* An alias to its own ancestor must not loop. */
	assert_parse_error("a: &x [*x]\n", "m.yaml:1:8", "aliases are not supported");
	assert_parse_error("base: &b {u: 1}\nd:\n  <<: *b\n", "m.yaml:3:7", "aliases are not supported");
}

static void test_non_scalar_key(void **state)
{
	assert_parse_error("[a, b]: 1\n", "m.yaml:1:1", "a key must be a scalar, got a sequence");
	assert_parse_error("x: 1\n? {a: 1}\n: 2\n", "m.yaml:2:3", "a key must be a scalar, got a mapping");
}

static void test_deep_nesting(void **state)
{
	char text[4096] = "a: ";
	for (int i = 0; i < 1000; i++)
		strcat(text, "[");
	assert_parse_error(text, "m.yaml:1:259", "nesting deeper than 256 levels is not supported");
}

static void test_load(void **state)
{
	const char *text = "units: 5\n";
	char *path = dt_test_write_file(".yaml", text, strlen(text));
	struct dt_doc *d = dt_doc_load(path);
	char *slash = strrchr(path, '/');
	struct dt_node *units;

	assert_non_null(d);
	units = dt_node_get(dt_doc_root(d), "units");
	assert_string_equal(units->file, path);
	*slash = '\0';
	assert_string_equal(units->dir, path);
	*slash = '/';
	dt_doc_free(d);
	unlink(path);
	free(path);

	assert_null(dt_doc_load("/nonexistent/x.yaml"));
	assert_string_equal(dt_error_last(), "cannot open '/nonexistent/x.yaml': No such file or directory");
	assert_where("dtrain");
	assert_null(dt_doc_load("/"));
	assert_error_contains("cannot open '/'");
}

static void test_load_error_names_file(void **state)
{
	const char *text = "a: 1\nb: [\n";
	char *path = dt_test_write_file(".yaml", text, strlen(text));
	char where[4200];

	assert_null(dt_doc_load(path));
	snprintf(where, sizeof(where), "%s:3:1", path);
	assert_where(where);
	unlink(path);
	free(path);
}

/* ---- getters ---- */

static const char *getters_yaml = "int: 42\n"
				  "neg: -7\n"
				  "big: 1e6\n"
				  "whole: 2.0\n"
				  "frac: 2.5\n"
				  "word: abc\n"
				  "over: 99999999999999999999\n"
				  "map: {a: 1}\n"
				  "seq: [1]\n"
				  "nul: ~\n"
				  "nul2: null\n"
				  "nul3:\n"
				  "zero: 0\n"
				  "hex: 0x10\n";

static void test_int(void **state)
{
	struct dt_doc *d = parse_ok(getters_yaml);
	struct dt_node *r = dt_doc_root(d);
	int64_t v = -1;

	assert_int_equal(dt_cfg_int(r, "int", 0, 0, 100, &v), 1);
	assert_int_equal(v, 42);
	assert_int_equal(dt_cfg_int(r, "neg", 0, INT64_MIN, INT64_MAX, &v), 1);
	assert_int_equal(v, -7);
	assert_int_equal(dt_cfg_int(r, "big", 0, 0, INT64_MAX, &v), 1);
	assert_int_equal(v, 1000000);
	assert_int_equal(dt_cfg_int(r, "whole", 0, 0, 10, &v), 1);
	assert_int_equal(v, 2);
	/* absent and null: the default */
	assert_int_equal(dt_cfg_int(r, "absent", 9, 0, 10, &v), 0);
	assert_int_equal(v, 9);
	assert_int_equal(dt_cfg_int(r, "nul", 8, 0, 10, &v), 0);
	assert_int_equal(v, 8);
	assert_int_equal(dt_cfg_int(r, "nul2", 7, 0, 10, &v), 0);
	assert_int_equal(v, 7);
	assert_int_equal(dt_cfg_int(r, "nul3", 6, 0, 10, &v), 0);
	assert_int_equal(v, 6);
	assert_int_equal(dt_cfg_int(NULL, "int", 5, 0, 10, &v), 0);
	assert_int_equal(v, 5);

	v = 123;
	assert_int_equal(dt_cfg_int(r, "frac", 0, 0, 10, &v), -1);
	assert_string_equal(dt_error_last(), "'frac' must be an integer, got '2.5'");
	assert_where("m.yaml:5:7");
	assert_int_equal(v, 123);
	assert_int_equal(dt_cfg_int(r, "word", 0, 0, 10, &v), -1);
	assert_string_equal(dt_error_last(), "'word' must be an integer, got 'abc'");
	assert_where("m.yaml:6:7");
	assert_int_equal(dt_cfg_int(r, "hex", 0, 0, 100, &v), -1);
	assert_string_equal(dt_error_last(), "'hex' must be an integer, got '0x10'");
	assert_int_equal(dt_cfg_int(r, "map", 0, 0, 10, &v), -1);
	assert_string_equal(dt_error_last(), "'map' must be an integer, got a mapping");
	assert_where("m.yaml:8:6");
	assert_int_equal(dt_cfg_int(r, "seq", 0, 0, 10, &v), -1);
	assert_string_equal(dt_error_last(), "'seq' must be an integer, got a sequence");
	assert_int_equal(v, 123);
	dt_doc_free(d);
}

static void test_int_range(void **state)
{
	struct dt_doc *d = parse_ok(getters_yaml);
	struct dt_node *r = dt_doc_root(d);
	int64_t v;

	assert_int_equal(dt_cfg_int(r, "int", 0, 42, 42, &v), 1);
	assert_int_equal(dt_cfg_int(r, "int", 0, 0, 41, &v), -1);
	assert_string_equal(dt_error_last(), "'int' must be in [0, 41], got 42");
	assert_where("m.yaml:1:6");
	assert_int_equal(dt_cfg_int(r, "zero", 0, 1, INT64_MAX, &v), -1);
	assert_string_equal(dt_error_last(), "'zero' must be >= 1, got 0");
	assert_int_equal(dt_cfg_int(r, "int", 0, INT64_MIN, 10, &v), -1);
	assert_string_equal(dt_error_last(), "'int' must be <= 10, got 42");
	/* overflow: the message names the bound it passed, also the end of 64 bits */
	assert_int_equal(dt_cfg_int(r, "over", 0, 1, 1000, &v), -1);
	assert_string_equal(dt_error_last(), "'over' must be in [1, 1000], got 99999999999999999999 (too large)");
	assert_where("m.yaml:7:7");
	assert_int_equal(dt_cfg_int(r, "over", 0, 0, INT64_MAX, &v), -1);
	assert_string_equal(dt_error_last(),
			    "'over' must be in [0, 9223372036854775807], got 99999999999999999999 (too large)");
	assert_int_equal(dt_cfg_int(r, "over", 0, INT64_MIN, INT64_MAX, &v), -1);
	assert_string_equal(dt_error_last(), "'over' must be <= 9223372036854775807, got 99999999999999999999 (too large)");
	dt_doc_free(d);

	d = parse_ok("max: 9223372036854775807\nmin: -9223372036854775808\nmore: 9223372036854775808\n"
		     "huge: 1e300\n");
	r = dt_doc_root(d);
	assert_int_equal(dt_cfg_int(r, "max", 0, INT64_MIN, INT64_MAX, &v), 1);
	assert_true(v == INT64_MAX);
	assert_int_equal(dt_cfg_int(r, "min", 0, INT64_MIN, INT64_MAX, &v), 1);
	assert_true(v == INT64_MIN);
	assert_int_equal(dt_cfg_int(r, "more", 0, INT64_MIN, INT64_MAX, &v), -1);
	assert_string_equal(dt_error_last(), "'more' must be <= 9223372036854775807, got 9223372036854775808 (too large)");
	assert_int_equal(dt_cfg_int(r, "huge", 0, 0, 100, &v), -1);
	assert_string_equal(dt_error_last(), "'huge' must be in [0, 100], got 1e300 (too large)");
	assert_int_equal(dt_cfg_int(r, "huge", 0, 0, INT64_MAX, &v), -1);
	assert_string_equal(dt_error_last(), "'huge' must be in [0, 9223372036854775807], got 1e300 (too large)");
	dt_doc_free(d);

	/* past 64 bits below zero: the lower bound, and too small */
	d = parse_ok("less: -9223372036854775809\ntiny: -1e300\n");
	r = dt_doc_root(d);
	assert_int_equal(dt_cfg_int(r, "less", 0, 0, INT64_MAX, &v), -1);
	assert_string_equal(dt_error_last(), "'less' must be >= 0, got -9223372036854775809 (too small)");
	assert_int_equal(dt_cfg_int(r, "less", 0, INT64_MIN, 10, &v), -1);
	assert_string_equal(dt_error_last(),
			    "'less' must be in [-9223372036854775808, 10], got -9223372036854775809 (too small)");
	assert_int_equal(dt_cfg_int(r, "tiny", 0, INT64_MIN, INT64_MAX, &v), -1);
	assert_string_equal(dt_error_last(), "'tiny' must be >= -9223372036854775808, got -1e300 (too small)");
	dt_doc_free(d);
}

static void test_float(void **state)
{
	struct dt_doc *d = parse_ok("a: 0.25\nb: .5\nc: 1e-3\nd: 1/255\ne: 3 / 4\nf: -2\ng: 5.\nh: 1.5E+2\n"
				    "bad: 1.2.3\nword: fast\nq: \"0.5\"\nnan: .nan\ninf: -.inf\ninf2: inf\n"
				    "zero: 1/0\nslash: 1/\nhuge: 1e999\nn: ~\n");
	struct dt_node *r = dt_doc_root(d);
	double v = -1;

	assert_int_equal(dt_cfg_float(r, "a", 0, 0, 1, &v), 1);
	assert_true(v == 0.25);
	assert_int_equal(dt_cfg_float(r, "b", 0, 0, 1, &v), 1);
	assert_true(v == 0.5);
	assert_int_equal(dt_cfg_float(r, "c", 0, 0, 1, &v), 1);
	assert_true(v == 1e-3);
	assert_int_equal(dt_cfg_float(r, "d", 0, 0, 1, &v), 1);
	assert_true(v == 1.0 / 255);
	assert_int_equal(dt_cfg_float(r, "e", 0, 0, 1, &v), 1);
	assert_true(v == 0.75);
	assert_int_equal(dt_cfg_float(r, "f", 0, -INFINITY, INFINITY, &v), 1);
	assert_true(v == -2);
	assert_int_equal(dt_cfg_float(r, "g", 0, 0, 10, &v), 1);
	assert_true(v == 5);
	assert_int_equal(dt_cfg_float(r, "h", 0, 0, 1000, &v), 1);
	assert_true(v == 150);
	assert_int_equal(dt_cfg_float(r, "absent", 0.125, 0, 1, &v), 0);
	assert_true(v == 0.125);
	assert_int_equal(dt_cfg_float(r, "n", 0.375, 0, 1, &v), 0);
	assert_true(v == 0.375);

	v = 7;
	assert_int_equal(dt_cfg_float(r, "bad", 0, 0, 1, &v), -1);
	assert_string_equal(dt_error_last(), "'bad' must be a number, got '1.2.3'");
	assert_where("m.yaml:9:6");
	assert_int_equal(dt_cfg_float(r, "word", 0, 0, 1, &v), -1);
	assert_string_equal(dt_error_last(), "'word' must be a number, got 'fast'");
	assert_int_equal(dt_cfg_float(r, "q", 0, 0, 1, &v), -1);
	assert_string_equal(dt_error_last(), "'q' must be a number, got the quoted string \"0.5\"");
	assert_int_equal(dt_cfg_float(r, "nan", 0, -INFINITY, INFINITY, &v), -1);
	assert_string_equal(dt_error_last(), "'nan' must be a finite number, got '.nan'");
	assert_int_equal(dt_cfg_float(r, "inf", 0, -INFINITY, INFINITY, &v), -1);
	assert_string_equal(dt_error_last(), "'inf' must be a finite number, got '-.inf'");
	assert_int_equal(dt_cfg_float(r, "inf2", 0, -INFINITY, INFINITY, &v), -1);
	assert_int_equal(dt_cfg_float(r, "huge", 0, -INFINITY, INFINITY, &v), -1);
	assert_string_equal(dt_error_last(), "'huge' must be a finite number, got '1e999'");
	assert_int_equal(dt_cfg_float(r, "zero", 0, -INFINITY, INFINITY, &v), -1);
	assert_string_equal(dt_error_last(), "'zero' must be a number, got '1/0' (division by zero)");
	assert_int_equal(dt_cfg_float(r, "slash", 0, -INFINITY, INFINITY, &v), -1);
	assert_string_equal(dt_error_last(), "'slash' must be a number, got '1/'");
	assert_true(v == 7);
	dt_doc_free(d);
}

static void test_float_range(void **state)
{
	struct dt_doc *d = parse_ok("rate: 1.5\none: 1\nzero: 0\nsmall: 1e-9\n");
	struct dt_node *r = dt_doc_root(d);
	double v;

	assert_int_equal(dt_cfg_float_range(r, "rate", 0, 0, 1, DT_OPEN_MAX, &v), -1);
	assert_string_equal(dt_error_last(), "'rate' must be in [0, 1), got 1.5");
	assert_where("m.yaml:1:7");
	assert_int_equal(dt_cfg_float_range(r, "one", 0, 0, 1, DT_OPEN_MAX, &v), -1);
	assert_string_equal(dt_error_last(), "'one' must be in [0, 1), got 1");
	assert_int_equal(dt_cfg_float_range(r, "zero", 0, 0, 1, DT_OPEN_MAX, &v), 1);
	assert_int_equal(dt_cfg_float_range(r, "zero", 0, 0, 1, DT_OPEN_MIN | DT_OPEN_MAX, &v), -1);
	assert_string_equal(dt_error_last(), "'zero' must be in (0, 1), got 0");
	assert_int_equal(dt_cfg_float_range(r, "zero", 0, 0, INFINITY, DT_OPEN_MIN, &v), -1);
	assert_string_equal(dt_error_last(), "'zero' must be > 0, got 0");
	assert_int_equal(dt_cfg_float(r, "rate", 0, 0, 1, &v), -1);
	assert_string_equal(dt_error_last(), "'rate' must be in [0, 1], got 1.5");
	assert_int_equal(dt_cfg_float(r, "one", 0, 0, 1, &v), 1);
	assert_true(v == 1);
	assert_int_equal(dt_cfg_float(r, "rate", 0, -INFINITY, 0.1, &v), -1);
	assert_string_equal(dt_error_last(), "'rate' must be <= 0.1, got 1.5");
	assert_int_equal(dt_cfg_float(r, "small", 0, 1e-8, 1, &v), -1);
	assert_string_equal(dt_error_last(), "'small' must be in [1e-08, 1], got 1e-9");
	dt_doc_free(d);
}

static void test_bool(void **state)
{
	static const char *const yes[] = { "t1", "t2", "t3", "t4", NULL }, *const no[] = { "f1", "f2", "f3", "f4", NULL };
	struct dt_doc *d = parse_ok("t1: true\nt2: YES\nt3: On\nt4: TRUE\nf1: false\nf2: no\nf3: OFF\nf4: False\n"
				    "q: \"true\"\nw: maybe\none: 1\nn: null\n");
	struct dt_node *r = dt_doc_root(d);
	int v;

	for (int i = 0; yes[i]; i++) {
		v = 0;
		assert_int_equal(dt_cfg_bool(r, yes[i], 0, &v), 1);
		assert_int_equal(v, 1);
		v = 1;
		assert_int_equal(dt_cfg_bool(r, no[i], 1, &v), 1);
		assert_int_equal(v, 0);
	}
	assert_int_equal(dt_cfg_bool(r, "absent", 1, &v), 0);
	assert_int_equal(v, 1);
	assert_int_equal(dt_cfg_bool(r, "n", 0, &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(dt_cfg_bool(r, "q", 0, &v), -1);
	assert_string_equal(dt_error_last(), "'q' must be true or false, got the quoted string \"true\"");
	assert_where("m.yaml:9:4");
	assert_int_equal(dt_cfg_bool(r, "w", 0, &v), -1);
	assert_string_equal(dt_error_last(), "'w' must be true or false, got 'maybe'");
	assert_int_equal(dt_cfg_bool(r, "one", 0, &v), -1);
	dt_doc_free(d);
}

static void test_string(void **state)
{
	struct dt_doc *d = parse_ok("name: my model\nnum: 123\nmap: {}\nseq: []\nn: ~\nq: '~'\n");
	struct dt_node *r = dt_doc_root(d);
	const char *s = NULL;

	assert_int_equal(dt_cfg_string(r, "name", NULL, &s), 1);
	assert_string_equal(s, "my model");
	assert_int_equal(dt_cfg_string(r, "num", NULL, &s), 1);
	assert_string_equal(s, "123");
	assert_int_equal(dt_cfg_string(r, "absent", "def", &s), 0);
	assert_string_equal(s, "def");
	assert_int_equal(dt_cfg_string(r, "n", "def2", &s), 0);
	assert_string_equal(s, "def2");
	assert_int_equal(dt_cfg_string(r, "q", NULL, &s), 1);
	assert_string_equal(s, "~");
	assert_int_equal(dt_cfg_string(r, "map", NULL, &s), -1);
	assert_string_equal(dt_error_last(), "'map' must be a string, got a mapping");
	assert_where("m.yaml:3:6");
	assert_int_equal(dt_cfg_string(r, "seq", NULL, &s), -1);
	assert_string_equal(dt_error_last(), "'seq' must be a string, got a sequence");
	dt_doc_free(d);
}

static void test_path(void **state)
{
	struct dt_doc *d = parse_ok("rel: data/train.gz\nabs: /data/x.gz\nempty: ''\nmap: {}\n");
	struct dt_node *r = dt_doc_root(d);
	char *p = (char *)"x";

	assert_int_equal(dt_cfg_path(r, "rel", &p), 1);
	assert_string_equal(p, "cfg/data/train.gz");
	free(p);
	assert_int_equal(dt_cfg_path(r, "abs", &p), 1);
	assert_string_equal(p, "/data/x.gz");
	free(p);
	assert_int_equal(dt_cfg_path(r, "absent", &p), 0);
	assert_null(p);
	assert_int_equal(dt_cfg_path(r, "empty", &p), -1);
	assert_string_equal(dt_error_last(), "'empty' must not be empty");
	assert_null(p);
	assert_int_equal(dt_cfg_path(r, "map", &p), -1);
	assert_null(p);
	/* --set values are relative to the current directory */
	assert_int_equal(dt_doc_set(d, "rel=other/y.gz"), 0);
	assert_int_equal(dt_cfg_path(r, "rel", &p), 1);
	assert_string_equal(p, "other/y.gz");
	free(p);
	dt_doc_free(d);

	d = dt_doc_parse("m.yaml", "rel: x.gz\n", "/");
	assert_non_null(d);
	assert_int_equal(dt_cfg_path(dt_doc_root(d), "rel", &p), 1);
	assert_string_equal(p, "/x.gz");
	free(p);
	dt_doc_free(d);
}

static const char *const losses[] = { "mse", "mae", "categorical_crossentropy", NULL };

static void test_enum(void **state)
{
	struct dt_doc *d = parse_ok("a: mae\nloss: mse2\nb: hinge\nc: [mse]\nd: \"mse\"\ne: MSE\n");
	struct dt_node *r = dt_doc_root(d);
	int v = -1;

	assert_int_equal(dt_cfg_enum(r, "a", losses, 0, &v), 1);
	assert_int_equal(v, 1);
	assert_int_equal(dt_cfg_enum(r, "d", losses, 1, &v), 1);
	assert_int_equal(v, 0);
	assert_int_equal(dt_cfg_enum(r, "absent", losses, 2, &v), 0);
	assert_int_equal(v, 2);
	assert_int_equal(dt_cfg_enum(r, "loss", losses, 0, &v), -1);
	assert_string_equal(dt_error_last(),
			    "unknown loss 'mse2' (expected one of: mse, mae, categorical_crossentropy); did you mean 'mse'?");
	assert_where("m.yaml:2:7");
	assert_int_equal(dt_cfg_enum(r, "b", losses, 0, &v), -1);
	assert_string_equal(dt_error_last(), "unknown b 'hinge' (expected one of: mse, mae, categorical_crossentropy)");
	assert_int_equal(dt_cfg_enum(r, "c", losses, 0, &v), -1);
	assert_string_equal(dt_error_last(), "'c' must be one of: mse, mae, categorical_crossentropy, got a sequence");
	/* case matters, but the suggestion finds it */
	assert_int_equal(dt_cfg_enum(r, "e", losses, 0, &v), -1);
	assert_error_contains("did you mean 'mse'?");
	assert_int_equal(v, 2);
	dt_doc_free(d);
}

static void test_shape(void **state)
{
	struct dt_doc *d = parse_ok("flow: [28, 28, 1]\n"
				    "block:\n  - 10\n  - 3\n"
				    "empty: []\n"
				    "long: [1, 2, 3, 4, 5]\n"
				    "zero: [28, 0]\n"
				    "word: [28, x]\n"
				    "scalar: 28\n"
				    "n: ~\n");
	struct dt_node *r = dt_doc_root(d);
	struct dt_shape s = { 1, { 99 } };

	assert_int_equal(dt_cfg_shape(r, "flow", &s), 1);
	assert_int_equal(s.ndim, 3);
	assert_int_equal(s.dim[0], 28);
	assert_int_equal(s.dim[2], 1);
	assert_int_equal(dt_cfg_shape(r, "block", &s), 1);
	assert_int_equal(s.ndim, 2);
	assert_int_equal(s.dim[1], 3);
	assert_int_equal(dt_cfg_shape(r, "absent", &s), 0);
	assert_int_equal(s.ndim, 2);
	assert_int_equal(dt_cfg_shape(r, "n", &s), 0);
	assert_int_equal(dt_cfg_shape(r, "empty", &s), -1);
	assert_string_equal(dt_error_last(), "'empty' must have 1 to 4 dimensions, got 0");
	assert_where("m.yaml:5:8");
	assert_int_equal(dt_cfg_shape(r, "long", &s), -1);
	assert_string_equal(dt_error_last(), "'long' must have 1 to 4 dimensions, got 5");
	assert_int_equal(dt_cfg_shape(r, "zero", &s), -1);
	assert_string_equal(dt_error_last(), "'zero[1]' must be in [1, 2147483647], got 0");
	assert_where("m.yaml:7:12");
	assert_int_equal(dt_cfg_shape(r, "word", &s), -1);
	assert_string_equal(dt_error_last(), "'word[1]' must be an integer, got 'x'");
	assert_where("m.yaml:8:12");
	assert_int_equal(dt_cfg_shape(r, "scalar", &s), -1);
	assert_error_contains("'scalar' must be a sequence of 1 to 4 positive integers");
	assert_error_contains("got '28'");
	assert_int_equal(s.ndim, 2);
	dt_doc_free(d);
}

static void test_node_numbers(void **state)
{
	struct dt_doc *d = parse_ok("s: [3, 0.5, x, 7]\n");
	struct dt_node *s = dt_node_get(dt_doc_root(d), "s");
	int64_t i;
	double f;

	assert_int_equal(dt_node_int(s->items[0], 0, 10, &i), 0);
	assert_int_equal(i, 3);
	assert_int_equal(dt_node_float(s->items[1], 0, 1, &f), 0);
	assert_true(f == 0.5);
	assert_int_equal(dt_node_int(s->items[1], 0, 10, &i), -1);
	assert_string_equal(dt_error_last(), "value must be an integer, got '0.5'");
	assert_where("m.yaml:1:8");
	assert_int_equal(dt_node_float(s->items[2], 0, 1, &f), -1);
	assert_string_equal(dt_error_last(), "value must be a number, got 'x'");
	assert_int_equal(dt_node_int(s->items[3], 0, 5, &i), -1);
	assert_string_equal(dt_error_last(), "value must be in [0, 5], got 7");
	assert_int_equal(dt_node_float_range(s->items[1], 0.5, 1, DT_OPEN_MIN, &f), -1);
	assert_string_equal(dt_error_last(), "value must be in (0.5, 1], got 0.5");
	assert_int_equal(dt_node_float(s, 0, 1, &f), -1);
	assert_string_equal(dt_error_last(), "value must be a number, got a sequence");
	dt_doc_free(d);
}

/* ---- keys ---- */

static const char *const dense_keys[] = { "units", "activation", "use_bias", NULL };

static void test_check_keys(void **state)
{
	struct dt_doc *d = parse_ok("ok: {units: 3, activation: relu}\n"
				    "typo:\n  units: 3\n  untis: 4\n"
				    "foo: {units: 3, foo: 1}\n"
				    "scalar: 5\n");
	struct dt_node *r = dt_doc_root(d);

	assert_int_equal(dt_cfg_check_keys(dt_node_get(r, "ok"), "dense", dense_keys), 0);
	assert_int_equal(dt_cfg_check_keys(NULL, "dense", dense_keys), 0);
	assert_int_equal(dt_cfg_check_keys(dt_node_get(r, "typo"), "dense", dense_keys), -1);
	assert_string_equal(dt_error_last(), "unknown key 'untis' in 'dense'; did you mean 'units'?");
	assert_where("m.yaml:4:3");
	assert_int_equal(dt_cfg_check_keys(dt_node_get(r, "foo"), "dense", dense_keys), -1);
	assert_string_equal(dt_error_last(),
			    "unknown key 'foo' in 'dense' (expected one of: units, activation, use_bias)");
	assert_where("m.yaml:5:17");
	assert_int_equal(dt_cfg_check_keys(dt_node_get(r, "scalar"), "dense", dense_keys), -1);
	assert_string_equal(dt_error_last(), "expected a mapping for 'dense', got '5'");
	dt_doc_free(d);
}

static void test_require_and_expect(void **state)
{
	struct dt_doc *d = parse_ok("dense:\n  activation: relu\n  units:\nseq: [1]\n");
	struct dt_node *r = dt_doc_root(d), *dense = dt_node_get(r, "dense");

	assert_int_equal(dt_cfg_require(dense, "activation", "dense"), 0);
	assert_int_equal(dt_cfg_require(dense, "use_bias", "dense"), -1);
	assert_string_equal(dt_error_last(), "missing required key 'use_bias' in 'dense'");
	assert_where("m.yaml:2:3");
	assert_int_equal(dt_cfg_require(dense, "units", "dense"), -1);
	assert_string_equal(dt_error_last(), "'units' in 'dense' needs a value");
	assert_where("m.yaml:3:3");

	assert_int_equal(dt_node_expect(dense, DT_NODE_MAP, "dense"), 0);
	assert_int_equal(dt_node_expect(dt_node_get(r, "seq"), DT_NODE_MAP, "data"), -1);
	assert_string_equal(dt_error_last(), "expected a mapping for 'data', got a sequence");
	assert_where("m.yaml:4:6");
	assert_int_equal(dt_node_expect(NULL, DT_NODE_MAP, "data"), -1);
	assert_string_equal(dt_error_last(), "missing 'data'");
	dt_doc_free(d);
}

/* A checkpoint's config (dt_node_to_json: every scalar a string) reads as the YAML it came from. */
static void test_parse_json(void **state)
{
	struct dt_doc *d = dt_doc_parse_json("c.safetensors", "{\"m\":{\"units\":\"32\",\"bias\":\"\",\"on\":\"true\"}}", ".");
	struct dt_node *m = dt_node_get(dt_doc_root(d), "m");
	int64_t units = 0;
	int on = 0;

	assert_int_equal(dt_cfg_int(m, "units", 1, 1, 100, &units), 1);
	assert_int_equal(units, 32);
	assert_null(dt_node_get(m, "bias")); /* "" is null, as an empty plain scalar */
	assert_int_equal(dt_cfg_bool(m, "on", 0, &on), 1);
	assert_int_equal(on, 1);
	dt_doc_free(d);

	/* JSON quotes every key: class_weight's class numbers read back as numbers. */
	d = dt_doc_parse_json("c.safetensors", "{\"class_weight\":{\"0\":\"3.0\",\"7\":\"0.25\"}}", ".");
	m = dt_node_get(dt_doc_root(d), "class_weight");
	assert_int_equal(dt_node_int(m->key_nodes[1], 0, 9, &units), 0);
	assert_int_equal(units, 7);
	dt_doc_free(d);
}

/* dtrain config's recorder: the defaults getters store, not sentinels, not keys a mapping does not allow. */
static void test_record(void **state)
{
	struct dt_doc *d = parse_ok("m:\n  units: 4\n  lr: ~\n  path: x.csv\nopt: adam\n");
	struct dt_node *m = dt_node_get(dt_doc_root(d), "m"), *opt;
	const struct dt_cfg_note *notes;
	static const char *const keys[] = { "units", "lr", "path", "use_bias", "clip", NULL };
	int64_t units;
	double lr, clip;
	int bias;
	char *path;

	dt_cfg_record(1);
	assert_int_equal(dt_cfg_check_keys(m, "m", keys), 0);
	assert_int_equal(dt_cfg_int(m, "units", 1, 1, 100, &units), 1);
	assert_int_equal(dt_cfg_float(m, "lr", 0.001, 0, 1, &lr), 0);
	assert_int_equal(dt_cfg_bool(m, "use_bias", 1, &bias), 0);
	assert_int_equal(dt_cfg_float_range(m, "clip", 0, 0, 1, DT_OPEN_MIN, &clip), 0); /* 0: a sentinel */
	assert_int_equal(dt_cfg_bool(m, "other", 0, &bias), 0); /* not an allowed key */
	assert_int_equal(dt_cfg_path(m, "path", &path), 1);
	dt_cfg_record(0);
	assert_int_equal(dt_cfg_notes(&notes), 4);
	assert_string_equal(notes[0].key, "lr");
	assert_string_equal(notes[0].value, "0.001");
	assert_string_equal(notes[1].key, "use_bias");
	assert_string_equal(notes[1].value, "true");
	assert_string_equal(notes[3].key, "path");
	assert_int_equal(notes[3].replace, 1);
	assert_int_equal(dt_cfg_note_allowed(m, "other"), 0);
	assert_int_equal(dt_cfg_note_allowed(m, "use_bias"), 1);
	dt_cfg_no_default(m, "use_bias");
	assert_int_equal(dt_cfg_notes(&notes), 3);
	dt_cfg_record_release();
	free(path);

	opt = dt_node_get(dt_doc_root(d), "opt");
	dt_node_name_to_map(d, opt);
	assert_int_equal(opt->kind, DT_NODE_MAP);
	assert_string_equal(opt->keys[0], "adam");
	assert_int_equal(opt->items[0]->kind, DT_NODE_MAP);
	assert_int_equal(opt->key_nodes[0]->line, 5);
	dt_doc_free(d);
}

static void test_node_error(void **state)
{
	struct dt_doc *d = parse_ok("a:\n  b: 1\n");
	struct dt_node *b = dt_node_get(dt_node_get(dt_doc_root(d), "a"), "b");
	assert_int_equal(dt_node_error(b, "bad %s %d", "thing", 3), -1);
	assert_string_equal(dt_error_last(), "bad thing 3");
	assert_where("m.yaml:2:6");
	dt_doc_free(d);
}

static void test_did_you_mean(void **state)
{
	static const char *const names[] = { "units", "activation", "relu", "sigmoid", "x", "ab", NULL };

	assert_string_equal(dt_did_you_mean("untis", names), "units");       /* swap */
	assert_string_equal(dt_did_you_mean("unit", names), "units");        /* deletion */
	assert_string_equal(dt_did_you_mean("unitss", names), "units");      /* insertion */
	assert_string_equal(dt_did_you_mean("activatoin", names), "activation");
	assert_string_equal(dt_did_you_mean("actvaton", names), "activation"); /* 2 edits in 10 chars */
	assert_string_equal(dt_did_you_mean("RELU", names), "relu");         /* case only */
	assert_string_equal(dt_did_you_mean("sigmod", names), "sigmoid");
	assert_string_equal(dt_did_you_mean("relu", names), "relu");
	assert_null(dt_did_you_mean("foo", names));
	assert_null(dt_did_you_mean("uni", names));    /* 2 edits in 5 chars */
	assert_null(dt_did_you_mean("y", names));      /* one letter names need an exact match */
	assert_null(dt_did_you_mean("cd", names));
	assert_string_equal(dt_did_you_mean("X", names), "x");
	assert_string_equal(dt_did_you_mean("ba", names), "ab");
	assert_null(dt_did_you_mean("", names));
	static const char *const none[] = { NULL };
	assert_null(dt_did_you_mean("x", none));
}

/* Keras' and PyTorch's spellings: module paths, calls, CamelCase and their own names. */
static void test_did_you_mean_python(void **state)
{
	static const char *const layers[] = { "dense", "max_pooling2d", "average_pooling2d", "batch_normalization",
					      "lstm", NULL };
	static const char *const opts[] = { "adam", "adamax", "sgd", NULL };
	static const char *const keys[] = { "learning_rate", "rate", NULL };
	char buf[128];

	assert_string_equal(dt_did_you_mean_config("keras.layers.Dense", layers), "dense");
	assert_string_equal(dt_did_you_mean_config("tf.keras.layers.MaxPooling2D", layers), "max_pooling2d");
	assert_string_equal(dt_did_you_mean_config("nn.Linear", layers), "dense");
	assert_string_equal(dt_did_you_mean_config("Linear", layers), "dense");
	assert_string_equal(dt_did_you_mean_config("AvgPool2d", layers), "average_pooling2d");
	assert_string_equal(dt_did_you_mean_config("nn.BatchNorm2d(16)", layers), "batch_normalization");
	assert_string_equal(dt_did_you_mean_config("LSTM", layers), "lstm");
	assert_null(dt_did_you_mean_config("keras.layers.Foo", layers));
	assert_string_equal(dt_did_you_mean_config("Adam()", opts), "adam"); /* not adamax, 2 edits away */
	assert_string_equal(dt_did_you_mean_config("lr", keys), "learning_rate");
	assert_string_equal(dt_did_you_mean_config("p", keys), "rate");
	assert_null(dt_did_you_mean_config("lr", layers));                    /* only to a name of the list */
	/* the user's data names (columns, class folders) are not read as Python */
	static const char *const columns[] = { "b", "rate", "height(cm)", NULL };
	assert_null(dt_did_you_mean("a.b", columns));
	assert_null(dt_did_you_mean("p", columns));
	assert_string_equal(dt_did_you_mean("height(m)", columns), "height(cm)");

	assert_string_equal(dt_python_call("Adam(learning_rate=1e-3)", "adam", buf, sizeof(buf)),
			    "{adam: {learning_rate: 1e-3}}");
	assert_string_equal(dt_python_call("optim.SGD(lr = 0.1, momentum=0.9)", "sgd", buf, sizeof(buf)),
			    "{sgd: {learning_rate: 0.1, momentum: 0.9}}");
	assert_string_equal(dt_python_call("Adam( lr=1e-3)", "adam", buf, sizeof(buf)), "{adam: {learning_rate: 1e-3}}");
	assert_string_equal(dt_python_call("Adam(1e-3)", "adam", buf, sizeof(buf)), "adam");
	assert_string_equal(dt_python_call("Adam()", "adam", buf, sizeof(buf)), "adam");
	assert_string_equal(dt_python_call("Adam", "adam", buf, sizeof(buf)), "adam");
	assert_string_equal(dt_python_call("Adam(learning_rate=1e-3, beta_1=0.95)", "adam", buf, 20), "adam");
}

/* ---- --set ---- */

static const char *set_yaml = "model:\n"
			      "  layers:\n"
			      "    - dense: {units: 128}\n"
			      "    - dropout: {rate: 0.2}\n"
			      "lr: 0.1\n"
			      "name: m\n"
			      "empty:\n";

static void test_set_scalar(void **state)
{
	struct dt_doc *d = parse_ok(set_yaml);
	struct dt_node *r = dt_doc_root(d), *n;
	double lr;
	int64_t units;

	assert_int_equal(dt_doc_set(d, "lr=0.5"), 0);
	assert_int_equal(dt_cfg_float(r, "lr", 0, 0, 1, &lr), 1);
	assert_true(lr == 0.5);
	n = dt_node_get(r, "lr");
	assert_string_equal(n->file, "--set");
	assert_string_equal(n->dir, ".");
	assert_int_equal(n->line, 1);
	assert_int_equal(n->col, 4);
	assert_int_equal(r->n, 4); /* replaced, not added */

	assert_int_equal(dt_doc_set(d, "model.layers.0.dense.units=256"), 0);
	n = dt_node_get(dt_node_get(r, "model"), "layers")->items[0];
	assert_int_equal(dt_cfg_int(dt_node_get(n, "dense"), "units", 0, 1, 1000, &units), 1);
	assert_int_equal(units, 256);

	/* quoted stays a string */
	assert_int_equal(dt_doc_set(d, "lr=\"0.5\""), 0);
	assert_int_equal(dt_cfg_float(r, "lr", 0, 0, 1, &lr), -1);
	assert_where("--set:1:4");

	/* a bad value reports its column in the assignment */
	assert_int_equal(dt_doc_set(d, "lr=fast"), 0);
	assert_int_equal(dt_cfg_float(r, "lr", 0, 0, 1, &lr), -1);
	assert_string_equal(dt_error_last(), "'lr' must be a number, got 'fast'");
	assert_where("--set:1:4");

	/* empty value: null, so the default */
	assert_int_equal(dt_doc_set(d, "lr="), 0);
	assert_int_equal(dt_cfg_float(r, "lr", 0.25, 0, 1, &lr), 0);
	assert_true(lr == 0.25);
	dt_doc_free(d);
}

static void test_set_collections(void **state)
{
	struct dt_doc *d = parse_ok(set_yaml);
	struct dt_node *r = dt_doc_root(d), *n;
	struct dt_shape s;

	assert_int_equal(dt_doc_set(d, "shape=[28, 28, 1]"), 0);
	assert_int_equal(dt_cfg_shape(r, "shape", &s), 1);
	assert_int_equal(s.ndim, 3);
	n = dt_node_get(r, "shape");
	assert_int_equal(n->col, 7);
	assert_int_equal(n->items[1]->col, 12);
	assert_int_equal(r->key_nodes[r->n - 1]->col, 1);
	assert_string_equal(r->key_nodes[r->n - 1]->file, "--set");

	assert_int_equal(dt_doc_set(d, "model.layers.1={dense: {units: 3}}"), 0);
	n = dt_node_get(dt_node_get(r, "model"), "layers")->items[1];
	assert_int_equal(n->kind, DT_NODE_MAP);
	assert_non_null(dt_node_get(n, "dense"));
	assert_null(dt_node_get(n, "dropout"));
	assert_string_equal(dt_node_get(dt_node_get(n, "dense"), "units")->value, "3");
	assert_int_equal(dt_node_get(dt_node_get(n, "dense"), "units")->col, 32);

	/* a bad value inside the flow sequence points at its column */
	assert_int_equal(dt_doc_set(d, "shape=[28, x]"), 0);
	assert_int_equal(dt_cfg_shape(r, "shape", &s), -1);
	assert_where("--set:1:12");
	dt_doc_free(d);
}

static void test_set_new_keys(void **state)
{
	struct dt_doc *d = parse_ok(set_yaml);
	struct dt_node *r = dt_doc_root(d), *n;
	int64_t v;

	assert_int_equal(dt_doc_set(d, "train.batch.size=64"), 0);
	n = dt_node_get(dt_node_get(r, "train"), "batch");
	assert_non_null(n);
	assert_int_equal(n->kind, DT_NODE_MAP);
	assert_int_equal(dt_cfg_int(n, "size", 0, 1, 1000, &v), 1);
	assert_int_equal(v, 64);
	assert_int_equal(n->key_nodes[0]->col, 13);
	/* through a null value */
	assert_int_equal(dt_doc_set(d, "empty.x=1"), 0);
	assert_int_equal(dt_cfg_int(dt_node_get(r, "empty"), "x", 0, 0, 10, &v), 1);
	assert_int_equal(v, 1);
	/* a second key in the created mapping */
	assert_int_equal(dt_doc_set(d, "train.batch.drop=true"), 0);
	assert_int_equal(dt_node_get(dt_node_get(r, "train"), "batch")->n, 2);
	dt_doc_free(d);
}

static void test_set_errors(void **state)
{
	struct dt_doc *d = parse_ok(set_yaml);
	struct dt_node *r = dt_doc_root(d);

	assert_int_equal(dt_doc_set(d, "lr"), -1);
	assert_string_equal(dt_error_last(), "expected 'key=value', got 'lr'");
	assert_where("--set:1:1");
	assert_int_equal(dt_doc_set(d, "=3"), -1);
	assert_error_contains("missing key before '='");
	assert_where("--set:1:1");
	assert_int_equal(dt_doc_set(d, "model..x=3"), -1);
	assert_string_equal(dt_error_last(), "empty name in key 'model..x'");
	assert_where("--set:1:7");
	assert_int_equal(dt_doc_set(d, "lr.=3"), -1);
	assert_where("--set:1:4");
	assert_int_equal(dt_doc_set(d, "model.layers.5.x=3"), -1);
	assert_string_equal(dt_error_last(),
			    "'model.layers' is a sequence of 2 items; expected an index from 0 to 1, got '5'");
	assert_where("--set:1:14");
	assert_int_equal(dt_doc_set(d, "model.layers.first=3"), -1);
	assert_where("--set:1:14");
	assert_int_equal(dt_doc_set(d, "model.layers.-1=3"), -1);
	assert_int_equal(dt_doc_set(d, "name.x=3"), -1);
	assert_string_equal(dt_error_last(), "cannot set 'name.x': 'name' is a scalar");
	assert_where("--set:1:6");
	assert_int_equal(dt_doc_set(d, "lr=[1, 2"), -1);
	assert_error_contains("did not find expected ',' or ']'");
	assert_where("--set:1:9");
	assert_int_equal(dt_doc_set(d, "lr=@x"), -1);
	assert_error_contains("found character that cannot start any token");
	assert_where("--set:1:4");
	assert_int_equal(dt_doc_set(d, "lr=*x"), -1);
	assert_error_contains("aliases are not supported");
	assert_int_equal(dt_doc_set(d, "lr=1\n---\n2"), -1);
	assert_error_contains("a second document");
	/* nothing changed */
	assert_int_equal(r->n, 4);
	assert_string_equal(dt_node_get(r, "lr")->value, "0.1");
	assert_string_equal(dt_node_get(r, "lr")->file, "m.yaml");
	assert_int_equal(dt_node_get(dt_node_get(r, "model"), "layers")->n, 2);
	dt_doc_free(d);
}

/* ---- include ---- */

static void write_in(const char *dir, const char *name, const char *text)
{
	char path[512];
	FILE *f;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void remove_in(const char *dir, const char *name)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	unlink(path);
}

static void test_include(void **state)
{
	char dir[256], main_path[512], where[600];
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	struct dt_doc *d;
	struct dt_node *r, *data;
	char *p;
	int64_t v;

	snprintf(dir, sizeof(dir), "%s/dtrain-test-XXXXXX", tmp);
	assert_non_null(mkdtemp(dir));
	write_in(dir, "main.yaml",
		 "data: data.yaml\nbad_root: list.yaml\nmissing: nope.yaml\nbroken: broken.yaml\n"
		 "inline: {x: 1}\nseq: [a]\nnul: ~\n");
	write_in(dir, "data.yaml", "# the data\nbatch: 32\ntrain: train.gz\n");
	write_in(dir, "list.yaml", "- 1\n- 2\n");
	write_in(dir, "broken.yaml", "a: 1\n  b: 2\n");
	snprintf(main_path, sizeof(main_path), "%s/main.yaml", dir);

	d = dt_doc_load(main_path);
	assert_non_null(d);
	r = dt_doc_root(d);
	assert_int_equal(dt_doc_include(d, r, "data"), 1);
	data = dt_node_get(r, "data");
	assert_int_equal(data->kind, DT_NODE_MAP);
	assert_int_equal(dt_cfg_int(data, "batch", 0, 1, 100, &v), 1);
	assert_int_equal(v, 32);
	assert_int_equal(data->line, 2);
	assert_int_equal(dt_cfg_path(data, "train", &p), 1);
	snprintf(where, sizeof(where), "%s/train.gz", dir);
	assert_string_equal(p, where);
	free(p);
	/* errors in it name it */
	assert_int_equal(dt_cfg_int(data, "batch", 0, 1, 10, &v), -1);
	snprintf(where, sizeof(where), "%s/data.yaml:2:8", dir);
	assert_where(where);
	/* already a mapping, absent or null: nothing to do */
	assert_int_equal(dt_doc_include(d, r, "data"), 0);
	assert_int_equal(dt_doc_include(d, r, "inline"), 0);
	assert_int_equal(dt_doc_include(d, r, "absent"), 0);
	assert_int_equal(dt_doc_include(d, r, "nul"), 0);

	assert_int_equal(dt_doc_include(d, r, "bad_root"), -1);
	assert_string_equal(dt_error_last(), "expected a mapping at the top level, got a sequence");
	snprintf(where, sizeof(where), "%s/list.yaml:1:1", dir);
	assert_where(where);

	assert_int_equal(dt_doc_include(d, r, "missing"), -1);
	snprintf(where, sizeof(where), "cannot open '%s/nope.yaml': No such file or directory", dir);
	assert_string_equal(dt_error_last(), where);
	snprintf(where, sizeof(where), "%s:3:10", main_path);
	assert_where(where);

	assert_int_equal(dt_doc_include(d, r, "broken"), -1);
	assert_error_contains("mapping values are not allowed");
	snprintf(where, sizeof(where), "%s/broken.yaml:2:4", dir);
	assert_where(where);

	assert_int_equal(dt_doc_include(d, r, "seq"), -1);
	assert_string_equal(dt_error_last(), "expected a file name or a mapping for 'seq', got a sequence");
	dt_doc_free(d);

	/* --set can name the file too (relative to the current directory) */
	d = parse_ok("data: x\n");
	snprintf(where, sizeof(where), "data=%s/data.yaml", dir);
	assert_int_equal(dt_doc_set(d, where), 0);
	assert_int_equal(dt_doc_include(d, dt_doc_root(d), "data"), 1);
	assert_int_equal(dt_cfg_int(dt_node_get(dt_doc_root(d), "data"), "batch", 0, 1, 100, &v), 1);
	dt_doc_free(d);

	remove_in(dir, "main.yaml");
	remove_in(dir, "data.yaml");
	remove_in(dir, "list.yaml");
	remove_in(dir, "broken.yaml");
	assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_positions),
		cmocka_unit_test(test_many_keys),
		cmocka_unit_test(test_quoted),
		cmocka_unit_test(test_syntax_errors),
		cmocka_unit_test(test_tabs),
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_root_not_mapping),
		cmocka_unit_test(test_duplicate_key),
		cmocka_unit_test(test_multiple_documents),
		cmocka_unit_test(test_aliases),
		cmocka_unit_test(test_non_scalar_key),
		cmocka_unit_test(test_deep_nesting),
		cmocka_unit_test(test_load),
		cmocka_unit_test(test_load_error_names_file),
		cmocka_unit_test(test_int),
		cmocka_unit_test(test_int_range),
		cmocka_unit_test(test_float),
		cmocka_unit_test(test_float_range),
		cmocka_unit_test(test_bool),
		cmocka_unit_test(test_string),
		cmocka_unit_test(test_path),
		cmocka_unit_test(test_enum),
		cmocka_unit_test(test_shape),
		cmocka_unit_test(test_node_numbers),
		cmocka_unit_test(test_check_keys),
		cmocka_unit_test(test_require_and_expect),
		cmocka_unit_test(test_parse_json),
		cmocka_unit_test(test_record),
		cmocka_unit_test(test_node_error),
		cmocka_unit_test(test_did_you_mean),
		cmocka_unit_test(test_did_you_mean_python),
		cmocka_unit_test(test_set_scalar),
		cmocka_unit_test(test_set_collections),
		cmocka_unit_test(test_set_new_keys),
		cmocka_unit_test(test_set_errors),
		cmocka_unit_test(test_include),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
