/*
 * Checkpoints: a safetensors file (8-byte header length, JSON header, raw
 * tensors) loaded and validated as --resume, --init-weights, evaluate and
 * predict load it; then every tensor and the metadata looked at.
 */
#include "core/checkpoint/checkpoint.h"
#include "tests/fuzz/fuzz.h"

volatile float fuzz_safetensors_sink; /* keeps the reads of the data */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dt_ckpt *c;

	fuzz_quiet();
	if (size > FUZZ_MAX_INPUT)
		return 0;
	c = dt_checkpoint_load(fuzz_write("a", data, size));
	if (!c)
		return 0;
	for (int i = 0; i < dt_checkpoint_count(c); i++) {
		struct dt_ckpt_tensor t = dt_checkpoint_at(c, i);
		int64_t n = dt_shape_count(&t.shape);
		for (int64_t k = 0; k < n; k++)
			fuzz_safetensors_sink = t.data[k];
		if (dt_checkpoint_find(c, t.name) == NULL)
			abort();
	}
	dt_checkpoint_meta(c, "config");
	dt_checkpoint_free(c);
	return 0;
}
