/*
 * `format: csv`: a table of numbers, one record per row, raw or gzipped, or
 * standard input (path: "-").
 *
 *   path: iris.csv          the file ("-": standard input, read whole)
 *   header: auto            is the first row a header? auto (the default):
 *                           when one of its feature fields is not a number,
 *                           or its label field is not and the next row's is;
 *                           true or false decide without looking
 *   skip_rows: 1            lines to skip before the header or the first row
 *   label: species          the label column, by name or by index (0-based,
 *                           negative from the end as in Python); default last
 *   label: [a, b, c]        several label columns (names or indices): a
 *                           multi-label (or multi-output) record, its label
 *                           the vector of their numbers (0/1 for multi-hot)
 *   delimiter: ","          one character ("\t" for TSV)
 *   sample_weight: w        a column of per-record weights (Keras'
 *                           sample_weight), by name or index as label;
 *                           not a feature. Each must be a finite number >= 0
 *                           (else an error naming the row at open)
 *   shape: [28, 28, 1]      the sample shape; default (features,)
 *
 * The whole file is parsed at open (random access for shuffling). Labels
 * that are all numbers stay as given (whole numbers >= 0 are class indices);
 * otherwise every distinct label string is a class, numbered in sorted order
 * (sklearn's LabelEncoder) and kept in s->class_names. Validation and test
 * files are opened with the training classes (s->class_map): a label string
 * is numbered by its place among the training names, a class number must be
 * below the training class count, and any other label makes its row bad.
 *
 * Lines: a UTF-8 byte-order mark before the first is dropped, blank lines
 * are skipped (skip_rows counts them), and a row's number is its line number.
 * header: auto says what it decided in a note on stderr (dt_note).
 *
 * Bad rows (a wrong number of fields, a feature that is not a finite number,
 * an empty label, a NUL byte) stay records, so the count is the file's row
 * count: reading one is an error naming the row (its line number) and the
 * fault, or with data.on_error: skip (bad != NULL) a bad[i] = 1. A file
 * without a single good row is an error at open.
 *
 * The stream reader (dt_csv_reader, for dtrain predict) reads rows in order
 * with bounded memory: features only, or the training layout (one more
 * column, the label, which it skips). It always decides about the first row
 * as header: auto does, and every bad row is an error.
 *
 * Columns by name: a training file's header names its features, kept in
 * s->feature_names (and by fit in the checkpoint). A validation, test or
 * predict file with a header is read by those names (the class map's
 * features, the reader's o->features): each training feature from the
 * column of its name, whatever the order; a file without a header by
 * position.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/pipeline/source.h"
#include "reader.h"
#include "sources.h"

#define CSV_MAX_CLASS_INDEX (1 << 24) /* larger whole-number labels are values, not classes */

#define CSV_CHUNK (1 << 16) /* bytes read from the stream at a time */

/* Lines of a gzip or plain stream, read a chunk at a time. */
struct csv_lines {
	struct dt_gz *gz;
	const char *name;
	char *chunk;          /* CSV_CHUNK bytes read ahead */
	int64_t pos, have;    /* the unread bytes: chunk[pos .. have) */
	int eof;              /* the stream has no bytes past the chunk */
	char *buf;            /* the current line, without its end of line */
	size_t len, cap;
	int nul;              /* buf holds a NUL byte (then it is no text to split) */
	int64_t line;         /* 1-based number of the line in buf: lines read so far */
	char *ahead;          /* the line csv_peekline read, which csv_readline returns next */
	size_t ahead_len, ahead_cap;
	int ahead_nul, peeked;
	int64_t ahead_line;
};

/* Swaps the current line with the line read ahead. */
static void csv_swap_ahead(struct csv_lines *l)
{
	struct csv_lines t = *l;
	l->buf = t.ahead;
	l->len = t.ahead_len;
	l->cap = t.ahead_cap;
	l->nul = t.ahead_nul;
	l->ahead = t.buf;
	l->ahead_len = t.len;
	l->ahead_cap = t.cap;
	l->ahead_nul = t.nul;
}

/* The next line, blank or not, in l->buf: 1, 0 at the end, -1 on a read error. */
static int csv_readline(struct csv_lines *l)
{
	int got = 0;
	if (l->peeked) {
		csv_swap_ahead(l);
		l->line = l->ahead_line;
		l->peeked = 0;
		return 1;
	}
	l->len = 0;
	for (;;) {
		const char *nl;
		int64_t take;
		if (l->pos == l->have) {
			if (l->eof)
				break;
			if (!l->chunk)
				l->chunk = dt_malloc(CSV_CHUNK);
			l->pos = 0;
			/* What has come, not a full chunk: predict prints a stream's first lines while it goes on. */
			l->have = dt_gz_read_some(l->gz, l->name, l->chunk, CSV_CHUNK);
			if (l->have < 0) {
				l->have = 0;
				return -1;
			}
			l->eof = l->have == 0;
			if (l->eof)
				break;
		}
		nl = memchr(l->chunk + l->pos, '\n', (size_t)(l->have - l->pos));
		take = (nl ? nl - l->chunk : l->have) - l->pos;
		if (l->len + (size_t)take + 1 > l->cap) {
			l->cap = 2 * (l->len + (size_t)take + 1) > 4096 ? 2 * (l->len + (size_t)take + 1) : 4096;
			l->buf = dt_realloc(l->buf, l->cap);
		}
		memcpy(l->buf + l->len, l->chunk + l->pos, (size_t)take);
		l->len += (size_t)take;
		l->pos += take;
		got = 1;
		if (nl) {
			l->pos++;
			break;
		}
	}
	if (!got)
		return 0;
	l->buf[l->len] = 0;
	while (l->len > 0 && l->buf[l->len - 1] == '\r')
		l->buf[--l->len] = 0;
	l->line++;
	if (l->line == 1 && l->len >= 3 && !memcmp(l->buf, "\xEF\xBB\xBF", 3)) { /* UTF-8 byte-order mark */
		l->len -= 3;
		memmove(l->buf, l->buf + 3, l->len + 1);
	}
	l->nul = memchr(l->buf, 0, l->len) != NULL;
	return 1;
}

/* The next non-blank line in l->buf: 1, 0 at the end, -1 on a read error. */
static int csv_getline(struct csv_lines *l)
{
	int rc;
	while ((rc = csv_readline(l)) > 0)
		for (size_t i = 0; i < l->len; i++)
			if (!isspace((unsigned char)l->buf[i]))
				return 1;
	return rc;
}

/*
 * Reads the next non-blank line into l->ahead, leaving the current line in
 * l->buf as it is (fields split from it stay valid); the next csv_getline
 * returns it. Once between two reads. 1, 0 at the end, -1 on a read error.
 */
static int csv_peekline(struct csv_lines *l)
{
	int64_t line = l->line;
	int rc;
	csv_swap_ahead(l);
	rc = csv_getline(l);
	csv_swap_ahead(l);
	l->ahead_line = l->line;
	l->line = line;
	l->peeked = rc > 0;
	return rc;
}

