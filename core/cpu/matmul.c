/*
 * Matrix products on oneDNN's matmul primitive: under compile.precision bf16
 * on the CPU every product, on bfloat16 copies of both operands, float32
 * accumulation and a float32 result (on AMX and avx512_bf16 CPUs, brgemm
 * kernels at 3-5x the float32 sgemm's rate, measured on a Sapphire Rapids
 * core); in float32 the data gradient's shape, c = a b^T (ops_cpu.c's
 * cpu_gemm), where oneDNN 2.6's sgemm splits badly between threads.
 * Measured alone on a 2-vCPU Zen 4 (AVX-512), sgemm against this primitive:
 * (m, n, k) = (128, 784, 512) 1.02 against 0.92 ms at 1 thread, 0.80 against
 * 0.52-0.53 at 2; (128, 512, 512) 0.66 against 0.60, 0.51 against 0.32-0.33;
 * Keras' CNN dense layer (128, 9216, 128) 3.46 against 3.29, 1.59-1.64
 * against 1.47-1.79. The other two shapes of a dense layer (a b, a^T b) ran
 * 0-10% faster on sgemm, and stay there.
 *
 * A primitive is made for one problem (sizes, transposes, alpha, beta,
 * precision) and kept in a small cache, least recently used out; a dense
 * layer uses up to three (forward, weight gradient, data gradient) per batch
 * size, and identical layers share them. The operands' bfloat16 copies are
 * dt_cpu_to_bf16's (ops_cpu.c), which streams them at several threads:
 * oneDNN's reorder wrote them with plain stores, and with the two vCPUs of
 * a Zen 4 330-370 ns apart fashion_mlp's bf16 step at 2 threads took
 * 39-41k samples/s against 61-65k now (75-78k either way with them
 * 50-60 ns apart). The copies and the scratchpad are buffers of this file
 * that grow to the largest problem seen. One lock: dt_op_gemm may be called
 * from any thread, although dtrain calls it from one at a time.
 *
 * The other float32 products run on oneDNN's sgemm (dt_cpu_sgemm). Its AVX2
 * kernels run a third slower when the operand it reads along k (b, or a
 * transposed) has rows a multiple of 2 KiB apart, as Keras' usual widths
 * 512 and 1024 make them: measured alone on a 2-vCPU Zen 3, (m, n, k) =
 * (128, 512, 784), a dense layer's forward, ran at 66-69 GFLOP/s at 1
 * thread and 134 at 2, against 98-99 and 189 with the rows 64 bytes
 * longer; (128, 1024, 784) at 47 against 98; the weight gradient a^T b of
 * (512, 512, 128) at 62 against 94 with both operands so. The data
 * gradient, a b^T, is the same either way. So where oneDNN runs AVX2, such
 * an operand is copied first to a buffer of this file with rows 16 floats
 * longer. AVX-512's kernels were not measured, and run on the operands as
 * they are.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu/ops_cpu.h"
#include "core/tensor.h"

#define MM_CACHE 64

struct mm_key { /* compared with memcmp: no padding */
	int64_t m, n, k;
	int trans_a, trans_b;
	float alpha, beta;
	int bf16, pad; /* bf16: on bfloat16 copies */
};

struct mm_entry {
	struct mm_key key;
	uint64_t used; /* 0: free */
	dnnl_primitive_t prim;
	dnnl_memory_t a, b, c, scratch; /* a, b: what the matmul reads (bf16: the copies); scratch NULL when it needs none */
};

static struct {
	pthread_mutex_t lock;
	struct mm_entry cache[MM_CACHE];
	uint64_t clock;
	void *a16, *b16, *scratch; /* the bfloat16 copies; the scratchpad */
	size_t a16_bytes, b16_bytes, scratch_bytes;
	void *apad, *bpad; /* sgemm's operands with longer rows (dt_cpu_sgemm) */
	size_t apad_bytes, bpad_bytes;
} mm = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* Grows *p to hold n bytes; the old contents are not kept. */
static void grow(void **p, size_t *have, size_t n)
{
	if (n <= *have)
		return;
	if (*p)
		dt_device_free(DT_CPU, *p);
	*p = dt_device_alloc(DT_CPU, (int64_t)((n + sizeof(float) - 1) / sizeof(float)));
	*have = n;
}

