/*
 * The fuzz harnesses of tests/fuzz/ replayed through the normal build:
 * every seed (tests/fuzz/corpus/NAME) and every reproducer of a past finding
 * (tests/fuzz/regress/NAME) goes through the harness's entry point once, so
 * `make check` (and `make check SANITIZE=1`) keeps them fixed without clang.
 * A harness is included under its own name; a crash, a sanitizer report or
 * an abort fails the program.
 */
#include <dirent.h>

#include "helpers.h"

#define LLVMFuzzerTestOneInput fuzz_config_one
#include "tests/fuzz/fuzz_config.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_idx_one
#include "tests/fuzz/fuzz_idx.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_npy_one
#include "tests/fuzz/fuzz_npy.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_csv_one
#include "tests/fuzz/fuzz_csv.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_png_one
#include "tests/fuzz/fuzz_png.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_cifar_one
#include "tests/fuzz/fuzz_cifar.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_safetensors_one
#include "tests/fuzz/fuzz_safetensors.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_reader_one
#include "tests/fuzz/fuzz_reader.c"
#undef LLVMFuzzerTestOneInput

/* Feeds every file of dir (absent: none) to one; returns how many. */
static int replay_dir(const char *dir, int (*one)(const uint8_t *, size_t))
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;
	if (!d)
		return 0;
	while ((e = readdir(d))) {
		char path[1024];
		uint8_t *buf;
		size_t size;
		FILE *f;
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		f = fopen(path, "rb");
		assert_non_null(f);
		buf = malloc(FUZZ_MAX_INPUT + 1);
		size = fread(buf, 1, FUZZ_MAX_INPUT + 1, f);
		fclose(f);
		print_message("# %s (%zu bytes)\n", path, size);
		one(buf, size);
		free(buf);
		n++;
	}
	closedir(d);
	return n;
}

/* The seeds and the reproducers of harness `name`; it has seeds. */
static void replay(const char *name, int (*one)(const uint8_t *, size_t))
{
	char dir[256];
	int seeds;
	snprintf(dir, sizeof(dir), "tests/fuzz/corpus/%s", name);
	seeds = replay_dir(dir, one);
	snprintf(dir, sizeof(dir), "tests/fuzz/regress/%s", name);
	replay_dir(dir, one);
	dt_error_set_quiet(0);
	dt_note_set_quiet(0);
	assert_true(seeds > 0);
}

static void test_fuzz_config(void **state) { replay("config", fuzz_config_one); }
static void test_fuzz_idx(void **state) { replay("idx", fuzz_idx_one); }
static void test_fuzz_npy(void **state) { replay("npy", fuzz_npy_one); }
static void test_fuzz_csv(void **state) { replay("csv", fuzz_csv_one); }
static void test_fuzz_png(void **state) { replay("png", fuzz_png_one); }
static void test_fuzz_cifar(void **state) { replay("cifar", fuzz_cifar_one); }
static void test_fuzz_safetensors(void **state) { replay("safetensors", fuzz_safetensors_one); }
static void test_fuzz_reader(void **state) { replay("reader", fuzz_reader_one); }

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fuzz_config), cmocka_unit_test(test_fuzz_idx),
		cmocka_unit_test(test_fuzz_npy), cmocka_unit_test(test_fuzz_csv),
		cmocka_unit_test(test_fuzz_png), cmocka_unit_test(test_fuzz_cifar),
		cmocka_unit_test(test_fuzz_safetensors), cmocka_unit_test(test_fuzz_reader),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
