/*
 * Checkpoints (core/checkpoint/checkpoint.c): round trips, the bytes of the safetensors
 * format, atomic saving, and one named case per kind of corrupt file, each
 * with the message it must give. A table of corrupt headers runs as one cmocka
 * test per row, named after the row.
 */
#include "helpers.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cjson/cJSON.h>
#include <zlib.h>

#include "core/checkpoint/checkpoint.h"
#include "core/rng.h"

/* ---- helpers ---- */

static char *make_dir(void)
{
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char *dir = malloc(4096);
	snprintf(dir, 4096, "%s/dtrain-ckpt-XXXXXX", tmp);
	assert_non_null(mkdtemp(dir));
	return dir;
}

static char *join(const char *dir, const char *name)
{
	char *p = malloc(4096);
	snprintf(p, 4096, "%s/%s", dir, name);
	return p;
}

/* Number of entries in dir, "." and ".." aside. */
static int count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;
	assert_non_null(d);
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

static void remove_dir(char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	assert_non_null(d);
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		char *p = join(dir, e->d_name);
		assert_int_equal(unlink(p), 0);
		free(p);
	}
	closedir(d);
	assert_int_equal(rmdir(dir), 0);
	free(dir);
}

static unsigned char *read_whole(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	unsigned char *buf;
	long size;
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	size = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)size + 1);
	assert_int_equal(fread(buf, 1, (size_t)size, f), (size_t)size);
	fclose(f);
	*n = (size_t)size;
	return buf;
}

/* A safetensors file from header text (length prefix `hlen`) and data; caller frees the path. */
static char *write_raw(uint64_t hlen, const char *header, const void *data, size_t ndata)
{
	size_t nh = strlen(header), n = 8 + nh + ndata;
	unsigned char *buf = malloc(n);
	char *path;
	for (int i = 0; i < 8; i++)
		buf[i] = (unsigned char)(hlen >> (8 * i));
	memcpy(buf + 8, header, nh);
	if (ndata)
		memcpy(buf + 8 + nh, data, ndata);
	path = dt_test_write_file(".safetensors", buf, n);
	free(buf);
	return path;
}

static char *write_st(const char *header, const void *data, size_t ndata)
{
	return write_raw(strlen(header), header, data, ndata);
}

static void assert_floats_equal_bits(const float *a, const float *b, int64_t n)
{
	if (n)
		assert_memory_equal(a, b, (size_t)n * sizeof(float));
}

static float data64[64]; /* 0, 1, 2, ... for the corrupt-file cases */

static int setup_quiet(void **state)
{
	dt_error_set_quiet(1);
	for (int i = 0; i < 64; i++)
		data64[i] = (float)i;
	return 0;
}

/* ---- round trips ---- */

static void test_round_trip(void **state)
{
	float kernel[12], bias[4], conv[36], scalar = -2.5f, five[4], empty_dummy = 0;
	float special[5] = { 0.0f, -0.0f, INFINITY, -INFINITY, NAN };
	struct dt_ckpt_tensor t[] = {
		{ "dense_1/kernel", { 2, { 3, 4 } }, kernel },
		{ "dense_1/bias", { 1, { 4 } }, bias },
		{ "conv2d/kernel", { 4, { 3, 3, 2, 2 } }, conv },
		{ "scalar", { 0, { 0 } }, &scalar },
		{ "empty", { 2, { 0, 5 } }, NULL },
		{ "optimizer/five_d/m", { 5, { 1, 2, 1, 2, 1 } }, five },
		{ "special", { 1, { 5 } }, special },
		{ "empty_1d", { 1, { 0 } }, &empty_dummy },
	};
	struct dt_ckpt_meta meta[] = {
		{ "dtrain_version", DT_VERSION },
		{ "epoch", "3" },
		{ "config", "model:\n  - dense: {units: 4, name: \"d\\x\"}\n\ttab é ✓" },
		{ "empty", "" },
	};
	int nt = sizeof(t) / sizeof(t[0]);
	char *dir = make_dir(), *path = join(dir, "model.safetensors");
	struct dt_ckpt *c;

	for (int i = 0; i < 12; i++)
		kernel[i] = 0.1f * (float)i - 0.3f;
	for (int i = 0; i < 4; i++)
		bias[i] = (float)i * 1e-30f, five[i] = -(float)i;
	for (int i = 0; i < 36; i++)
		conv[i] = 1.0f / (float)(i + 1);

	assert_int_equal(dt_checkpoint_save(path, t, nt, meta, 4), 0);
	c = dt_checkpoint_load(path);
	assert_non_null(c);
	assert_string_equal(dt_checkpoint_path(c), path);
	assert_int_equal(dt_checkpoint_count(c), nt);
	for (int i = 0; i < nt; i++) {
		struct dt_ckpt_tensor a = dt_checkpoint_at(c, i);
		assert_string_equal(a.name, t[i].name);
		assert_true(dt_shape_equal(&a.shape, &t[i].shape));
		assert_non_null(a.data);
		assert_int_equal((uintptr_t)a.data % sizeof(float), 0);
		assert_floats_equal_bits(a.data, t[i].data, dt_shape_count(&t[i].shape));
		assert_ptr_equal(dt_checkpoint_find(c, t[i].name)->data, a.data);
	}
	assert_null(dt_checkpoint_find(c, "dense_1"));
	assert_null(dt_checkpoint_find(c, "zzz"));
	assert_null(dt_checkpoint_find(c, ""));
	for (int i = 0; i < 4; i++)
		assert_string_equal(dt_checkpoint_meta(c, meta[i].key), meta[i].value);
	assert_null(dt_checkpoint_meta(c, "step"));
	assert_null(dt_checkpoint_meta(c, "dense_1/kernel"));
	dt_checkpoint_free(c);
	dt_checkpoint_free(NULL);
	assert_int_equal(count_entries(dir), 1);
	free(path);
	remove_dir(dir);
}

