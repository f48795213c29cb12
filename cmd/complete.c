/*
 * dtrain complete keys | values KEY: the config's key paths and the names a
 * key takes, for the shell completion scripts (cmd/completion/), read from
 * the tables that check the YAML, so that a key added there completes
 * without editing the scripts.
 */
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "core/cuda/cuda.h"
#include "data/sources.h"

/* Where the data sources' arguments sit: `format:` and the rest of each source type's keys. */
static const char *const sources[] = { "data.train", "data.validation", "data.test", NULL };

/* The mappings cmd/ composes besides the run config's own. */
static const struct dt_cfg_section others[] = {
	{ "distribute", dt_distribute_keys },
	{ NULL, NULL },
};

/* A key that takes one of a table of names, and the table. */
struct named {
	const char *key;
	const char *const *names;
};

static const struct named named_keys[] = {
	{ "compile.optimizer", dt_optimizer_names },
	{ "compile.loss", dt_loss_names },
	{ "compile.precision", dt_precision_names },
	{ "distribute.strategy", dt_strategy_names },
	{ NULL, NULL },
};

static void print_sections(const struct dt_cfg_section *s)
{
	for (; s->path; s++)
		for (int i = 0; s->keys[i]; i++)
			printf("%s%s%s\n", s->path, s->path[0] ? "." : "", s->keys[i]);
}

/* Whether a source type before dt_source_types[t] allows key too (a key that several formats take is listed once). */
static int earlier_source_key(int t, const char *key)
{
	for (int u = 0; u < t; u++)
		for (int k = 0; dt_source_types[u]->keys && dt_source_types[u]->keys[k]; k++)
			if (!strcmp(dt_source_types[u]->keys[k], key))
				return 1;
	return 0;
}

/* Every key path, one a line: model.name, data.split.seed, data.train.format, ... */
static void print_keys(void)
{
	print_sections(dt_run_config_sections);
	print_sections(others);
	for (int i = 0; sources[i]; i++)
		for (int t = 0; dt_source_types[t]; t++)
			for (int k = 0; dt_source_types[t]->keys && dt_source_types[t]->keys[k]; k++)
				if (!earlier_source_key(t, dt_source_types[t]->keys[k]))
					printf("%s.%s\n", sources[i], dt_source_types[t]->keys[k]);
}

/* The names key takes, one a line; nothing for a key without a table of names. */
static void print_values(const char *key)
{
	for (int i = 0; named_keys[i].key; i++)
		if (!strcmp(named_keys[i].key, key))
			for (int k = 0; named_keys[i].names[k]; k++)
				puts(named_keys[i].names[k]);
	for (int i = 0; sources[i]; i++) {
		size_t n = strlen(sources[i]);
		if (strncmp(key, sources[i], n) || strcmp(key + n, ".format"))
			continue;
		for (int t = 0; dt_source_types[t]; t++)
			puts(dt_source_types[t]->name);
	}
}

int dt_complete_config(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "keys"))
		print_keys();
	else if (argc == 3 && !strcmp(argv[1], "values"))
		print_values(argv[2]);
	return DT_EXIT_OK;
}
