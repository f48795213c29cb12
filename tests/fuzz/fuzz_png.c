/*
 * The PNG decoder (data/png.h), as png_folder and predict's PNG reader use
 * it: the first byte picks the output (1, 3 or 4 channels; the image's own
 * size or a resize to another), the rest is the file. Header only, then the
 * pixels, then the pixels again with the buffers the first decode left.
 */
#include "data/png.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const int channels[4] = { 1, 3, 4, 3 };
	struct dt_png_decoder *d;
	const char *path;
	int h = 5, w = 7, c = channels[0], h0, w0, c0;
	float *out;

	fuzz_quiet();
	if (size < 1 || size > FUZZ_MAX_INPUT)
		return 0;
	c = channels[data[0] & 3];
	path = fuzz_write("a", data + 1, size - 1);
	d = dt_png_decoder_new();
	if (dt_png_decoder_info(d, path, &h0, &w0, &c0) == 0 && data[0] & 4 && (int64_t)h0 * w0 <= 1 << 16) {
		h = h0; /* the image's own size: no resize */
		w = w0;
	}
	out = malloc((size_t)h * w * c * sizeof(float));
	if (!out)
		abort();
	dt_png_decoder_decode(d, path, h, w, c, out);
	dt_png_decoder_decode(d, path, h, w, c, out);
	free(out);
	dt_png_decoder_free(d);
	return 0;
}