static void test_round_trip_empty(void **state)
{
	char *dir = make_dir(), *path = join(dir, "empty.safetensors");
	struct dt_ckpt *c;
	assert_int_equal(dt_checkpoint_save(path, NULL, 0, NULL, 0), 0);
	c = dt_checkpoint_load(path);
	assert_non_null(c);
	assert_int_equal(dt_checkpoint_count(c), 0);
	assert_null(dt_checkpoint_find(c, "x"));
	assert_null(dt_checkpoint_meta(c, "x"));
	dt_checkpoint_free(c);
	free(path);
	remove_dir(dir);
}

/* ---- the bytes on disk ---- */

static void test_format_bytes(void **state)
{
	float k[6] = { 1, 2, 3, 4, 5, 6 }, b[4] = { -1, 0.5f, 1e-3f, 7 };
	struct dt_ckpt_tensor t[] = {
		{ "dense/kernel", { 2, { 2, 3 } }, k },
		{ "dense/bias", { 1, { 4 } }, b },
	};
	struct dt_ckpt_meta meta[] = { { "epoch", "1" }, { "quote", "a\"b" } };
	char *dir = make_dir(), *path = join(dir, "f.safetensors");
	unsigned char *buf;
	size_t n;
	uint64_t hlen = 0;
	cJSON *root, *e, *m;

	assert_int_equal(dt_checkpoint_save(path, t, 2, meta, 2), 0);
	buf = read_whole(path, &n);
	for (int i = 0; i < 8; i++)
		hlen |= (uint64_t)buf[i] << (8 * i);
	assert_true(hlen > 0 && 8 + hlen <= n);
	assert_int_equal((8 + hlen) % 8, 0);
	assert_int_equal(n - 8 - hlen, sizeof(k) + sizeof(b));
	assert_int_equal(buf[8], '{');

	root = cJSON_ParseWithLength((const char *)buf + 8, hlen);
	assert_non_null(root);
	/* __metadata__ first, then the tensors in the order given */
	e = root->child;
	assert_string_equal(e->string, "__metadata__");
	m = e;
	/* the two given and the checksums dtrain adds */
	assert_int_equal(cJSON_GetArraySize(m), 3);
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(m, "epoch")->valuestring, "1");
	{
		cJSON *crc = cJSON_Parse(cJSON_GetObjectItemCaseSensitive(m, "crc32")->valuestring);
		uint32_t want = (uint32_t)crc32(0, (const unsigned char *)k, sizeof(k));
		char hex[16];
		assert_non_null(crc);
		assert_int_equal(cJSON_GetArraySize(crc), 3);
		snprintf(hex, sizeof(hex), "%08x", (unsigned)want);
		assert_string_equal(cJSON_GetObjectItemCaseSensitive(crc, "dense/kernel")->valuestring, hex);
		assert_non_null(cJSON_GetObjectItemCaseSensitive(crc, "__metadata__"));
		cJSON_Delete(crc);
	}
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(m, "quote")->valuestring, "a\"b");
	e = e->next;
	assert_string_equal(e->string, "dense/kernel");
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(e, "dtype")->valuestring, "F32");
	{
		char *shape = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(e, "shape"));
		assert_string_equal(shape, "[2,3]");
		cJSON_free(shape);
	}
	{
		cJSON *o = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
		assert_int_equal(cJSON_GetArraySize(o), 2);
		assert_int_equal(cJSON_GetArrayItem(o, 0)->valueint, 0);
		assert_int_equal(cJSON_GetArrayItem(o, 1)->valueint, 24);
	}
	e = e->next;
	assert_string_equal(e->string, "dense/bias");
	{
		cJSON *o = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
		assert_int_equal(cJSON_GetArrayItem(o, 0)->valueint, 24);
		assert_int_equal(cJSON_GetArrayItem(o, 1)->valueint, 40);
		assert_int_equal(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(e, "shape"), 0)->valueint, 4);
	}
	assert_null(e->next);
	cJSON_Delete(root);

	/* the JSON text is padded with spaces only */
	{
		size_t end = 0;
		for (size_t i = 0; i < hlen; i++)
			if (buf[8 + i] == '}')
				end = i + 1;
		assert_true(hlen - end < 8);
		for (size_t i = end; i < hlen; i++)
			assert_int_equal(buf[8 + i], ' ');
	}
	/* the data: little-endian IEEE float32, kernel then bias */
	for (int i = 0; i < 10; i++) {
		float f = i < 6 ? k[i] : b[i - 6];
		uint32_t bits, got = 0;
		memcpy(&bits, &f, 4);
		for (int j = 0; j < 4; j++)
			got |= (uint32_t)buf[8 + hlen + 4 * (size_t)i + j] << (8 * j);
		assert_int_equal(got, bits);
	}
	free(buf);
	free(path);
	remove_dir(dir);
}

