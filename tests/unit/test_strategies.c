/*
 * Strategies without MPI: the distribute: keys, the table and auto-selection,
 * mirrored's update against one replica's on the summed gradient, and the
 * parameter server's shard update (dt_optimizer_apply_range) against the
 * whole-buffer update.
 */
#include "helpers.h"

#include "core/model/model.h"
#include "core/model/optimizer.h"
#include "layers/layers.h"
#include "strategies/strategies.h"

static const char model_yaml[] = "layers:\n  - dense: {units: 7, activation: relu}\n  - dense: {units: 3}\n";

struct built {
	struct dt_doc *doc;
	struct dt_model m;
	struct dt_optimizer o;
};

static void build(struct built *b, const char *optimizer, struct dt_device dev)
{
	struct dt_shape in = dt_shape_make(1, (int[]){ 5 });
	struct dt_optimizer_config c;
	struct dt_doc *d = dt_doc_parse("compile.yaml", optimizer, ".");
	memset(b, 0, sizeof(*b));
	b->doc = dt_doc_parse("model.yaml", model_yaml, ".");
	assert_non_null(b->doc);
	assert_non_null(d);
	assert_int_equal(dt_model_init(&b->m, "t", &in, dt_node_get(dt_doc_root(b->doc), "layers"), dt_layer_types), 0);
	dt_model_alloc(&b->m, dev, 4);
	dt_model_init_params(&b->m, 11);
	assert_int_equal(dt_optimizer_config_read(&c, dt_doc_root(d)), 0);
	dt_optimizer_init(&b->o, &c, &b->m);
	dt_doc_free(d);
}

static void release(struct built *b)
{
	dt_optimizer_release(&b->o, &b->m);
	dt_model_release(&b->m);
	dt_doc_free(b->doc);
}

static void fill_grads(struct dt_model *m, float scale)
{
	for (int64_t i = 0; i < m->ntrainable; i++)
		m->grads[i] = scale * (float)((i * 37) % 11 - 5);
}

static struct dt_doc *distribute(const char *yaml)
{
	struct dt_doc *d = dt_doc_parse("d.yaml", yaml, ".");
	assert_non_null(d);
	return d;
}

