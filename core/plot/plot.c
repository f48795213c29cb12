#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "core/error.h"
#include "core/fit/fit_callbacks.h"
#include "core/plot/font.h"
#include "core/plot/plot.h"

/* matplotlib's first colours: blue, orange, green, red, purple, brown, pink, grey, olive, cyan. */
const uint32_t dt_plot_colors[DT_PLOT_MAX_RUNS] = { 0x1f77b4, 0xff7f0e, 0x2ca02c, 0xd62728, 0x9467bd,
						    0x8c564b, 0xe377c2, 0x7f7f7f, 0xbcbd22, 0x17becf };

enum {
	PANEL_W = 560, PANEL_H = 360,   /* a panel's size when the picture's is not given */
	MARGIN_L = 104, MARGIN_R = 24,  /* around a panel's plot area */
	MARGIN_T = 40, MARGIN_B = 58,
	TEXT = 2,                       /* the font's scale: 10 x 14 pixel characters */
	LINE_W = 2, DASH = 8, DOT = 5,  /* curves: width, dash length, epoch marks */
	LEGEND_ROW = 26, SWATCH = 32,
};
#define INK 0x222222u
#define FRAME 0x555555u
#define GRID 0xe6e6e6u
#define PAPER 0xffffffu

/* ---- histories ---- */

void dt_history_init(struct dt_history *h, const char *name)
{
	char copy[sizeof(h->name)];
	snprintf(copy, sizeof(copy), "%.255s", name); /* name may be h->name */
	memset(h, 0, sizeof(*h));
	memcpy(h->name, copy, sizeof(copy));
}

void dt_history_release(struct dt_history *h)
{
	free(h->epochs);
	free(h->values);
	memset(h, 0, sizeof(*h));
}

static int column(const struct dt_history *h, const char *name)
{
	for (int i = 0; i < h->ncols; i++)
		if (!strcmp(h->cols[i], name))
			return i;
	return -1;
}

/* A new column, NaN in the rows before; -1 when the history has DT_HISTORY_MAX_COLS. */
static int add_column(struct dt_history *h, const char *name)
{
	int k = h->ncols;
	double *v;
	if (k == DT_HISTORY_MAX_COLS)
		return -1;
	v = dt_malloc(((size_t)h->cap ? (size_t)h->cap : 1) * (k + 1) * sizeof(double));
	for (int r = 0; r < h->nrows; r++) {
		memcpy(v + (size_t)r * (k + 1), h->values + (size_t)r * k, (size_t)k * sizeof(double));
		v[(size_t)r * (k + 1) + k] = NAN;
	}
	free(h->values);
	h->values = v;
	snprintf(h->cols[k], sizeof(h->cols[k]), "%s", name);
	h->ncols++;
	return k;
}

/* A row of NaN at the end; its values. */
static double *add_row(struct dt_history *h, int epoch)
{
	if (h->nrows == h->cap) {
		h->cap = h->cap ? h->cap * 2 : 16;
		h->epochs = dt_realloc(h->epochs, (size_t)h->cap * sizeof(int));
		h->values = dt_realloc(h->values, (size_t)h->cap * (h->ncols ? h->ncols : 1) * sizeof(double));
	}
	h->epochs[h->nrows] = epoch;
	double *row = h->values + (size_t)h->nrows * h->ncols;
	for (int i = 0; i < h->ncols; i++)
		row[i] = NAN;
	h->nrows++;
	return row;
}

void dt_history_add(struct dt_history *h, int epoch, const char *const *names, const double *values, int n)
{
	for (int i = 0; i < n; i++)
		if (column(h, names[i]) < 0)
			add_column(h, names[i]);
	double *row = add_row(h, epoch);
	for (int i = 0; i < n; i++) {
		int k = column(h, names[i]);
		if (k >= 0)
			row[k] = values[i];
	}
}

/* The fields of one CSV line (modified in place), split at commas; their count, or -1 past max. */
static int split(char *line, char **fields, int max)
{
	int n = 0;
	line[strcspn(line, "\r\n")] = '\0';
	for (char *p = line;; p++) {
		if (n == max)
			return -1;
		fields[n++] = p;
		p += strcspn(p, ",");
		if (!*p)
			return n;
		*p = '\0';
	}
}

