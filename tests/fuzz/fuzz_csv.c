/*
 * format: csv: the first byte picks the arguments (header, label column,
 * delimiter, skip_rows, a class map as a validation file has), the rest is
 * the file, raw or gzip; opened as a source and every record read.
 */
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const header[] = { "auto", "true", "false", "auto" };
	static const char *const label[] = { "-1", "0", "1", "species" };
	static const char *const delim[] = { "\",\"", "\"\\t\"", "\";\"", "\" \"" };
	static char *const names[] = { "a", "b", "c" };
	const struct dt_class_map map_names = { .n = 3, .names = names }, map_numbers = { .n = 3 };
	struct dt_source s;
	struct dt_doc *d;
	char yaml[2 * sizeof(fuzz_paths) + 256]; /* two paths (gcc bounds them by the whole table) */
	int o;

	fuzz_quiet();
	if (size < 1 || size > FUZZ_MAX_INPUT)
		return 0;
	o = data[0];
	snprintf(yaml, sizeof(yaml), "format: csv\nheader: %s\nlabel: %s\ndelimiter: %s\nskip_rows: %d\npath: '%s'\n",
		 header[o & 3], label[o >> 2 & 3], delim[o >> 4 & 3], o >> 6 & 1, fuzz_write("a.csv", data + 1, size - 1));
	d = dt_doc_parse("fuzz.yaml", yaml, fuzz_dir());
	if (!d)
		abort();
	if (dt_source_open_classes(&s, dt_doc_root(d), dt_source_types,
				   o & 0x80 ? (o & 1 ? &map_names : &map_numbers) : NULL) == 0)
		fuzz_read_all(&s);
	dt_source_close(&s);
	dt_doc_free(d);
	return 0;
}
