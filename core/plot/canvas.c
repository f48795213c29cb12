#include <errno.h>
#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/plot/canvas.h"
#include "core/plot/font.h"

void dt_canvas_init(struct dt_canvas *c, int w, int h, uint32_t bg)
{
	c->w = w;
	c->h = h;
	c->rgb = dt_malloc((size_t)w * h * 3);
	dt_canvas_rect(c, 0, 0, w, h, bg);
}

void dt_canvas_release(struct dt_canvas *c)
{
	free(c->rgb);
	c->rgb = NULL;
}

static void pixel(struct dt_canvas *c, int x, int y, uint32_t color)
{
	uint8_t *p;
	if (x < 0 || y < 0 || x >= c->w || y >= c->h)
		return;
	p = c->rgb + ((size_t)y * c->w + x) * 3;
	p[0] = (uint8_t)(color >> 16);
	p[1] = (uint8_t)(color >> 8);
	p[2] = (uint8_t)color;
}

void dt_canvas_rect(struct dt_canvas *c, int x, int y, int w, int h, uint32_t color)
{
	for (int j = y; j < y + h; j++)
		for (int i = x; i < x + w; i++)
			pixel(c, i, j, color);
}

/* Steps of at most half a pixel along the line; a square of width pixels at each drawn step. */
void dt_canvas_line(struct dt_canvas *c, double x0, double y0, double x1, double y1, uint32_t color, int width,
		    int dash, double *phase)
{
	double len = hypot(x1 - x0, y1 - y0);
	int steps = (int)ceil(len * 2);
	double at = phase ? *phase : 0;
	if (steps < 1)
		steps = 1;
	for (int s = 0; s <= steps; s++) {
		double t = (double)s / steps, pos = at + t * len;
		if (dash && fmod(pos, 2.0 * dash) >= dash)
			continue;
		int x = (int)lround(x0 + t * (x1 - x0)) - (width - 1) / 2;
		int y = (int)lround(y0 + t * (y1 - y0)) - (width - 1) / 2;
		dt_canvas_rect(c, x, y, width, width, color);
	}
	if (phase)
		*phase = at + len;
}

void dt_canvas_text(struct dt_canvas *c, int x, int y, const char *text, int scale, uint32_t color, int vertical)
{
	for (int k = 0; text[k]; k++) {
		const char *const *g = dt_font_glyph(text[k]);
		int off = k * DT_FONT_ADVANCE * scale;
		for (int gy = 0; gy < DT_FONT_H; gy++)
			for (int gx = 0; gx < DT_FONT_W; gx++) {
				if (g[gy][gx] != '#')
					continue;
				if (vertical) /* turned a quarter left: the glyph's rows run left to right */
					dt_canvas_rect(c, x + gy * scale, y - off - (gx + 1) * scale, scale, scale, color);
				else
					dt_canvas_rect(c, x + off + gx * scale, y + gy * scale, scale, scale, color);
			}
	}
}

int dt_canvas_text_width(const char *text, int scale)
{
	int n = (int)strlen(text);
	return n ? (n * DT_FONT_ADVANCE - (DT_FONT_ADVANCE - DT_FONT_W)) * scale : 0;
}

int dt_canvas_write_png(const struct dt_canvas *c, const char *path)
{
	FILE *f = fopen(path, "wb");
	png_structp png;
	png_infop info;
	if (!f)
		return dt_error("cannot open '%s': %s", path, strerror(errno));
	png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
	info = png ? png_create_info_struct(png) : NULL;
	if (!info || setjmp(png_jmpbuf(png))) {
		png_destroy_write_struct(&png, &info);
		fclose(f);
		return dt_error("cannot write '%s': libpng failed", path);
	}
	png_init_io(png, f);
	png_set_IHDR(png, info, (png_uint_32)c->w, (png_uint_32)c->h, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
		     PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
	png_write_info(png, info);
	for (int y = 0; y < c->h; y++)
		png_write_row(png, c->rgb + (size_t)y * c->w * 3);
	png_write_end(png, NULL);
	png_destroy_write_struct(&png, &info);
	if (fclose(f) != 0)
		return dt_error("cannot write '%s': %s", path, strerror(errno));
	return 0;
}
