/*
 * `format: cifar10` and `format: cifar100`: the binary versions of CIFAR-10
 * and CIFAR-100 (cifar-10-batches-bin/, cifar-100-binary/).
 *
 *   files: [data_batch_1.bin, data_batch_2.bin]   or
 *   directory: cifar-10-batches-bin               with split: train | test
 *   label_mode: fine | coarse                     cifar100 only (fine)
 *
 * A CIFAR-10 record is 1 label byte and 3072 pixel bytes; a CIFAR-100
 * record is a coarse and a fine label byte, then the pixels. Pixels are
 * channel-major (1024 red, 1024 green, 1024 blue, each 32 rows of 32);
 * read() gives (32, 32, 3) channels last, values 0..255. The standard files
 * of a directory: data_batch_1..5.bin or test_batch.bin (CIFAR-10),
 * train.bin or test.bin (CIFAR-100). Class names come from batches.meta.txt,
 * fine_label_names.txt or coarse_label_names.txt beside the (first) file,
 * when it is there.
 *
 * Every file is read into memory at open and its size and labels checked.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/config/config.h"
#include "core/pipeline/source.h"
#include "sources.h"

#define CIFAR_PIXELS 3072
#define CIFAR_MAX_FILES 64

struct cifar {
	uint8_t *data;  /* (count, record) as in the files */
	int record;     /* bytes of one record */
	int label_at;   /* offset of the label used in a record */
};

struct cifar_kind {
	const char *title;    /* "CIFAR-10" */
	int labels;           /* label bytes before the pixels */
	const char *train[6]; /* standard file names, NULL-terminated */
	const char *test[2];
};

static const struct cifar_kind cifar10_kind = {
	"CIFAR-10", 1,
	{ "data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin", NULL },
	{ "test_batch.bin", NULL },
};
static const struct cifar_kind cifar100_kind = {
	"CIFAR-100", 2, { "train.bin", NULL }, { "test.bin", NULL },
};

static char *join(const char *dir, const char *name)
{
	size_t n;
	char *p;
	if (name[0] == '/' || !dir || !strcmp(dir, "."))
		return dt_strdup(name);
	n = strlen(dir);
	p = dt_malloc(n + strlen(name) + 2);
	sprintf(p, "%s%s%s", dir, dir[n - 1] == '/' ? "" : "/", name);
	return p;
}

static char *dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	char *d;
	if (!slash)
		return dt_strdup(".");
	if (slash == path)
		return dt_strdup("/");
	d = dt_strdup(path);
	d[slash - path] = 0;
	return d;
}

static void cifar_close(struct dt_source *s)
{
	struct cifar *d = s->priv;
	if (!d)
		return;
	free(d->data);
	free(d);
	s->priv = NULL;
}

/*
 * Appends the records of one file to d->data (*count records so far).
 * Checks the size and every label against the number of classes.
 */
static int cifar_load(struct cifar *d, const struct cifar_kind *k, const char *path, int64_t *count)
{
	struct stat st;
	FILE *f = fopen(path, "rb");
	int64_t n;
	uint8_t *p;

	if (!f)
		return dt_error("cannot open '%s': %s", path, strerror(errno));
	if (fstat(fileno(f), &st) < 0) {
		int e = errno;
		fclose(f);
		return dt_error("cannot read '%s': %s", path, strerror(e));
	}
	if (!S_ISREG(st.st_mode)) {
		fclose(f);
		return dt_error("cannot read '%s': %s", path, S_ISDIR(st.st_mode) ? "it is a directory" : "not a regular file");
	}
	if (st.st_size == 0) {
		fclose(f);
		return dt_error("'%s' is empty", path);
	}
	if (st.st_size % d->record) {
		const struct cifar_kind *o = k == &cifar10_kind ? &cifar100_kind : &cifar10_kind;
		int64_t whole = st.st_size / d->record;
		fclose(f);
		return dt_error("'%s' has %lld bytes, not a whole number of %d-byte %s records: record %lld is cut "
				"after %lld bytes%s%s%s",
				path, (long long)st.st_size, d->record, k->title, (long long)whole,
				(long long)(st.st_size % d->record),
				st.st_size % (o->labels + CIFAR_PIXELS) ? "" : " (is it a ",
				st.st_size % (o->labels + CIFAR_PIXELS) ? "" : o->title,
				st.st_size % (o->labels + CIFAR_PIXELS) ? "" : " file?)");
	}
	n = st.st_size / d->record;
	d->data = dt_realloc(d->data, (size_t)(*count + n) * d->record);
	p = d->data + *count * d->record;
	if (fread(p, d->record, (size_t)n, f) != (size_t)n) {
		int e = ferror(f) ? errno : 0;
		fclose(f);
		return dt_error("cannot read '%s': %s", path, e ? strerror(e) : "the file shrank while being read");
	}
	fclose(f);
	for (int64_t i = 0; i < n; i++) {
		const uint8_t *r = p + i * d->record;
		if (k->labels == 1 && r[0] >= 10)
			return dt_error("'%s' record %lld: label %d is out of range (CIFAR-10 has 10 classes, 0 to 9)",
					path, (long long)i, r[0]);
		if (k->labels == 2 && r[0] >= 20)
			return dt_error("'%s' record %lld: coarse label %d is out of range (CIFAR-100 has 20 coarse "
					"classes, 0 to 19)", path, (long long)i, r[0]);
		if (k->labels == 2 && r[1] >= 100)
			return dt_error("'%s' record %lld: fine label %d is out of range (CIFAR-100 has 100 fine "
					"classes, 0 to 99)", path, (long long)i, r[1]);
	}
	*count += n;
	return 0;
}

