/*
 * Shapes, devices and tensors.
 *
 * A shape of a sample leaves the batch out: Fashion-MNIST images are (28, 28, 1),
 * channels last as in Keras. A tensor that holds a batch has the batch size N as
 * dim[0]. A tensor is a view: it never owns its memory; buffers come from
 * dt_device_alloc() and are released with dt_device_free().
 *
 * Sizes are counted in 64 bits and never wrap: dt_count_mul, dt_count_add and
 * dt_shape_count saturate at INT64_MAX, a count no memory holds, so a size
 * computed from any shape can be compared with a limit and refused.
 */
#ifndef DT_TENSOR_H
#define DT_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#define DT_MAX_DIMS 5
/* A sample's shape: the batch dimension comes on top of it. */
#define DT_MAX_SAMPLE_DIMS (DT_MAX_DIMS - 1)

enum dt_device_kind { DT_DEVICE_CPU, DT_DEVICE_CUDA };

struct dt_device {
	enum dt_device_kind kind;
	int index;
};

struct dt_shape {
	int ndim;
	int dim[DT_MAX_DIMS];
};

struct dt_tensor {
	float *data; /* memory on dev */
	struct dt_shape shape;
	struct dt_device dev;
};

#define DT_CPU ((struct dt_device){ DT_DEVICE_CPU, 0 })

/*
 * The most values one sample of a layer's output (and of the model's input)
 * and all of a model's parameters may hold: dimensions are int, and the flat
 * views of the parameter buffer are 1-d.
 */
#define DT_MAX_COUNT INT32_MAX

/* a * b and a + b of counts (>= 0), INT64_MAX when the result does not fit. */
int64_t dt_count_mul(int64_t a, int64_t b);
int64_t dt_count_add(int64_t a, int64_t b);
/* Number of elements (1 for a 0-d shape); INT64_MAX when it does not fit. */
int64_t dt_shape_count(const struct dt_shape *s);
int dt_shape_equal(const struct dt_shape *a, const struct dt_shape *b);
/* (d0, d1, ...) */
struct dt_shape dt_shape_make(int ndim, const int *dim);
/* Batch shape: N followed by the sample shape. */
struct dt_shape dt_shape_batch(int n, const struct dt_shape *sample);
/*
 * Writes n with thousands separators, "1,234,567"; INT64_MAX, the saturated
 * count, as "more than 9.2 x 10^18". Returns buf.
 */
char *dt_count_format(int64_t n, char *buf, size_t size);
/* Writes bytes as Keras' summaries do, in units of 1024: "22.00 KB", "1.50 GB". Returns buf. */
char *dt_bytes_format(double bytes, char *buf, size_t size);
/* Writes "(28, 28, 1)", or "(None, 28, 28, 1)" when with_batch. Returns buf. */
char *dt_shape_format(const struct dt_shape *s, int with_batch, char *buf, size_t size);

/* A view of n samples of `sample` shape at data. */
struct dt_tensor dt_tensor_batch(float *data, struct dt_device dev, int n, const struct dt_shape *sample);
/* A 1-d view of n floats. */
struct dt_tensor dt_tensor_flat(float *data, struct dt_device dev, int64_t n);
int64_t dt_tensor_count(const struct dt_tensor *t);
/* Rows and columns of the 2-d view used by gemm: rows = dim[0], cols = the rest. */
int64_t dt_tensor_rows(const struct dt_tensor *t);
int64_t dt_tensor_cols(const struct dt_tensor *t);

/*
 * Device memory of n floats, 64-byte aligned, zeroed. When the memory is not
 * there, prints "dtrain: error: out of memory ..." and exits with status 1
 * (dt_exit_out_of_memory): for buffers made while training runs, where no
 * caller could go on without them.
 */
float *dt_device_alloc(struct dt_device dev, int64_t n);
/* The same, but NULL after printing that error, for callers that pass the failure up. */
float *dt_device_try_alloc(struct dt_device dev, int64_t n);
void dt_device_free(struct dt_device dev, float *p);
/* Bytes of memory dev has: the host's physical memory for the CPU, the GPU's own for a GPU. */
int64_t dt_device_memory(struct dt_device dev);
/* Waits for the work queued on dev (a GPU's stream); nothing on the CPU. For timing. */
void dt_device_synchronize(struct dt_device dev);
/* "cpu:0", "gpu:1" */
char *dt_device_format(struct dt_device dev, char *buf, size_t size);

#endif
