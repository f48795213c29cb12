/*
 * dtrain: main and the one table of subcommands.
 */
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "core/error.h"

struct subcommand {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
};

static int cmd_help(int argc, char **argv);
static int cmd_version(int argc, char **argv);
static int cmd_complete(int argc, char **argv);

static const struct subcommand commands[] = {
	{ "fit", cmd_fit, "train the model a YAML file describes" },
	{ "evaluate", cmd_evaluate, "loss and metrics of a checkpoint on the test set" },
	{ "predict", cmd_predict, "the class (or the values) of every sample of an input, one line each, streaming" },
	{ "export", cmd_export, "a checkpoint's model as an ONNX file" },
	{ "summary", cmd_summary, "the model's layers, shapes and parameter counts" },
	{ "config", cmd_config, "the configuration as fit uses it: defaults filled in, data file inlined, --set applied" },
	{ "inspect", cmd_inspect, "one training step on the first batch: every layer's outputs, gradients, warnings" },
	{ "plot", cmd_plot, "training curves of one or more runs (history.csv) as a PNG picture" },
	{ "time", cmd_time, "time each layer's forward and backward pass, and a training step" },
	{ "devices", cmd_devices, "what dtrain found and which strategy fit would choose" },
	{ "help", cmd_help, "this list, or 'dtrain help COMMAND' for a command's options" },
	{ "version", cmd_version, "print the version" },
	{ NULL, NULL, NULL },
};

static const struct subcommand *find(const char *name)
{
	for (int i = 0; commands[i].name; i++)
		if (!strcmp(commands[i].name, name))
			return &commands[i];
	return NULL;
}

static void usage(FILE *out)
{
	fputs("usage: dtrain COMMAND [options] [MODEL.yaml]\n\ncommands:\n", out);
	for (int i = 0; commands[i].name; i++)
		fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
	fputs("\n'dtrain COMMAND -h' shows a command's options; 'man dtrain' and 'man dtrain.yaml' say more.\n", out);
}

static int cmd_help(int argc, char **argv)
{
	const struct subcommand *c;
	char *args[] = { NULL, "-h", NULL };
	if (argc < 2) {
		usage(stdout);
		return DT_EXIT_OK;
	}
	c = find(argv[1]);
	if (!c || c->run == cmd_help || c->run == cmd_version) {
		if (!c) {
			dt_error("unknown command '%s'; see 'dtrain help'", argv[1]);
			return DT_EXIT_USAGE;
		}
		usage(stdout);
		return DT_EXIT_OK;
	}
	args[0] = argv[1];
	return c->run(2, args);
}

static int cmd_version(int argc, char **argv)
{
	printf("dtrain %s\n", DT_VERSION);
	return DT_EXIT_OK;
}

/*
 * dtrain complete commands | options COMMAND | keys | values KEY: the words
 * the shell completion scripts offer (man dtrain, SHELL COMPLETION), from
 * the tables that parse the command line and check the config. Not in the
 * list of commands: people do not type it. An unknown question prints nothing.
 */
static int cmd_complete(int argc, char **argv)
{
	const struct subcommand *c;
	if (argc == 2 && !strcmp(argv[1], "commands")) {
		for (int i = 0; commands[i].name; i++)
			puts(commands[i].name);
		return DT_EXIT_OK;
	}
	if (argc == 3 && !strcmp(argv[1], "options")) {
		char *args[] = { argv[2], "-h", NULL };
		c = find(argv[2]);
		if (!c || c->run == cmd_help || c->run == cmd_version)
			return DT_EXIT_OK;
		dt_opts_list = 1;
		return c->run(2, args);
	}
	return dt_complete_config(argc, argv);
}

int main(int argc, char **argv)
{
	const struct subcommand *c;
	if (argc < 2) {
		usage(stderr);
		return DT_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V"))
		return cmd_version(argc - 1, argv + 1);
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))
		return cmd_help(1, argv + 1);
	if (!strcmp(argv[1], "complete"))
		return cmd_complete(argc - 1, argv + 1);
	c = find(argv[1]);
	if (!c) {
		dt_error("unknown command '%s'; see 'dtrain help'", argv[1]);
		return DT_EXIT_USAGE;
	}
	return c->run(argc - 1, argv + 1);
}