static void test_format_no_metadata(void **state)
{
	float x[2] = { 1, 2 };
	struct dt_ckpt_tensor t = { "x", { 1, { 2 } }, x };
	char *dir = make_dir(), *path = join(dir, "f.safetensors");
	unsigned char *buf;
	size_t n;
	cJSON *root;

	assert_int_equal(dt_checkpoint_save(path, &t, 1, NULL, 0), 0);
	buf = read_whole(path, &n);
	assert_true(n > 8 + (size_t)(buf[0] | (size_t)buf[1] << 8));
	assert_int_equal(buf[0] % 8, 0);
	root = cJSON_ParseWithLength((const char *)buf + 8, buf[0] | (size_t)buf[1] << 8);
	assert_non_null(root);
	/* the tensor and __metadata__ with the checksums alone */
	assert_int_equal(cJSON_GetArraySize(root), 2);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(root, "__metadata__")), 1);
	cJSON_Delete(root);
	free(buf);
	free(path);
	remove_dir(dir);
}

/* Files that dtrain does not write but that are valid safetensors. */
static void test_load_foreign_layouts(void **state)
{
	struct dt_ckpt *c;
	char *p;

	/* header order differs from data order; unpadded header; JSON whitespace */
	p = write_st("{ \"b\" : {\"shape\": [2], \"dtype\": \"F32\", \"data_offsets\": [8, 16]},\n"
		     "  \"a\" : {\"dtype\": \"F32\", \"shape\": [1, 2], \"data_offsets\": [0, 8], \"extra\": 1},"
		     "  \"z\" : {\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": [16, 16]} }\t",
		     data64, 16);
	c = dt_checkpoint_load(p);
	assert_non_null(c);
	assert_int_equal(dt_checkpoint_count(c), 3);
	assert_string_equal(dt_checkpoint_at(c, 0).name, "b");
	assert_float_equal(dt_checkpoint_find(c, "b")->data[0], 2.0f, 0);
	assert_float_equal(dt_checkpoint_find(c, "a")->data[1], 1.0f, 0);
	assert_int_equal(dt_checkpoint_find(c, "z")->shape.dim[0], 0);
	assert_null(dt_checkpoint_meta(c, "x"));
	dt_checkpoint_free(c);
	unlink(p);
	free(p);

	/* an empty header object and no data */
	p = write_st("{}", NULL, 0);
	c = dt_checkpoint_load(p);
	assert_non_null(c);
	assert_int_equal(dt_checkpoint_count(c), 0);
	dt_checkpoint_free(c);
	unlink(p);
	free(p);

	/* metadata only, an empty name, and a 0-d tensor */
	p = write_st("{\"__metadata__\":{\"format\":\"pt\"},\"\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}",
		     data64 + 3, 4);
	c = dt_checkpoint_load(p);
	assert_non_null(c);
	assert_string_equal(dt_checkpoint_meta(c, "format"), "pt");
	assert_int_equal(dt_checkpoint_find(c, "")->shape.ndim, 0);
	assert_float_equal(dt_checkpoint_find(c, "")->data[0], 3.0f, 0);
	dt_checkpoint_free(c);
	unlink(p);
	free(p);
}

/* ---- atomic saving ---- */

static float old_w[3] = { 1, 2, 3 };
static const struct dt_ckpt_tensor old_t = { "w", { 1, { 3 } }, old_w };

static void assert_old_file(const char *path)
{
	struct dt_ckpt *c = dt_checkpoint_load(path);
	assert_non_null(c);
	assert_int_equal(dt_checkpoint_count(c), 1);
	assert_int_equal(dt_checkpoint_at(c, 0).shape.dim[0], 3);
	assert_floats_equal_bits(dt_checkpoint_at(c, 0).data, old_w, 3);
	dt_checkpoint_free(c);
}

static void test_save_replaces_leaving_no_temp(void **state)
{
	float w2[2] = { 9, 8 };
	struct dt_ckpt_tensor t2 = { "w2", { 1, { 2 } }, w2 };
	char *dir = make_dir(), *path = join(dir, "ckpt.safetensors");
	struct dt_ckpt *c;

	assert_int_equal(dt_checkpoint_save(path, &old_t, 1, NULL, 0), 0);
	assert_int_equal(count_entries(dir), 1);
	assert_int_equal(dt_checkpoint_save(path, &t2, 1, NULL, 0), 0);
	assert_int_equal(count_entries(dir), 1);
	c = dt_checkpoint_load(path);
	assert_non_null(c);
	assert_int_equal(dt_checkpoint_count(c), 1);
	assert_string_equal(dt_checkpoint_at(c, 0).name, "w2");
	dt_checkpoint_free(c);
	free(path);
	remove_dir(dir);
}

/* A write that fails half-way (the file-size limit) leaves the old file and no temp. */
static void test_save_fails_midway_keeps_old(void **state)
{
	static float big[1 << 16];
	struct dt_ckpt_tensor t = { "big", { 1, { 1 << 16 } }, big };
	char *dir = make_dir(), *path = join(dir, "ckpt.safetensors");
	struct rlimit old, lim;
	void (*old_handler)(int);

	assert_int_equal(dt_checkpoint_save(path, &old_t, 1, NULL, 0), 0);
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	lim = old;
	lim.rlim_cur = 4096;
	old_handler = signal(SIGXFSZ, SIG_IGN);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
	assert_int_equal(dt_checkpoint_save(path, &t, 1, NULL, 0), -1);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	signal(SIGXFSZ, old_handler);

	assert_error_contains("cannot write '");
	assert_error_contains(path);
	assert_error_contains(strerror(EFBIG));
	assert_int_equal(count_entries(dir), 1);
	assert_old_file(path);
	free(path);
	remove_dir(dir);
}

