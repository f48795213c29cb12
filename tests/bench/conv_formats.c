/*
 * Which memory layouts make oneDNN's convolution fastest for dtrain's NHWC
 * tensors and Keras' HWIO kernels: the measurement behind the choice in
 * core/cpu/dnnl.c. Three ways, each timed with the reorders it needs:
 *
 *   nhwc+hwio  activations and weights as dtrain holds them, no reorder
 *   nhwc+any   activations as they are, weights in oneDNN's choice
 *              (reordered in, and the weight gradient back, every step)
 *   any        activations and weights in oneDNN's choice (every tensor reordered)
 *   blocked    activations held in oneDNN's channel blocks (nChw16c on AVX-512,
 *              nChw8c below; a 1-channel x as NCHW), as dtrain holds them
 *              between convolutions and pooling: no activation reordered
 *
 * on Keras' MNIST CNN convolutions and VGG-style 'same' ones, batch 128.
 * Best of REPS runs, so other load on the machine shows as less than it costs.
 *
 *   cc -O2 -fopenmp tests/bench/conv_formats.c -o conv_formats -ldnnl
 *   OMP_NUM_THREADS=1 ./conv_formats [REPS]; OMP_NUM_THREADS=2 ./conv_formats
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>

#define CHECK(call) \
	do { \
		dnnl_status_t st_ = (call); \
		if (st_ != dnnl_success) { \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, dnnl_status2str(st_)); \
			exit(1); \
		} \
	} while (0)

static dnnl_engine_t engine;
static dnnl_stream_t stream;

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

/* A memory object that owns its buffer, filled with values in [-0.5, 0.5). */
static dnnl_memory_t mem(const dnnl_memory_desc_t *md)
{
	dnnl_memory_t m;
	float *p;
	CHECK(dnnl_memory_create(&m, md, engine, DNNL_MEMORY_ALLOCATE));
	CHECK(dnnl_memory_get_data_handle(m, (void **)&p));
	for (size_t i = 0; i < dnnl_memory_desc_get_size(md) / sizeof(float); i++)
		p[i] = (float)((i * 7919) % 1000) / 1000 - 0.5f;
	return m;
}

/* One primitive execution: the primitive, its arguments. */
struct run {
	dnnl_primitive_t p;
	int nargs;
	dnnl_exec_arg_t args[4];
};

/* What one pass executes: reorders in, the convolution, reorders out. */
struct pass {
	int n;
	struct run runs[6];
};

static void pass_run(const struct pass *ps)
{
	for (int i = 0; i < ps->n; i++)
		CHECK(dnnl_primitive_execute(ps->runs[i].p, stream, ps->runs[i].nargs, ps->runs[i].args));
}

/*
 * The memory the primitive reads as `want`, from the user's memory `user`: the
 * user's itself when the layouts agree, else a copy with its reorder added to ps.
 */
static dnnl_memory_t in(struct pass *ps, dnnl_memory_t user, const dnnl_memory_desc_t *want)
{
	const dnnl_memory_desc_t *have;
	dnnl_primitive_desc_t pd;
	dnnl_memory_t m;
	struct run *r;
	CHECK(dnnl_memory_get_memory_desc(user, &have));
	if (dnnl_memory_desc_equal(have, want))
		return user;
	m = mem(want);
	CHECK(dnnl_reorder_primitive_desc_create(&pd, have, engine, want, engine, NULL));
	r = &ps->runs[ps->n++];
	CHECK(dnnl_primitive_create(&r->p, pd));
	CHECK(dnnl_primitive_desc_destroy(pd));
	r->nargs = 2;
	r->args[0] = (dnnl_exec_arg_t){ DNNL_ARG_FROM, user };
	r->args[1] = (dnnl_exec_arg_t){ DNNL_ARG_TO, m };
	return m;
}

/* The memory the primitive writes as `want`; its reorder to `user` goes to out (run after). */
static dnnl_memory_t out(struct pass *post, dnnl_memory_t user, const dnnl_memory_desc_t *want)
{
	const dnnl_memory_desc_t *have;
	dnnl_primitive_desc_t pd;
	dnnl_memory_t m;
	struct run *r;
	CHECK(dnnl_memory_get_memory_desc(user, &have));
	if (dnnl_memory_desc_equal(have, want))
		return user;
	m = mem(want);
	CHECK(dnnl_reorder_primitive_desc_create(&pd, want, engine, have, engine, NULL));
	r = &post->runs[post->n++];
	CHECK(dnnl_primitive_create(&r->p, pd));
	CHECK(dnnl_primitive_desc_destroy(pd));
	r->nargs = 2;
	r->args[0] = (dnnl_exec_arg_t){ DNNL_ARG_FROM, m };
	r->args[1] = (dnnl_exec_arg_t){ DNNL_ARG_TO, user };
	return m;
}