static void csv_lines_close(struct csv_lines *l)
{
	dt_gz_close(l->gz);
	free(l->chunk);
	free(l->buf);
	free(l->ahead);
	memset(l, 0, sizeof(*l));
}

static char *csv_trim(char *s)
{
	char *e = s + strlen(s);
	while (isspace((unsigned char)*s))
		s++;
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = 0;
	return s;
}

#define CSV_OPEN_QUOTE (-1) /* csv_split: a quoted field has no closing quote */
#define CSV_NUL_ROW (-2)    /* csv_split_line: the row holds a NUL byte */

/*
 * Splits line in place at delim into *fields (grown as needed); a field in
 * double quotes may hold the delimiter and "" for a quote. Returns the number
 * of fields, or CSV_OPEN_QUOTE.
 */
static int csv_split(char *line, char delim, char ***fields, int *cap)
{
	int n = 0;
	char *p = line;
	for (;;) {
		char *start;
		if (n == *cap) {
			*cap = *cap ? 2 * *cap : 16;
			*fields = dt_realloc(*fields, (size_t)*cap * sizeof(**fields));
		}
		while ((*p == ' ' || *p == '\t') && *p != delim)
			p++;
		start = p;
		if (*p == '"') {
			char *w = start = ++p;
			for (;;) {
				if (!*p)
					return CSV_OPEN_QUOTE;
				if (*p == '"' && p[1] == '"') {
					*w++ = '"';
					p += 2;
				} else if (*p == '"') {
					p++;
					break;
				} else {
					*w++ = *p++;
				}
			}
			while (*p && *p != delim)
				p++;
			*w = 0;
		} else {
			while (*p && *p != delim)
				p++;
		}
		(*fields)[n++] = start;
		if (!*p)
			break;
		*p++ = 0;
	}
	for (int i = 0; i < n; i++)
		(*fields)[i] = csv_trim((*fields)[i]);
	return n;
}

/* The current line of l split as csv_split does, or CSV_NUL_ROW. */
static int csv_split_line(struct csv_lines *l, char delim, char ***fields, int *cap)
{
	return l->nul ? CSV_NUL_ROW : csv_split(l->buf, delim, fields, cap);
}

/* Does the whole field read as a number, finite or not ("nan", "inf", "1e999")? */
static int csv_is_number(const char *s)
{
	char *end;
	if (!*s)
		return 0;
	(void)strtod(s, &end);
	return end != s && !*end;
}

/* What is wrong with a non-empty field that csv_number refuses: "is not a number", ... */
static const char *csv_number_fault(const char *s)
{
	double v;
	if (!csv_is_number(s))
		return "is not a number";
	errno = 0;
	v = strtod(s, NULL);
	/* 1e39 is finite but no float; 1e400 overflows even a double (ERANGE); nan and inf are what they say */
	return isfinite(v) || errno == ERANGE ? "is beyond float32's range (+-3.4e38)" : "is not a finite number";
}

/* A finite number filling the whole field. 0 or -1. */
static int csv_number(const char *s, float *out)
{
	char *end;
	double v;
	if (!*s)
		return -1;
	v = strtod(s, &end);
	if (end == s || *end || !isfinite(v) || !isfinite((float)v))
		return -1;
	*out = (float)v;
	return 0;
}

/* Where the label is and what the columns are called. */
struct csv_layout {
	int ncols;     /* fields per row */
	int label_col; /* -1: none (predict input of features only), or several (label_cols) */
	int nlabels;   /* label: [a, b, ...]: the label columns label_cols[0..nlabels) (malloc'd); else 0 */
	int *label_cols;
	int weight_col; /* the sample_weight column, -1: none */
	char **names;  /* ncols header names (NULL-terminated, pointers into name_text), or NULL */
	char *name_text;
	/*
	 * The column of each of the nfeatures features, in the order they are
	 * extracted: every column but the labels and the sample_weight, in file
	 * order, or the training data's order when taken by name (malloc'd).
	 */
	int *feature_cols;
	int nfeatures;
	char delim;
};

static void csv_column(const struct csv_layout *L, int col, char *buf, size_t size)
{
	if (L->names)
		snprintf(buf, size, "column '%s'", L->names[col]);
	else
		snprintf(buf, size, "column %d", col + 1);
}

/* Is column i a label or the sample_weight, not a feature? */
static int csv_not_feature(const struct csv_layout *L, int i)
{
	if (i == L->label_col || i == L->weight_col)
		return 1;
	for (int j = 0; j < L->nlabels; j++)
		if (i == L->label_cols[j])
			return 1;
	return 0;
}

/* The features are every column but the labels and the sample_weight, in file order: L->feature_cols. */
static void csv_feature_columns(struct csv_layout *L)
{
	free(L->feature_cols);
	L->feature_cols = dt_malloc((size_t)L->ncols * sizeof(int));
	L->nfeatures = 0;
	for (int i = 0; i < L->ncols; i++)
		if (!csv_not_feature(L, i))
			L->feature_cols[L->nfeatures++] = i;
}

/*
 * The features of one split row into x (L->nfeatures, from L->feature_cols).
 * NULL if the row is good, else what is wrong with it ("row 17: ..." in msg).
 */
static const char *csv_features(const struct csv_layout *L, char **f, int k, int64_t line, float *x, char *msg,
				size_t size)
{
	char col[300];
	if (k == CSV_OPEN_QUOTE) {
		snprintf(msg, size, "row %lld: a quoted field has no closing quote", (long long)line);
		return msg;
	}
	if (k == CSV_NUL_ROW) {
		snprintf(msg, size, "row %lld: the row holds a NUL byte", (long long)line);
		return msg;
	}
	if (k != L->ncols) {
		snprintf(msg, size, "row %lld: expected %d fields, found %d", (long long)line, L->ncols, k);
		return msg;
	}
	for (int j = 0; j < L->nfeatures; j++) {
		int i = L->feature_cols[j];
		if (csv_number(f[i], &x[j]) < 0) {
			csv_column(L, i, col, sizeof(col));
			if (!f[i][0])
				snprintf(msg, size, "row %lld, %s: the field is empty", (long long)line, col);
			else
				snprintf(msg, size, "row %lld, %s: '%.40s%s' %s", (long long)line, col, f[i],
					 strlen(f[i]) > 40 ? "..." : "", csv_number_fault(f[i]));
			return msg;
		}
	}
	return NULL;
}

/* The delimiter argument: one character. 0 or -1. */
static int csv_delimiter(const struct dt_node *args, char *out)
{
	const char *d;
	int rc = dt_cfg_string(args, "delimiter", ",", &d);
	if (rc < 0)
		return -1;
	if (strlen(d) != 1 || d[0] == '"' || d[0] == '\n' || d[0] == '\r')
		return dt_node_error(dt_node_get(args, "delimiter"),
				     "delimiter must be one character other than a quote or a newline, not '%s'", d);
	*out = d[0];
	return 0;
}

/* Is the label argument a column index? Sets *index when it is. */
static int csv_label_index(const struct dt_node *label, long *index)
{
	char *end;
	if (!label || label->kind != DT_NODE_SCALAR || label->quoted)
		return 0;
	errno = 0;
	*index = strtol(label->value, &end, 10);
	return end != label->value && !*end && !errno;
}

