#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/pipeline/source.h"

#define DT_MAX_SOURCE_TYPES 64

/* The type `format:` names in the table, or NULL after an error at the arguments. */
static const struct dt_source_type *find_type(const struct dt_node *args, const struct dt_source_type *const *types)
{
	const char *names[DT_MAX_SOURCE_TYPES + 1];
	int n = 0, k;

	for (; types[n]; n++) {
		DT_ASSERT(n < DT_MAX_SOURCE_TYPES);
		names[n] = types[n]->name;
	}
	names[n] = NULL;
	if (dt_node_expect(args, DT_NODE_MAP, "data source") < 0 ||
	    dt_cfg_require(args, "format", "data source") < 0 ||
	    dt_cfg_enum(args, "format", names, -1, &k) < 0)
		return NULL;
	return types[k];
}

int dt_source_check(const struct dt_node *args, const struct dt_source_type *const *types)
{
	const struct dt_source_type *type = find_type(args, types);
	if (!type)
		return -1;
	return type->check ? type->check(args) : 0;
}

int dt_source_open(struct dt_source *s, const struct dt_node *args,
		   const struct dt_source_type *const *types)
{
	return dt_source_open_classes(s, args, types, NULL);
}

int dt_source_open_classes(struct dt_source *s, const struct dt_node *args,
			   const struct dt_source_type *const *types, const struct dt_class_map *map)
{
	int rc;

	memset(s, 0, sizeof(*s));
	if (!(s->type = find_type(args, types)))
		return -1;
	s->class_map = map;
	rc = s->type->open(s, args);
	s->class_map = NULL;
	if (rc < 0) {
		dt_source_close(s);
		return -1;
	}
	return 0;
}

void dt_source_close(struct dt_source *s)
{
	if (s->type && s->type->close)
		s->type->close(s);
	if (s->class_names) {
		for (int i = 0; i < s->num_classes; i++)
			free(s->class_names[i]);
		free(s->class_names);
	}
	for (int64_t i = 0; s->feature_names && i < dt_shape_count(&s->sample); i++)
		free(s->feature_names[i]);
	free(s->feature_names);
	free(s->sample_weight);
	memset(s, 0, sizeof(*s));
}

const char *dt_class_map_format(const struct dt_class_map *map, char *buf, size_t size)
{
	size_t len = 0;
	buf[0] = '\0';
	if (!map->names) {
		snprintf(buf, size, "0 to %d", map->n - 1);
		return buf;
	}
	for (int i = 0; i < map->n && len < size; i++) {
		if (i == 4) {
			snprintf(buf + len, size - len, ", ...");
			break;
		}
		len += (size_t)snprintf(buf + len, size - len, "%s'%.40s'", i ? ", " : "", map->names[i]);
	}
	return buf;
}

int dt_source_has_classes(const struct dt_source *s)
{
	return s->num_classes > 0 && s->label.ndim == 1 && s->label.dim[0] == 1;
}

#define DT_LABEL_CHUNK 256 /* records read at a time by dt_source_labels */

int dt_source_labels(struct dt_source *s, int32_t *out)
{
	int64_t idx[DT_LABEL_CHUNK];
	float y[DT_LABEL_CHUNK], *x;
	uint8_t bad[DT_LABEL_CHUNK];
	int rc = 0;

	DT_ASSERT(dt_source_has_classes(s));
	if (s->type->labels) {
		s->type->labels(s, out);
		return 0;
	}
	x = dt_malloc((size_t)DT_LABEL_CHUNK * dt_shape_count(&s->sample) * sizeof(float));
	for (int64_t first = 0; first < s->count && rc == 0; first += DT_LABEL_CHUNK) {
		int n = s->count - first < DT_LABEL_CHUNK ? (int)(s->count - first) : DT_LABEL_CHUNK;
		for (int i = 0; i < n; i++)
			idx[i] = first + i;
		memset(bad, 0, sizeof(bad));
		rc = s->type->read(s, idx, n, x, y, bad);
		for (int i = 0; rc == 0 && i < n; i++)
			out[first + i] = bad[i] || !(y[i] >= 0 && y[i] < s->num_classes) ? -1 : (int32_t)y[i];
	}
	free(x);
	return rc;
}
