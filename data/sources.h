/*
 * The data sources dtrain knows, one file per format in data/. cmd/ passes
 * dt_source_types to dt_source_open() (core/source.h); a new format is one
 * file here plus one line in data/sources.c.
 */
#ifndef DT_DATA_SOURCES_H
#define DT_DATA_SOURCES_H

#include <stddef.h> /* core/error.h uses size_t without including it */

#include "core/pipeline/source.h"

extern const struct dt_source_type dt_idx_source;       /* format: idx */
extern const struct dt_source_type dt_synthetic_source; /* format: synthetic */
extern const struct dt_source_type dt_csv_source;       /* format: csv */
extern const struct dt_source_type dt_npy_source;       /* format: npy */
extern const struct dt_source_type dt_png_folder_source; /* format: png_folder (data/png_folder.c) */
extern const struct dt_source_type dt_cifar10_source;   /* format: cifar10 (data/cifar.c) */
extern const struct dt_source_type dt_cifar100_source;  /* format: cifar100 */

/* NULL-terminated. */
extern const struct dt_source_type *const dt_source_types[];

#endif