/*
 * The column a label or sample_weight argument n names among k columns:
 * by index, or by name among names (NULL: no header). -1 when none.
 */
static int csv_column_of(const struct dt_node *n, char *const *names, int k)
{
	long index;
	if (csv_label_index(n, &index))
		return index >= -k && index < k ? (int)(index < 0 ? k + index : index) : -1;
	for (int i = 0; names && i < k; i++)
		if (!strcmp(names[i], n->value))
			return i;
	return -1;
}

enum csv_header { CSV_HEADER_NO, CSV_HEADER_YES, CSV_HEADER_AUTO };

/* The header argument: auto (the default), or a boolean (true, yes, on; false, no, off). 0 or -1. */
static int csv_header_arg(const struct dt_node *args, int *out)
{
	static const char *const words[] = { "false", "no", "off", "true", "yes", "on", "auto", NULL };
	const struct dt_node *n = dt_node_get(args, "header");

	*out = CSV_HEADER_AUTO;
	if (!n)
		return 0;
	if (n->kind != DT_NODE_SCALAR)
		return dt_node_error(n, "header must be auto, true or false");
	for (int i = 0; words[i]; i++) {
		if (!strcasecmp(n->value, words[i])) {
			*out = i < 3 ? CSV_HEADER_NO : i < 6 ? CSV_HEADER_YES : CSV_HEADER_AUTO;
			return 0;
		}
	}
	return dt_node_error(n, "header must be auto, true or false, not '%s'", n->value);
}

/*
 * header: auto's rule: the first row (k fields f, the current line of l) is
 * a header when a field other than column `label` (-1: none known) is not a
 * number. Empty fields decide nothing; "nan", "inf" and "1e999" are numbers.
 * A row of numbered columns, as pandas writes for a DataFrame with integer
 * column names (0,1,...,63,target), has nothing but its label field to tell:
 * so it is a header too when its label field is not a number and the next
 * row's is. That row is read ahead (csv_peekline), only then. A headerless
 * file with named classes (UCI's iris.data) has a word in every row's label
 * field and stays data. 1 (a header), 0, or -1 on a read error.
 */
static int csv_is_header(struct csv_lines *l, char delim, char **f, int k, int label)
{
	char *next, **g = NULL;
	int cap = 0, rc;

	for (int i = 0; i < k; i++)
		if (i != label && f[i][0] && !csv_is_number(f[i]))
			return 1;
	if (label < 0 || !f[label][0] || csv_is_number(f[label]))
		return 0;
	if ((rc = csv_peekline(l)) <= 0 || l->ahead_nul)
		return rc < 0 ? -1 : 0;
	next = dt_strdup(l->ahead); /* a copy to split: csv_split writes into its line */
	rc = csv_split(next, delim, &g, &cap) == k && csv_is_number(g[label]);
	free(next);
	free(g);
	return rc;
}

/* Tells what header: auto decided about the first row (line `line` of `name`), naming a few columns. */
static void csv_note_first_row(const char *name, int64_t line, char **f, int k, int header)
{
	char where[48] = "", cols[160] = "";
	int n = 0;
	if (line > 1)
		snprintf(where, sizeof(where), " (line %lld)", (long long)line);
	if (!header) {
		dt_note("'%s': first row%s is data, not a header", name, where);
		return;
	}
	for (int i = 0; i < k && i < 3; i++)
		n += snprintf(cols + n, sizeof(cols) - (size_t)n, "%s'%.24s'", i ? ", " : "", f[i]);
	dt_note("'%s': first row%s is a header (%s%s)", name, where, cols, k > 3 ? ", ..." : "");
}

/* ---- the source ---- */

struct csv_bad {
	int64_t record;
	char *msg;
};

struct csv {
	float *x;        /* (count, features) */
	float *y;        /* (count, labels) */
	int labels;      /* values per label: 1, or the label columns of label: [a, b, ...] */
	uint8_t *bad;    /* (count) */
	struct csv_bad *bads;
	int64_t nbad;
	int64_t features;
};

/* Distinct label strings, first-seen order, with a hash index. */
struct csv_labels {
	char **s;
	int n, cap;
	int *slot; /* hash table of indices into s, -1 empty */
	int nslot;
};

static uint64_t csv_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

/* The index of label s in t; a new one when insert is set (else -1 for an unknown label). */
static int csv_lookup(struct csv_labels *t, const char *s, int insert)
{
	uint64_t h;
	if (2 * (t->n + 1) > t->nslot) {
		int nslot = t->nslot ? 2 * t->nslot : 64;
		free(t->slot);
		t->slot = dt_malloc((size_t)nslot * sizeof(int));
		memset(t->slot, -1, (size_t)nslot * sizeof(int));
		t->nslot = nslot;
		for (int i = 0; i < t->n; i++) {
			uint64_t g = csv_hash(t->s[i]) & (uint64_t)(nslot - 1);
			while (t->slot[g] >= 0)
				g = (g + 1) & (uint64_t)(nslot - 1);
			t->slot[g] = i;
		}
	}
	h = csv_hash(s) & (uint64_t)(t->nslot - 1);
	while (t->slot[h] >= 0) {
		if (!strcmp(t->s[t->slot[h]], s))
			return t->slot[h];
		h = (h + 1) & (uint64_t)(t->nslot - 1);
	}
	if (!insert)
		return -1;
	if (t->n == t->cap) {
		t->cap = t->cap ? 2 * t->cap : 16;
		t->s = dt_realloc(t->s, (size_t)t->cap * sizeof(*t->s));
	}
	t->s[t->n] = dt_strdup(s);
	t->slot[h] = t->n;
	return t->n++;
}

static int csv_intern(struct csv_labels *t, const char *s) { return csv_lookup(t, s, 1); }

/*
 * The class of label field f by the training classes: its place among
 * map->names (`known` indexes them), or with class numbers the number itself,
 * below map->n. -1 with what is wrong in msg ("row 17: ...") otherwise.
 */
static int csv_mapped_label(const struct dt_class_map *map, struct csv_labels *known, const char *f, int64_t line,
			    char *msg, size_t size)
{
	char classes[256];
	float v;
	int k;

	if (map->names && (k = csv_lookup(known, f, 0)) >= 0)
		return k;
	if (!map->names && csv_number(f, &v) == 0 && v >= 0 && v < map->n && v == floorf(v))
		return (int)v;
	snprintf(msg, size, "row %lld: label '%.40s%s' is not a class of the training data (%s)", (long long)line, f,
		 strlen(f) > 40 ? "..." : "", dt_class_map_format(map, classes, sizeof(classes)));
	return -1;
}

static void csv_labels_free(struct csv_labels *t)
{
	for (int i = 0; i < t->n; i++)
		free(t->s[i]);
	free(t->s);
	free(t->slot);
}

/*
 * Takes the training data's features (the nf names `want`, in its order)
 * from the columns of those names in the header L->names, wherever they
 * are, so that a file with its columns in another order reads as the
 * training file: pandas and Keras users select columns by name. A training
 * feature the header lacks, a feature column the training data did not
 * have, or a feature name twice: an error naming the file (`line`: the
 * header's row), -1. A note when the order differs.
 */