static void test_distribute_keys(void **state)
{
	struct dt_distribute d;
	struct dt_doc *doc = distribute("strategy: mirrored\n");
	assert_int_equal(dt_distribute_read(dt_doc_root(doc), &d), 0);
	assert_int_equal(d.ndevices, 0);
	assert_int_equal(d.num_ps, 1);
	assert_int_equal(d.has_num_ps, 0);
	assert_float_equal(d.timeout, 300, 0);
	assert_float_equal(d.bucket_mb, 1, 0);
	assert_int_equal(d.communication, DT_COMM_AUTO);
	dt_doc_free(doc);

	doc = distribute("devices: [cpu:0, cpu:3]\nnum_ps: 2\ntimeout: 5\nbucket_mb: 0.25\n");
	assert_int_equal(dt_distribute_read(dt_doc_root(doc), &d), 0);
	assert_int_equal(d.ndevices, 2);
	assert_int_equal(d.devices[1].index, 3);
	assert_int_equal(d.num_ps, 2);
	assert_int_equal(d.has_num_ps, 1);
	assert_float_equal(d.timeout, 5, 0);
	assert_float_equal(d.bucket_mb, 0.25, 0);
	assert_int_equal(d.communication, DT_COMM_AUTO);
	dt_doc_free(doc);

	doc = distribute("communication: shared_memory\n");
	assert_int_equal(dt_distribute_read(dt_doc_root(doc), &d), 0);
	assert_int_equal(d.communication, DT_COMM_SHARED_MEMORY);
	assert_non_null(d.communication_node);
	dt_doc_free(doc);
	doc = distribute("communication: mpi\n");
	assert_int_equal(dt_distribute_read(dt_doc_root(doc), &d), 0);
	assert_int_equal(d.communication, DT_COMM_MPI);
	dt_doc_free(doc);

	/* GPU names parse; whether the GPUs exist is the strategy's check (test_gpu_devices). */
	doc = distribute("devices: [gpu:1, gpu]\n");
	assert_int_equal(dt_distribute_read(dt_doc_root(doc), &d), 0);
	assert_int_equal(d.ndevices, 2);
	assert_int_equal(d.devices[0].kind, DT_DEVICE_CUDA);
	assert_int_equal(d.devices[0].index, 1);
	assert_int_equal(d.devices[1].kind, DT_DEVICE_CUDA);
	assert_int_equal(d.devices[1].index, 0);
	dt_doc_free(doc);

	static const struct {
		const char *yaml, *error;
	} bad[] = {
		{ "devices: [cpu:0, cpu:0]\n", "listed twice" },
		{ "devices: [gpu:64]\n", "unknown device 'gpu:64'" },
		{ "devices: [gpu:x]\n", "unknown device 'gpu:x'" },
		{ "devices: [tpu:0]\n", "unknown device 'tpu:0'" },
		{ "devices: []\n", "'devices' is 'auto' or a list" },
		{ "devices: cpu:0\n", "'devices' is 'auto' or a list" },
		{ "num_ps: 0\n", "num_ps" },
		{ "timeout: 0\n", "timeout" },
		{ "timout: 5\n", "did you mean 'timeout'" },
		{ "bucket_mb: -1\n", "bucket_mb" },
		{ "bucket_mb: big\n", "bucket_mb" },
		{ "communication: ring\n", "expected one of: auto, shared_memory, mpi" },
		{ "communication: shared_memroy\n", "did you mean 'shared_memory'" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		doc = distribute(bad[i].yaml);
		assert_int_equal(dt_distribute_read(dt_doc_root(doc), &d), -1);
		assert_error_contains(bad[i].error);
		assert_true(dt_error_last_is_config());
		dt_doc_free(doc);
	}
}

/* GPU replicas: a GPU that is not there, or CPUs and GPUs mixed, are config errors at the item. */
static void test_gpu_devices(void **state)
{
	static const struct {
		const char *yaml, *error;
	} bad[] = {
		{ "strategy: mirrored\ndevices: [gpu:63]\n", "device 'gpu:63': " },
		{ "strategy: mirrored\ndevices: [cpu:0, gpu:0]\n", "device 'gpu:0': the replicas are all CPUs or all GPUs" },
		{ "strategy: mirrored\ndevices: [gpu:0, cpu:1]\n", "device 'cpu:1': the replicas are all CPUs or all GPUs" },
		{ "strategy: multi_worker_mirrored\ndevices: [gpu:63]\n", "device 'gpu:63': " },
		{ "strategy: parameter_server\ndevices: [gpu:0]\n", "devices is [cpu:0] or auto" },
	};
	struct dt_system sys;
	struct dt_strategy s;

	memset(&sys, 0, sizeof(sys));
	sys.mpi_world = 1;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct dt_doc *doc = distribute(bad[i].yaml);
		assert_int_equal(dt_strategy_create(&s, dt_doc_root(doc), &sys), -1);
		assert_error_contains(bad[i].error);
		assert_true(dt_error_last_is_config());
		dt_strategy_release(&s);
		dt_doc_free(doc);
	}
}

static void test_create_and_auto(void **state)
{
	struct dt_system sys;
	struct dt_strategy s;
	struct dt_doc *doc = distribute("strategy: mirrored\ndevices: [cpu:0, cpu:1, cpu:2]\n");
	char why[160];

	memset(&sys, 0, sizeof(sys));
	sys.mpi_world = 1;
	assert_int_equal(dt_strategy_create(&s, dt_doc_root(doc), &sys), 0);
	assert_string_equal(s.type->name, "mirrored");
	assert_int_equal(s.nreplicas, 3);
	assert_int_equal(s.first_replica, 0);
	assert_int_equal(s.global_replicas, 3);
	assert_int_equal(s.is_chief, 1);
	assert_int_equal(s.devices[2].index, 2);
	dt_strategy_release(&s);
	dt_doc_free(doc);

	/* auto: one process -> one_device; several -> multi_worker_mirrored. */
	assert_string_equal(dt_strategy_auto(&sys, NULL, why, sizeof(why)), "one_device");
	sys.mpi_world = 4;
	assert_string_equal(dt_strategy_auto(&sys, NULL, why, sizeof(why)), "multi_worker_mirrored");
	/* With num_ps, auto under MPI picks parameter_server, which needs a real MPI job. */
	doc = distribute("num_ps: 1\n");
	assert_int_equal(dt_strategy_create(&s, dt_doc_root(doc), &sys), -1);
	assert_error_contains("parameter_server");
	dt_strategy_release(&s);
	dt_doc_free(doc);

	/* multi_worker_mirrored outside an MPI job: one process, all slices its own. */
	sys.mpi_world = 1;
	doc = distribute("strategy: multi_worker_mirrored\ndevices: [cpu:0, cpu:1]\n");
	assert_int_equal(dt_strategy_create(&s, dt_doc_root(doc), &sys), 0);
	assert_int_equal(s.world, 1);
	assert_int_equal(s.global_replicas, 2);
	dt_strategy_release(&s);
	dt_doc_free(doc);
}