static void add(struct pass *ps, const_dnnl_primitive_desc_t pd, int nargs, const dnnl_exec_arg_t *args)
{
	struct run *r = &ps->runs[ps->n++];
	CHECK(dnnl_primitive_create(&r->p, pd));
	r->nargs = nargs;
	for (int i = 0; i < nargs; i++)
		r->args[i] = args[i];
}

static void append(struct pass *ps, const struct pass *post)
{
	for (int i = 0; i < post->n; i++)
		ps->runs[ps->n++] = post->runs[i];
}

static double best_ms(const struct pass *ps, int reps)
{
	double best = 1e30;
	pass_run(ps);
	for (int r = 0; r < reps; r++) {
		double t = now();
		pass_run(ps);
		t = now() - t;
		best = t < best ? t : best;
	}
	return best * 1e3;
}

struct shape {
	const char *name;
	int n, ih, iw, ic, oh, ow, oc, k, pad;
};

enum layout { NHWC_HWIO, NHWC_ANY, ANY, BLOCKED };
static const char *const layout_names[] = { "nhwc+hwio", "nhwc+any", "any", "blocked" };

/* The layout `lay` holds c channels in: NHWC, or (BLOCKED) oneDNN's blocks of this CPU. */
static dnnl_format_tag_t held(enum layout lay, int c)
{
	int avx512 = dnnl_get_effective_cpu_isa() >= dnnl_cpu_isa_avx512_core &&
		     dnnl_get_effective_cpu_isa() != dnnl_cpu_isa_avx2_vnni;
	if (lay != BLOCKED)
		return dnnl_nhwc;
	if (c == 1)
		return dnnl_nchw;
	return avx512 ? dnnl_aBcd16b : dnnl_aBcd8b;
}

