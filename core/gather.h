/*
 * The row a token index names, written once for the CPU backend
 * (core/cpu/embedding.c) and the CUDA kernels (core/cuda/embedding.cu) of
 * dt_op_gather and dt_op_scatter_add (core/ops.h). Indices arrive as floats
 * (every dtrain input is); a value that does not name a row, being negative,
 * too large or not a number, gives -1: the gather writes zeros for it and
 * the scatter skips it, so no device reads or writes out of bounds. The data
 * pipeline refuses such values before they reach a device, naming the file
 * and record (dt_pipeline_set_index_limit); this is the last line.
 */
#ifndef DT_GATHER_H
#define DT_GATHER_H

#include <stdint.h>

#include "core/rng.h"

/* round(v) when that is in [0, rows), else -1. */
static inline DT_HOST_DEVICE int64_t dt_gather_row(float v, int64_t rows)
{
	if (!(v > -0.5f && v < (float)rows - 0.5f)) /* false for NaN too */
		return -1;
	return (int64_t)(v + 0.5f);
}

#endif