static int read_csv(struct dt_history *h, FILE *f, const char *path)
{
	char line[8192], *fields[DT_HISTORY_MAX_COLS + 1];
	int n, row = 1;
	if (!fgets(line, sizeof(line), f))
		return dt_error("%s: the file is empty (expected the header 'epoch,...' of csv_logger)", path);
	n = split(line, fields, DT_HISTORY_MAX_COLS + 1);
	if (n < 2 || strcmp(fields[0], "epoch"))
		return dt_error("%s:1: the header must be 'epoch' and at least one metric, comma-separated "
				"(csv_logger's columns)", path);
	for (int i = 1; i < n; i++)
		add_column(h, fields[i]);
	while (fgets(line, sizeof(line), f)) {
		char *end, *cells[DT_HISTORY_MAX_COLS + 2];
		long epoch;
		int got;
		row++;
		if (line[strspn(line, " \r\n")] == '\0')
			continue;
		if ((got = split(line, cells, DT_HISTORY_MAX_COLS + 2)) != n)
			return got < 0 ? dt_error("%s:%d: more fields than the header's %d", path, row, n)
				       : dt_error("%s:%d: %d fields, the header has %d", path, row, got, n);
		epoch = strtol(cells[0], &end, 10);
		if (*end || end == cells[0] || epoch < 0 || epoch > 1000000000)
			return dt_error("%s:%d: the epoch '%s' is not a number from 0", path, row, cells[0]);
		double *v = add_row(h, (int)epoch);
		for (int i = 1; i < n; i++) {
			if (!cells[i][0])
				continue; /* an empty cell: not reported that epoch */
			v[i - 1] = strtod(cells[i], &end);
			if (*end)
				return dt_error("%s:%d: '%s' (column '%s') is not a number", path, row, cells[i], h->cols[i - 1]);
		}
	}
	if (ferror(f))
		return dt_error("cannot read '%s': %s", path, strerror(errno));
	if (h->nrows == 0)
		return dt_error("%s: no epochs after the header", path);
	return 0;
}

/* "runs/a/" -> "a"; "runs/a/history.csv" -> "a"; "history.csv" -> "history". */
static void run_name(const char *path, int is_dir, char *buf, size_t size)
{
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s", path);
	size_t n = strlen(tmp);
	while (n > 1 && tmp[n - 1] == '/')
		tmp[--n] = '\0';
	char *slash = strrchr(tmp, '/');
	if (!is_dir) {
		if (slash) {
			*slash = '\0';
			slash = strrchr(tmp, '/');
		} else {
			char *dot = strrchr(tmp, '.');
			if (dot && dot != tmp)
				*dot = '\0';
		}
	}
	snprintf(buf, size, "%s", slash ? slash + 1 : tmp);
}

int dt_history_read(struct dt_history *h, const char *path)
{
	char file[4200], name[256];
	struct stat st;
	FILE *f;
	int is_dir = stat(path, &st) == 0 && S_ISDIR(st.st_mode), rc;
	if (is_dir)
		snprintf(file, sizeof(file), "%s/history.csv", path);
	else
		snprintf(file, sizeof(file), "%s", path);
	run_name(path, is_dir, name, sizeof(name));
	dt_history_init(h, name);
	f = fopen(file, "r");
	if (!f) {
		if (is_dir && errno == ENOENT)
			return dt_error("no history.csv in '%s' (fit writes it with fit.callbacks: [csv_logger])", path);
		return dt_error("cannot open '%s': %s", file, strerror(errno));
	}
	rc = read_csv(h, f, file);
	fclose(f);
	return rc;
}

/* ---- axes ---- */

/* 1, 2 or 5 times a power of ten, the nearest at or above x. */
static double nice_step(double x)
{
	double p = pow(10, floor(log10(x))), m = x / p;
	return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}

/* A tick label with as many decimals as the step needs. */
static void tick_label(double v, double step, char *buf, size_t size)
{
	int decimals = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
	if (fabs(v) < step * 1e-6)
		v = 0;
	if (decimals > 6 || fabs(v) >= 1e7)
		snprintf(buf, size, "%.3g", v);
	else
		snprintf(buf, size, "%.*f", decimals, v);
}

static double px_x(const struct dt_plot_panel *p, double v)
{
	return p->x + (v - p->x0) / (p->x1 - p->x0) * (p->w - 1);
}

static double px_y(const struct dt_plot_panel *p, double v)
{
	return p->y + (p->y1 - v) / (p->y1 - p->y0) * (p->h - 1);
}

