/*
 * PNG files as data: the `format: png_folder` source and the PNG-paths
 * stream reader of `dtrain predict` (dt_png_reader), both decoding through
 * png.h (data/png_decode.c).
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/config/config.h"
#include "core/error.h"
#include "core/rng.h"
#include "core/pipeline/source.h"
#include "png.h"
#include "reader.h"
#include "sources.h"


/*
 * `format: png_folder`: a directory with one subfolder per class, as Keras'
 * image_dataset_from_directory reads it.
 *
 *   directory: flowers/train    flowers/train/daisy/a.png, flowers/train/rose/b.png, ...
 *   image_size: [180, 180]      default: the size of the first image
 *   color_mode: rgb             grayscale | rgb | rgba (channels 1, 3, 4)
 *   class_names: [rose, daisy]  optional: this order, or a subset of the folders
 *   shuffle: true               the records in a seeded order (Keras' shuffle)
 *   seed: 0
 *
 * Classes are the subfolders in byte order of their names (Python's
 * sorted()), or class_names. A class's records are the .png files (any case
 * of the extension) under its folder and its subfolders, directories in byte
 * order of their paths, files sorted within each (Keras' os.walk order).
 * Names that start with '.' are skipped, and so are files of other types and
 * files directly in `directory`. With shuffle (the default, as Keras) the
 * records are then put in one order drawn from seed, so that
 * data.validation_split, which takes the last records, holds every class,
 * as Keras' validation_split does. Only the file list is read at open; read()
 * decodes each record from its file.
 *
 * Validation and test folders are opened with the training classes
 * (s->class_map): each class folder is numbered by its name among the
 * training classes, so a folder may lack classes; the records of a folder
 * that is no training class are unreadable (an error naming the file, or
 * skipped under data.on_error: skip).
 */

#define FOLDER_MAX_VALUES (1 << 26) /* floats in one sample */

struct png_folder {
	char *paths;       /* every record's path, NUL-terminated, one after another */
	int64_t *offset;   /* (count) where record i's path starts in paths */
	int32_t *labels;   /* (count) the class, or -1 - k for folder k of `folders` that is no training class */
	char **folders;    /* the class folders read, NULL-terminated */
	int h, w, c;
	struct dt_png_decoder *dec;
};

struct strvec {
	char **v;
	int n, cap;
};

static void strvec_push(struct strvec *s, char *str)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 16;
		s->v = dt_realloc(s->v, (size_t)s->cap * sizeof(char *));
	}
	s->v[s->n++] = str;
}

