/*
 * up_sampling2d: repeats or interpolates the image to size times its
 * height and width, as Keras' UpSampling2D, channels last. Arguments: size
 * (2, or [h, w]), interpolation (nearest: each value repeated; bilinear:
 * Keras 3's ops.image.resize, which is tf.image.resize's half-pixel
 * centres, the same as torch's align_corners=False). No parameters.
 * (H, W, C) -> (H * h, W * w, C).
 */
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/export/onnx.h"
#include "layers.h"
#include "window.h"

static const char *const interpolation_names[] = { "nearest", "bilinear", NULL };

struct up_sampling2d {
	enum dt_interp mode;
	int sh, sw;
};

static int up_sampling2d_init(struct dt_layer *l, const struct dt_node *args)
{
	static const char *const keys[] = { "size", "interpolation", NULL };
	int s[2], mode;
	char shape[64];
	struct up_sampling2d *u;

	if (dt_layer_check_keys(l, args, keys) < 0 || dt_window_pair(args, "size", 2, 1, 1 << 12, s) < 0 ||
	    dt_cfg_enum(args, "interpolation", interpolation_names, DT_INTERP_NEAREST, &mode) < 0)
		return -1;
	if (l->in.ndim != 3)
		return dt_node_error(args, "layer '%s' needs an image input (height, width, channels) but gets %s; "
				     "add '- reshape: {target_shape: [H, W, C]}' before it",
				     l->name, dt_shape_format(&l->in, 1, shape, sizeof(shape)));
	if ((int64_t)l->in.dim[0] * s[0] > 1 << 24 || (int64_t)l->in.dim[1] * s[1] > 1 << 24)
		return dt_node_error(dt_node_get(args, "size"),
				     "layer '%s': upsampling %s by %dx%d makes an image over %d rows or columns",
				     l->name, dt_shape_format(&l->in, 0, shape, sizeof(shape)), s[0], s[1], 1 << 24);
	u = dt_calloc(1, sizeof(*u));
	u->mode = (enum dt_interp)mode;
	u->sh = s[0];
	u->sw = s[1];
	l->priv = u;
	l->out = dt_shape_make(3, (int[]){ l->in.dim[0] * s[0], l->in.dim[1] * s[1], l->in.dim[2] });
	return 0;
}

static struct dt_tensor image(const struct dt_tensor *t, const struct dt_shape *s)
{
	struct dt_tensor v = *t;
	v.shape = dt_shape_make(4, (int[]){ t->shape.dim[0], s->dim[0], s->dim[1], s->dim[2] });
	return v;
}

static void up_sampling2d_forward(struct dt_layer *l, const struct dt_tensor *x, struct dt_tensor *y,
				  const struct dt_step_ctx *ctx)
{
	const struct up_sampling2d *u = l->priv;
	struct dt_tensor xv = image(x, &l->in), yv = image(y, &l->out);
	dt_op_upsample2d(u->mode, &xv, &yv);
}

static void up_sampling2d_backward(struct dt_layer *l, const struct dt_tensor *x, const struct dt_tensor *y,
				   struct dt_tensor *dy, struct dt_tensor *dx)
{
	const struct up_sampling2d *u = l->priv;
	struct dt_tensor dyv, dxv;
	if (!dx)
		return;
	dyv = image(dy, &l->out);
	dxv = image(dx, &l->in);
	dt_op_upsample2d_backward(u->mode, &dyv, &dxv);
}

static void up_sampling2d_release(struct dt_layer *l)
{
	free(l->priv);
	l->priv = NULL;
}

/* nearest copies; bilinear blends 4 values with 3 lerps of 2 multiply-adds each. */
static int64_t up_sampling2d_flops(const struct dt_layer *l)
{
	const struct up_sampling2d *u = l->priv;
	return u->mode == DT_INTERP_NEAREST ? 0 : 6 * dt_shape_count(&l->out);
}

/*
 * ONNX's Resize on NCHW, scales (1, 1, h, w): nearest as floor(o / s)
 * (asymmetric, floor), bilinear as linear with half_pixel coordinates.
 */
static const char *up_sampling2d_export(const struct dt_layer *l, struct dt_onnx *g, const char *x)
{
	static const int64_t to_nchw[4] = { 0, 3, 1, 2 }, to_nhwc[4] = { 0, 2, 3, 1 };
	const struct up_sampling2d *u = l->priv;
	float scales[4] = { 1, 1, (float)u->sh, (float)u->sw };
	const char *in[3], *y;
	char name[160];

	in[0] = dt_onnx_transpose(g, x, to_nchw, l->name);
	in[1] = NULL; /* roi: only for tf_crop_and_resize */
	snprintf(name, sizeof(name), "%s/scales", l->name);
	in[2] = dt_onnx_floats(g, name, 1, (int64_t[]){ 4 }, scales);
	y = dt_onnx_node(g, "Resize", in, 3, l->name);
	if (u->mode == DT_INTERP_NEAREST) {
		dt_onnx_attr_string(g, "mode", "nearest");
		dt_onnx_attr_string(g, "coordinate_transformation_mode", "asymmetric");
		dt_onnx_attr_string(g, "nearest_mode", "floor");
	} else {
		dt_onnx_attr_string(g, "mode", "linear");
		dt_onnx_attr_string(g, "coordinate_transformation_mode", "half_pixel");
	}
	return dt_onnx_transpose(g, y, to_nhwc, l->name);
}

static const struct dt_layer_example examples[] = {
	{ "2,3,2", NULL },
	{ "3,2,1", "{size: [1, 3]}" },
	{ "2,3,2", "{size: 2, interpolation: bilinear}" },
	{ "3,4,1", "{size: [3, 2], interpolation: bilinear}" },
	{ "1,2,1", "{size: [4, 1], interpolation: bilinear}" },
	{ NULL, NULL },
};

const struct dt_layer_type dt_up_sampling2d_layer = {
	.name = "up_sampling2d",
	.class_name = "UpSampling2D",
	.examples = examples,
	.init = up_sampling2d_init,
	.forward = up_sampling2d_forward,
	.backward = up_sampling2d_backward,
	.release = up_sampling2d_release,
	.flops = up_sampling2d_flops,
	.export = up_sampling2d_export,
};