static int csv_features_by_name(struct csv_layout *L, char *const *want, int nf, const char *file, int64_t line)
{
	struct csv_labels have = { 0 }; /* the names of the feature columns: name i is feature column i's */
	int *cols = dt_malloc((size_t)(nf + 1) * sizeof(int));
	uint8_t *used = dt_calloc((size_t)L->nfeatures + 1, 1);
	int rc = -1, moved = 0;

	for (int i = 0; i < L->nfeatures; i++) {
		const char *name = L->names[L->feature_cols[i]];
		if (csv_intern(&have, name) != i) {
			dt_error("'%s' names the column '%s' twice in its header (row %lld): its columns are taken by "
				 "the training data's names", file, name, (long long)line);
			goto out;
		}
	}
	for (int j = 0; j < nf; j++) {
		int k = csv_lookup(&have, want[j], 0);
		if (k < 0) {
			const char *hint = dt_did_you_mean(want[j], (const char *const *)L->names);
			dt_error("'%s' has no column '%s' in its header (row %lld), a feature of the training data%s%s%s",
				 file, want[j], (long long)line, hint ? "; did you mean '" : "", hint ? hint : "",
				 hint ? "'?" : "");
			goto out;
		}
		if (used[k]) { /* a checkpoint edited by hand */
			dt_error("the training data's feature names hold '%s' twice", want[j]);
			goto out;
		}
		used[k] = 1;
		cols[j] = L->feature_cols[k];
	}
	for (int i = 0; i < L->nfeatures; i++) {
		if (!used[i]) {
			dt_error("'%s' has a column '%s' (row %lld, its header) that is not a feature of the training data",
				 file, L->names[L->feature_cols[i]], (long long)line);
			goto out;
		}
	}
	/* Every feature column taken once: nf == nfeatures. */
	for (int j = 0; j < nf; j++)
		moved |= cols[j] != L->feature_cols[j];
	if (moved)
		dt_note("'%s': columns taken by name, in another order than the training data's", file);
	free(L->feature_cols);
	L->feature_cols = cols;
	cols = NULL;
	rc = 0;
out:
	csv_labels_free(&have);
	free(cols);
	free(used);
	return rc;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/*
 * Labels to numbers: all numeric → as given; else each distinct string a
 * class in sorted order, names kept in s->class_names. ids (count) index t.
 */
static void csv_label_values(struct dt_source *s, struct csv *d, struct csv_labels *t, const int *ids)
{
	float *value = dt_malloc((size_t)(t->n ? t->n : 1) * sizeof(float));
	int numeric = 1, classes = 1;
	double max = -1;

	for (int i = 0; i < t->n; i++) {
		if (csv_number(t->s[i], &value[i]) < 0) {
			numeric = 0;
			break;
		}
		if (value[i] < 0 || value[i] != floorf(value[i]) || value[i] >= CSV_MAX_CLASS_INDEX)
			classes = 0;
		else if (value[i] > max)
			max = value[i];
	}
	if (!numeric) {
		char **sorted = dt_malloc((size_t)t->n * sizeof(*sorted));
		memcpy(sorted, t->s, (size_t)t->n * sizeof(*sorted));
		qsort(sorted, t->n, sizeof(*sorted), cmp_str);
		for (int i = 0; i < t->n; i++) {
			char **at = bsearch(&t->s[i], sorted, t->n, sizeof(*sorted), cmp_str);
			value[i] = (float)(at - sorted);
		}
		s->class_names = dt_malloc((size_t)t->n * sizeof(char *));
		for (int i = 0; i < t->n; i++)
			s->class_names[i] = dt_strdup(sorted[i]);
		s->num_classes = t->n;
		free(sorted);
	} else {
		s->num_classes = classes ? (max + 1 < 2 ? 2 : (int)max + 1) : 0;
	}
	for (int64_t r = 0; r < s->count; r++)
		d->y[r] = ids[r] >= 0 ? value[ids[r]] : 0;
	free(value);
}

/* The training classes as s's own: their count, and a copy of their names. */
static void csv_take_map(struct dt_source *s, const struct dt_class_map *map)
{
	s->num_classes = map->n;
	if (!map->names)
		return;
	s->class_names = dt_malloc((size_t)map->n * sizeof(char *));
	for (int i = 0; i < map->n; i++)
		s->class_names[i] = dt_strdup(map->names[i]);
}

/*
 * The header's names of the features, in the order read, as s->feature_names,
 * for the checkpoint; none when a name repeats: such columns cannot be found
 * by name.
 */
static void csv_keep_feature_names(struct dt_source *s, const struct csv_layout *L)
{
	struct csv_labels seen = { 0 };
	int distinct = 1;
	for (int j = 0; j < L->nfeatures && distinct; j++)
		distinct = csv_intern(&seen, L->names[L->feature_cols[j]]) == j;
	csv_labels_free(&seen);
	if (!distinct)
		return;
	s->feature_names = dt_malloc((size_t)L->nfeatures * sizeof(char *));
	for (int j = 0; j < L->nfeatures; j++)
		s->feature_names[j] = dt_strdup(L->names[L->feature_cols[j]]);
}

static void csv_close(struct dt_source *s)
{
	struct csv *d = s->priv;
	if (!d)
		return;
	for (int64_t i = 0; i < d->nbad; i++)
		free(d->bads[i].msg);
	free(d->bads);
	free(d->x);
	free(d->y);
	free(d->bad);
	free(d);
	s->priv = NULL;
}

/*
 * Keeps the k fields of the header row as the column names, in one block of
 * text: a header of millions of short names costs its bytes, not an
 * allocation per name.
 */
static void csv_keep_names(struct csv_layout *L, char **fields, int k)
{
	size_t bytes = 0;
	char *w;
	for (int i = 0; i < k; i++)
		bytes += strlen(fields[i]) + 1;
	L->names = dt_malloc((size_t)(k + 1) * sizeof(char *));
	L->name_text = w = dt_malloc(bytes);
	for (int i = 0; i < k; i++) {
		size_t n = strlen(fields[i]) + 1;
		memcpy(w, fields[i], n);
		L->names[i] = w;
		w += n;
	}
	L->names[k] = NULL;
}

/*
 * Finds the sample_weight column w (a column name or index, NULL: none) of
 * the k columns of file, after the label's: L->weight_col. 0 or -1.
 */
static int csv_weight_column(const struct dt_node *w, struct csv_layout *L, int k, const char *file)
{
	long index;
	L->weight_col = -1;
	if (!w)
		return 0;
	L->weight_col = csv_column_of(w, L->names, k);
	if (L->weight_col < 0 && csv_label_index(w, &index))
		return dt_node_error(w, "sample_weight column %ld is out of range: '%s' has %d columns", index, file,
				     k);
	if (L->weight_col < 0 && !L->names)
		return dt_node_error(w, "sample_weight '%s' names a column but '%s' has no header; give the "
				     "column's index", w->value, file);
	if (L->weight_col < 0)
		return dt_node_error(w, "'%s' has no column '%s' in its header (the sample_weight)", file, w->value);
	for (int j = -1; j < L->nlabels; j++)
		if (L->weight_col == (j < 0 ? L->label_col : L->label_cols[j]))
			return dt_node_error(w, "sample_weight names the label column of '%s'", file);
	if (k < 2 + (L->nlabels ? L->nlabels : 1))
		return dt_node_error(w, "'%s' has %d columns: no feature beside the label and the sample_weight", file,
				     k);
	return 0;
}

/*
 * The label columns of label: [a, b, ...] (seq) among the k columns of the
 * first row (names: its fields when it is a header, else NULL) into
 * L->label_cols. 0 or -1.
 */
static int csv_label_columns(const struct dt_node *seq, struct csv_layout *L, char *const *names, int k,
			     const char *file, int64_t line)
{
	if (k < seq->n + 1)
		return dt_error("'%s', row %lld: found %d fields, expected features and the %d label columns", file,
				(long long)line, k, seq->n);
	L->nlabels = seq->n;
	L->label_cols = dt_malloc((size_t)seq->n * sizeof(int));
	L->label_col = -1;
	for (int j = 0; j < seq->n; j++) {
		const struct dt_node *c = seq->items[j];
		long index;
		int col = csv_column_of(c, names, k);
		if (col < 0 && csv_label_index(c, &index))
			return dt_node_error(c, "label column %ld is out of range: '%s' has %d columns", index, file, k);
		if (col < 0 && !names)
			return dt_node_error(c, "label '%s' names a column but '%s' has no header; give the column's "
					     "index", c->value, file);
		if (col < 0)
			return dt_node_error(c, "'%s' has no column '%s' in its header (row %lld)", file, c->value,
					     (long long)line);
		for (int i = 0; i < j; i++)
			if (L->label_cols[i] == col)
				return dt_node_error(c, "label names column %d of '%s' twice", col, file);
		L->label_cols[j] = col;
	}
	return 0;
}

/*
 * Skips `skip` lines, reads the header (or the first row: then *pending)
 * and finds the label column. `header` is a csv_header. 0 or -1.
 */
static int csv_layout_read(struct csv_lines *l, const struct dt_node *args, int header, int64_t skip,
			   struct csv_layout *L, char ***fields, int *cap, int *pending)
{
	const struct dt_node *label = dt_node_get(args, "label");
	long index = 0;
	int k, rc = 0, names, by_index = csv_label_index(label, &index), by_name = label && !by_index;

	for (int64_t i = 0; i < skip && (rc = csv_readline(l)) > 0; i++)
		;
	if (rc < 0 || (rc = csv_getline(l)) < 0)
		return -1;
	if (rc == 0)
		return skip ? dt_error("'%s' has no rows after the %lld lines of skip_rows", l->name, (long long)skip)
			    : dt_error("'%s' is empty", l->name);
	k = csv_split_line(l, L->delim, fields, cap);
	if (k == CSV_NUL_ROW)
		return dt_error("'%s', row %lld: the first row holds a NUL byte (a binary or UTF-16 file?)", l->name,
				(long long)l->line);
	if (k == CSV_OPEN_QUOTE)
		return dt_error("'%s', row %lld: a quoted field has no closing quote", l->name, (long long)l->line);
	if (k < 2)
		return dt_error("'%s', row %lld: found %d field, expected features and a label (a preamble? "
				"skip_rows: N skips N lines; another separator? delimiter: names it)",
				l->name, (long long)l->line, k);
	L->ncols = k;
	L->label_col = k - 1;
	if (label && label->kind == DT_NODE_SEQ) {
		/* Several label columns: their fields are numbers, so any other word makes the first row a header. */
		names = header == CSV_HEADER_AUTO ? csv_is_header(l, L->delim, *fields, k, -1)
						  : header == CSV_HEADER_YES;
		*pending = !names;
		if (names)
			csv_keep_names(L, *fields, k);
		if (csv_label_columns(label, L, L->names, k, l->name, l->line) < 0 ||
		    csv_weight_column(dt_node_get(args, "sample_weight"), L, k, l->name) < 0)
			return -1;
		if (header == CSV_HEADER_AUTO)
			csv_note_first_row(l->name, l->line, *fields, k, names);
		return 0;
	}
	if (by_index) {
		if (index < -k || index >= k)
			return dt_node_error(label, "label column %ld is out of range: '%s' has %d columns", index,
					     l->name, k);
		L->label_col = (int)(index < 0 ? k + index : index);
	}
	/* Does the first row name the columns? (A label by name is looked for in every column.) */
	if (header == CSV_HEADER_AUTO)
		names = csv_is_header(l, L->delim, *fields, k, by_name ? -1 : L->label_col);
	else
		names = header == CSV_HEADER_YES;
	if (names < 0)
		return -1;
	*pending = !names;
	if (names)
		csv_keep_names(L, *fields, k);
	if (by_name && !names && header == CSV_HEADER_NO)
		return dt_node_error(label, "label '%s' names a column but '%s' has no header (header: false); "
				     "give the column's index", label->value, l->name);
	if (by_name && !names)
		return dt_node_error(label, "'%s' has no column '%s': it has no header, its first row (row %lld) is "
				     "data; give the column's index", l->name, label->value, (long long)l->line);
	if (by_name) {
		const char *hint;
		for (L->label_col = 0; L->label_col < k; L->label_col++)
			if (!strcmp(L->names[L->label_col], label->value))
				break;
		if (L->label_col == k) {
			hint = dt_did_you_mean(label->value, (const char *const *)L->names);
			return hint ? dt_node_error(label, "'%s' has no column '%s' in its header (row %lld); did you mean '%s'?",
						    l->name, label->value, (long long)l->line, hint)
				    : dt_node_error(label, "'%s' has no column '%s' in its header (row %lld)", l->name,
						    label->value, (long long)l->line);
		}
	}
	if (csv_weight_column(dt_node_get(args, "sample_weight"), L, k, l->name) < 0)
		return -1;
	if (header == CSV_HEADER_AUTO)
		csv_note_first_row(l->name, l->line, *fields, k, names);
	return 0;
}

static void csv_free_names(struct csv_layout *L)
{
	free(L->names);
	free(L->name_text);
	free(L->label_cols);
	free(L->feature_cols);
	L->names = NULL;
	L->name_text = NULL;
	L->label_cols = NULL;
	L->feature_cols = NULL;
	L->nlabels = 0;
}

/*
 * Rows of the first allocation: 1024, or fewer for wide rows, so that it
 * takes about 4 MB at most; a row of n fields has n - 1 delimiters, so a
 * wider one brings its bytes before its floats are allocated.
 */
static int64_t csv_first_rows(int ncols)
{
	int64_t rows = (1 << 20) / ncols;
	return rows < 1 ? 1 : rows > 1024 ? 1024 : rows;
}

static const char *const csv_keys[] = { "format", "path", "header", "skip_rows", "label", "delimiter", "shape",
					"sample_weight", NULL };

/*
 * The arguments that need no file: the path as given and resolved (*path
 * NULL for "-"; the caller frees it, also after an error), header, skip_rows,
 * delimiter, shape, and the kind of label (a column name or index, found in
 * the file later). 0 or -1.
 */
static int csv_args(const struct dt_node *args, const char **given, char **path, int *header, int64_t *skip,
		    char *delim, struct dt_shape *shape)
{
	const struct dt_node *label = dt_node_get(args, "label"), *weight = dt_node_get(args, "sample_weight");

	*path = NULL;
	if (dt_cfg_check_keys(args, "csv", csv_keys) < 0 || dt_cfg_require(args, "path", "csv") < 0 ||
	    dt_cfg_string(args, "path", NULL, given) < 0 || csv_header_arg(args, header) < 0 ||
	    dt_cfg_int(args, "skip_rows", 0, 0, INT64_MAX, skip) < 0 || csv_delimiter(args, delim) < 0 ||
	    dt_cfg_shape(args, "shape", shape) < 0)
		return -1;
	if (label && label->kind == DT_NODE_SEQ) {
		if (label->n == 0)
			return dt_node_error(label, "label lists no column");
		for (int j = 0; j < label->n; j++)
			if (label->items[j]->kind != DT_NODE_SCALAR)
				return dt_node_error(label->items[j], "a label column must be a column name or index");
	} else if (label && label->kind != DT_NODE_SCALAR) {
		return dt_node_error(label, "label must be a column name or index, or a list of them");
	}
	if (weight && weight->kind != DT_NODE_SCALAR)
		return dt_node_error(weight, "sample_weight must be a column name or index");
	return strcmp(*given, "-") && dt_cfg_path(args, "path", path) < 0 ? -1 : 0;
}

static int csv_check(const struct dt_node *args)
{
	struct dt_shape shape = { 0 };
	const char *given;
	char *path, delim;
	int header, rc;
	int64_t skip;

	rc = csv_args(args, &given, &path, &header, &skip, &delim, &shape);
	free(path);
	return rc;
}

/*
 * The label columns of a row of label: [a, b, ...] into y (nlabels): each
 * a finite number. NULL, or what is wrong ("row 17, column 'b': ...").
 */
static const char *csv_label_row(const struct csv_layout *L, char **f, int64_t line, float *y, char *msg,
				 size_t size)
{
	char col[300];
	for (int j = 0; j < L->nlabels; j++) {
		const char *v = f[L->label_cols[j]];
		if (csv_number(v, &y[j]) == 0)
			continue;
		csv_column(L, L->label_cols[j], col, sizeof(col));
		if (!v[0])
			snprintf(msg, size, "row %lld, %s: the label is empty", (long long)line, col);
		else
			snprintf(msg, size, "row %lld, %s: the label '%.40s%s' is not a number (the columns of label: "
				 "[...] hold numbers, 0 or 1 for multi-hot labels)", (long long)line, col, v,
				 strlen(v) > 40 ? "..." : "");
		return msg;
	}
	return NULL;
}

/* Keeps the reason record `rows` (k fields of ncols) is bad, and zeroes its features. */
static void csv_keep_bad(struct csv *d, int64_t rows, int k, int ncols, const char *msg, int *first_bad_width)
{
	memset(d->x + rows * d->features, 0, (size_t)d->features * sizeof(float));
	if (d->nbad % 64 == 0)
		d->bads = dt_realloc(d->bads, (size_t)(d->nbad + 64) * sizeof(*d->bads));
	if (d->nbad == 0)
		*first_bad_width = k >= 0 && k != ncols;
	d->bads[d->nbad].record = rows;
	d->bads[d->nbad++].msg = dt_strdup(msg);
}

static int csv_open(struct dt_source *s, const struct dt_node *args)
{
	struct csv_lines l = { 0 };
	struct csv_layout L = { 0 };
	struct csv_labels labels = { 0 }, known = { 0 };
	const struct dt_class_map *map = s->class_map && s->class_map->n > 0 ? s->class_map : NULL;
	const struct dt_class_map *train = s->class_map; /* its features: the training data's columns */
	struct dt_shape shape = { 0 };
	const char *given;
	char *path = NULL, **fields = NULL, msg[512];
	int header, cap = 0, pending = 0, rc = -1, *ids = NULL;
	int64_t rows = 0, rowcap = 0, good = 0, skip;
	int first_bad_width = 0; /* the first bad row has another count of fields than the header */
	struct csv *d = dt_calloc(1, sizeof(*d));

	s->priv = d;
	if (csv_args(args, &given, &path, &header, &skip, &L.delim, &shape) < 0)
		goto out;
	snprintf(s->name, sizeof(s->name), "%s", path ? path : dt_data_name(given));
	l.name = s->name;
	for (int i = 0; map && map->names && i < map->n; i++)
		csv_intern(&known, map->names[i]);
	if (!(l.gz = dt_gz_open(path ? path : given)))
		goto out;
	if (csv_layout_read(&l, args, header, skip, &L, &fields, &cap, &pending) < 0)
		goto out;
	d->labels = L.nlabels ? L.nlabels : 1;
	csv_feature_columns(&L);
	if (train && train->features && L.names &&
	    csv_features_by_name(&L, train->features, train->nfeatures, s->name, l.line) < 0)
		goto out;
	d->features = L.nfeatures;
	if (shape.ndim && dt_shape_count(&shape) != d->features) {
		char buf[64];
		dt_node_error(dt_node_get(args, "shape"), "shape %s holds %lld values but the rows of '%s' have %lld features",
			      dt_shape_format(&shape, 0, buf, sizeof(buf)), (long long)dt_shape_count(&shape), s->name,
			      (long long)d->features);
		goto out;
	}

	for (;;) {
		const char *bad;
		int k;
		if (!pending) {
			int got = csv_getline(&l);
			if (got < 0)
				goto out;
			if (got == 0)
				break;
			k = csv_split_line(&l, L.delim, &fields, &cap);
		} else {
			k = L.ncols; /* the first row, already split */
		}
		pending = 0;
		if (rows == rowcap) {
			/* Room for the rows read: the first allocation is no larger than the first row's text. */
			rowcap = rowcap ? 2 * rowcap : csv_first_rows(L.ncols);
			d->x = dt_realloc(d->x, (size_t)(rowcap * d->features) * sizeof(float));
			d->y = dt_realloc(d->y, (size_t)(rowcap * d->labels) * sizeof(float));
			d->bad = dt_realloc(d->bad, (size_t)rowcap);
			if (L.weight_col >= 0)
				s->sample_weight = dt_realloc(s->sample_weight, (size_t)rowcap * sizeof(float));
			ids = dt_realloc(ids, (size_t)rowcap * sizeof(int));
		}
		bad = csv_features(&L, fields, k, l.line, d->x + rows * d->features, msg, sizeof(msg));
		if (L.weight_col >= 0) {
			/* A weight is the run's configuration: a wrong one is an error, not a row to skip. */
			float *w = &s->sample_weight[rows];
			*w = 0;
			if (k == L.ncols && (csv_number(fields[L.weight_col], w) < 0 || *w < 0)) {
				dt_error("'%s', row %lld: the sample_weight '%.40s' is not a finite number >= 0", s->name,
					 (long long)l.line, fields[L.weight_col]);
				goto out;
			}
		}
		ids[rows] = -1;
		if (L.nlabels) {
			/* Several label columns: each a number (0 or 1 for multi-hot labels), no class map. */
			if (!bad)
				bad = csv_label_row(&L, fields, l.line, d->y + rows * d->labels, msg, sizeof(msg));
			if (bad)
				memset(d->y + rows * d->labels, 0, (size_t)d->labels * sizeof(float));
			d->bad[rows] = bad != NULL;
			if (bad)
				csv_keep_bad(d, rows, k, L.ncols, msg, &first_bad_width);
			else
				good++;
			rows++;
			continue;
		}
		if (!bad && !fields[L.label_col][0])
			bad = (snprintf(msg, sizeof(msg), "row %lld: the label is empty", (long long)l.line), msg);
		d->y[rows] = 0;
		if (!bad && map &&
		    (ids[rows] = csv_mapped_label(map, &known, fields[L.label_col], l.line, msg, sizeof(msg))) < 0)
			bad = msg;
		d->bad[rows] = bad != NULL;
		if (bad) {
			csv_keep_bad(d, rows, k, L.ncols, msg, &first_bad_width);
		} else if (map) {
			d->y[rows] = (float)ids[rows];
			good++;
		} else {
			ids[rows] = csv_intern(&labels, fields[L.label_col]);
			good++;
		}
		rows++;
	}
	if (rows == 0) {
		dt_error("'%s' has a header but no rows", s->name);
		goto out;
	}
	if (good == 0) {
		/* A line of counts before the header (sklearn's wine_data.csv) reads as a header of the wrong width. */
		char hint[128] = "";
		if (L.names && first_bad_width)
			snprintf(hint, sizeof(hint), " (is line %lld a preamble, not the header? skip_rows: N skips N lines)",
				 (long long)skip + 1);
		dt_error("'%s' has no readable row; the first: %s%s", s->name, d->bads[0].msg, hint);
		goto out;
	}
	s->count = rows;
	s->sample = shape.ndim ? shape : dt_shape_make(1, (int[]){ (int)d->features });
	s->label = dt_shape_make(1, (int[]){ d->labels });
	if (L.names)
		csv_keep_feature_names(s, &L);
	if (L.nlabels)
		s->num_classes = 0; /* vectors, not class indices */
	else if (map)
		csv_take_map(s, map);
	else
		csv_label_values(s, d, &labels, ids);
	rc = 0;
out:
	csv_lines_close(&l);
	free(fields);
	free(ids);
	free(path);
	csv_free_names(&L);
	csv_labels_free(&labels);
	csv_labels_free(&known);
	return rc;
}

static const char *csv_bad_msg(const struct csv *d, int64_t record)
{
	int64_t lo = 0, hi = d->nbad - 1;
	while (lo <= hi) {
		int64_t mid = (lo + hi) / 2;
		if (d->bads[mid].record == record)
			return d->bads[mid].msg;
		if (d->bads[mid].record < record)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return "unreadable row";
}

static int csv_record_what(struct dt_source *s, int64_t i, char *buf, size_t size)
{
	const struct csv *d = s->priv;
	if (!d || i < 0 || i >= s->count || !d->bad[i])
		return 0;
	snprintf(buf, size, "%s", csv_bad_msg(d, i));
	return 1;
}

static int csv_known_bad(struct dt_source *s, int64_t i)
{
	const struct csv *d = s->priv;
	return d->bad[i];
}

static int csv_read(struct dt_source *s, const int64_t *idx, int n, float *x, float *y, uint8_t *bad)
{
	const struct csv *d = s->priv;
	for (int i = 0; i < n; i++) {
		int64_t r = idx[i];
		if (r < 0 || r >= s->count)
			return dt_error("record %lld is out of range in '%s' (%lld records)", (long long)r, s->name,
					(long long)s->count);
		if (d->bad[r] && !bad)
			return dt_error("'%s', %s", s->name, csv_bad_msg(d, r));
		memcpy(x + i * d->features, d->x + r * d->features, (size_t)d->features * sizeof(float));
		memcpy(y + i * d->labels, d->y + r * d->labels, (size_t)d->labels * sizeof(float));
		if (bad)
			bad[i] = d->bad[r];
	}
	return 0;
}

static void csv_labels(struct dt_source *s, int32_t *out)
{
	const struct csv *d = s->priv;
	for (int64_t r = 0; r < s->count; r++)
		out[r] = d->bad[r] ? -1 : (int32_t)d->y[r];
}

const struct dt_source_type dt_csv_source = {
	.name = "csv",
	.keys = csv_keys,
	.open = csv_open,
	.read = csv_read,
	.close = csv_close,
	.labels = csv_labels,
	.check = csv_check,
	.record_what = csv_record_what,
	.known_bad = csv_known_bad,
};

/* ---- the stream reader ---- */

struct csv_stream {
	struct csv_lines l;
	struct csv_layout L;
	char **fields;
	int cap;
	int pending; /* the first row is data, already split in fields */
	int64_t features;
};

static void csv_stream_close(struct dt_reader *r)
{
	struct csv_stream *c = r->priv;
	if (!c)
		return;
	csv_lines_close(&c->l);
	free(c->fields);
	csv_free_names(&c->L);
	free(c);
	r->priv = NULL;
}

/*
 * The layout of a row of the training file's columns (labels, and the
 * sample_weight when k has room for it) in c->L: the label columns of
 * label: [a, b, ...], and the sample_weight column, each by index or by
 * name in the first row (then a header: *header set). 0 or -1.
 */
static int csv_stream_columns(struct dt_reader *r, struct csv_stream *c, const struct dt_node *label,
			      const struct dt_node *weight, int k, int *header)
{
	char *const *names = c->fields;
	if (label && label->kind == DT_NODE_SEQ) {
		c->L.nlabels = label->n;
		c->L.label_cols = dt_malloc((size_t)label->n * sizeof(int));
		c->L.label_col = -1;
		for (int j = 0; j < label->n; j++) {
			const struct dt_node *n = label->items[j];
			long index;
			if ((c->L.label_cols[j] = csv_column_of(n, names, k)) < 0)
				return dt_error("'%s' has %d fields per row, the features and the training data's %d label "
						"columns%s, but no %s label column '%s' (row %lld)", r->name, k, label->n,
						weight ? " and its sample_weight" : "",
						csv_label_index(n, &index) ? "such" : "header naming the", n->value,
						(long long)c->l.line);
			*header |= !csv_label_index(n, &index);
		}
	}
	if (weight) {
		long index;
		if ((c->L.weight_col = csv_column_of(weight, names, k)) < 0)
			return dt_error("'%s' has %d fields per row, the features, the label and the sample_weight "
					"column, but no %s sample_weight column '%s' (row %lld)", r->name, k,
					csv_label_index(weight, &index) ? "such" : "header naming the", weight->value,
					(long long)c->l.line);
		*header |= !csv_label_index(weight, &index);
	}
	return 0;
}

/*
 * A column of a header row (c->fields, k of them) that is no training
 * feature (o->features) nor the training label (by name) or sample_weight:
 * an error naming it, -1. 0 when there is none, or when the label's name is
 * unknown.
 */
static int csv_stream_foreign(const struct dt_reader *r, const struct csv_stream *c, const struct dt_reader_opts *o,
			      const struct dt_node *label, const struct dt_node *weight, int k)
{
	long index;
	if (!label || label->kind != DT_NODE_SCALAR || csv_label_index(label, &index))
		return 0;
	for (int i = 0; i < k; i++) {
		const char *name = c->fields[i];
		int known = !strcmp(name, label->value) || (weight && !strcmp(name, weight->value));
		for (int j = 0; j < o->nfeatures && !known; j++)
			known = !strcmp(name, o->features[j]);
		if (!known)
			return dt_error("'%s' has a column '%s' (row %lld, its header) that is not a feature of the training "
					"data", r->name, name, (long long)c->l.line);
	}
	return 0;
}

/*
 * The first row decides the layout: features only (as many fields as the
 * model's input), or more fields, the label columns of the training layout
 * (data.train's label, else the last; label: [a, b, ...] names several),
 * then maybe its sample_weight column too, which are skipped. It is a
 * header when it holds a label column's name, or by header: auto's rule
 * (csv_is_header), whatever data.train's header and
 * skip_rows say: those describe the training file, not this input. A note
 * says which. A header gives each of the training data's features
 * (o->features) from the column of its name.
 */
static int csv_stream_open(struct dt_reader *r, const char *path, const struct dt_reader_opts *o)
{
	struct csv_stream *c = dt_calloc(1, sizeof(*c));
	const struct dt_node *train = o->train, *label = NULL, *weight = NULL;
	const char *format = NULL;
	long index = 0;
	int k, rc, by_index = 0, header = 0, nlab = 1, list = 0;

	r->priv = c;
	r->sample = o->sample;
	c->features = dt_shape_count(&o->sample);
	c->L.delim = ',';
	c->L.label_col = -1;
	c->L.weight_col = -1;
	if (train && dt_cfg_string(train, "format", NULL, &format) >= 0 && format && !strcmp(format, "csv")) {
		if (csv_delimiter(train, &c->L.delim) < 0)
			return -1;
		label = dt_node_get(train, "label");
		weight = dt_node_get(train, "sample_weight");
		by_index = csv_label_index(label, &index);
		list = label && label->kind == DT_NODE_SEQ;
		if (list)
			nlab = label->n;
	}
	c->l.name = r->name;
	if (!(c->l.gz = dt_gz_open(path)))
		return -1;
	if ((rc = csv_getline(&c->l)) <= 0)
		return rc; /* empty input: no samples */
	k = csv_split_line(&c->l, c->L.delim, &c->fields, &c->cap);
	if (k == CSV_NUL_ROW)
		return dt_error("'%s', row %lld: the row holds a NUL byte", r->name, (long long)c->l.line);
	if (k == CSV_OPEN_QUOTE)
		return dt_error("'%s', row %lld: a quoted field has no closing quote", r->name, (long long)c->l.line);
	c->L.ncols = k;
	if ((list || weight) && (k == c->features + nlab || (weight && k == c->features + nlab + 1))) {
		long windex;
		int by_name = weight && !csv_label_index(weight, &windex);
		if (k == c->features + nlab && nlab == 1 && by_name && csv_column_of(weight, c->fields, k) >= 0 &&
		    !(label && !by_index && label->kind == DT_NODE_SCALAR && csv_column_of(label, c->fields, k) >= 0)) {
			label = NULL; /* a header names the sample_weight and no label: the features and the weights */
			c->L.label_col = -1;
			nlab = 0;
		} else if (k == c->features + nlab) {
			weight = NULL; /* the labels without the weights */
		}
		if (nlab == 1) { /* one label column: the training label's, else the last but the weight's */
			c->L.label_col = -1;
			if (label && label->kind == DT_NODE_SCALAR && (c->L.label_col = csv_column_of(label, c->fields, k)) >= 0)
				header |= !by_index;
		}
		if (csv_stream_columns(r, c, label, weight, k, &header) < 0)
			return -1;
		if (nlab == 1 && !list && c->L.label_col < 0)
			for (int i = k - 1; i >= 0 && c->L.label_col < 0; i--)
				if (i != c->L.weight_col)
					c->L.label_col = i;
	} else if (k == c->features + 1 && nlab == 1) {
		c->L.label_col = k - 1;
		if (by_index && index >= -k && index < k)
			c->L.label_col = (int)(index < 0 ? k + index : index);
		else if (label && !by_index && label->kind == DT_NODE_SCALAR) {
			for (c->L.label_col = 0; c->L.label_col < k; c->L.label_col++)
				if (!strcmp(c->fields[c->L.label_col], label->value))
					break;
			if (c->L.label_col == k)
				return dt_error("'%s' has %d fields per row, the features and a label column, but no "
						"header naming the label column '%s' (row %lld)",
						r->name, k, label->value, (long long)c->l.line);
			header = 1;
		}
	} else if (k != c->features) {
		char more[96] = "";
		/* A header with a column too many: name it, not only the count. */
		if (o->features && csv_is_header(&c->l, c->L.delim, c->fields, k, -1) && csv_stream_foreign(r, c, o, label, weight, k) < 0)
			return -1;
		if (weight)
			snprintf(more, sizeof(more), ", or %lld with the sample_weight too", (long long)c->features + nlab + 1);
		return dt_error("'%s', row %lld: expected %lld fields (the model's input), or %lld with %s%s, found %d",
				r->name, (long long)c->l.line, (long long)c->features, (long long)c->features + nlab,
				nlab > 1 ? "the label columns" : "a label column", more, k);
	}
	if (!header && (header = csv_is_header(&c->l, c->L.delim, c->fields, k, c->L.label_col)) < 0)
		return -1;
	csv_note_first_row(r->name, c->l.line, c->fields, k, header);
	csv_feature_columns(&c->L);
	if (header)
		csv_keep_names(&c->L, c->fields, k);
	if (header && o->features &&
	    csv_features_by_name(&c->L, o->features, o->nfeatures, r->name, c->l.line) < 0)
		return -1;
	c->pending = !header;
	return 0;
}

static int csv_stream_next(struct dt_reader *r, int n, float *x)
{
	struct csv_stream *c = r->priv;
	char msg[512];
	int i;

	if (!c->l.gz || !c->L.ncols)
		return 0;
	for (i = 0; i < n; i++) {
		int k;
		if (c->pending) {
			k = c->L.ncols;
			c->pending = 0;
		} else {
			int rc = csv_getline(&c->l);
			if (rc < 0)
				return -1;
			if (rc == 0)
				break;
			k = csv_split_line(&c->l, c->L.delim, &c->fields, &c->cap);
		}
		if (csv_features(&c->L, c->fields, k, c->l.line, x + i * c->features, msg, sizeof(msg)))
			return dt_error("'%s', %s", r->name, msg);
	}
	r->records += i;
	return i;
}

const struct dt_reader_type dt_csv_reader = {
	.name = "csv",
	.needs_shape = 1,
	.open = csv_stream_open,
	.next = csv_stream_next,
	.close = csv_stream_close,
};