/* The panels' metrics: loss first, then each other base name (val_ stripped) in the order the runs give them. */
static int find_panels(const struct dt_history *runs, int nruns, struct dt_plot_panel *panels)
{
	int n = 0;
	for (int pass = 0; pass < 2; pass++)
		for (int r = 0; r < nruns; r++)
			for (int i = 0; i < runs[r].ncols; i++) {
				const char *base = runs[r].cols[i];
				int k;
				if (!strncmp(base, "val_", 4))
					base += 4;
				if ((pass == 0) != !strcmp(base, "loss"))
					continue;
				for (k = 0; k < n; k++)
					if (!strcmp(panels[k].metric, base))
						break;
				if (k < n)
					continue;
				if (n == DT_PLOT_MAX_PANELS)
					return dt_error("more than %d metrics to draw", DT_PLOT_MAX_PANELS);
				memset(&panels[n], 0, sizeof(panels[n]));
				snprintf(panels[n++].metric, sizeof(panels[0].metric), "%s", base);
			}
	return n;
}

/* The data ranges of panel p: epochs (from 1) on x, every finite value of its columns on y. */
static void data_range(struct dt_plot_panel *p, const struct dt_history *runs, int nruns)
{
	double lo = INFINITY, hi = -INFINITY, first = INFINITY, last = -INFINITY;
	char val[40];
	snprintf(val, sizeof(val), "val_%.31s", p->metric);
	for (int r = 0; r < nruns; r++)
		for (int c = 0; c < 2; c++) {
			int k = column(&runs[r], c ? val : p->metric);
			if (k < 0)
				continue;
			for (int i = 0; i < runs[r].nrows; i++) {
				double v = runs[r].values[(size_t)i * runs[r].ncols + k];
				if (!isfinite(v))
					continue;
				lo = fmin(lo, v);
				hi = fmax(hi, v);
				first = fmin(first, runs[r].epochs[i] + 1);
				last = fmax(last, runs[r].epochs[i] + 1);
			}
		}
	if (!isfinite(lo)) { /* nothing finite: an empty panel */
		lo = 0, hi = 1, first = 1, last = 2;
	}
	if (hi - lo < 1e-12 * fmax(1, fabs(hi))) {
		double d = fabs(hi) > 0 ? fabs(hi) * 0.1 : 1;
		lo -= d, hi += d;
	}
	if (last == first)
		first -= 1, last += 1;
	p->y0 = lo - (hi - lo) * 0.06;
	p->y1 = hi + (hi - lo) * 0.06;
	p->x0 = first - (last - first) * 0.03;
	p->x1 = last + (last - first) * 0.03;
}

static void draw_axes(struct dt_canvas *c, const struct dt_plot_panel *p)
{
	char label[32];
	double step = nice_step((p->y1 - p->y0) / 5);
	for (double v = ceil(p->y0 / step) * step; v <= p->y1; v += step) {
		int y = (int)lround(px_y(p, v));
		dt_canvas_rect(c, p->x, y, p->w, 1, GRID);
		dt_canvas_rect(c, p->x - 6, y, 6, 1, FRAME);
		tick_label(v, step, label, sizeof(label));
		dt_canvas_text(c, p->x - 10 - dt_canvas_text_width(label, TEXT), y - DT_FONT_H * TEXT / 2, label, TEXT,
			       INK, 0);
	}
	double xstep = fmax(1, round(nice_step((p->x1 - p->x0) / 8)));
	for (double v = ceil(p->x0 / xstep) * xstep; v <= p->x1; v += xstep) {
		int x = (int)lround(px_x(p, v));
		dt_canvas_rect(c, x, p->y, 1, p->h, GRID);
		dt_canvas_rect(c, x, p->y + p->h, 1, 6, FRAME);
		tick_label(v, 1, label, sizeof(label));
		dt_canvas_text(c, x - dt_canvas_text_width(label, TEXT) / 2, p->y + p->h + 10, label, TEXT, INK, 0);
	}
	/* The frame, just outside the plot area. */
	dt_canvas_rect(c, p->x - 1, p->y - 1, p->w + 2, 1, FRAME);
	dt_canvas_rect(c, p->x - 1, p->y + p->h, p->w + 2, 1, FRAME);
	dt_canvas_rect(c, p->x - 1, p->y - 1, 1, p->h + 2, FRAME);
	dt_canvas_rect(c, p->x + p->w, p->y - 1, 1, p->h + 2, FRAME);
	/* Title, x label, y label. */
	dt_canvas_text(c, p->x + (p->w - dt_canvas_text_width(p->metric, TEXT)) / 2, p->y - 12 - DT_FONT_H * TEXT,
		       p->metric, TEXT, INK, 0);
	dt_canvas_text(c, p->x + (p->w - dt_canvas_text_width("epoch", TEXT)) / 2, p->y + p->h + 34, "epoch", TEXT,
		       INK, 0);
	dt_canvas_text(c, p->x - MARGIN_L + 4, p->y + (p->h + dt_canvas_text_width(p->metric, TEXT)) / 2, p->metric,
		       TEXT, INK, 1);
}

