/*
 * mirrored: several replicas in one process (tf.distribute.MirroredStrategy).
 * `distribute: {strategy: mirrored, devices: [cpu:0, cpu:1]}` makes logical
 * CPU replicas, as TensorFlow's logical devices do. Each replica computes its
 * slice of the global batch; the gradients (each scaled by 1/global batch)
 * are summed into replica 0, replica 0's optimizer applies the update, and
 * the parameters are copied back to the other replicas, so every replica
 * holds the same weights as one_device would on the same global batches (up
 * to the order of float additions).
 *
 * `devices: [gpu:0, gpu:1]` (or auto with several GPUs) makes GPU replicas
 * that meet through NCCL (local_gpu.c): replica 0's parameters and optimizer
 * state are broadcast at start, and each step every replica's gradient
 * buffer is all-reduced (summed) in place, then every replica's optimizer
 * applies the same update, so no parameter copy is needed.
 */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "local.h"

static struct dt_tensor host_flat(float *p, int64_t n) { return dt_tensor_flat(p, DT_CPU, n); }

void dt_local_sum_grads(struct dt_strategy *s, struct dt_model *replicas, int64_t lo, int64_t hi)
{
	struct dt_tensor g0;
	if (hi <= lo)
		return;
	g0 = host_flat(replicas[0].grads + lo, hi - lo);
	for (int r = 1; r < s->nreplicas; r++) {
		struct dt_tensor g = host_flat(replicas[r].grads + lo, hi - lo);
		DT_ASSERT(replicas[r].dev.kind == DT_DEVICE_CPU);
		dt_op_axpy(1, &g, &g0);
	}
}

void dt_local_copy_params(struct dt_strategy *s, struct dt_model *replicas, struct dt_optimizer *opts)
{
	struct dt_tensor p0 = host_flat(replicas[0].params, replicas[0].nparams);
	for (int r = 1; r < s->nreplicas; r++) {
		struct dt_tensor p = host_flat(replicas[r].params, replicas[r].nparams);
		dt_op_copy(&p0, &p);
		if (opts)
			opts[r].iterations = opts[0].iterations;
	}
}

static int mirrored_init(struct dt_strategy *s, const struct dt_node *args)
{
	struct dt_distribute d;
	if (dt_distribute_read(args, &d) < 0 || dt_local_devices(s, &d) < 0)
		return -1;
	s->rank = 0;
	s->world = 1;
	s->is_chief = 1;
	s->timeout = d.timeout;
	if (dt_local_is_gpu(s)) {
		struct dt_local_nccl *c = dt_calloc(1, sizeof(*c));
		s->priv = c;
		if (dt_local_nccl_init_all(c, s, "mirrored") < 0)
			return -1;
	}
	return 0;
}

static void mirrored_broadcast(struct dt_strategy *s, struct dt_model *replicas, struct dt_optimizer *opts)
{
	if (s->priv)
		dt_local_nccl_broadcast(s->priv, s, replicas, opts);
	else
		dt_local_copy_params(s, replicas, opts);
}

static void mirrored_apply(struct dt_strategy *s, struct dt_model *replicas, struct dt_optimizer *opts)
{
	if (s->priv) {
		dt_local_nccl_allreduce(s->priv, s, replicas);
		for (int r = 0; r < s->nreplicas; r++)
			dt_optimizer_apply(&opts[r], &replicas[r]);
		return;
	}
	dt_local_sum_grads(s, replicas, 0, replicas[0].ntrainable);
	dt_optimizer_apply(&opts[0], &replicas[0]);
	dt_local_copy_params(s, replicas, opts);
}

static void mirrored_release(struct dt_strategy *s)
{
	if (s->priv)
		dt_local_nccl_release(s->priv);
	free(s->priv);
	s->priv = NULL;
}

static void mirrored_reduce(struct dt_strategy *s, double *v, int n) {}

const struct dt_strategy_type dt_mirrored_strategy = {
	.name = "mirrored",
	.one_process = 1,
	.init = mirrored_init,
	.broadcast = mirrored_broadcast,
	.apply_gradients = mirrored_apply,
	.reduce_sum = mirrored_reduce,
	.release = mirrored_release,
};