/* dt_strategy_check: the config alone (NULL system), or with the job's rules. */
static void test_check(void **state)
{
	static const struct {
		const char *yaml, *error; /* error NULL: valid on its own; job_error: refused in a job of 2 */
		const char *job_error;
	} cases[] = {
		{ "strategy: foo\n", "unknown strategy 'foo'", "unknown strategy 'foo'" },
		{ "strategy: one_device\n", NULL, "trains in one process" },
		{ "strategy: mirrored\ndevices: [cpu:0, cpu:1]\n", NULL, "trains in one process" },
		{ "strategy: one_device\ndevices: [cpu:0, cpu:1]\n", "has one replica, but devices names 2",
		  "trains in one process" },
		{ "strategy: one_device\ndevice: cpu:1\n", "unknown device 'cpu:1'", "trains in one process" },
		{ "strategy: one_device\ndevice: cpu:0\ndevices: [gpu:1]\n", "device is 'cpu:0' but devices names 'gpu:1'",
		  "trains in one process" },
		{ "strategy: parameter_server\nnum_ps: 2\n", NULL, "needs at least 3 processes (mpirun -np 3)" },
		{ "strategy: parameter_server\ndevices: [cpu:1]\n", "devices is [cpu:0] or auto",
		  "devices is [cpu:0] or auto" },
		{ "device: gpux\n", "unknown device 'gpux'", "unknown device 'gpux'" },
	};
	struct dt_system job;

	memset(&job, 0, sizeof(job));
	job.mpi_world = 2;
	snprintf(job.launcher, sizeof(job.launcher), "mpirun -np 2");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct dt_doc *doc = distribute(cases[i].yaml);
		assert_int_equal(dt_strategy_check(dt_doc_root(doc), NULL), cases[i].error ? -1 : 0);
		if (cases[i].error)
			assert_error_contains(cases[i].error);
		assert_int_equal(dt_strategy_check(dt_doc_root(doc), &job), -1);
		assert_error_contains(cases[i].job_error);
		dt_doc_free(doc);
	}
}

/* auto's choice and reason, and the line fit prints. */
static void test_auto_reason_and_line(void **state)
{
	struct dt_system sys;
	struct dt_strategy s;
	struct dt_distribute d;
	struct dt_doc *doc = distribute("devices: [cpu:0, cpu:1]\n");
	char why[160], line[256];

	memset(&sys, 0, sizeof(sys));
	sys.mpi_world = 1;
	assert_string_equal(dt_strategy_auto(&sys, NULL, why, sizeof(why)), "one_device");
	assert_string_equal(why, "no GPU and one process");
	sys.gpus = 2;
	assert_string_equal(dt_strategy_auto(&sys, NULL, why, sizeof(why)), "mirrored");
	assert_string_equal(why, "2 GPUs and one process");
	sys.gpus = 0;
	assert_int_equal(dt_distribute_read(dt_doc_root(doc), &d), 0);
	assert_string_equal(dt_strategy_auto(&sys, &d, why, sizeof(why)), "mirrored");
	assert_string_equal(why, "distribute.devices names 2 devices");
	sys.mpi_world = 3;
	assert_string_equal(dt_strategy_auto(&sys, &d, why, sizeof(why)), "multi_worker_mirrored");
	assert_string_equal(why, "the MPI job has 3 processes");

	sys.mpi_world = 1;
	assert_int_equal(dt_strategy_create(&s, dt_doc_root(doc), &sys), 0);
	dt_strategy_describe(&s, line, sizeof(line));
	assert_string_equal(line, "mirrored over cpu:0, cpu:1 (distribute.devices names 2 devices)");
	dt_strategy_release(&s);
	dt_doc_free(doc);

	doc = distribute("strategy: one_device\ndevice: cpu:0\n");
	assert_int_equal(dt_strategy_create(&s, dt_doc_root(doc), &sys), 0);
	dt_strategy_describe(&s, line, sizeof(line));
	assert_string_equal(line, "one_device cpu:0 (as distribute.strategy asks)");
	dt_strategy_release(&s);
	dt_doc_free(doc);
}