/* One column of one run: a polyline through its finite values (broken at the others), a dot at each. */
static void draw_curve(struct dt_canvas *c, const struct dt_plot_panel *p, const struct dt_history *h, int k,
		       uint32_t color, int dash)
{
	double phase = 0, px = 0, py = 0;
	int have = 0;
	for (int i = 0; i < h->nrows; i++) {
		double v = h->values[(size_t)i * h->ncols + k];
		if (!isfinite(v)) {
			have = 0;
			continue;
		}
		double x = px_x(p, h->epochs[i] + 1), y = px_y(p, v);
		if (have)
			dt_canvas_line(c, px, py, x, y, color, LINE_W, dash, &phase);
		dt_canvas_rect(c, (int)lround(x) - DOT / 2, (int)lround(y) - DOT / 2, DOT, DOT, color);
		px = x, py = y, have = 1;
	}
}

/* ---- the legend: one entry per curve kind of each run ---- */

struct legend_entry {
	char text[300];
	uint32_t color;
	int dash;
};

static int legend_entries(const struct dt_history *runs, int nruns, struct legend_entry *e)
{
	int n = 0;
	for (int r = 0; r < nruns; r++) {
		int has_val = 0;
		for (int i = 0; i < runs[r].ncols; i++)
			has_val |= !strncmp(runs[r].cols[i], "val_", 4);
		for (int v = 0; v <= has_val; v++) {
			if (nruns == 1)
				snprintf(e[n].text, sizeof(e[n].text), "%s", v ? "validation" : "training");
			else
				snprintf(e[n].text, sizeof(e[n].text), "%s %s", runs[r].name, v ? "validation" : "training");
			e[n].color = dt_plot_colors[r];
			e[n].dash = v ? DASH : 0;
			n++;
		}
	}
	return n;
}

/* Lays the entries out in rows across width w from (x, y); draws them when c is not NULL. The height used. */
static int legend(struct dt_canvas *c, const struct legend_entry *e, int n, int x, int y, int w)
{
	int cx = x, cy = y;
	for (int i = 0; i < n; i++) {
		int ew = SWATCH + 8 + dt_canvas_text_width(e[i].text, TEXT) + 28;
		if (cx > x && cx + ew > x + w)
			cx = x, cy += LEGEND_ROW;
		if (c) {
			double phase = 0;
			int mid = cy + LEGEND_ROW / 2;
			dt_canvas_line(c, cx, mid, cx + SWATCH, mid, e[i].color, LINE_W, e[i].dash / 2, &phase);
			dt_canvas_rect(c, cx + SWATCH / 2 - DOT / 2, mid - DOT / 2, DOT, DOT, e[i].color);
			dt_canvas_text(c, cx + SWATCH + 8, mid - DT_FONT_H * TEXT / 2, e[i].text, TEXT, INK, 0);
		}
		cx += ew;
	}
	return cy - y + LEGEND_ROW;
}