static void strvec_free(struct strvec *s)
{
	for (int i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	memset(s, 0, sizeof(*s));
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *path_join(const char *dir, const char *name)
{
	size_t n = strlen(dir);
	char *p = dt_malloc(n + strlen(name) + 2);
	sprintf(p, "%s%s%s", dir, n && dir[n - 1] == '/' ? "" : "/", name);
	return p;
}

/* 1 if path is a directory (follow says whether a symbolic link to one counts). */
static int is_dir(const char *path, const struct dirent *e, int follow)
{
	struct stat st;
	if (e->d_type == DT_DIR)
		return 1;
	if (e->d_type != DT_UNKNOWN && (e->d_type != DT_LNK || !follow))
		return 0;
	if ((follow ? stat(path, &st) : lstat(path, &st)) < 0)
		return 0;
	return S_ISDIR(st.st_mode);
}

static int has_suffix(const char *name, const char *suffix)
{
	size_t n = strlen(name), k = strlen(suffix);
	return n > k && !strcasecmp(name + n - k, suffix);
}

/* The extension of an image file Keras reads and png_folder does not (.jpg, ...), or NULL. */
static const char *other_image(const char *name)
{
	static const char *const keras_only[] = { ".jpg", ".jpeg", ".bmp", ".gif", NULL };
	for (int i = 0; keras_only[i]; i++)
		if (has_suffix(name, keras_only[i]))
			return keras_only[i];
	return NULL;
}

/* Appends dir and every directory below it (symbolic links not followed, as os.walk) to out. */
static int walk(const char *dir, struct strvec *out)
{
	DIR *dp = opendir(dir);
	struct dirent *e;

	if (!dp)
		return dt_error("cannot open directory '%s': %s", dir, strerror(errno));
	strvec_push(out, dt_strdup(dir));
	while ((e = readdir(dp))) {
		char *sub;
		if (e->d_name[0] == '.')
			continue;
		sub = path_join(dir, e->d_name);
		if (is_dir(sub, e, 0) && walk(sub, out) < 0) {
			free(sub);
			closedir(dp);
			return -1;
		}
		free(sub);
	}
	closedir(dp);
	return 0;
}

/* Appends the sorted .png files of dir to files; counts other image files in *other. */
static int list_pngs(const char *dir, struct strvec *files, int *other)
{
	struct strvec names = { 0 };
	DIR *dp = opendir(dir);
	struct dirent *e;

	if (!dp)
		return dt_error("cannot open directory '%s': %s", dir, strerror(errno));
	while ((e = readdir(dp))) {
		if (e->d_name[0] == '.' || e->d_type == DT_DIR)
			continue;
		if (has_suffix(e->d_name, ".png")) {
			char *p = path_join(dir, e->d_name);
			if (is_dir(p, e, 1))
				free(p);
			else
				strvec_push(&names, p);
			continue;
		}
		if (other_image(e->d_name))
			(*other)++;
	}
	closedir(dp);
	if (names.n)
		qsort(names.v, names.n, sizeof(char *), cmp_str);
	for (int i = 0; i < names.n; i++)
		strvec_push(files, names.v[i]);
	free(names.v);
	return 0;
}

/* The class folders of dir, sorted. */
static int list_classes(const char *dir, struct strvec *out)
{
	DIR *dp = opendir(dir);
	struct dirent *e;

	if (!dp)
		return dt_error("cannot open directory '%s': %s", dir, strerror(errno));
	while ((e = readdir(dp))) {
		char *p;
		if (e->d_name[0] == '.')
			continue;
		p = path_join(dir, e->d_name);
		if (is_dir(p, e, 1))
			strvec_push(out, dt_strdup(e->d_name));
		free(p);
	}
	closedir(dp);
	if (out->n)
		qsort(out->v, out->n, sizeof(char *), cmp_str);
	return 0;
}

/* The class names from class_names: (a subset of the folders, in the order given), else all folders. */
static int pick_classes(const struct dt_node *args, const char *dir, struct strvec *folders, struct strvec *out)
{
	const struct dt_node *list = dt_node_get(args, "class_names");

	if (!list) {
		*out = *folders;
		memset(folders, 0, sizeof(*folders));
		return 0;
	}
	if (dt_node_expect(list, DT_NODE_SEQ, "class_names") < 0)
		return -1;
	strvec_push(folders, NULL); /* NULL-terminated for dt_did_you_mean */
	folders->n--;
	for (int i = 0; i < list->n; i++) {
		const struct dt_node *it = list->items[i];
		int found = 0;
		if (it->kind != DT_NODE_SCALAR || !it->value || !*it->value)
			return dt_node_error(it, "a class name must be a folder name");
		for (int j = 0; j < folders->n; j++)
			found |= !strcmp(folders->v[j], it->value);
		if (!found) {
			const char *guess = dt_did_you_mean(it->value, (const char *const *)folders->v);
			if (guess)
				return dt_node_error(it, "'%s' is not a class folder of '%s'; did you mean '%s'?",
						     it->value, dir, guess);
			return dt_node_error(it, "'%s' is not a class folder of '%s'", it->value, dir);
		}
		for (int j = 0; j < out->n; j++)
			if (!strcmp(out->v[j], it->value))
				return dt_node_error(it, "class '%s' is listed twice", it->value);
		strvec_push(out, dt_strdup(it->value));
	}
	return 0;
}

/*
 * The number of each class folder (classes->n) by the training classes into
 * number: its place in map->names, or -1 - k for folder k that is no training
 * class. An error when no folder is one. 0 or -1.
 */
static int map_classes(const struct dt_class_map *map, const char *dir, const struct strvec *classes, int *number)
{
	char names[256];
	int known = 0;

	for (int k = 0; k < classes->n; k++) {
		number[k] = -1 - k;
		for (int i = 0; i < map->n; i++)
			if (!strcmp(classes->v[k], map->names[i]))
				number[k] = i;
		known += number[k] >= 0;
	}
	if (!known)
		return dt_error("none of the class folders of '%s' is a class of the training data (%s)", dir,
				dt_class_map_format(map, names, sizeof(names)));
	return 0;
}

static void folder_close(struct dt_source *s)
{
	struct png_folder *d = s->priv;
	if (!d)
		return;
	free(d->paths);
	free(d->offset);
	free(d->labels);
	for (int k = 0; d->folders && d->folders[k]; k++)
		free(d->folders[k]);
	free(d->folders);
	dt_png_decoder_free(d->dec);
	free(d);
	s->priv = NULL;
}

static const int channels[] = { 1, 3, 4 }; /* of each color_mode */

static const char *const folder_keys[] = { "format", "directory", "image_size", "color_mode", "class_names",
					"shuffle", "seed", NULL };

/*
 * The arguments that need no file: the directory (the caller frees it, also
 * after an error), color_mode, image_size, shuffle and seed. 0 or -1.
 */
static int folder_args(const struct dt_node *args, char **dir, int *mode, struct dt_shape *size, int *shuffle,
		       int64_t *seed)
{
	static const char *const names[] = { "grayscale", "rgb", "rgba", NULL };

	*dir = NULL;
	if (dt_cfg_check_keys(args, "png_folder", folder_keys) < 0 ||
	    dt_cfg_require(args, "directory", "png_folder") < 0 ||
	    dt_cfg_path(args, "directory", dir) < 0 || dt_cfg_enum(args, "color_mode", names, 1, mode) < 0 ||
	    dt_cfg_shape(args, "image_size", size) < 0 || dt_cfg_bool(args, "shuffle", 1, shuffle) < 0 ||
	    dt_cfg_int(args, "seed", 0, 0, INT64_MAX, seed) < 0)
		return -1;
	if (size->ndim && size->ndim != 2)
		return dt_node_error(dt_node_get(args, "image_size"), "image_size is [height, width], got %d numbers",
				     size->ndim);
	if (size->ndim && ((int64_t)size->dim[0] * size->dim[1] * channels[*mode] > FOLDER_MAX_VALUES ||
			   size->dim[0] > DT_PNG_MAX_SIDE || size->dim[1] > DT_PNG_MAX_SIDE))
		return dt_node_error(dt_node_get(args, "image_size"), "image_size [%d, %d] is too large", size->dim[0],
				     size->dim[1]);
	return 0;
}

static int folder_check(const struct dt_node *args)
{
	struct dt_shape size = { 0 };
	char *dir;
	int mode, shuffle, rc;
	int64_t seed;

	rc = folder_args(args, &dir, &mode, &size, &shuffle, &seed);
	free(dir);
	return rc;
}

static int folder_open(struct dt_source *s, const struct dt_node *args)
{
	struct strvec folders = { 0 }, classes = { 0 }, files = { 0 };
	const struct dt_class_map *map = s->class_map && s->class_map->names ? s->class_map : NULL;
	struct dt_shape size = { 0 };
	struct png_folder *d;
	char *dir = NULL;
	int mode, shuffle, other = 0, rc = -1, *number = NULL;
	int64_t seed;
	size_t bytes = 0;

	if (folder_args(args, &dir, &mode, &size, &shuffle, &seed) < 0)
		goto out;
	if (list_classes(dir, &folders) < 0)
		goto out;
	if (folders.n == 0) {
		dt_error("'%s' has no class folders (it needs one subfolder of .png files per class)", dir);
		goto out;
	}
	if (pick_classes(args, dir, &folders, &classes) < 0)
		goto out;
	if (classes.n == 0) {
		dt_node_error(dt_node_get(args, "class_names"), "class_names is empty");
		goto out;
	}
	if (classes.n < 2 && !map) {
		dt_error("'%s' has only one class, '%s'; a classifier needs at least 2 class folders", dir, classes.v[0]);
		goto out;
	}
	number = dt_malloc((size_t)classes.n * sizeof(int));
	for (int k = 0; k < classes.n; k++)
		number[k] = k;
	if (map && map_classes(map, dir, &classes, number) < 0)
		goto out;

	d = dt_calloc(1, sizeof(*d));
	s->priv = d;
	d->dec = dt_png_decoder_new();
	for (int k = 0; k < classes.n; k++) {
		struct strvec dirs = { 0 };
		char *cdir = path_join(dir, classes.v[k]);
		int first = files.n;
		int failed = walk(cdir, &dirs) < 0;
		if (!failed)
			qsort(dirs.v, dirs.n, sizeof(char *), cmp_str);
		for (int i = 0; !failed && i < dirs.n; i++)
			failed = list_pngs(dirs.v[i], &files, &other) < 0;
		strvec_free(&dirs);
		if (!failed && files.n == first) {
			dt_error("class folder '%s' holds no .png files", cdir);
			failed = 1;
		}
		free(cdir);
		if (failed)
			goto out;
		d->labels = dt_realloc(d->labels, (size_t)files.n * sizeof(int32_t));
		for (int i = first; i < files.n; i++)
			d->labels[i] = number[k];
	}
	if (other)
		dt_warn("'%s' holds %d .jpg, .jpeg, .bmp or .gif file%s: %s ignored, png_folder reads only .png", dir,
			other, other == 1 ? "" : "s", other == 1 ? "it is" : "they are");

	d->offset = dt_malloc((size_t)files.n * sizeof(int64_t));
	for (int i = 0; i < files.n; i++) {
		d->offset[i] = (int64_t)bytes;
		bytes += strlen(files.v[i]) + 1;
	}
	d->paths = dt_malloc(bytes);
	for (int i = 0; i < files.n; i++)
		memcpy(d->paths + d->offset[i], files.v[i], strlen(files.v[i]) + 1);
	d->c = channels[mode];
	if (size.ndim) {
		d->h = size.dim[0];
		d->w = size.dim[1];
	} else {
		int ch;
		if (dt_png_decoder_info(d->dec, files.v[0], &d->h, &d->w, &ch) < 0) {
			dt_error("cannot decode '%s' (record 0), whose size would be image_size: %s", files.v[0],
				 dt_png_decoder_error(d->dec));
			goto out;
		}
		if ((int64_t)d->h * d->w * d->c > FOLDER_MAX_VALUES) {
			dt_error("'%s' is %d x %d pixels, too large for a sample; set image_size", files.v[0], d->h, d->w);
			goto out;
		}
	}

	if (shuffle) {
		struct dt_rng r;
		dt_rng_seed(&r, (uint64_t)seed, 0x706e67); /* "png" */
		for (int i = files.n - 1; i > 0; i--) {
			int j = (int)dt_rng_below(&r, (uint64_t)i + 1);
			int64_t o = d->offset[i];
			int32_t l = d->labels[i];
			d->offset[i] = d->offset[j], d->offset[j] = o;
			d->labels[i] = d->labels[j], d->labels[j] = l;
		}
	}

	snprintf(s->name, sizeof(s->name), "%s", dir);
	s->count = files.n;
	s->sample = dt_shape_make(3, (int[]){ d->h, d->w, d->c });
	s->label = dt_shape_make(1, (int[]){ 1 });
	s->num_classes = map ? map->n : classes.n;
	s->class_names = dt_malloc((size_t)s->num_classes * sizeof(char *));
	for (int k = 0; k < s->num_classes; k++)
		s->class_names[k] = dt_strdup(map ? map->names[k] : classes.v[k]);
	strvec_push(&classes, NULL);
	d->folders = classes.v;
	memset(&classes, 0, sizeof(classes));
	rc = 0;
out:
	free(number);
	strvec_free(&folders);
	strvec_free(&classes);
	strvec_free(&files);
	free(dir);
	return rc;
}

static int folder_read(struct dt_source *s, const int64_t *idx, int n, float *x, float *y, uint8_t *bad)
{
	struct png_folder *d = s->priv;
	int64_t rec = (int64_t)d->h * d->w * d->c;
	char names[256];

	for (int i = 0; i < n; i++) {
		const char *path;
		if (idx[i] < 0 || idx[i] >= s->count)
			return dt_error("record %lld is out of range in '%s' (%lld records)", (long long)idx[i],
					s->name, (long long)s->count);
		path = d->paths + d->offset[idx[i]];
		if (d->labels[idx[i]] < 0) {
			if (!bad)
				return dt_error("'%s' (record %lld of '%s'): its folder '%s' is not a class of the "
						"training data (%s)", path, (long long)idx[i], s->name,
						d->folders[-1 - d->labels[idx[i]]],
						dt_class_map_format(&(struct dt_class_map){ .n = s->num_classes, .names = s->class_names },
								    names, sizeof(names)));
			bad[i] = 1;
			continue;
		}
		if (dt_png_decoder_decode(d->dec, path, d->h, d->w, d->c, x + i * rec) < 0) {
			if (!bad)
				return dt_error("cannot decode '%s' (record %lld of '%s'): %s", path, (long long)idx[i],
						s->name, dt_png_decoder_error(d->dec));
			bad[i] = 1;
			continue;
		}
		y[i] = (float)d->labels[idx[i]];
		if (bad)
			bad[i] = 0;
	}
	return 0;
}

static int folder_record_what(struct dt_source *s, int64_t i, char *buf, size_t size)
{
	struct png_folder *d = s->priv;
	if (!d || i < 0 || i >= s->count)
		return 0;
	snprintf(buf, size, "'%s'", d->paths + d->offset[i]);
	return 1;
}

static int folder_known_bad(struct dt_source *s, int64_t i)
{
	const struct png_folder *d = s->priv;
	return d->labels[i] < 0; /* its folder is no training class */
}

static void folder_labels(struct dt_source *s, int32_t *out)
{
	const struct png_folder *d = s->priv;
	for (int64_t r = 0; r < s->count; r++)
		out[r] = d->labels[r] < 0 ? -1 : d->labels[r];
}

const struct dt_source_type dt_png_folder_source = {
	.name = "png_folder",
	.keys = folder_keys,
	.open = folder_open,
	.read = folder_read,
	.close = folder_close,
	.labels = folder_labels,
	.check = folder_check,
	.record_what = folder_record_what,
	.known_bad = folder_known_bad,
};

/*
 * The stream reader for `dtrain predict`: a list of PNG paths, one per line
 * (a file or standard input, gzip or plain), each decoded to the model's
 * input shape (H, W, C) as png_folder decodes its records (C channels: 1
 * grayscale, 3 rgb, 4 rgba; resized bilinearly when the image is of another
 * size). Paths are used as written (relative ones to the current directory);
 * blank lines are skipped; line numbers count every line. A path that cannot
 * be decoded stops with an error naming it and its line, or, with
 * skip_bad (data.on_error: skip), is skipped with a warning. The paths of the
 * samples of the last chunk are kept for sample_name().
 *
 * A path that itself ends in .png (any case) is the one image to predict, not
 * a list: `dtrain predict MODEL cat.png` is what a Keras user types first. A
 * list line that is not text (control bytes, or not UTF-8: a PNG's first line
 * is "\x89PNG") is refused as a whole without printing its bytes, and a
 * path ending in .jpg, .jpeg, .bmp or .gif is refused by its name.
 */

struct png_stream {
	struct dt_gz *gz;
	struct dt_png_decoder *dec;
	char *buf;         /* the current line */
	size_t cap;
	int64_t line;      /* lines read so far */
	char *image;       /* the path given, when it names one image (*.png) rather than a list */
	char **names;      /* (ncap) the paths of the last chunk's samples */
	size_t *name_cap;
	int ncap;
	int h, w, c, skip;
};

/* Is the line text a path can be: UTF-8 without control bytes (a tab aside)? */
static int is_text_line(const unsigned char *p, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		int more = p[i] >= 0xf0 && p[i] <= 0xf4 ? 3 : p[i] >= 0xe0 ? 2 : p[i] >= 0xc2 ? 1 : 0;
		if ((p[i] < 0x20 && p[i] != '\t') || p[i] == 0x7f || (p[i] >= 0x80 && p[i] < 0xc2) || p[i] > 0xf4)
			return 0;
		for (; more > 0; more--)
			if (++i >= len || (p[i] & 0xc0) != 0x80)
				return 0;
	}
	return 1;
}

/* The next non-blank line into s->buf, without its line end. 1, 0 at the end, -1 after an error. */
static int png_getline(struct dt_reader *r, struct png_stream *s)
{
	if (s->image) { /* one image: its path is the only line */
		if (s->line++)
			return 0;
		s->buf = dt_strdup(s->image);
		return 1;
	}
	for (;;) {
		size_t len = 0;
		int got = 0;
		for (;;) {
			int64_t k;
			if (s->cap - len < 64) {
				s->cap = s->cap ? 2 * s->cap : 4096;
				s->buf = dt_realloc(s->buf, s->cap);
			}
			k = dt_gz_gets(s->gz, r->name, s->buf + len, (int64_t)(s->cap - len));
			if (k < 0)
				return -1;
			if (k == 0)
				break;
			got = 1;
			len += (size_t)k;
			if (s->buf[len - 1] == '\n')
				break;
			if (len >= 1 << 20)
				return dt_error("'%s', line %lld: longer than 1 MiB, not a path", r->name,
						(long long)s->line + 1);
		}
		if (!got)
			return 0;
		while (len > 0 && (s->buf[len - 1] == '\n' || s->buf[len - 1] == '\r'))
			s->buf[--len] = 0;
		s->line++;
		if (len >= 4 && !memcmp(s->buf, "\x89PNG", 4))
			return dt_error("'%s' is not a text list of PNG paths: it looks binary, a PNG image (a path "
					"ending in .png is read as one image)", r->name);
		if (strlen(s->buf) != len || !is_text_line((const unsigned char *)s->buf, len))
			return dt_error("'%s' is not a text list of PNG paths: line %lld looks binary", r->name,
					(long long)s->line);
		for (size_t i = 0; i < len; i++)
			if (s->buf[i] != ' ' && s->buf[i] != '\t')
				return 1;
	}
}

int dt_png_reader_check(const struct dt_shape *in)
{
	char shape[64];
	if (in->ndim != 3 || (in->dim[2] != 1 && in->dim[2] != 3 && in->dim[2] != 4) || in->dim[0] < 1 ||
	    in->dim[1] < 1 || in->dim[0] > DT_PNG_MAX_SIDE || in->dim[1] > DT_PNG_MAX_SIDE ||
	    dt_shape_count(in) > FOLDER_MAX_VALUES)
		return dt_error("reading PNG paths needs a model input of (height, width, channels) with 1, 3 or 4 "
				"channels, but it is %s",
				dt_shape_format(in, 0, shape, sizeof(shape)));
	return 0;
}

static int png_stream_open(struct dt_reader *r, const char *path, const struct dt_reader_opts *o)
{
	struct png_stream *s;
	const struct dt_shape *in = &o->sample;

	if (dt_png_reader_check(in) < 0)
		return -1;
	s = dt_calloc(1, sizeof(*s));
	r->priv = s;
	r->sample = *in;
	s->h = in->dim[0];
	s->w = in->dim[1];
	s->c = in->dim[2];
	s->skip = o->skip_bad;
	s->dec = dt_png_decoder_new();
	if (strcmp(path, "-") && has_suffix(path, ".png")) {
		s->image = dt_strdup(path);
		return 0;
	}
	/* Not a list of paths either: the image a Keras user would predict on. */
	if (strcmp(path, "-") && other_image(path))
		return dt_error("cannot read '%s': dtrain reads PNG images only, not %s (convert it to .png)", path,
				other_image(path));
	if (!(s->gz = dt_gz_open(path)))
		return -1;
	return 0;
}

static int png_stream_next(struct dt_reader *r, int n, float *x)
{
	struct png_stream *s = r->priv;
	int64_t rec = (int64_t)s->h * s->w * s->c;
	int i = 0;

	if (!s->gz && !s->image)
		return 0;
	if (n > s->ncap) {
		s->names = dt_realloc(s->names, (size_t)n * sizeof(char *));
		s->name_cap = dt_realloc(s->name_cap, (size_t)n * sizeof(size_t));
		for (int k = s->ncap; k < n; k++)
			s->names[k] = NULL, s->name_cap[k] = 0;
		s->ncap = n;
	}
	while (i < n) {
		size_t len;
		int rc = png_getline(r, s);
		if (rc < 0)
			return -1;
		if (rc == 0)
			break;
		if (dt_png_decoder_decode(s->dec, s->buf, s->h, s->w, s->c, x + i * rec) < 0) {
			if (s->image && !s->skip)
				return dt_error("cannot decode '%s': %s", s->image, dt_png_decoder_error(s->dec));
			if (s->image) {
				dt_warn("skipping '%s': %s", s->image, dt_png_decoder_error(s->dec));
				continue;
			}
			if (!s->skip)
				return dt_error("cannot decode '%s' (line %lld of '%s'): %s", s->buf, (long long)s->line,
						r->name, dt_png_decoder_error(s->dec));
			dt_warn("skipping '%s' (line %lld of '%s'): %s", s->buf, (long long)s->line, r->name,
				dt_png_decoder_error(s->dec));
			continue;
		}
		len = strlen(s->buf) + 1;
		if (len > s->name_cap[i]) {
			s->names[i] = dt_realloc(s->names[i], len);
			s->name_cap[i] = len;
		}
		memcpy(s->names[i], s->buf, len);
		i++;
	}
	r->records += i;
	return i;
}

static const char *png_stream_name(struct dt_reader *r, int i)
{
	struct png_stream *s = r->priv;
	return s && i >= 0 && i < s->ncap ? s->names[i] : NULL;
}

static void png_stream_close(struct dt_reader *r)
{
	struct png_stream *s = r->priv;
	if (!s)
		return;
	dt_gz_close(s->gz);
	dt_png_decoder_free(s->dec);
	free(s->image);
	for (int k = 0; k < s->ncap; k++)
		free(s->names[k]);
	free(s->names);
	free(s->name_cap);
	free(s->buf);
	free(s);
	r->priv = NULL;
}

const struct dt_reader_type dt_png_reader = {
	.name = "png",
	.needs_shape = 1,
	.open = png_stream_open,
	.next = png_stream_next,
	.close = png_stream_close,
	.sample_name = png_stream_name,
};