/*
 * Class names from a text file beside the data, one per line (blank lines
 * skipped). Absent file: no names, 0. A file with another number of names
 * is an error.
 */
static int cifar_names(struct dt_source *s, const char *dir, const char *file, int classes)
{
	char *path = join(dir, file), line[256];
	FILE *f = fopen(path, "r");
	struct stat st;
	char **names;
	int n = 0;

	if (!f) {
		free(path);
		return 0;
	}
	if (fstat(fileno(f), &st) < 0 || !S_ISREG(st.st_mode)) {
		fclose(f);
		dt_error("cannot read '%s': not a regular file", path);
		free(path);
		return -1;
	}
	names = dt_calloc(classes, sizeof(char *));
	while (fgets(line, sizeof(line), f)) {
		char *b = line, *e;
		while (*b == ' ' || *b == '\t')
			b++;
		e = b + strlen(b);
		while (e > b && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
			e--;
		*e = 0;
		if (!*b)
			continue;
		if (n < classes)
			names[n] = dt_strdup(b);
		n++;
	}
	fclose(f);
	if (n != classes) {
		for (int i = 0; i < classes && i < n; i++)
			free(names[i]);
		free(names);
		dt_error("'%s' names %d classes, expected %d", path, n, classes);
		free(path);
		return -1;
	}
	free(path);
	s->class_names = names;
	return 0;
}

static const char *const cifar_keys[] = { "format", "files", "directory", "split", "label_mode", NULL };

/*
 * The arguments, which need no file: the batch files to read (paths[0..*npaths),
 * from `files` or from `directory` and `split`), the directory (NULL with
 * `files`) and label_mode. The caller frees paths and dir, also after an
 * error. 0 or -1.
 */
static int cifar_args(const struct dt_node *args, const struct cifar_kind *k, char **paths, int *npaths, char **dir,
		      int *mode)
{
	static const char *const names[] = { "train", "test", NULL };  /* split */
	static const char *const kinds[] = { "fine", "coarse", NULL }; /* label_mode */
	const char *what = k == &cifar10_kind ? "cifar10" : "cifar100";
	const struct dt_node *files = dt_node_get(args, "files");
	int split;

	*npaths = 0;
	*dir = NULL;
	if (dt_cfg_check_keys(args, what, cifar_keys) < 0 || dt_cfg_path(args, "directory", dir) < 0 ||
	    dt_cfg_enum(args, "split", names, 0, &split) < 0 || dt_cfg_enum(args, "label_mode", kinds, 0, mode) < 0)
		return -1;
	if (k == &cifar10_kind && dt_node_get(args, "label_mode"))
		return dt_node_error(dt_node_get(args, "label_mode"), "label_mode is for cifar100 only");
	if (!files == !*dir)
		return dt_node_error(files ? files : args, "%s takes either 'files' or 'directory'", what);
	if (files && dt_node_get(args, "split"))
		return dt_node_error(dt_node_get(args, "split"),
				     "split chooses the standard files of 'directory', not of 'files'");
	if (!files) {
		const char *const *std = split ? k->test : k->train;
		for (int i = 0; std[i]; i++)
			paths[(*npaths)++] = join(*dir, std[i]);
		return 0;
	}
	if (files->kind == DT_NODE_SCALAR) {
		paths[(*npaths)++] = join(files->dir, files->value);
		return 0;
	}
	if (dt_node_expect(files, DT_NODE_SEQ, "files") < 0)
		return -1;
	if (files->n == 0 || files->n > CIFAR_MAX_FILES)
		return dt_node_error(files, "files lists 1 to %d files, got %d", CIFAR_MAX_FILES, files->n);
	for (int i = 0; i < files->n; i++) {
		const struct dt_node *it = files->items[i];
		if (it->kind != DT_NODE_SCALAR || !it->value || !*it->value)
			return dt_node_error(it, "expected a file name");
		paths[(*npaths)++] = join(it->dir, it->value);
	}
	return 0;
}

static int cifar_check(const struct dt_node *args, const struct cifar_kind *k)
{
	char *paths[CIFAR_MAX_FILES] = { 0 }, *dir;
	int npaths, mode, rc = cifar_args(args, k, paths, &npaths, &dir, &mode);
	for (int i = 0; i < npaths; i++)
		free(paths[i]);
	free(dir);
	return rc;
}

static int cifar_open(struct dt_source *s, const struct dt_node *args, const struct cifar_kind *k)
{
	char *paths[CIFAR_MAX_FILES] = { 0 }, *dir = NULL, *meta_dir = NULL;
	int npaths = 0, mode, rc = -1;
	const char *meta;
	struct cifar *d;
	int64_t count = 0;

	if (cifar_args(args, k, paths, &npaths, &dir, &mode) < 0)
		goto out;
	d = dt_calloc(1, sizeof(*d));
	s->priv = d;
	d->record = k->labels + CIFAR_PIXELS;
	d->label_at = k->labels == 2 && mode == 0 ? 1 : 0; /* fine: the second byte */
	for (int i = 0; i < npaths; i++)
		if (cifar_load(d, k, paths[i], &count) < 0)
			goto out;

	snprintf(s->name, sizeof(s->name), "%s", dir ? dir : paths[0]);
	s->count = count;
	s->sample = dt_shape_make(3, (int[]){ 32, 32, 3 });
	s->label = dt_shape_make(1, (int[]){ 1 });
	s->num_classes = k->labels == 1 ? 10 : mode == 0 ? 100 : 20;
	meta = k->labels == 1 ? "batches.meta.txt" : mode == 0 ? "fine_label_names.txt" : "coarse_label_names.txt";
	meta_dir = dir_of(paths[0]);
	if (cifar_names(s, meta_dir, meta, s->num_classes) < 0)
		goto out;
	rc = 0;
out:
	for (int i = 0; i < npaths; i++)
		free(paths[i]);
	free(dir);
	free(meta_dir);
	return rc;
}

static int cifar10_open(struct dt_source *s, const struct dt_node *args)
{
	return cifar_open(s, args, &cifar10_kind);
}

static int cifar100_open(struct dt_source *s, const struct dt_node *args)
{
	return cifar_open(s, args, &cifar100_kind);
}

static int cifar_read(struct dt_source *s, const int64_t *idx, int n, float *x, float *y, uint8_t *bad)
{
	const struct cifar *d = s->priv;
	int lab = d->record - CIFAR_PIXELS;

	for (int i = 0; i < n; i++) {
		const uint8_t *r, *px;
		float *o = x + (int64_t)i * CIFAR_PIXELS;
		if (idx[i] < 0 || idx[i] >= s->count)
			return dt_error("record %lld is out of range in '%s' (%lld records)", (long long)idx[i],
					s->name, (long long)s->count);
		r = d->data + idx[i] * d->record;
		px = r + lab;
		for (int p = 0; p < 1024; p++) {
			o[3 * p] = px[p];
			o[3 * p + 1] = px[1024 + p];
			o[3 * p + 2] = px[2048 + p];
		}
		y[i] = r[d->label_at];
		if (bad)
			bad[i] = 0;
	}
	return 0;
}

static int cifar10_check(const struct dt_node *args) { return cifar_check(args, &cifar10_kind); }
static int cifar100_check(const struct dt_node *args) { return cifar_check(args, &cifar100_kind); }

const struct dt_source_type dt_cifar10_source = {
	.name = "cifar10",
	.keys = cifar_keys,
	.open = cifar10_open,
	.read = cifar_read,
	.close = cifar_close,
	.check = cifar10_check,
};

const struct dt_source_type dt_cifar100_source = {
	.name = "cifar100",
	.keys = cifar_keys,
	.open = cifar100_open,
	.read = cifar_read,
	.close = cifar_close,
	.check = cifar100_check,
};
