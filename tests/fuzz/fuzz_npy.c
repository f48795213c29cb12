/*
 * format: npy: an x file and a y file (fuzz_split), raw or gzip, opened as a
 * source and every record read.
 */
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_quiet();
	fuzz_two_file_source(data, size, "format: npy\nx: '%s'\ny: '%s'\n");
	return 0;
}
