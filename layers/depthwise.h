/*
 * What depthwise_conv2d and separable_conv2d share (depthwise_conv2d.c):
 * reading the depthwise part's arguments into a grouped convolution's
 * geometry, and its ONNX Conv node.
 */
#ifndef DT_LAYERS_DEPTHWISE_H
#define DT_LAYERS_DEPTHWISE_H

#include "core/model/layer.h"

/*
 * Reads kernel_size (required), strides (1), padding (valid),
 * depth_multiplier (1) and dilation_rate (1) as Keras' DepthwiseConv2D
 * does, checks the image input, and fills g: groups = in_c, out_c = in_c *
 * depth_multiplier, Keras' output size. 0 or -1 (printed with the position).
 */
int dt_depthwise_geom(struct dt_layer *l, const struct dt_node *args, const char *type, struct dt_conv_geom *g);
/*
 * ONNX Conv of x (N, H, W, C) channels last with g's geometry and groups,
 * kernel k (kh, kw, in_c/groups, out_c) on the host, bias (NULL: none):
 * transposes to NCHW and back, so the value returned is channels last.
 */
const char *dt_conv_export_nodes(struct dt_onnx *o, const char *name, const char *x, const struct dt_conv_geom *g,
				 const float *k, const struct dt_param *bias);

#endif