/*
 * Saving into a directory the process may not write: the old file survives
 * and nothing is created. Root may write anywhere, so a child drops to the
 * user nobody first; skipped where it cannot.
 */
static void test_save_unwritable_dir_keeps_old(void **state)
{
	float w2[2] = { 9, 8 };
	struct dt_ckpt_tensor t2 = { "w2", { 1, { 2 } }, w2 };
	char *dir = make_dir(), *path = join(dir, "ckpt.safetensors");
	int status;
	pid_t pid;

	assert_int_equal(dt_checkpoint_save(path, &old_t, 1, NULL, 0), 0);
	assert_int_equal(chmod(dir, 0555), 0);
	assert_int_equal(chmod(path, 0644), 0);
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (geteuid() == 0 && (setgid(65534) || setuid(65534)))
			_exit(77);
		if (access(dir, W_OK) == 0)
			_exit(77);
		if (dt_checkpoint_save(path, &t2, 1, NULL, 0) != -1)
			_exit(1);
		if (!strstr(dt_error_last(), "cannot write '") || !strstr(dt_error_last(), path) ||
		    !strstr(dt_error_last(), strerror(EACCES)))
			_exit(2);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_int_equal(chmod(dir, 0700), 0);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) == 77) {
		free(path);
		remove_dir(dir);
		skip();
	}
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(count_entries(dir), 1);
	assert_old_file(path);
	free(path);
	remove_dir(dir);
}

static void test_save_missing_dir(void **state)
{
	char *dir = make_dir(), *sub = join(dir, "no/such"), *path = join(sub, "c.safetensors");
	assert_int_equal(dt_checkpoint_save(path, &old_t, 1, NULL, 0), -1);
	assert_error_contains("cannot write '");
	assert_error_contains(path);
	assert_error_contains(strerror(ENOENT));
	assert_int_equal(count_entries(dir), 0);
	free(sub);
	free(path);
	remove_dir(dir);
}

static void test_save_rejects_bad_input(void **state)
{
	float x[2] = { 0 };
	struct dt_ckpt_tensor dup[] = { { "a", { 1, { 2 } }, x }, { "b", { 1, { 1 } }, x }, { "a", { 1, { 1 } }, x } };
	struct dt_ckpt_tensor reserved = { "__metadata__", { 1, { 2 } }, x };
	struct dt_ckpt_tensor noname = { "", { 1, { 2 } }, x };
	struct dt_ckpt_tensor negative = { "n", { 2, { 2, -1 } }, x };
	struct dt_ckpt_tensor nodata = { "d", { 1, { 2 } }, NULL };
	struct dt_ckpt_meta mdup[] = { { "k", "1" }, { "k", "2" } };
	char *dir = make_dir(), *path = join(dir, "c.safetensors");

	assert_int_equal(dt_checkpoint_save(path, dup, 3, NULL, 0), -1);
	assert_error_contains("duplicate tensor 'a'");
	assert_int_equal(dt_checkpoint_save(path, &reserved, 1, NULL, 0), -1);
	assert_error_contains("tensor name '__metadata__' is reserved");
	assert_int_equal(dt_checkpoint_save(path, &noname, 1, NULL, 0), -1);
	assert_error_contains("tensor 0 has no name");
	assert_int_equal(dt_checkpoint_save(path, &negative, 1, NULL, 0), -1);
	assert_error_contains("tensor 'n' has a negative dimension");
	assert_int_equal(dt_checkpoint_save(path, &nodata, 1, NULL, 0), -1);
	assert_error_contains("tensor 'd' has no data");
	assert_int_equal(dt_checkpoint_save(path, dup, 1, mdup, 2), -1);
	assert_error_contains("duplicate metadata key 'k'");
	assert_error_contains(path);
	assert_int_equal(count_entries(dir), 0);
	free(path);
	remove_dir(dir);
}

/* ---- files that are not checkpoints ---- */

static void test_load_missing_file(void **state)
{
	assert_null(dt_checkpoint_load("/nonexistent/dir/x.safetensors"));
	assert_error_contains("cannot open '/nonexistent/dir/x.safetensors': ");
	assert_error_contains(strerror(ENOENT));
}

static void test_load_directory(void **state)
{
	char *dir = make_dir();
	assert_null(dt_checkpoint_load(dir));
	assert_error_contains("not a regular file");
	remove_dir(dir);
}

static void test_load_short_file(void **state)
{
	char *p = dt_test_write_file(".safetensors", "\x02\0\0\0\0", 5);
	char want[4200];
	assert_null(dt_checkpoint_load(p));
	snprintf(want, sizeof(want), "'%s': file has 5 bytes, too few for a safetensors header", p);
	assert_string_equal(dt_error_last(), want);
	unlink(p);
	free(p);
}

static void test_load_header_longer_than_file(void **state)
{
	char *p = write_raw(1000, "{}", NULL, 0);
	char want[4200];
	assert_null(dt_checkpoint_load(p));
	snprintf(want, sizeof(want), "'%s': header length 1000 exceeds the file size of 10 bytes", p);
	assert_string_equal(dt_error_last(), want);
	unlink(p);
	free(p);
}