/* A row-major (rows, cols) operand of op(x), stored transposed when trans. */
static dnnl_memory_desc_t operand_md(int64_t rows, int64_t cols, int trans, dnnl_data_type_t type)
{
	dnnl_memory_desc_t md;
	dnnl_dims_t dims = { rows, cols }, strides = { trans ? 1 : cols, trans ? rows : 1 };
	DT_DNNL_CHECK(dnnl_memory_desc_init_by_strides(&md, 2, dims, type, strides));
	return md;
}

static void entry_clear(struct mm_entry *e)
{
	if (e->prim)
		DT_DNNL_CHECK(dnnl_primitive_destroy(e->prim));
	dt_dnnl_mem_free(&e->a);
	dt_dnnl_mem_free(&e->b);
	dt_dnnl_mem_free(&e->c);
	dt_dnnl_mem_free(&e->scratch);
	memset(e, 0, sizeof(*e));
}

static void entry_make(struct mm_entry *e, const struct mm_key *key)
{
	dnnl_engine_t engine;
	dnnl_stream_t stream;
	dnnl_primitive_attr_t shared, attr;
	dnnl_post_ops_t post;
	dnnl_data_type_t in = key->bf16 ? dnnl_bf16 : dnnl_f32; /* what the matmul reads */
	dnnl_memory_desc_t a = operand_md(key->m, key->k, key->trans_a, in);
	dnnl_memory_desc_t b = operand_md(key->k, key->n, key->trans_b, in);
	dnnl_memory_desc_t c = operand_md(key->m, key->n, 0, dnnl_f32);
	dnnl_matmul_desc_t op;
	dnnl_primitive_desc_t pd;
	const dnnl_memory_desc_t *scratch;

	dt_dnnl_shared(&engine, &stream, &shared);
	DT_DNNL_CHECK(dnnl_primitive_attr_clone(&attr, shared));
	if (key->alpha != 1.0f)
		DT_DNNL_CHECK(dnnl_primitive_attr_set_output_scales(attr, 1, 0, &key->alpha));
	if (key->beta != 0.0f) { /* c = alpha a b + beta c: the sum post-op */
		DT_DNNL_CHECK(dnnl_post_ops_create(&post));
		DT_DNNL_CHECK(dnnl_post_ops_append_sum(post, key->beta));
		DT_DNNL_CHECK(dnnl_primitive_attr_set_post_ops(attr, post));
		DT_DNNL_CHECK(dnnl_post_ops_destroy(post));
	}
	DT_DNNL_CHECK(dnnl_matmul_desc_init(&op, &a, &b, NULL, &c));
	DT_DNNL_CHECK(dnnl_primitive_desc_create(&pd, &op, attr, engine, NULL));
	DT_DNNL_CHECK(dnnl_primitive_create(&e->prim, pd));
	scratch = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
	if (scratch && dnnl_memory_desc_get_size(scratch) > 0) {
		grow(&mm.scratch, &mm.scratch_bytes, dnnl_memory_desc_get_size(scratch));
		e->scratch = dt_dnnl_mem_new(scratch);
	}
	DT_DNNL_CHECK(dnnl_primitive_desc_destroy(pd));
	DT_DNNL_CHECK(dnnl_primitive_attr_destroy(attr));
	e->a = dt_dnnl_mem_new(&a);
	e->b = dt_dnnl_mem_new(&b);
	e->c = dt_dnnl_mem_new(&c);
	if (key->bf16) {
		grow(&mm.a16, &mm.a16_bytes, dnnl_memory_desc_get_size(&a));
		grow(&mm.b16, &mm.b16_bytes, dnnl_memory_desc_get_size(&b));
	}
	e->key = *key;
}

