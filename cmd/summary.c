/*
 * dtrain summary: the model's layers, output shapes and parameter counts as
 * Keras 3 prints them (man dtrain-summary).
 */
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "core/error.h"

static const char usage[] =
	"usage: dtrain summary [options] MODEL.yaml|CHECKPOINT\n"
	"\n"
	"Prints the layers, their output shapes and parameter counts, and the totals.\n"
	"\n"
	"  --set KEY=VALUE        override a config key (repeatable)\n"
	"  -h, --help             this help\n";

static void rule(const char *l, const char *fill, const char *mid, const char *r, const int *w)
{
	fputs(l, stdout);
	for (int c = 0; c < 3; c++) {
		for (int i = 0; i < w[c]; i++)
			fputs(fill, stdout);
		fputs(c < 2 ? mid : r, stdout);
	}
	fputc('\n', stdout);
}

/* Pads by display columns (the box characters are multi-byte). */
static void cell(const char *text, int width, int right)
{
	int len = (int)strlen(text), pad = width - 2 - len;
	fputc(' ', stdout);
	if (right)
		printf("%*s%s", pad > 0 ? pad : 0, "", text);
	else
		printf("%s%*s", text, pad > 0 ? pad : 0, "");
	fputc(' ', stdout);
}

static void row(const char *a, const char *b, const char *c, const int *w, const char *bar)
{
	fputs(bar, stdout);
	cell(a, w[0], 0);
	fputs(bar, stdout);
	cell(b, w[1], 0);
	fputs(bar, stdout);
	cell(c, w[2], 1);
	fputs(bar, stdout);
	fputc('\n', stdout);
}

/*
 * A layer's row. When "name (Type)" is wider than the first column the type
 * goes to a line of its own, as in Keras' table, and a name still too wide
 * is cut into lines.
 */
static void layer_row(const char *name, const char *type, const char *shape, const char *count, const int *w)
{
	char text[160], line[64];
	int width = w[0] - 2, first = 1;

	snprintf(text, sizeof(text), "%s (%s)", name, type);
	if ((int)strlen(text) > width)
		snprintf(text, sizeof(text), "%s\n(%s)", name, type);
	for (const char *p = text; *p; first = 0) {
		int len = (int)strcspn(p, "\n");
		if (len > width)
			len = width;
		snprintf(line, sizeof(line), "%.*s", len, p);
		row(line, first ? shape : "", first ? count : "", w, "│");
		p += len;
		if (*p == '\n')
			p++;
	}
}

int cmd_summary(int argc, char **argv)
{
	static const int w[3] = { 33, 24, 15 };
	struct dt_opts o;
	struct dt_app a;
	struct dt_model m = { 0 };
	char shape[64], count[32], size[32];
	int rc;

	if ((rc = dt_opts_parse(&o, argc, argv, "config model-or-checkpoint set", usage)) >= 0)
		goto out_opts;
	if ((rc = dt_app_config(&a, &o, 0)))
		goto out;
	if ((rc = dt_app_model(&a, &m)))
		goto out;
	printf("Model: \"%s\"\n", m.name);
	rule("┏", "━", "┳", "┓", w);
	row("Layer (type)", "Output Shape", "Param #", w, "┃");
	rule("┡", "━", "╇", "┩", w);
	for (int i = 0; i < m.nlayers; i++) {
		const struct dt_layer *l = &m.layers[i];
		char name[96];
		/* a residual block's inner layers and projection are indented, above the add that closes it */
		snprintf(name, sizeof(name), "%*s%s", 2 * m.depth[i], "", l->name);
		layer_row(name, l->type->class_name, dt_shape_format(&l->out, 1, shape, sizeof(shape)),
			  dt_count_format(dt_layer_param_count(l), count, sizeof(count)), w);
		if (i + 1 < m.nlayers)
			rule("├", "─", "┼", "┤", w);
	}
	rule("└", "─", "┴", "┘", w);
	printf(" Total params: %s (%s)\n", dt_count_format(m.nparams, count, sizeof(count)),
	       dt_bytes_format(m.nparams * 4.0, size, sizeof(size)));
	printf(" Trainable params: %s (%s)\n", dt_count_format(m.ntrainable, count, sizeof(count)),
	       dt_bytes_format(m.ntrainable * 4.0, size, sizeof(size)));
	printf(" Non-trainable params: %s (%s)\n", dt_count_format(m.nparams - m.ntrainable, count, sizeof(count)),
	       dt_bytes_format((m.nparams - m.ntrainable) * 4.0, size, sizeof(size)));
	rc = DT_EXIT_OK;
out:
	dt_model_release(&m);
	dt_app_release(&a);
out_opts:
	dt_opts_release(&o);
	return rc;
}
