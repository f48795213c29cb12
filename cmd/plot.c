/*
 * dtrain plot: training curves of one or more runs as a PNG picture
 * (man dtrain-plot).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cmd.h"
#include "core/error.h"
#include "core/plot/plot.h"

static const char usage[] =
	"usage: dtrain plot [-o FILE.png] [--size WxH] [--json] RUN_DIR|history.csv...\n"
	"\n"
	"Draws the loss and every metric by epoch, training solid and validation\n"
	"dashed, one panel each; several runs in distinct colours with a legend.\n"
	"A RUN_DIR is read through its history.csv (fit.callbacks: [csv_logger]).\n"
	"\n"
	"  -o, --output FILE      the picture (default curves.png)\n"
	"  --size WxH             its size in pixels (default: 560x360 per panel)\n"
	"  --json                 print where each panel's data lies, one JSON object\n"
	"  -h, --help             this help\n";

struct plot_opts {
	const char *output;
	int w, h, json;
	const char *paths[DT_PLOT_MAX_RUNS + 1];
	int npaths;
};

static int parse_size(const char *s, int *w, int *h)
{
	char *end;
	long a = strtol(s, &end, 10), b;
	if (end == s || (*end != 'x' && *end != 'X'))
		return -1;
	s = end + 1;
	b = strtol(s, &end, 10);
	if (end == s || *end || a < 1 || b < 1 || a > 16384 || b > 16384)
		return -1;
	*w = (int)a;
	*h = (int)b;
	return 0;
}

/* DT_EXIT_OK after -h, DT_EXIT_USAGE after an error, -1 to go on. */
static int parse(struct plot_opts *o, int argc, char **argv)
{
	/* What the loop below takes, printed for -h under dt_opts_list (`dtrain complete options plot`). */
	static const char *const options[] = { "--help", "-h", "--output\tVALUE", "-o\tVALUE", "--size\tVALUE",
					       "--json", NULL };
	memset(o, 0, sizeof(*o));
	o->output = "curves.png";
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			for (int k = 0; dt_opts_list && options[k]; k++)
				puts(options[k]);
			if (!dt_opts_list)
				fputs(usage, stdout);
			return DT_EXIT_OK;
		} else if (!strcmp(a, "-o") || !strcmp(a, "--output") || !strcmp(a, "--size")) {
			if (i + 1 == argc) {
				dt_error("'%s' needs a value; see 'dtrain plot -h'", a);
				return DT_EXIT_USAGE;
			}
			if (strcmp(a, "--size")) {
				o->output = argv[++i];
			} else if (parse_size(argv[++i], &o->w, &o->h) < 0) {
				dt_error("--size must be WIDTHxHEIGHT in pixels (1 to 16384 each), such as 1200x800, not '%s'",
					 argv[i]);
				return DT_EXIT_USAGE;
			}
		} else if (!strcmp(a, "--json")) {
			o->json = 1;
		} else if (a[0] == '-' && a[1]) {
			dt_error("unknown option '%s'; see 'dtrain plot -h'", a);
			return DT_EXIT_USAGE;
		} else if (o->npaths == DT_PLOT_MAX_RUNS) {
			dt_error("more than %d runs; one picture holds at most %d", DT_PLOT_MAX_RUNS, DT_PLOT_MAX_RUNS);
			return DT_EXIT_USAGE;
		} else {
			o->paths[o->npaths++] = a;
		}
	}
	if (o->npaths == 0) {
		dt_error("no run to plot: give a run directory or a history.csv file; see 'dtrain plot -h'");
		return DT_EXIT_USAGE;
	}
	return -1;
}

/* {"file":..., "width":..., "height":..., "runs":[{"name":..., "color":"#rrggbb"}], "panels":[...]} */
static void print_json(const struct plot_opts *o, const struct dt_history *runs, const struct dt_plot_panel *p,
		       int n)
{
	cJSON *j = cJSON_CreateObject(), *rs, *ps;
	char *s, color[8];
	cJSON_AddStringToObject(j, "file", o->output);
	rs = cJSON_AddArrayToObject(j, "runs");
	for (int i = 0; i < o->npaths; i++) {
		cJSON *r = cJSON_CreateObject();
		cJSON_AddStringToObject(r, "name", runs[i].name);
		snprintf(color, sizeof(color), "#%06x", (unsigned)dt_plot_colors[i]);
		cJSON_AddStringToObject(r, "color", color);
		cJSON_AddItemToArray(rs, r);
	}
	ps = cJSON_AddArrayToObject(j, "panels");
	for (int i = 0; i < n; i++) {
		cJSON *q = cJSON_CreateObject();
		double box[4] = { p[i].x, p[i].y, p[i].w, p[i].h };
		cJSON_AddStringToObject(q, "metric", p[i].metric);
		cJSON_AddItemToObject(q, "box", cJSON_CreateDoubleArray(box, 4));
		cJSON_AddItemToObject(q, "x", cJSON_CreateDoubleArray((double[]){ p[i].x0, p[i].x1 }, 2));
		cJSON_AddItemToObject(q, "y", cJSON_CreateDoubleArray((double[]){ p[i].y0, p[i].y1 }, 2));
		cJSON_AddItemToArray(ps, q);
	}
	s = cJSON_PrintUnformatted(j);
	puts(s);
	free(s);
	cJSON_Delete(j);
}

int cmd_plot(int argc, char **argv)
{
	struct plot_opts o;
	struct dt_history runs[DT_PLOT_MAX_RUNS];
	struct dt_plot_panel panels[DT_PLOT_MAX_PANELS];
	int rc = parse(&o, argc, argv), n = 0, nread = 0;
	if (rc >= 0)
		return rc;
	rc = DT_EXIT_FAIL;
	for (; nread < o.npaths; nread++)
		if (dt_history_read(&runs[nread], o.paths[nread]) < 0) {
			nread++;
			goto out;
		}
	if (dt_plot_write(o.output, runs, o.npaths, o.w, o.h, panels, &n) < 0)
		goto out;
	if (o.json)
		print_json(&o, runs, panels, n);
	rc = DT_EXIT_OK;
out:
	for (int i = 0; i < nread; i++)
		dt_history_release(&runs[i]);
	return rc;
}