int dt_plot_render(struct dt_canvas *c, const struct dt_history *runs, int nruns, int w, int h,
		   struct dt_plot_panel *panels, int *npanels)
{
	struct legend_entry entries[2 * DT_PLOT_MAX_RUNS];
	int n, cols, rows, nentries, legend_h, pw, ph;
	if (nruns < 1)
		return dt_error("no history to draw");
	if (nruns > DT_PLOT_MAX_RUNS)
		return dt_error("%d runs to draw; at most %d fit in one picture", nruns, DT_PLOT_MAX_RUNS);
	if ((n = find_panels(runs, nruns, panels)) < 0)
		return -1;
	if (n == 0)
		return dt_error("'%s' has no metric columns to draw", runs[0].name);
	cols = n == 1 ? 1 : 2;
	rows = (n + cols - 1) / cols;
	nentries = legend_entries(runs, nruns, entries);
	if (w <= 0 || h <= 0) {
		w = cols * PANEL_W;
		legend_h = legend(NULL, entries, nentries, 20, 0, w - 40) + 16;
		h = rows * PANEL_H + legend_h;
	} else {
		legend_h = legend(NULL, entries, nentries, 20, 0, w - 40) + 16;
	}
	pw = w / cols;
	ph = (h - legend_h) / rows;
	if (pw < MARGIN_L + MARGIN_R + 60 || ph < MARGIN_T + MARGIN_B + 40)
		return dt_error("a %dx%d picture is too small for %d panels in %d rows of %d (each needs at least %dx%d)",
				w, h, n, rows, cols, MARGIN_L + MARGIN_R + 60, MARGIN_T + MARGIN_B + 40);
	dt_canvas_init(c, w, h, PAPER);
	for (int i = 0; i < n; i++) {
		struct dt_plot_panel *p = &panels[i];
		char val[40];
		p->x = (i % cols) * pw + MARGIN_L;
		p->y = (i / cols) * ph + MARGIN_T;
		p->w = pw - MARGIN_L - MARGIN_R;
		p->h = ph - MARGIN_T - MARGIN_B;
		data_range(p, runs, nruns);
		draw_axes(c, p);
		snprintf(val, sizeof(val), "val_%.31s", p->metric);
		/* Validation under training, each run over the one before. */
		for (int r = 0; r < nruns; r++) {
			int kv = column(&runs[r], val), kt = column(&runs[r], p->metric);
			if (kv >= 0)
				draw_curve(c, p, &runs[r], kv, dt_plot_colors[r], DASH);
			if (kt >= 0)
				draw_curve(c, p, &runs[r], kt, dt_plot_colors[r], 0);
		}
	}
	legend(c, entries, nentries, 20, rows * ph + 8, w - 40);
	*npanels = n;
	return 0;
}

int dt_plot_write(const char *path, const struct dt_history *runs, int nruns, int w, int h,
		  struct dt_plot_panel *panels, int *npanels)
{
	struct dt_canvas c;
	char tmp[4300];
	int rc;
	if (dt_plot_render(&c, runs, nruns, w, h, panels, npanels) < 0)
		return -1;
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	rc = dt_canvas_write_png(&c, tmp);
	dt_canvas_release(&c);
	if (rc == 0 && rename(tmp, path) < 0)
		rc = dt_error("cannot rename '%s' to '%s': %s", tmp, path, strerror(errno));
	if (rc < 0)
		remove(tmp);
	return rc;
}

/* ---- fit.plot ---- */

static int plot_epoch_end(struct dt_callback *cb, struct dt_trainer *t, const struct dt_logs *l)
{
	struct dt_plot_callback *p = cb->priv;
	struct dt_plot_panel panels[DT_PLOT_MAX_PANELS];
	const char *names[10];
	double values[10];
	int n = 0, np;
	(void)t;
#define ADD(cond, name, v) do { if (cond) { names[n] = (name); values[n++] = (v); } } while (0)
	ADD(1, "loss", l->loss);
	ADD(l->has_accuracy, "accuracy", l->accuracy);
	ADD(l->has_errors, "mae", l->mae);
	ADD(l->has_errors, "rmse", l->rmse);
	ADD(l->has_learning_rate, "learning_rate", (float)l->learning_rate);
	ADD(l->has_val, "val_loss", l->val_loss);
	ADD(l->has_val && l->has_accuracy, "val_accuracy", l->val_accuracy);
	ADD(l->has_val && l->has_errors, "val_mae", l->val_mae);
	ADD(l->has_val && l->has_errors, "val_rmse", l->val_rmse);
#undef ADD
	dt_history_add(&p->history, l->epoch, names, values, n);
	return dt_plot_write(p->path, &p->history, 1, 0, 0, panels, &np);
}

/*
 * The history as {"cols": [...], "epochs": [...], "values": [[...], ...]}:
 * each value a string that reads back exactly (cJSON's numbers may not),
 * null for NaN.
 */
