/*
 * Token-index inputs (issue 14): an embedding reads the data's values as
 * rows of its table, so the pipeline checks each batch on the host, where
 * the record is known, before it reaches a device (see pipeline.h).
 */
#include <math.h>
#include <stdio.h>

#include "core/error.h"
#include "core/pipeline/pipeline.h"

void dt_pipeline_set_index_limit(struct dt_pipeline *p, int64_t limit, const char *layer)
{
	p->index_limit = limit;
	snprintf(p->index_layer, sizeof(p->index_layer), "%s", layer);
}

int dt_index_check(const float *x, int n, int64_t per_sample, int64_t limit, const char *file,
		   const int64_t *records, int64_t first, const char *layer)
{
	for (int i = 0; i < n; i++) {
		const float *row = x + (int64_t)i * per_sample;
		for (int64_t j = 0; j < per_sample; j++) {
			float v = row[j];
			if (v >= 0 && v < (float)limit && v == floorf(v))
				continue;
			return dt_error("'%s' record %lld: value %.9g at position %lld is not a token index of "
					"embedding '%s' (a whole number from 0 to %lld)",
					file, (long long)(records ? records[i] : first + i), v, (long long)j, layer,
					(long long)limit - 1);
		}
	}
	return 0;
}
