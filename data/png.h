/*
 * PNG decoding for data sources and commands: one file to (H, W, C) floats,
 * channels last, values 0..255 (not rescaled), the way Keras'
 * image_dataset_from_directory loads an image (tf.io.decode_png with
 * `channels`, then tf.image.resize, bilinear, half-pixel centres).
 *
 * Every PNG kind is read: grayscale, gray + alpha, RGB, RGBA and palette
 * (with or without tRNS), bit depths 1 to 16, interlaced or not. Samples are
 * brought to 0..255: 1/2/4-bit gray is scaled to 8 bits (v * 255 / (2^d - 1)),
 * 16-bit samples become v / 257 (exact, not rounded). Then to C channels:
 *
 *   C = 1: gray as is; colour to luma 0.299 R + 0.587 G + 0.114 B (ITU-R 601,
 *          as PIL's convert("L"); not rounded); alpha dropped
 *   C = 3: gray replicated to R = G = B; alpha dropped
 *   C = 4: as C = 3, plus alpha: the image's own, tRNS made alpha (0 for the
 *          transparent colour or the palette's tRNS value), else 255
 *
 * An image of another size is resized bilinearly like TensorFlow's resize
 * with half_pixel_centers: output pixel x samples the input at
 * sx = (x + 0.5) * in / out - 0.5, between floor(sx) and ceil(sx) clamped to
 * the image, weight sx - floor(sx); rows the same way, columns first.
 *
 * A decoder keeps its buffers between calls, so decoding a stream of images
 * of one size allocates nothing but libpng's own small structures. A decoder
 * is not thread-safe: use one per thread.
 *
 * The decoder is data/png_decode.c; the png_folder source and the PNG-paths
 * reader that use it are data/png_folder.c.
 */
#ifndef DT_DATA_PNG_H
#define DT_DATA_PNG_H

#include <stddef.h>

/* The largest side, in pixels, of an image the decoder reads or resizes to. */
#define DT_PNG_MAX_SIDE 65536

struct dt_png_decoder;

/* A decoder with empty buffers; free with dt_png_decoder_free(). */
struct dt_png_decoder *dt_png_decoder_new(void);
void dt_png_decoder_free(struct dt_png_decoder *d); /* accepts NULL */

/*
 * Decodes the PNG file at path into out, (h, w, c) floats on the host,
 * c = 1, 3 or 4. Returns 0, or -1 without printing anything: the reason
 * ("not a PNG file", "the file ends early", libpng's message) is then
 * dt_png_decoder_error(d). Never crashes on a corrupt file.
 */
int dt_png_decoder_decode(struct dt_png_decoder *d, const char *path, int h, int w, int c, float *out);

/*
 * Reads only the header of the PNG at path: *h, *w and *c (the channels of
 * its colour type: 1 gray, 2 gray + alpha, 3 RGB or palette, 4 RGBA or
 * palette with tRNS). 0, or -1 as above.
 */
int dt_png_decoder_info(struct dt_png_decoder *d, const char *path, int *h, int *w, int *c);

/* Why the last call failed ("" after a success). */
const char *dt_png_decoder_error(const struct dt_png_decoder *d);

/*
 * One-shot decode with a temporary decoder; on failure prints
 * "dtrain: error: cannot decode 'PATH': REASON" and returns -1.
 */
int dt_png_decode(const char *path, int h, int w, int c, float *out);

/*
 * The PNG-paths stream reader (dt_png_reader of data/reader.h) decodes to
 * the model's input shape, which must be (height, width, channels) with 1,
 * 3 or 4 channels. 0, or -1 after an error saying what the shape is.
 */
struct dt_shape;
int dt_png_reader_check(const struct dt_shape *sample);

#endif
