/*
 * The tensorboard callback's pieces: CRC-32C against its published check
 * values, its TFRecord mask, the protobuf varint, one Event's exact bytes, a
 * record's frame (its arguments in fit.callbacks: test_fit_callbacks).
 */
#include "helpers.h"

#include "core/fit/tensorboard.h"

static void test_crc32c(void **state)
{
	uint8_t zeros[32] = { 0 }, ones[32], up[32];
	memset(ones, 0xff, sizeof(ones));
	for (int i = 0; i < 32; i++)
		up[i] = (uint8_t)i;
	/* The check value of CRC-32C, and RFC 3720's (iSCSI) test vectors. */
	assert_int_equal(dt_crc32c("123456789", 9), 0xe3069283u);
	assert_int_equal(dt_crc32c(zeros, 32), 0x8a9136aau);
	assert_int_equal(dt_crc32c(ones, 32), 0x62a8ab43u);
	assert_int_equal(dt_crc32c(up, 32), 0x46dd794eu);
	assert_int_equal(dt_crc32c("", 0), 0);
	assert_int_equal(dt_crc32c_mask(0), 0xa282ead8u);
	assert_int_equal(dt_crc32c_mask(0xe3069283u), ((0xe3069283u >> 15) | (0xe3069283u << 17)) + 0xa282ead8u);
}

static void test_varint(void **state)
{
	static const struct {
		uint64_t v;
		size_t n;
		uint8_t bytes[10];
	} cases[] = {
		{ 0, 1, { 0x00 } },
		{ 1, 1, { 0x01 } },
		{ 127, 1, { 0x7f } },
		{ 128, 2, { 0x80, 0x01 } },
		{ 300, 2, { 0xac, 0x02 } },
		{ 16384, 3, { 0x80, 0x80, 0x01 } },
		{ UINT64_MAX, 10, { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01 } },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint8_t out[10];
		assert_int_equal(dt_pb_varint(cases[i].v, out), cases[i].n);
		assert_memory_equal(out, cases[i].bytes, cases[i].n);
	}
}

static void test_event_bytes(void **state)
{
	static const uint8_t want[] = {
		0x09, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f,      /* wall_time = 1.0 (field 1, 64-bit) */
		0x10, 0x03,                               /* step = 3 (field 2, varint) */
		0x2a, 0x0a,                               /* summary (field 5), 10 bytes */
		0x0a, 0x08,                               /* value (field 1), 8 bytes */
		0x0a, 0x01, 'a',                          /* tag = "a" */
		0x15, 0x00, 0x00, 0x80, 0x3f,             /* simple_value = 1.0f (field 2, 32-bit) */
	};
	static const uint8_t version[] = { 0x09, 0, 0, 0, 0, 0, 0, 0, 0x40, 0x1a, 0x0d, 'b', 'r', 'a', 'i', 'n',
					   '.', 'E', 'v', 'e', 'n', 't', ':', '2' };
	const char *tags[] = { "a" };
	float one = 1.0f;
	struct dt_pb_buf b = { 0 };
	dt_tf_event_encode(&b, 1.0, 3, NULL, tags, &one, 1);
	assert_int_equal(b.n, sizeof(want));
	assert_memory_equal(b.data, want, sizeof(want));
	b.n = 0;
	dt_tf_event_encode(&b, 2.0, 0, "brain.Event:2", NULL, NULL, 0); /* step 0: not written */
	assert_int_equal(b.n, sizeof(version));
	assert_memory_equal(b.data, version, sizeof(version));
	dt_pb_buf_free(&b);
}

static void test_record_frame(void **state)
{
	uint8_t buf[64];
	FILE *f = tmpfile();
	uint32_t crc;
	assert_non_null(f);
	assert_int_equal(dt_tf_record_write(f, "123456789", 9), 0);
	assert_int_equal(ftell(f), 8 + 4 + 9 + 4);
	rewind(f);
	assert_int_equal(fread(buf, 1, 25, f), 25);
	fclose(f);
	assert_int_equal(buf[0], 9);
	for (int i = 1; i < 8; i++)
		assert_int_equal(buf[i], 0);
	crc = dt_crc32c_mask(dt_crc32c(buf, 8));
	assert_int_equal(buf[8] | buf[9] << 8 | buf[10] << 16 | (uint32_t)buf[11] << 24, crc);
	assert_memory_equal(buf + 12, "123456789", 9);
	crc = dt_crc32c_mask(0xe3069283u);
	assert_int_equal(buf[21] | buf[22] << 8 | buf[23] << 16 | (uint32_t)buf[24] << 24, crc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crc32c),
		cmocka_unit_test(test_varint),
		cmocka_unit_test(test_event_bytes),
		cmocka_unit_test(test_record_frame),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