static void bench(const struct shape *s, enum layout lay, int reps)
{
	dnnl_dims_t xd = { s->n, s->ic, s->ih, s->iw }, wd = { s->oc, s->ic, s->k, s->k }, bd = { s->oc };
	dnnl_dims_t yd = { s->n, s->oc, s->oh, s->ow }, st = { 1, 1 }, pad = { s->pad, s->pad };
	dnnl_format_tag_t act = lay == ANY ? dnnl_format_tag_any : dnnl_nhwc, xt = held(lay, s->ic), yt = held(lay, s->oc);
	dnnl_format_tag_t wts = lay == NHWC_HWIO ? dnnl_hwio : dnnl_format_tag_any;
	dnnl_memory_desc_t ux, uw, ub, uy, px, pw, py;
	dnnl_convolution_desc_t fd, dd, wdsc;
	dnnl_primitive_desc_t fpd, dpd, wpd;
	dnnl_memory_t x, w, b, y, dy, dx, dw, db;
	struct pass fwd = { 0 }, bwd_data = { 0 }, bwd_weights = { 0 }, post = { 0 };
	double flops = 2.0 * s->n * s->oh * s->ow * s->oc * s->ic * s->k * s->k, ms[3];
	const char *impl[3];
	int block = held(BLOCKED, 2) == dnnl_aBcd16b ? 16 : 8;

	if (lay == BLOCKED && ((s->ic != 1 && s->ic % block) || s->oc % block))
		return; /* dtrain keeps such activations NHWC */

	CHECK(dnnl_memory_desc_init_by_tag(&ux, 4, xd, dnnl_f32, xt));
	CHECK(dnnl_memory_desc_init_by_tag(&uw, 4, wd, dnnl_f32, dnnl_hwio));
	CHECK(dnnl_memory_desc_init_by_tag(&ub, 1, bd, dnnl_f32, dnnl_a));
	CHECK(dnnl_memory_desc_init_by_tag(&uy, 4, yd, dnnl_f32, yt));
	CHECK(dnnl_memory_desc_init_by_tag(&px, 4, xd, dnnl_f32, lay == BLOCKED ? xt : act));
	CHECK(dnnl_memory_desc_init_by_tag(&pw, 4, wd, dnnl_f32, wts));
	CHECK(dnnl_memory_desc_init_by_tag(&py, 4, yd, dnnl_f32, lay == BLOCKED ? yt : act));
	x = mem(&ux), w = mem(&uw), b = mem(&ub), y = mem(&uy), dy = mem(&uy), dx = mem(&ux), dw = mem(&uw), db = mem(&ub);

	CHECK(dnnl_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct, &px, &pw, &ub,
						 &py, st, pad, pad));
	CHECK(dnnl_convolution_backward_data_desc_init(&dd, dnnl_convolution_direct, &px, &pw, &py, st, pad, pad));
	CHECK(dnnl_convolution_backward_weights_desc_init(&wdsc, dnnl_convolution_direct, &px, &pw, &ub, &py, st, pad,
							  pad));
	CHECK(dnnl_primitive_desc_create(&fpd, &fd, NULL, engine, NULL));
	CHECK(dnnl_primitive_desc_create(&dpd, &dd, NULL, engine, fpd));
	CHECK(dnnl_primitive_desc_create(&wpd, &wdsc, NULL, engine, fpd));

	{
		dnnl_memory_t px_ = in(&fwd, x, dnnl_primitive_desc_query_md(fpd, dnnl_query_src_md, 0));
		dnnl_memory_t pw_ = in(&fwd, w, dnnl_primitive_desc_query_md(fpd, dnnl_query_weights_md, 0));
		dnnl_memory_t py_ = out(&post, y, dnnl_primitive_desc_query_md(fpd, dnnl_query_dst_md, 0));
		dnnl_exec_arg_t a[4] = { { DNNL_ARG_SRC, px_ }, { DNNL_ARG_WEIGHTS, pw_ }, { DNNL_ARG_BIAS, b },
					 { DNNL_ARG_DST, py_ } };
		add(&fwd, fpd, 4, a);
		append(&fwd, &post);
	}
	post.n = 0;
	{
		dnnl_memory_t pdy = in(&bwd_data, dy, dnnl_primitive_desc_query_md(dpd, dnnl_query_diff_dst_md, 0));
		dnnl_memory_t pw_ = in(&bwd_data, w, dnnl_primitive_desc_query_md(dpd, dnnl_query_weights_md, 0));
		dnnl_memory_t pdx = out(&post, dx, dnnl_primitive_desc_query_md(dpd, dnnl_query_diff_src_md, 0));
		dnnl_exec_arg_t a[3] = { { DNNL_ARG_DIFF_DST, pdy }, { DNNL_ARG_WEIGHTS, pw_ }, { DNNL_ARG_DIFF_SRC, pdx } };
		add(&bwd_data, dpd, 3, a);
		append(&bwd_data, &post);
	}
	post.n = 0;
	{
		/* src and diff_dst reorders counted here too; a training step could share them */
		dnnl_memory_t px_ = in(&bwd_weights, x, dnnl_primitive_desc_query_md(wpd, dnnl_query_src_md, 0));
		dnnl_memory_t pdy = in(&bwd_weights, dy, dnnl_primitive_desc_query_md(wpd, dnnl_query_diff_dst_md, 0));
		dnnl_memory_t pdw = out(&post, dw, dnnl_primitive_desc_query_md(wpd, dnnl_query_diff_weights_md, 0));
		dnnl_exec_arg_t a[4] = { { DNNL_ARG_SRC, px_ }, { DNNL_ARG_DIFF_DST, pdy }, { DNNL_ARG_DIFF_WEIGHTS, pdw },
					 { DNNL_ARG_DIFF_BIAS, db } };
		add(&bwd_weights, wpd, 4, a);
		append(&bwd_weights, &post);
	}
	ms[0] = best_ms(&fwd, reps);
	/* a blocked first layer's data gradient is a reference loop (a second a run), and dtrain runs none */
	ms[1] = lay == BLOCKED && s->ic == 1 ? 0 : best_ms(&bwd_data, reps);
	ms[2] = best_ms(&bwd_weights, reps);
	CHECK(dnnl_primitive_desc_query(fpd, dnnl_query_impl_info_str, 0, &impl[0]));
	CHECK(dnnl_primitive_desc_query(dpd, dnnl_query_impl_info_str, 0, &impl[1]));
	CHECK(dnnl_primitive_desc_query(wpd, dnnl_query_impl_info_str, 0, &impl[2]));
	for (int i = 0; i < 3; i++)
		if (ms[i] > 0)
			printf("%-26s %-10s %-12s %8.2f ms %6.1f GFLOP/s  %s\n", s->name, layout_names[lay],
			       (const char *[]){ "forward", "bwd data", "bwd weights" }[i], ms[i], flops / ms[i] * 1e-6,
			       impl[i]);
	fflush(stdout);
	/* a benchmark: the process ends here, its memory with it */
}

int main(int argc, char **argv)
{
	int reps = argc > 1 ? atoi(argv[1]) : 20;
	static const struct shape shapes[] = {
		{ "conv 28x28x1->26x26x32", 128, 28, 28, 1, 26, 26, 32, 3, 0 },
		{ "conv 26x26x32->24x24x64", 128, 26, 26, 32, 24, 24, 64, 3, 0 },
		{ "same 28x28x32->28x28x32", 128, 28, 28, 32, 28, 28, 32, 3, 1 },
		{ "same 32x32x3->32x32x32", 128, 32, 32, 3, 32, 32, 32, 3, 1 },
		{ "same 28x28x32->28x28x64", 128, 28, 28, 32, 28, 28, 64, 3, 1 },
		{ "same 14x14x64->14x14x64", 128, 14, 14, 64, 14, 14, 64, 3, 1 },
		{ "same 14x14x64->14x14x128", 128, 14, 14, 64, 14, 14, 128, 3, 1 },
	};
	CHECK(dnnl_engine_create(&engine, dnnl_cpu, 0));
	CHECK(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags));
	for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
		for (int lay = NHWC_HWIO; lay <= BLOCKED; lay++)
			bench(&shapes[i], lay, reps);
	return 0;
}
