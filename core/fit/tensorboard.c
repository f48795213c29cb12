#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "core/checkpoint/run_dir.h"
#include "core/error.h"
#include "core/fit/progress.h"
#include "core/fit/tensorboard.h"

uint32_t dt_crc32c(const void *data, size_t n)
{
	static uint32_t table[256];
	static int ready;
	const uint8_t *p = data;
	uint32_t crc = 0xffffffffu;
	if (!ready) {
		for (uint32_t i = 0; i < 256; i++) {
			uint32_t c = i;
			for (int k = 0; k < 8; k++)
				c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
			table[i] = c;
		}
		ready = 1;
	}
	for (size_t i = 0; i < n; i++)
		crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
	return crc ^ 0xffffffffu;
}

uint32_t dt_crc32c_mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

size_t dt_pb_varint(uint64_t v, uint8_t *out)
{
	size_t n = 0;
	while (v >= 0x80) {
		out[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	out[n++] = (uint8_t)v;
	return n;
}

static void put(struct dt_pb_buf *b, const void *data, size_t n)
{
	if (b->n + n > b->cap) {
		b->cap = b->cap * 2 > b->n + n ? b->cap * 2 : b->n + n + 64;
		b->data = dt_realloc(b->data, b->cap);
	}
	memcpy(b->data + b->n, data, n);
	b->n += n;
}

static void put_varint(struct dt_pb_buf *b, uint64_t v)
{
	uint8_t tmp[10];
	put(b, tmp, dt_pb_varint(v, tmp));
}

/* A field's key: its number and wire type (0 varint, 1 64-bit, 2 length-delimited, 5 32-bit). */
static void put_key(struct dt_pb_buf *b, int field, int wire) { put_varint(b, (uint64_t)field << 3 | (uint64_t)wire); }

/* Little-endian whatever the host: n bytes of v. */
static void put_fixed(struct dt_pb_buf *b, uint64_t v, int n)
{
	uint8_t tmp[8];
	for (int i = 0; i < n; i++)
		tmp[i] = (uint8_t)(v >> (8 * i));
	put(b, tmp, (size_t)n);
}

static void put_bytes(struct dt_pb_buf *b, int field, const void *data, size_t n)
{
	put_key(b, field, 2);
	put_varint(b, n);
	put(b, data, n);
}

void dt_pb_buf_free(struct dt_pb_buf *b)
{
	free(b->data);
	memset(b, 0, sizeof(*b));
}

void dt_tf_event_encode(struct dt_pb_buf *b, double wall_time, int64_t step, const char *file_version,
			const char *const *tags, const float *values, int n)
{
	uint64_t bits;
	memcpy(&bits, &wall_time, 8);
	put_key(b, 1, 1);
	put_fixed(b, bits, 8);
	if (step) { /* proto3: a zero scalar is not written */
		put_key(b, 2, 0);
		put_varint(b, (uint64_t)step);
	}
	if (file_version) {
		put_bytes(b, 3, file_version, strlen(file_version));
		return;
	}
	struct dt_pb_buf summary = { 0 }, value = { 0 };
	for (int i = 0; i < n; i++) {
		uint32_t f;
		memcpy(&f, &values[i], 4);
		value.n = 0;
		put_bytes(&value, 1, tags[i], strlen(tags[i]));
		put_key(&value, 2, 5);
		put_fixed(&value, f, 4);
		put_bytes(&summary, 1, value.data, value.n);
	}
	put_bytes(b, 5, summary.data, summary.n);
	dt_pb_buf_free(&summary);
	dt_pb_buf_free(&value);
}

int dt_tf_record_write(FILE *f, const void *data, size_t n)
{
	uint8_t head[12], foot[4];
	uint32_t crc;
	for (int i = 0; i < 8; i++)
		head[i] = (uint8_t)((uint64_t)n >> (8 * i));
	crc = dt_crc32c_mask(dt_crc32c(head, 8));
	for (int i = 0; i < 4; i++)
		head[8 + i] = (uint8_t)(crc >> (8 * i));
	crc = dt_crc32c_mask(dt_crc32c(data, n));
	for (int i = 0; i < 4; i++)
		foot[i] = (uint8_t)(crc >> (8 * i));
	if (fwrite(head, 1, 12, f) != 12 || fwrite(data, 1, n, f) != n || fwrite(foot, 1, 4, f) != 4)
		return -1;
	return 0;
}

static double wall_clock(void)
{
	struct timeval tv;
	gettimeofday(&tv, NULL);
	return (double)tv.tv_sec + tv.tv_usec * 1e-6;
}

static int write_event(struct dt_tf_writer *w, int64_t step, const char *version, const char *const *tags,
		       const float *values, int n)
{
	struct dt_pb_buf b = { 0 };
	int rc;
	dt_tf_event_encode(&b, wall_clock(), step, version, tags, values, n);
	rc = dt_tf_record_write(w->f, b.data, b.n);
	dt_pb_buf_free(&b);
	if (rc < 0 || fflush(w->f) != 0)
		return dt_error("cannot write '%s': %s", w->path, strerror(errno));
	return 0;
}

int dt_tf_writer_open(struct dt_tf_writer *w, const char *dir)
{
	char host[256] = "localhost";
	memset(w, 0, sizeof(*w));
	if (dt_mkdir_p(dir) < 0)
		return -1;
	gethostname(host, sizeof(host) - 1);
	host[sizeof(host) - 1] = '\0';
	snprintf(w->path, sizeof(w->path), "%s/events.out.tfevents.%lld.%s.%ld", dir, (long long)wall_clock(), host,
		 (long)getpid());
	w->f = fopen(w->path, "wb");
	if (!w->f)
		return dt_error("cannot open '%s': %s", w->path, strerror(errno));
	return write_event(w, 0, "brain.Event:2", NULL, NULL, 0);
}

int dt_tf_writer_scalars(struct dt_tf_writer *w, int64_t step, const char *const *tags, const float *values, int n)
{
	return write_event(w, step, NULL, tags, values, n);
}

void dt_tf_writer_close(struct dt_tf_writer *w)
{
	if (w->f)
		fclose(w->f);
	w->f = NULL;
}

/* ---- the callback ---- */

/* LOG_DIR/NAME's file, at its first use. */
static int open_writer(struct dt_tensorboard *tb, struct dt_tf_writer *w, const char *name)
{
	char dir[4200];
	if (w->f)
		return 0;
	snprintf(dir, sizeof(dir), "%s/%s", tb->log_dir, name);
	return dt_tf_writer_open(w, dir);
}

/*
 * The reported metrics of logs (dt_logs_pairs: loss, accuracy, mae, rmse and
 * compile.metrics' table) with Keras' prefix ("epoch_", "batch_"); val: the
 * val_ ones, under their plain names as Keras writes them in validation/;
 * lr: the learning rate too. n.
 */
static int collect(const struct dt_logs *l, const char *prefix, int val, int lr, char tags[][64], float *values)
{
	struct dt_metric_pair pairs[DT_MAX_PAIRS];
	int n = 0, k = dt_logs_pairs(l, val, pairs);
	for (int i = 0; i < k; i++) {
		const char *name = pairs[i].name;
		int is_val = !strncmp(name, "val_", 4);
		if (is_val != val || !strcmp(name, "learning_rate"))
			continue;
		snprintf(tags[n], 64, "%s%s", prefix, name + (val ? 4 : 0));
		values[n++] = (float)pairs[i].value;
	}
	if (lr) {
		snprintf(tags[n], 64, "%slearning_rate", prefix);
		values[n++] = (float)l->learning_rate;
	}
	return n;
}

static int write_logs(struct dt_tf_writer *w, int64_t step, const struct dt_logs *l, const char *prefix, int val,
		      int lr)
{
	char tags[DT_MAX_PAIRS + 1][64];
	const char *ptrs[DT_MAX_PAIRS + 1];
	float values[DT_MAX_PAIRS + 1];
	int n = collect(l, prefix, val, lr, tags, values);
	for (int i = 0; i < n; i++)
		ptrs[i] = tags[i];
	return dt_tf_writer_scalars(w, step, ptrs, values, n);
}

static int tb_epoch_end(struct dt_callback *cb, struct dt_trainer *t, const struct dt_logs *logs)
{
	struct dt_tensorboard *tb = cb->priv;
	(void)t;
	if (open_writer(tb, &tb->train, "train") < 0 || write_logs(&tb->train, logs->epoch, logs, "epoch_", 0, 1) < 0)
		return -1;
	if (logs->has_val &&
	    (open_writer(tb, &tb->val, "validation") < 0 || write_logs(&tb->val, logs->epoch, logs, "epoch_", 1, 0) < 0))
		return -1;
	return 0;
}

/* Every update_freq batches: the running metrics of the epoch, at the batch's number in the run. */
static void tb_batch_end(struct dt_callback *cb, struct dt_trainer *t, const struct dt_logs *logs)
{
	struct dt_tensorboard *tb = cb->priv;
	int64_t batch = (int64_t)logs->epoch * logs->steps + logs->step;
	if (!tb->update_freq || batch % tb->update_freq != 0)
		return;
	if (open_writer(tb, &tb->train, "train") < 0 || write_logs(&tb->train, batch, logs, "batch_", 0, 0) < 0)
		dt_trainer_stop(t, -1);
}

static int tb_train_end(struct dt_callback *cb, struct dt_trainer *t)
{
	(void)t;
	dt_tensorboard_release(cb->priv);
	return 0;
}

int dt_tensorboard_init(struct dt_tensorboard *tb, const struct dt_tensorboard_config *cfg, const char *run_dir)
{
	const char *dir = cfg && cfg->log_dir ? cfg->log_dir : "logs";
	memset(tb, 0, sizeof(*tb));
	dt_callback_path(run_dir, dir, tb->log_dir, sizeof(tb->log_dir));
	tb->update_freq = cfg ? cfg->update_freq : 0;
	tb->cb.name = "tensorboard";
	tb->cb.priv = tb;
	tb->cb.on_epoch_end = tb_epoch_end;
	tb->cb.on_batch_end = tb_batch_end;
	tb->cb.on_train_end = tb_train_end;
	return 0;
}

void dt_tensorboard_release(struct dt_tensorboard *tb)
{
	dt_tf_writer_close(&tb->train);
	dt_tf_writer_close(&tb->val);
}
