/*
 * The tensorboard callback of fit.callbacks: event files that TensorBoard
 * reads, as Keras' TensorBoard callback writes them.
 *
 * LOG_DIR/train/ and LOG_DIR/validation/ each get one file
 * events.out.tfevents.TIME.HOST.PID per run. A file is a sequence of
 * TFRecord records: uint64 length, masked CRC-32C of those 8 bytes, the
 * data, masked CRC-32C of the data (all little-endian; the mask is
 * ((crc >> 15) | (crc << 17)) + 0xa282ead8). Each record's data is a
 * protobuf Event {wall_time = 1 (double), step = 2 (int64), file_version = 3
 * (string), summary = 5 (Summary)}; Summary {value = 1 (repeated Value)};
 * Value {tag = 1 (string), simple_value = 2 (float)}. The first record of a
 * file holds file_version "brain.Event:2" alone; each later one holds the
 * scalars of one step. The encoding is written by hand: three messages of
 * scalar fields do not need a protobuf library.
 *
 * Scalars, as Keras names them: at each epoch's end, epoch_loss,
 * epoch_accuracy, epoch_mae, epoch_rmse (those reported) and
 * epoch_learning_rate in train/, the val_ metrics without their prefix in
 * validation/, at step = epoch (from 0); with update_freq N, also batch_loss,
 * batch_accuracy, ... in train/ every N training batches, at step = the
 * batch's number since the run began (from 1).
 */
#ifndef DT_TENSORBOARD_H
#define DT_TENSORBOARD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/fit/fit_callbacks.h"

/* CRC-32C (Castagnoli, reflected 0x82f63b78), as TFRecord frames use it. */
uint32_t dt_crc32c(const void *data, size_t n);
/* TFRecord's mask of a CRC: ((crc >> 15) | (crc << 17)) + 0xa282ead8. */
uint32_t dt_crc32c_mask(uint32_t crc);
/* v as a protobuf base-128 varint into out (room for 10 bytes); the byte count. */
size_t dt_pb_varint(uint64_t v, uint8_t *out);

/* A growing byte buffer for one encoded message. */
struct dt_pb_buf {
	uint8_t *data;
	size_t n, cap;
};
void dt_pb_buf_free(struct dt_pb_buf *b);

/*
 * One scalar Event (wall time, step, tags[i] = values[i], i < n) encoded
 * into b (appended). file_version: when not NULL, the Event holds that
 * string instead of a summary.
 */
void dt_tf_event_encode(struct dt_pb_buf *b, double wall_time, int64_t step, const char *file_version,
			const char *const *tags, const float *values, int n);
/* Writes data as one TFRecord record to f. 0, or -1 when the write failed. */
int dt_tf_record_write(FILE *f, const void *data, size_t n);

/* One event file. */
struct dt_tf_writer {
	FILE *f;
	char path[4200];
};
/* Creates dir (with its parents) and a new event file in it, starting with the file_version record. 0 or -1. */
int dt_tf_writer_open(struct dt_tf_writer *w, const char *dir);
/* One Event of n scalars at step, flushed. 0 or -1 with an error naming the file. */
int dt_tf_writer_scalars(struct dt_tf_writer *w, int64_t step, const char *const *tags, const float *values, int n);
void dt_tf_writer_close(struct dt_tf_writer *w);

struct dt_tensorboard {
	struct dt_callback cb;
	char log_dir[4096];
	int64_t update_freq;        /* 0: epoch ends only; N: also every N batches */
	struct dt_tf_writer train, val; /* train/ and validation/, opened at their first event */
};
/*
 * cfg->log_dir (default "logs") relative to run_dir unless absolute. Files
 * are created at the first epoch or batch written. 0.
 */
int dt_tensorboard_init(struct dt_tensorboard *tb, const struct dt_tensorboard_config *cfg, const char *run_dir);
void dt_tensorboard_release(struct dt_tensorboard *tb);

#endif
