#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/config/resolved.h"
#include "core/error.h"

/* One entry of a mapping as printed: the node written, or the text of a note (a default, a resolved path). */
struct entry {
	const char *key;
	const struct dt_node *node; /* NULL when text */
	const char *text;
};

static int is_null_text(const char *v)
{
	return !*v || !strcmp(v, "~") || !strcmp(v, "null") || !strcmp(v, "Null") || !strcmp(v, "NULL");
}

/* The note of map's key, or NULL. */
static const struct dt_cfg_note *find_note(const struct dt_node *map, const char *key)
{
	const struct dt_cfg_note *notes;
	int n = dt_cfg_notes(&notes);
	for (int i = 0; i < n; i++)
		if (notes[i].map == map && !strcmp(notes[i].key, key))
			return &notes[i];
	return NULL;
}

/* The entries of map: its items (a note in place of a null value or a resolved path), then the defaults of absent keys. */
static struct entry *entries(const struct dt_node *map, int *count)
{
	const struct dt_cfg_note *notes;
	int nn = dt_cfg_notes(&notes), k = 0;
	struct entry *e = dt_calloc((size_t)(map->n + nn + 1), sizeof(*e));

	for (int i = 0; i < map->n; i++) {
		const struct dt_cfg_note *note = find_note(map, map->keys[i]);
		const struct dt_node *v = map->items[i];
		int null = v->kind == DT_NODE_SCALAR && !v->quoted && is_null_text(v->value);
		e[k++] = note && (note->replace || null) ? (struct entry){ map->keys[i], NULL, note->value }
							 : (struct entry){ map->keys[i], v, NULL };
	}
	for (int i = 0; i < nn; i++) {
		int j;
		if (notes[i].map != map)
			continue;
		for (j = 0; j < map->n && strcmp(map->keys[j], notes[i].key); j++)
			;
		if (j == map->n && dt_cfg_note_allowed(map, notes[i].key))
			e[k++] = (struct entry){ notes[i].key, NULL, notes[i].value };
	}
	*count = k;
	return e;
}

/* ---- YAML ---- */

/* v as a YAML scalar: plain when it was plain and holds only safe characters, else double-quoted (JSON's escapes). */
static void yaml_scalar(FILE *f, const char *v, int quoted)
{
	static const char safe[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./+-~";
	if (!quoted && *v && strcmp(v, "-") && strspn(v, safe) == strlen(v)) {
		fputs(v, f);
		return;
	}
	if (!quoted && !*v) {
		fputs("~", f);
		return;
	}
	cJSON *s = cJSON_CreateString(v);
	char *text = cJSON_PrintUnformatted(s);
	fputs(text, f);
	free(text);
	cJSON_Delete(s);
}

static void yaml_map(FILE *f, const struct dt_node *map, int indent, int inline_first);
static void yaml_seq(FILE *f, const struct dt_node *seq, int indent);

/* Is every item of seq a scalar (written in flow style, [a, b])? */
static int flat_seq(const struct dt_node *seq)
{
	for (int i = 0; i < seq->n; i++)
		if (seq->items[i]->kind != DT_NODE_SCALAR)
			return 0;
	return 1;
}

/* The value after "key:" (or "- "): " scalar\n", or a newline and the block at indent. */
static void yaml_value(FILE *f, const struct dt_node *n, int indent)
{
	if (n->kind == DT_NODE_SCALAR) {
		fputc(' ', f);
		yaml_scalar(f, n->value ? n->value : "", n->quoted);
		fputc('\n', f);
	} else if (n->kind == DT_NODE_SEQ && flat_seq(n)) {
		fputs(" [", f);
		for (int i = 0; i < n->n; i++) {
			if (i)
				fputs(", ", f);
			yaml_scalar(f, n->items[i]->value, n->items[i]->quoted);
		}
		fputs("]\n", f);
	} else if (n->kind == DT_NODE_MAP) {
		int count;
		free(entries(n, &count));
		if (!count) {
			fputs(" {}\n", f);
			return;
		}
		fputc('\n', f);
		yaml_map(f, n, indent, 0);
	} else {
		fputc('\n', f);
		yaml_seq(f, n, indent);
	}
}

static void yaml_map(FILE *f, const struct dt_node *map, int indent, int inline_first)
{
	int count;
	struct entry *e = entries(map, &count);
	for (int i = 0; i < count; i++) {
		if (i || !inline_first)
			fprintf(f, "%*s", indent, "");
		yaml_scalar(f, e[i].key, 0);
		fputc(':', f);
		if (e[i].node) {
			yaml_value(f, e[i].node, indent + 2);
		} else {
			fputc(' ', f);
			yaml_scalar(f, e[i].text, 0);
			fputc('\n', f);
		}
	}
	free(e);
}

static void yaml_seq(FILE *f, const struct dt_node *seq, int indent)
{
	for (int i = 0; i < seq->n; i++) {
		const struct dt_node *it = seq->items[i];
		int count = 0;
		fprintf(f, "%*s-", indent, "");
		if (it->kind == DT_NODE_MAP)
			free(entries(it, &count));
		if (count) {
			fputc(' ', f);
			yaml_map(f, it, indent + 2, 1);
		} else {
			yaml_value(f, it, indent + 2);
		}
	}
}

/* ---- JSON ---- */

/* A JSON number as RFC 8259 spells it: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static int json_number(const char *s)
{
	if (*s == '-')
		s++;
	if (*s == '0')
		s++;
	else if (isdigit((unsigned char)*s))
		while (isdigit((unsigned char)*s))
			s++;
	else
		return 0;
	if (*s == '.') {
		if (!isdigit((unsigned char)*++s))
			return 0;
		while (isdigit((unsigned char)*s))
			s++;
	}
	if (*s == 'e' || *s == 'E') {
		s++;
		if (*s == '+' || *s == '-')
			s++;
		if (!isdigit((unsigned char)*s))
			return 0;
		while (isdigit((unsigned char)*s))
			s++;
	}
	return *s == '\0';
}

static cJSON *json_scalar(const char *v, int quoted)
{
	if (quoted)
		return cJSON_CreateString(v);
	if (is_null_text(v))
		return cJSON_CreateNull();
	if (!strcmp(v, "true") || !strcmp(v, "false"))
		return cJSON_CreateBool(!strcmp(v, "true"));
	return json_number(v) ? cJSON_CreateRaw(v) : cJSON_CreateString(v);
}

static cJSON *json_node(const struct dt_node *n)
{
	cJSON *o;
	if (n->kind == DT_NODE_SCALAR)
		return json_scalar(n->value ? n->value : "", n->quoted);
	if (n->kind == DT_NODE_SEQ) {
		o = cJSON_CreateArray();
		for (int i = 0; i < n->n; i++)
			cJSON_AddItemToArray(o, json_node(n->items[i]));
		return o;
	}
	int count;
	struct entry *e = entries(n, &count);
	o = cJSON_CreateObject();
	for (int i = 0; i < count; i++)
		cJSON_AddItemToObject(o, e[i].key, e[i].node ? json_node(e[i].node) : json_scalar(e[i].text, 0));
	free(e);
	return o;
}

int dt_resolved_write(FILE *f, const struct dt_node *root, int json)
{
	if (json) {
		cJSON *o = json_node(root);
		char *text = cJSON_Print(o);
		fprintf(f, "%s\n", text);
		free(text);
		cJSON_Delete(o);
	} else {
		yaml_map(f, root, 0, 0);
	}
	return fflush(f) == 0 && !ferror(f) ? 0 : dt_error("cannot write the config: write error");
}
