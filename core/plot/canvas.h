/*
 * An RGB picture in memory and the few ways dtrain draws on it: filled
 * rectangles, lines (solid or dashed, of a width), text in the built-in
 * font (core/plot/font.h), and the picture written as a PNG file with
 * libpng. Colours are 0xRRGGBB; coordinates are pixels from the top left,
 * and whatever falls outside the picture is clipped.
 */
#ifndef DT_CANVAS_H
#define DT_CANVAS_H

#include <stdint.h>

struct dt_canvas {
	int w, h;
	uint8_t *rgb; /* h rows of w pixels, 3 bytes each */
};

/* A w x h picture filled with bg; release with dt_canvas_release. */
void dt_canvas_init(struct dt_canvas *c, int w, int h, uint32_t bg);
void dt_canvas_release(struct dt_canvas *c);
void dt_canvas_rect(struct dt_canvas *c, int x, int y, int w, int h, uint32_t color);
/*
 * A line from (x0, y0) to (x1, y1), width pixels wide. dash: 0 for a solid
 * line, else the length of a dash and of the gap after it; *phase (may be
 * NULL when dash is 0) carries the pattern from one segment of a polyline
 * to the next.
 */
void dt_canvas_line(struct dt_canvas *c, double x0, double y0, double x1, double y1, uint32_t color, int width,
		    int dash, double *phase);
/* text with its top left at (x, y), each font pixel scale x scale; vertical: reads upward, (x, y) its bottom left. */
void dt_canvas_text(struct dt_canvas *c, int x, int y, const char *text, int scale, uint32_t color, int vertical);
/* The width of text drawn at scale, in pixels. */
int dt_canvas_text_width(const char *text, int scale);
/* Writes the picture to path (8-bit RGB PNG). 0, or -1 with an error naming the file. */
int dt_canvas_write_png(const struct dt_canvas *c, const char *path);

#endif