static struct mm_entry *entry_find(const struct mm_key *key)
{
	struct mm_entry *pick = &mm.cache[0];
	for (int i = 0; i < MM_CACHE; i++) {
		struct mm_entry *e = &mm.cache[i];
		if (e->used && !memcmp(&e->key, key, sizeof(*key))) {
			e->used = ++mm.clock;
			return e;
		}
		if (pick->used && (!e->used || e->used < pick->used))
			pick = e;
	}
	entry_clear(pick);
	entry_make(pick, key);
	pick->used = ++mm.clock;
	return pick;
}

void dt_cpu_matmul(int bf16, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
		   const float *b, float beta, float *c)
{
	struct mm_key key;
	struct mm_entry *e;
	dnnl_engine_t engine;
	dnnl_stream_t stream;
	dnnl_primitive_attr_t attr;
	dnnl_exec_arg_t args[4];
	int nargs = 3;

	key = (struct mm_key){ m, n, k, !!trans_a, !!trans_b, alpha, beta, !!bf16, 0 };
	dt_dnnl_shared(&engine, &stream, &attr);
	pthread_mutex_lock(&mm.lock);
	e = entry_find(&key);
	if (bf16) {
		dt_cpu_to_bf16(mm.a16, a, m * k);
		dt_cpu_to_bf16(mm.b16, b, k * n);
	}
	args[0] = (dnnl_exec_arg_t){ DNNL_ARG_SRC, dt_dnnl_bind(e->a, bf16 ? mm.a16 : (const void *)a) };
	args[1] = (dnnl_exec_arg_t){ DNNL_ARG_WEIGHTS, dt_dnnl_bind(e->b, bf16 ? mm.b16 : (const void *)b) };
	args[2] = (dnnl_exec_arg_t){ DNNL_ARG_DST, dt_dnnl_bind(e->c, c) };
	if (e->scratch)
		args[nargs++] = (dnnl_exec_arg_t){ DNNL_ARG_SCRATCHPAD, dt_dnnl_bind(e->scratch, mm.scratch) };
	DT_DNNL_CHECK(dnnl_primitive_execute(e->prim, stream, nargs, args));
	pthread_mutex_unlock(&mm.lock);
}

/* Floats added to a row that dt_cpu_sgemm copies: 64 bytes. */
#define ROW_PAD 16

/* Whether sgemm reads an operand with rows ld floats apart along k slowly on this CPU (see the top). */
static int slow_rows(int64_t ld)
{
	dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
	return (isa == dnnl_cpu_isa_avx2 || isa == dnnl_cpu_isa_avx2_vnni) && ld >= 512 && ld % 512 == 0;
}

int64_t dt_cpu_sgemm_ld(int64_t cols) { return slow_rows(cols) ? cols + ROW_PAD : cols; }

/* x (rows, cols) into *buf with rows cols + ROW_PAD floats apart; the copy. */
static const float *pad_rows(void **buf, size_t *have, const float *x, int64_t rows, int64_t cols)
{
	float *y;
	grow(buf, have, (size_t)(rows * (cols + ROW_PAD)) * sizeof(float));
	y = *buf;
#pragma omp parallel for if (rows * cols > 65536)
	for (int64_t r = 0; r < rows; r++)
		memcpy(y + r * (cols + ROW_PAD), x + r * cols, (size_t)cols * sizeof(float));
	return y;
}

void dt_cpu_sgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
		  const float *b, float beta, float *c)
{
	int64_t lda = trans_a ? m : k, ldb = trans_b ? k : n;
	int pad_a = trans_a && k > 0 && slow_rows(lda), pad_b = !trans_b && k > 0 && slow_rows(ldb);

	if (pad_a || pad_b) /* the copies are this file's buffers */
		pthread_mutex_lock(&mm.lock);
	if (pad_a) {
		a = pad_rows(&mm.apad, &mm.apad_bytes, a, k, lda);
		lda += ROW_PAD;
	}
	if (pad_b) {
		b = pad_rows(&mm.bpad, &mm.bpad_bytes, b, k, ldb);
		ldb += ROW_PAD;
	}
	DT_DNNL_CHECK(dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, n));
	if (pad_a || pad_b)
		pthread_mutex_unlock(&mm.lock);
}
