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
	memset(s, 0, sizeof(*s));
	if (!(s->type = find_type(args, types)))
		return -1;
	if (s->type->open(s, args) < 0) {
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
	memset(s, 0, sizeof(*s));
}