static void test_load_header_length_absurd(void **state)
{
	char *p = write_raw(UINT64_MAX - 3, "{}", NULL, 0);
	assert_null(dt_checkpoint_load(p));
	assert_error_contains("header length 18446744073709551612 exceeds the file size of 10 bytes");
	unlink(p);
	free(p);
}

/* A sparse file larger than the header limit: rejected before anything is allocated. */
static void test_load_header_over_limit(void **state)
{
	char *p = write_raw(100000001, "{}", NULL, 0);
	assert_int_equal(truncate(p, 200000000), 0);
	assert_null(dt_checkpoint_load(p));
	assert_error_contains("header length 100000001 exceeds the limit of 100000000 bytes");
	unlink(p);
	free(p);
}

static void test_load_empty_header(void **state)
{
	char *p = write_st("", NULL, 0);
	assert_null(dt_checkpoint_load(p));
	assert_error_contains("': header is not valid JSON");
	unlink(p);
	free(p);
}

/* ---- corrupt headers, one named test each ---- */

struct bad_case {
	const char *name;
	const char *header;
	size_t ndata;   /* bytes of data64 after the header */
	const char *msg; /* expected message after "'<path>': " */
};

#define T(n, s, off) "\"" n "\":{\"dtype\":\"F32\",\"shape\":" s ",\"data_offsets\":" off "}"

