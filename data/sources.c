#include "sources.h"

const struct dt_source_type *const dt_source_types[] = {
	&dt_idx_source,
	&dt_synthetic_source,
	&dt_csv_source,
	&dt_npy_source,
	&dt_png_folder_source,
	&dt_cifar10_source,
	&dt_cifar100_source,
	NULL,
};
