/*
 * Random augmentation of images (H, W, C), Keras' layers: data.augment read
 * from the config, then per image a flip, a crop of the zero-padded image
 * and a translation by whole pixels, drawn from (seed, epoch, record) alone
 * (never from the batch position or the thread), so batches are the same
 * with and without the prefetch thread.
 */
#include <math.h>
#include <string.h>

#include "core/pipeline/internal.h"
#include "core/pipeline/pipeline.h"
#include "core/rng.h"

/* ---- data.augment ---- */

static const char *const fill_mode_names[] = { "reflect", "wrap", "nearest", "constant", NULL };
static const char *const flip_names[] = { "horizontal", "vertical", "horizontal_and_vertical", NULL };

/* height_factor: 0.1 is [-0.1, 0.1]; [lo, hi] a range, as Keras. */
static int read_factor(const struct dt_node *map, const char *key, double *lo, double *hi)
{
	const struct dt_node *n = dt_node_get(map, key);
	double v;
	*lo = *hi = 0;
	if (!n)
		return 0;
	if (n->kind == DT_NODE_SCALAR) {
		if (dt_node_float(n, 0, 1, &v) < 0)
			return -1;
		*lo = -v;
		*hi = v;
		return 0;
	}
	if (dt_node_expect(n, DT_NODE_SEQ, key) < 0)
		return -1;
	if (n->n != 2)
		return dt_node_error(n, "'%s' is one factor or a [lower, upper] pair, got %d values", key, n->n);
	if (dt_node_float(n->items[0], -1, 1, lo) < 0 || dt_node_float(n->items[1], -1, 1, hi) < 0)
		return -1;
	if (*lo > *hi)
		return dt_node_error(n, "'%s' lower bound %g is above its upper bound %g", key, *lo, *hi);
	return 0;
}

const char *const dt_augment_keys[] = { "random_flip", "random_crop", "random_translation", NULL };
const char *const dt_random_crop_keys[] = { "padding", NULL };
const char *const dt_random_translation_keys[] = { "height_factor", "width_factor", "fill_mode", "fill_value",
						    NULL };

int dt_augment_read(struct dt_augment *a, const struct dt_node *n)
{
	const struct dt_node *flip, *crop, *tr;
	int mode;
	int64_t pad;
	double fill;

	memset(a, 0, sizeof(*a));
	if (dt_node_expect(n, DT_NODE_MAP, "augment") < 0 || dt_cfg_check_keys(n, "augment", dt_augment_keys) < 0)
		return -1;
	if ((flip = dt_node_get(n, "random_flip"))) {
		if (dt_cfg_enum(n, "random_flip", flip_names, 0, &mode) < 0)
			return -1;
		a->flip_h = mode != 1;
		a->flip_v = mode != 0;
	}
	if ((crop = dt_node_get(n, "random_crop"))) {
		if (dt_node_expect(crop, DT_NODE_MAP, "random_crop") < 0 ||
		    dt_cfg_check_keys(crop, "random_crop", dt_random_crop_keys) < 0 ||
		    dt_cfg_require(crop, "padding", "random_crop") < 0 ||
		    dt_cfg_int(crop, "padding", 0, 1, 4096, &pad) < 0)
			return -1;
		a->crop_padding = (int)pad;
	}
	if ((tr = dt_node_get(n, "random_translation"))) {
		if (dt_node_expect(tr, DT_NODE_MAP, "random_translation") < 0 ||
		    dt_cfg_check_keys(tr, "random_translation", dt_random_translation_keys) < 0 ||
		    dt_cfg_require(tr, "height_factor", "random_translation") < 0 ||
		    read_factor(tr, "height_factor", &a->height_lo, &a->height_hi) < 0 ||
		    read_factor(tr, "width_factor", &a->width_lo, &a->width_hi) < 0 ||
		    dt_cfg_enum(tr, "fill_mode", fill_mode_names, DT_FILL_REFLECT, &mode) < 0 ||
		    dt_cfg_float(tr, "fill_value", 0, -INFINITY, INFINITY, &fill) < 0)
			return -1;
		a->translate = 1;
		a->fill_mode = (enum dt_fill_mode)mode;
		a->fill_value = (float)fill;
	}
	return 0;
}

/* ---- one image ---- */

/* An index outside [0, n) brought inside by the fill mode; -1 for a constant fill. */
static int fill_index(int i, int n, enum dt_fill_mode mode)
{
	if (i >= 0 && i < n)
		return i;
	switch (mode) {
	case DT_FILL_REFLECT: { /* d c b a | a b c d | d c b a */
		int period = 2 * n;
		i %= period;
		if (i < 0)
			i += period;
		return i < n ? i : period - 1 - i;
	}
	case DT_FILL_WRAP:
		i %= n;
		return i < 0 ? i + n : i;
	case DT_FILL_NEAREST:
		return i < 0 ? 0 : n - 1;
	default:
		return -1;
	}
}

void dt_augment_image(const struct dt_pipeline *p, float *x, float *tmp, int epoch, int64_t record)
{
	const struct dt_augment *a = &p->augment;
	int H = p->sample.dim[0], W = p->sample.dim[1], C = p->sample.dim[2], P = a->crop_padding;
	int fh = 0, fv = 0, oy = P, ox = P, dy = 0, dx = 0;
	struct dt_rng r;

	/* Draws in a fixed order, from (seed, epoch, record) alone. */
	dt_rng_seed(&r, dt_hash64(dt_hash64(p->seed, 0x6175676d656e74ull), (uint64_t)epoch), (uint64_t)record);
	if (a->flip_h)
		fh = dt_rng_uniform(&r) < 0.5;
	if (a->flip_v)
		fv = dt_rng_uniform(&r) < 0.5;
	if (P) {
		oy = (int)dt_rng_below(&r, (uint64_t)(2 * P + 1));
		ox = (int)dt_rng_below(&r, (uint64_t)(2 * P + 1));
	}
	if (a->translate) {
		dy = (int)lround((a->height_lo + (a->height_hi - a->height_lo) * dt_rng_uniform(&r)) * H);
		dx = (int)lround((a->width_lo + (a->width_hi - a->width_lo) * dt_rng_uniform(&r)) * W);
	}
	if (!fh && !fv && oy == P && ox == P && dy == 0 && dx == 0)
		return;
	memcpy(tmp, x, (size_t)H * W * C * sizeof(float));
	for (int y = 0; y < H; y++) {
		for (int xo = 0; xo < W; xo++) {
			float *out = x + ((int64_t)y * W + xo) * C;
			/* translation: out(y, x) = in(y - dy, x - dx), filled outside */
			int ty = fill_index(y - dy, H, a->fill_mode), tx = fill_index(xo - dx, W, a->fill_mode);
			int cy, cx;
			if (ty < 0 || tx < 0) {
				for (int c = 0; c < C; c++)
					out[c] = a->fill_value;
				continue;
			}
			/* crop of the zero-padded image at (oy, ox) */
			cy = ty + oy - P;
			cx = tx + ox - P;
			if (cy < 0 || cy >= H || cx < 0 || cx >= W) {
				for (int c = 0; c < C; c++)
					out[c] = 0;
				continue;
			}
			if (fh)
				cx = W - 1 - cx;
			if (fv)
				cy = H - 1 - cy;
			memcpy(out, tmp + ((int64_t)cy * W + cx) * C, (size_t)C * sizeof(float));
		}
	}
}