/* Two mirrored replicas with gradients g and 2g: the update one replica makes with 3g. */
static void test_mirrored_update(void **state)
{
	struct dt_system sys = { .mpi_world = 1 };
	struct dt_strategy s;
	struct dt_doc *doc = distribute("strategy: mirrored\ndevices: [cpu:0, cpu:1]\n");
	struct built rep[2], one;
	struct dt_model models[2];
	struct dt_optimizer opts[2];

	assert_int_equal(dt_strategy_create(&s, dt_doc_root(doc), &sys), 0);
	for (int r = 0; r < 2; r++)
		build(&rep[r], "optimizer: adam\n", s.devices[r]);
	build(&one, "optimizer: adam\n", DT_CPU);
	/* Replica 1 starts elsewhere: broadcast makes it replica 0. */
	dt_model_init_params(&rep[1].m, 99);
	for (int r = 0; r < 2; r++) {
		models[r] = rep[r].m;
		opts[r] = rep[r].o;
	}
	s.type->broadcast(&s, models, opts);
	assert_memory_equal(models[1].params, one.m.params, one.m.nparams * sizeof(float));
	for (int step = 0; step < 3; step++) {
		fill_grads(&models[0], 1);
		fill_grads(&models[1], 2);
		fill_grads(&one.m, 3);
		s.type->apply_gradients(&s, models, opts);
		dt_optimizer_apply(&one.o, &one.m);
	}
	for (int64_t i = 0; i < one.m.nparams; i++) {
		assert_float_equal(models[0].params[i], one.m.params[i], 1e-6);
		assert_float_equal(models[1].params[i], models[0].params[i], 0);
	}
	for (int r = 0; r < 2; r++) {
		rep[r].o = opts[r];
		release(&rep[r]);
	}
	release(&one);
	dt_strategy_release(&s);
	dt_doc_free(doc);
}

/* Shards on parameter boundaries, each updated by its own call: the whole-buffer update. */
static void test_apply_range(void **state)
{
	static const char *const optimizers[] = {
		"optimizer: adam\n",
		"optimizer: {sgd: {learning_rate: 0.1, momentum: 0.9, clipnorm: 0.5}}\n",
		"optimizer: {rmsprop: {momentum: 0.5}}\n",
	};
	for (int k = 0; k < 3; k++) {
		struct built whole, parts;
		int64_t cut;
		build(&whole, optimizers[k], DT_CPU);
		build(&parts, optimizers[k], DT_CPU);
		cut = whole.m.layers[1].params[0].offset; /* the second layer's kernel */
		for (int step = 0; step < 3; step++) {
			fill_grads(&whole.m, 1 + step);
			fill_grads(&parts.m, 1 + step);
			dt_optimizer_apply(&whole.o, &whole.m);
			parts.o.iterations = step;
			dt_optimizer_apply_range(&parts.o, &parts.m, 0, cut);
			parts.o.iterations = step;
			dt_optimizer_apply_range(&parts.o, &parts.m, cut, parts.m.ntrainable);
		}
		assert_int_equal(parts.o.iterations, whole.o.iterations);
		assert_memory_equal(parts.m.params, whole.m.params, whole.m.nparams * sizeof(float));
		release(&whole);
		release(&parts);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_distribute_keys),
		cmocka_unit_test(test_gpu_devices),
		cmocka_unit_test(test_create_and_auto),
		cmocka_unit_test(test_check),
		cmocka_unit_test(test_auto_reason_and_line),
		cmocka_unit_test(test_mirrored_update),
		cmocka_unit_test(test_apply_range),
	};
	dt_error_set_quiet(1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