static const struct bad_case bad_cases[] = {
	{ "not_utf8", "{\"a\xff\":1}", 0, "header is not valid UTF-8 JSON text: bad byte at file offset 11" },
	{ "overlong_utf8", "{\"\xc0\xaf\":1}", 0, "header is not valid UTF-8 JSON text: bad byte at file offset 10" },
	{ "control_byte", "{\"a\x01\":1}", 0, "header is not valid UTF-8 JSON text: bad byte at file offset 11" },
	{ "invalid_json", "{\"a\": ", 0, "header is not valid JSON: error near file offset 13" },
	{ "truncated_json", "{" T("w", "[2]", "[0,8]"), 8, "header is not valid JSON" },
	{ "deep_json", "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
		       "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
		       "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
		       "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
		       "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
		       "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
		       "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
		       "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
		       "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
		       "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
		       "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
		       0, "header is not valid JSON" },
	{ "header_is_array", "[1, 2]", 0, "header is not a JSON object" },
	{ "header_is_string", "\"{}\"", 0, "header is not a JSON object" },
	{ "text_after_object", "{} x", 0, "header has text after its JSON object" },
	{ "metadata_not_object", "{\"__metadata__\":[\"a\"]}", 0, "'__metadata__' is not an object" },
	{ "metadata_not_string", "{\"__metadata__\":{\"epoch\":3}}", 0, "metadata 'epoch' is not a string" },
	{ "metadata_twice", "{\"__metadata__\":{},\"__metadata__\":{}}", 0, "header has '__metadata__' twice" },
	{ "tensor_not_object", "{\"w\":[0,8]}", 8, "tensor 'w' is not an object" },
	{ "missing_dtype", "{\"w\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "tensor 'w' lacks 'dtype'" },
	{ "missing_shape", "{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8, "tensor 'w' lacks 'shape'" },
	{ "missing_offsets", "{\"w\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "tensor 'w' lacks 'data_offsets'" },
	{ "dtype_f16", "{\"w\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[0,8]}}", 8,
	  "tensor 'w' has dtype 'F16'; only F32 is supported" },
	{ "dtype_f64", "{\"w\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8,
	  "tensor 'w' has dtype 'F64'; only F32 is supported" },
	{ "dtype_not_string", "{\"w\":{\"dtype\":32,\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
	  "tensor 'w' has a dtype that is not a string" },
	{ "shape_not_list", "{" T("w", "2", "[0,8]") "}", 8, "tensor 'w' has a shape that is not a list" },
	{ "shape_negative", "{" T("w", "[2,-1]", "[0,8]") "}", 8,
	  "tensor 'w' has shape [2,-1]; dimensions must be integers from 0 to 2147483647" },
	{ "shape_fraction", "{" T("w", "[2.5]", "[0,8]") "}", 8,
	  "tensor 'w' has shape [2.5]; dimensions must be integers from 0 to 2147483647" },
	{ "shape_string", "{" T("w", "[\"2\"]", "[0,8]") "}", 8,
	  "tensor 'w' has shape [\"2\"]; dimensions must be integers from 0 to 2147483647" },
	{ "shape_huge_dim", "{" T("w", "[3000000000]", "[0,8]") "}", 8,
	  "tensor 'w' has shape [3000000000]; dimensions must be integers from 0 to 2147483647" },
	{ "shape_rank_6", "{" T("w", "[1,1,1,1,1,2]", "[0,8]") "}", 8,
	  "tensor 'w' has 6 dimensions; at most 5 are supported" },
	{ "shape_overflow", "{" T("w", "[2147483647,2147483647,2147483647,2147483647,2147483647]", "[0,8]") "}", 8,
	  "tensor 'w' has shape (2147483647, 2147483647, 2147483647, 2147483647, 2147483647), too large" },
	{ "offsets_not_list", "{" T("w", "[2]", "8") "}", 8,
	  "tensor 'w' has data_offsets 8; they must be [begin, end] in bytes" },
	{ "offsets_three", "{" T("w", "[2]", "[0,8,16]") "}", 8,
	  "tensor 'w' has data_offsets [0,8,16]; they must be [begin, end] in bytes" },
	{ "offsets_negative", "{" T("w", "[2]", "[-8,0]") "}", 8,
	  "tensor 'w' has data_offsets [-8,0]; they must be [begin, end] in bytes" },
	{ "offsets_fraction", "{" T("w", "[2]", "[0,8.5]") "}", 8,
	  "tensor 'w' has data_offsets [0,8.5]; they must be [begin, end] in bytes" },
	{ "end_before_begin", "{" T("w", "[0]", "[8,4]") "}", 8,
	  "tensor 'w' has data_offsets [8, 4] that end before they begin" },
	{ "offsets_out_of_range", "{" T("w", "[100]", "[0,400]") "}", 24,
	  "tensor 'w' has data_offsets [0, 400] beyond the 24-byte data buffer" },
	{ "offsets_huge", "{" T("w", "[2]", "[18446744073709551608,18446744073709551616]") "}", 8,
	  "tensor 'w' has data_offsets [1.8446744073709552e+19,1.8446744073709552e+19]; they must be [begin, end] in bytes" },
	{ "size_mismatch", "{" T("dense/kernel", "[2,3]", "[0,12]") "}", 12,
	  "tensor 'dense/kernel' has data_offsets [0, 12] but shape (2, 3) needs 24 bytes" },
	{ "size_mismatch_1d", "{" T("b", "[3]", "[0,8]") "}", 8, "tensor 'b' has data_offsets [0, 8] but shape (3,) needs 12 bytes" },
	{ "size_mismatch_0d", "{" T("s", "[]", "[0,8]") "}", 8, "tensor 's' has data_offsets [0, 8] but shape () needs 4 bytes" },
	{ "overlap", "{" T("a", "[4]", "[0,16]") "," T("b", "[4]", "[8,24]") "}", 24,
	  "tensors 'a' and 'b' overlap in the data buffer" },
	{ "same_offsets", "{" T("a", "[2]", "[0,8]") "," T("b", "[2]", "[0,8]") "}", 16,
	  "tensors 'a' and 'b' overlap in the data buffer" },
	{ "empty_inside_other", "{" T("a", "[4]", "[0,16]") "," T("z", "[0]", "[4,4]") "}", 16,
	  "tensors 'a' and 'z' overlap in the data buffer" },
	{ "gap", "{" T("a", "[2]", "[0,8]") "," T("b", "[2]", "[16,24]") "}", 24,
	  "bytes [8, 16) of the data buffer belong to no tensor" },
	{ "gap_at_start", "{" T("a", "[2]", "[8,16]") "}", 16, "bytes [0, 8) of the data buffer belong to no tensor" },
	{ "trailing_data", "{" T("a", "[2]", "[0,8]") "}", 12, "the data buffer has 12 bytes but the tensors cover only 8" },
	{ "data_without_tensors", "{}", 4, "the data buffer has 4 bytes but the tensors cover only 0" },
	{ "duplicate_tensor", "{" T("a", "[2]", "[0,8]") "," T("a", "[2]", "[8,16]") "}", 16, "duplicate tensor 'a'" },
};

static void test_bad_header(void **state)
{
	const struct bad_case *bc = *state;
	char *p = write_st(bc->header, data64, bc->ndata);
	char want[8192];
	assert_null(dt_checkpoint_load(p));
	snprintf(want, sizeof(want), "'%s': %s", p, bc->msg);
	if (strncmp(dt_error_last(), want, strlen(want)))
		fail_msg("error \"%s\"\n  expected \"%s\"", dt_error_last(), want);
	unlink(p);
	free(p);
}

/* ---- no file crashes the loader ---- */

/* Every truncation and many random byte changes of a valid file load or fail cleanly. */
static void test_load_mutations(void **state)
{
	float w[6] = { 1, 2, 3, 4, 5, 6 }, b[2] = { 7, 8 };
	struct dt_ckpt_tensor t[] = { { "dense/kernel", { 2, { 3, 2 } }, w }, { "dense/bias", { 1, { 2 } }, b } };
	struct dt_ckpt_meta meta[] = { { "epoch", "12" } };
	char *dir = make_dir(), *path = join(dir, "m.safetensors"), *bad = join(dir, "bad.safetensors");
	unsigned char *orig, *buf;
	struct dt_rng rng;
	size_t n;
	int loaded = 0;

	assert_int_equal(dt_checkpoint_save(path, t, 2, meta, 1), 0);
	orig = read_whole(path, &n);
	buf = malloc(n);
	for (size_t len = 0; len < n; len++) {
		FILE *f = fopen(bad, "wb");
		fwrite(orig, 1, len, f);
		fclose(f);
		assert_null(dt_checkpoint_load(bad));
	}
	dt_rng_seed(&rng, 7, 0);
	for (int iter = 0; iter < 3000; iter++) {
		struct dt_ckpt *c;
		int flips = 1 + (int)dt_rng_below(&rng, 4);
		FILE *f;
		memcpy(buf, orig, n);
		for (int k = 0; k < flips; k++) {
			size_t at = dt_rng_below(&rng, iter % 2 ? n : 8 + 40); /* often near the header start */
			buf[at] = (unsigned char)dt_rng_below(&rng, 256);
		}
		f = fopen(bad, "wb");
		fwrite(buf, 1, n, f);
		fclose(f);
		c = dt_checkpoint_load(bad);
		if (c) {
			loaded++;
			for (int i = 0; i < dt_checkpoint_count(c); i++) {
				struct dt_ckpt_tensor a = dt_checkpoint_at(c, i);
				volatile float sum = 0;
				for (int64_t j = 0; j < dt_shape_count(&a.shape); j++)
					sum += a.data[j];
				(void)sum;
				assert_string_equal(dt_checkpoint_find(c, a.name)->name, a.name);
			}
			dt_checkpoint_free(c);
		} else {
			assert_true(strlen(dt_error_last()) > 0);
		}
	}
	assert_true(loaded > 0);
	free(orig);
	free(buf);
	unlink(bad);
	free(bad);
	free(path);
	remove_dir(dir);
}


/* ---- checksums ---- */

/* Every single byte changed in the data of a dtrain file is caught by its checksum. */
static void test_checksum_catches_data_changes(void **state)
{
	float w[6] = { 1, 2, 3, 4, 5, 6 }, b[2] = { 7, 8 };
	struct dt_ckpt_tensor t[] = { { "dense/kernel", { 2, { 3, 2 } }, w }, { "dense/bias", { 1, { 2 } }, b } };
	struct dt_ckpt_meta meta[] = { { "epoch", "12" } };
	char *dir = make_dir(), *path = join(dir, "m.safetensors"), *bad = join(dir, "bad.safetensors");
	unsigned char *orig;
	size_t n, data;
	uint64_t hlen = 0;

	assert_int_equal(dt_checkpoint_save(path, t, 2, meta, 1), 0);
	orig = read_whole(path, &n);
	for (int i = 0; i < 8; i++)
		hlen |= (uint64_t)orig[i] << (8 * i);
	data = 8 + hlen;
	assert_int_equal(n - data, sizeof(w) + sizeof(b));
	for (size_t at = data; at < n; at++) {
		FILE *f = fopen(bad, "wb");
		orig[at] ^= 0x10;
		fwrite(orig, 1, n, f);
		fclose(f);
		orig[at] ^= 0x10;
		assert_null(dt_checkpoint_load(bad));
		assert_error_contains(at < data + sizeof(w) ? "tensor 'dense/kernel' fails its checksum"
							    : "tensor 'dense/bias' fails its checksum");
		assert_error_contains(bad);
	}
	free(orig);
	unlink(bad);
	free(bad);
	free(path);
	remove_dir(dir);
}

/* A metadata value changed in a way that keeps the JSON valid fails the metadata checksum. */
static void test_checksum_catches_metadata_changes(void **state)
{
	float w[2] = { 1, 2 };
	struct dt_ckpt_tensor t = { "w", { 1, { 2 } }, w };
	struct dt_ckpt_meta meta[] = { { "epoch", "12" } };
	char *dir = make_dir(), *path = join(dir, "m.safetensors");
	unsigned char *buf;
	char *at;
	size_t n;
	FILE *f;

	assert_int_equal(dt_checkpoint_save(path, &t, 1, meta, 1), 0);
	buf = read_whole(path, &n);
	at = memmem(buf, n, "\"12\"", 4);
	assert_non_null(at);
	at[2] = '3';
	f = fopen(path, "wb");
	fwrite(buf, 1, n, f);
	fclose(f);
	assert_null(dt_checkpoint_load(path));
	assert_error_contains("the metadata fails its checksum");
	free(buf);
	free(path);
	remove_dir(dir);
}

/* Files of other tools: no checksums (they load), other dtypes (a clear error). */
static void test_foreign_files(void **state)
{
	static const struct {
		const char *header;
		size_t data;
		const char *error; /* NULL: loads */
	} cases[] = {
		/* as PyTorch's safetensors.torch.save_file writes: format pt, F32 */
		{ "{\"__metadata__\":{\"format\":\"pt\"},\"fc.weight\":{\"dtype\":\"F32\",\"shape\":[2,2],"
		  "\"data_offsets\":[0,16]}}", 16, NULL },
		{ "{\"w\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,16]}}", 16,
		  "tensor 'w' has dtype 'I64'; only F32 is supported" },
		{ "{\"w\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[0,8]}}", 8,
		  "tensor 'w' has dtype 'BF16'; only F32 is supported" },
		{ "{\"__metadata__\":{\"crc32\":\"[1,2]\"},\"w\":{\"dtype\":\"F32\",\"shape\":[1],"
		  "\"data_offsets\":[0,4]}}", 4, "metadata 'crc32' is not a JSON object" },
		{ "{\"__metadata__\":{\"crc32\":\"{\\\"__metadata__\\\":\\\"00000000\\\"}\"},\"w\":{\"dtype\":"
		  "\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "metadata 'crc32' has no checksum for 'w'" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t hlen = strlen(cases[i].header), n = 8 + hlen + cases[i].data;
		unsigned char *buf = calloc(1, n);
		struct dt_ckpt *c;
		char *p;
		for (int k = 0; k < 8; k++)
			buf[k] = (unsigned char)((uint64_t)hlen >> (8 * k));
		memcpy(buf + 8, cases[i].header, hlen);
		p = dt_test_write_file(".safetensors", buf, n);
		c = dt_checkpoint_load(p);
		if (cases[i].error) {
			if (c)
				fail_msg("case %zu loaded", i);
			assert_error_contains(cases[i].error);
			assert_error_contains(p);
		} else {
			if (!c)
				fail_msg("case %zu: %s", i, dt_error_last());
			dt_checkpoint_free(c);
		}
		unlink(p);
		free(p);
		free(buf);
	}
}

/* Random bytes and a huge header length: an error naming the file, never a crash. */
static void test_random_files(void **state)
{
	struct dt_rng rng;
	unsigned char buf[512];
	dt_rng_seed(&rng, 11, 0);
	for (int iter = 0; iter < 200; iter++) {
		size_t n = 1 + dt_rng_below(&rng, sizeof(buf));
		char *p;
		for (size_t i = 0; i < n; i++)
			buf[i] = (unsigned char)dt_rng_below(&rng, 256);
		if (iter % 4 == 0 && n >= 8) /* a header length that fits the file */
			for (int k = 0; k < 8; k++)
				buf[k] = (unsigned char)((uint64_t)(n - 8) >> (8 * k));
		if (iter == 1)
			memset(buf, 0xff, 8 < n ? 8 : n);
		p = dt_test_write_file(".safetensors", buf, n);
		assert_null(dt_checkpoint_load(p));
		assert_error_contains(p);
		unlink(p);
		free(p);
	}
}

/*
 * ---- the reference reader, when it is installed ----
 * Registered only when python3 imports safetensors (main decides), so that a
 * machine without it reports nothing rather than a skip on every run.
 */

static void test_python_safetensors_reads_it(void **state)
{
	float k[6] = { 1, 2, 3, 4, 5, 6 }, b[3] = { -1, 0.5f, 7 };
	struct dt_ckpt_tensor t[] = { { "dense/kernel", { 2, { 2, 3 } }, k }, { "dense/bias", { 1, { 3 } }, b } };
	struct dt_ckpt_meta meta[] = { { "epoch", "4" } };
	char *dir, *path, cmd[8192];
	const char *py = "import sys, numpy as np\n"
			 "from safetensors import safe_open\n"
			 "with safe_open(sys.argv[1], framework='np') as f:\n"
			 "    m = f.metadata(); m.pop('crc32')\n"
			 "    assert m == {'epoch': '4'}, m\n"
			 "    assert sorted(f.keys()) == ['dense/bias', 'dense/kernel']\n"
			 "    k = f.get_tensor('dense/kernel'); b = f.get_tensor('dense/bias')\n"
			 "    assert k.dtype == np.float32 and k.shape == (2, 3) and k.tolist() == [[1,2,3],[4,5,6]]\n"
			 "    assert b.tolist() == [-1, 0.5, 7]\n";

	dir = make_dir();
	path = join(dir, "py.safetensors");
	assert_int_equal(dt_checkpoint_save(path, t, 2, meta, 1), 0);
	snprintf(cmd, sizeof(cmd), "python3 -c \"$DT_PY\" '%s'", path);
	setenv("DT_PY", py, 1);
	assert_int_equal(system(cmd), 0);
	free(path);
	remove_dir(dir);
}

int main(void)
{
	static const struct CMUnitTest fixed[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_round_trip_empty),
		cmocka_unit_test(test_format_bytes),
		cmocka_unit_test(test_format_no_metadata),
		cmocka_unit_test(test_load_foreign_layouts),
		cmocka_unit_test(test_save_replaces_leaving_no_temp),
		cmocka_unit_test(test_save_fails_midway_keeps_old),
		cmocka_unit_test(test_save_unwritable_dir_keeps_old),
		cmocka_unit_test(test_save_missing_dir),
		cmocka_unit_test(test_save_rejects_bad_input),
		cmocka_unit_test(test_load_missing_file),
		cmocka_unit_test(test_load_directory),
		cmocka_unit_test(test_load_short_file),
		cmocka_unit_test(test_load_header_longer_than_file),
		cmocka_unit_test(test_load_header_length_absurd),
		cmocka_unit_test(test_load_header_over_limit),
		cmocka_unit_test(test_load_empty_header),
		cmocka_unit_test(test_load_mutations),
		cmocka_unit_test(test_checksum_catches_data_changes),
		cmocka_unit_test(test_checksum_catches_metadata_changes),
		cmocka_unit_test(test_foreign_files),
		cmocka_unit_test(test_random_files),
	};
	static const struct CMUnitTest python = cmocka_unit_test(test_python_safetensors_reads_it);
	enum { NFIXED = sizeof(fixed) / sizeof(fixed[0]), NBAD = sizeof(bad_cases) / sizeof(bad_cases[0]) };
	static struct CMUnitTest tests[NFIXED + NBAD + 1];
	static char names[NBAD][64];
	size_t n = 0;

	for (int i = 0; i < NFIXED; i++)
		tests[n++] = fixed[i];
	for (int i = 0; i < NBAD; i++) {
		snprintf(names[i], sizeof(names[i]), "test_bad_header_%s", bad_cases[i].name);
		tests[n++] = (struct CMUnitTest){ names[i], test_bad_header, NULL, NULL, (void *)&bad_cases[i] };
	}
	if (system("python3 -c 'import safetensors, numpy' >/dev/null 2>&1") == 0)
		tests[n++] = python;
	return _cmocka_run_group_tests("checkpoint", tests, n, setup_quiet, NULL);
}
