/*
 * Training curves as a picture: `dtrain plot` and fit.plot.
 *
 * A history is one run's metrics by epoch, as csv_logger writes them
 * (history.csv: the column epoch, then loss, accuracy, val_loss, ...). The
 * picture has one panel per metric (loss first, then the others in the
 * order of the first run's columns; val_X is drawn in X's panel), the
 * epoch (from 1, as the progress lines count) on x; each run has a colour
 * of dt_plot_colors, its training curve solid and its validation curve
 * dashed, every epoch marked with a dot. Axes carry tick numbers, the
 * panel its metric's name as title and y label and "epoch" under x; a
 * legend under the panels names each run's curves.
 */
#ifndef DT_PLOT_H
#define DT_PLOT_H

#include <stdint.h>

#include "core/fit/train.h"
#include "core/plot/canvas.h"

#define DT_HISTORY_MAX_COLS 32
#define DT_PLOT_MAX_PANELS 16
#define DT_PLOT_MAX_RUNS 10

/* The colours of runs 1, 2, ... (0xRRGGBB). */
extern const uint32_t dt_plot_colors[DT_PLOT_MAX_RUNS];

struct dt_history {
	char name[256];                          /* the run's name in the legend */
	int ncols;                               /* metric columns, without epoch */
	char cols[DT_HISTORY_MAX_COLS][32];      /* "loss", "val_loss", ... */
	int nrows, cap;
	int *epochs;                             /* nrows: the epoch column (from 0) */
	double *values;                          /* nrows x ncols; NaN: not given */
};

/*
 * Reads a history from path: a history.csv file (any name), or a run
 * directory, whose history.csv it reads. The name is the directory's last
 * part. 0, or -1 with an error naming the file and row.
 */
int dt_history_read(struct dt_history *h, const char *path);
/* An empty history named name. */
void dt_history_init(struct dt_history *h, const char *name);
/* One epoch's values of the named columns (new names become columns). */
void dt_history_add(struct dt_history *h, int epoch, const char *const *names, const double *values, int n);
void dt_history_release(struct dt_history *h);

/* Where a panel's data went: tests and --json map values to pixels with it. */
struct dt_plot_panel {
	char metric[32];
	int x, y, w, h;          /* the plot area in pixels (inside the frame) */
	double x0, x1, y0, y1;   /* the data at its left, right, bottom and top edges */
};

/*
 * Draws runs[0..nruns) on c, a w x h picture (0, 0: a size from the number
 * of panels). panels (DT_PLOT_MAX_PANELS entries) receives the layout and
 * *npanels their count. 0, or -1 with an error (nothing to draw, too many
 * runs, a picture too small). c is initialized on success only.
 */
int dt_plot_render(struct dt_canvas *c, const struct dt_history *runs, int nruns, int w, int h,
		   struct dt_plot_panel *panels, int *npanels);
/* dt_plot_render, then the PNG into path (through path.tmp and a rename). 0 or -1. */
int dt_plot_write(const char *path, const struct dt_history *runs, int nruns, int w, int h,
		  struct dt_plot_panel *panels, int *npanels);

/*
 * fit.plot: rewrites RUN_DIR/curves.png at each epoch's end. Its history
 * is saved with the checkpoints, so a resumed run draws every epoch.
 */
struct dt_plot_callback {
	struct dt_callback cb;
	struct dt_history history;
	char path[4200];
};
/* The history is named after the run directory's last part. */
void dt_plot_callback_init(struct dt_plot_callback *p, const char *run_dir);
void dt_plot_callback_release(struct dt_plot_callback *p);

#endif