static char *plot_state_save(struct dt_callback *cb, const struct dt_trainer *t)
{
	const struct dt_history *h = &((struct dt_plot_callback *)cb->priv)->history;
	cJSON *o = cJSON_CreateObject(), *cols = cJSON_AddArrayToObject(o, "cols"),
	      *epochs = cJSON_AddArrayToObject(o, "epochs"), *values = cJSON_AddArrayToObject(o, "values");
	char *s;
	(void)t;
	for (int i = 0; i < h->ncols; i++)
		cJSON_AddItemToArray(cols, cJSON_CreateString(h->cols[i]));
	for (int r = 0; r < h->nrows; r++) {
		cJSON *row = cJSON_CreateArray();
		cJSON_AddItemToArray(epochs, cJSON_CreateNumber(h->epochs[r]));
		for (int i = 0; i < h->ncols; i++) {
			double v = h->values[(size_t)r * h->ncols + i];
			char num[40];
			dt_format_repr(v, num, sizeof(num));
			cJSON_AddItemToArray(row, isfinite(v) ? cJSON_CreateString(num) : cJSON_CreateNull());
		}
		cJSON_AddItemToArray(values, row);
	}
	s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return s;
}

/* The n values of one saved row into v: strings of numbers, null for NaN. 0, or -1 when it is not that. */
static int state_row(const cJSON *row, int n, double *v)
{
	if (!cJSON_IsArray(row) || cJSON_GetArraySize(row) != n)
		return -1;
	for (int i = 0; i < n; i++) {
		const cJSON *x = cJSON_GetArrayItem(row, i);
		char *end;
		if (cJSON_IsNull(x)) {
			v[i] = NAN;
			continue;
		}
		if (!cJSON_IsString(x))
			return -1;
		v[i] = strtod(x->valuestring, &end);
		if (end == x->valuestring || *end)
			return -1;
	}
	return 0;
}

static int plot_state_load(struct dt_callback *cb, struct dt_trainer *t, const char *json)
{
	struct dt_plot_callback *p = cb->priv;
	cJSON *o = cJSON_Parse(json);
	const cJSON *cols = cJSON_GetObjectItemCaseSensitive(o, "cols"), *epochs, *values;
	const char *names[DT_HISTORY_MAX_COLS];
	double v[DT_HISTORY_MAX_COLS];
	int n = cJSON_GetArraySize(cols), ok = o && cJSON_IsArray(cols) && n <= DT_HISTORY_MAX_COLS;
	(void)t;
	epochs = cJSON_GetObjectItemCaseSensitive(o, "epochs");
	values = cJSON_GetObjectItemCaseSensitive(o, "values");
	ok = ok && cJSON_IsArray(epochs) && cJSON_IsArray(values) &&
	     cJSON_GetArraySize(epochs) == cJSON_GetArraySize(values);
	for (int i = 0; ok && i < n; i++)
		ok = cJSON_IsString(cJSON_GetArrayItem(cols, i)) && (names[i] = cJSON_GetArrayItem(cols, i)->valuestring);
	char name[sizeof(p->history.name)];
	memcpy(name, p->history.name, sizeof(name));
	dt_history_release(&p->history);
	dt_history_init(&p->history, name);
	for (int r = 0; ok && r < cJSON_GetArraySize(values); r++) {
		const cJSON *row = cJSON_GetArrayItem(values, r), *e = cJSON_GetArrayItem(epochs, r);
		ok = cJSON_IsNumber(e) && state_row(row, n, v) == 0;
		if (ok)
			dt_history_add(&p->history, e->valueint, names, v, n);
	}
	cJSON_Delete(o);
	if (!ok)
		return dt_error("the saved state of 'plot' is not valid: %.200s", json);
	return 0;
}

void dt_plot_callback_init(struct dt_plot_callback *p, const char *run_dir)
{
	char name[256];
	memset(p, 0, sizeof(*p));
	run_name(run_dir, 1, name, sizeof(name));
	dt_history_init(&p->history, name);
	snprintf(p->path, sizeof(p->path), "%s/curves.png", run_dir);
	p->cb.name = "plot";
	p->cb.priv = p;
	p->cb.on_epoch_end = plot_epoch_end;
	p->cb.state_save = plot_state_save;
	p->cb.state_load = plot_state_load;
}

void dt_plot_callback_release(struct dt_plot_callback *p) { dt_history_release(&p->history); }
