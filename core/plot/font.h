/*
 * A small bitmap font for the pictures dtrain draws (dtrain plot, fit.plot):
 * 5x7 glyphs with a row below for the tails of g, j, p, q, y and ',', drawn for dtrain, for digits, lowercase letters and the signs
 * numbers and metric names need (. - _ + : / ( ) , % = and space).
 * Uppercase letters are drawn with the lowercase glyphs; any other character
 * is an empty box.
 */
#ifndef DT_PLOT_FONT_H
#define DT_PLOT_FONT_H

#define DT_FONT_W 5       /* glyph width in pixels */
#define DT_FONT_H 8       /* glyph height: 7 rows above the baseline, 1 below */
#define DT_FONT_ADVANCE 6 /* from one character to the next */

/*
 * The glyph of c: DT_FONT_H rows of DT_FONT_W characters, '#' for a pixel
 * drawn, '.' for one left alone. Never NULL.
 */
const char *const *dt_font_glyph(int c);

#endif
