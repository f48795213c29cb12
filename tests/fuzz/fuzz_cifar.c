/*
 * format: cifar10 and cifar100: a batch file and its class-names file beside
 * it (fuzz_split); the first byte of the batch part picks the format and the
 * label mode. Opened as a source and every record read.
 */
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const names[4] = { "batches.meta.txt", "batches.meta.txt", "fine_label_names.txt",
					      "coarse_label_names.txt" };
	const uint8_t *a, *b;
	size_t an, bn;
	struct dt_source s;
	char yaml[2 * sizeof(fuzz_paths) + 256]; /* two paths (gcc bounds them by the whole table) */
	int o;

	fuzz_quiet();
	if (size > FUZZ_MAX_INPUT || fuzz_split(data, size, &a, &an, &b, &bn) < 0 || an < 1)
		return 0;
	o = a[0] & 3;
	fuzz_write(names[o], b, bn);
	snprintf(yaml, sizeof(yaml), "format: %s\nfiles: ['%s']\n%s", o < 2 ? "cifar10" : "cifar100",
		 fuzz_write("data_batch_1.bin", a + 1, an - 1),
		 o == 2 ? "label_mode: fine\n" : o == 3 ? "label_mode: coarse\n" : "");
	if (fuzz_open_source(&s, yaml) == 0)
		fuzz_read_all(&s);
	dt_source_close(&s);
	return 0;
}
