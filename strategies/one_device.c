/*
 * one_device: a single replica on one device (tf.distribute.OneDeviceStrategy).
 * `distribute: {strategy: one_device, device: cpu:0}` or `device: gpu:N`
 * (the CUDA backend, core/cuda.h), or a `devices:` list of one entry;
 * without either, gpu:0 when a GPU is usable, else cpu:0.
 */
#include "core/cuda/cuda.h"
#include "core/error.h"
#include "strategies.h"

/* device: cpu:0 or gpu:N; a `devices` list of one entry names it too (the same one when both are given). */
static int one_device_check(const struct dt_distribute *d, const struct dt_system *sys)
{
	const struct dt_node *n = d->has_device ? d->device_node : d->ndevices ? d->devices_node->items[0] : NULL;
	struct dt_device dev = d->has_device ? d->device : d->devices[0];
	(void)sys;
	if (d->ndevices > 1)
		return dt_node_error(d->devices_node, "strategy 'one_device' has one replica, but devices names %d; use "
				     "mirrored for several", d->ndevices);
	if (d->has_device && d->ndevices &&
	    (d->devices[0].kind != d->device.kind || d->devices[0].index != d->device.index))
		return dt_node_error(d->devices_node, "device is '%s' but devices names '%s'; one_device has one",
				     d->device_node->value, d->devices_node->items[0]->value);
	if (n && dev.kind == DT_DEVICE_CPU && dev.index != 0)
		return dt_node_error(n, "unknown device '%s' (expected cpu:0 or gpu:N)", n->value);
	return 0;
}

static int one_device_init(struct dt_strategy *s, const struct dt_node *args)
{
	struct dt_distribute d;
	const struct dt_node *n;
	char why[512];

	if (dt_distribute_read(args, &d) < 0)
		return -1;
	n = d.has_device ? d.device_node : d.ndevices ? d.devices_node->items[0] : NULL;
	/* Without a device, the first GPU when one is usable (auto's "one GPU -> gpu:0"), else the CPU. */
	s->devices[0] = DT_CPU;
	if (n)
		s->devices[0] = d.has_device ? d.device : d.devices[0];
	else if (dt_cuda_device_count() > 0 && dt_cuda_check_device(0, why, sizeof(why)) == 0)
		s->devices[0] = (struct dt_device){ DT_DEVICE_CUDA, 0 };
	if (n && s->devices[0].kind == DT_DEVICE_CUDA && dt_cuda_check_device(s->devices[0].index, why, sizeof(why)) < 0)
		return dt_node_error(n, "device '%s': %s", n->value, why);
	s->nreplicas = 1;
	s->rank = 0;
	s->world = 1;
	s->is_chief = 1;
	return 0;
}

static void one_device_broadcast(struct dt_strategy *s, struct dt_model *replicas, struct dt_optimizer *opts) {}

static void one_device_apply(struct dt_strategy *s, struct dt_model *replicas, struct dt_optimizer *opts)
{
	dt_optimizer_apply(&opts[0], &replicas[0]);
}

static void one_device_reduce(struct dt_strategy *s, double *v, int n) {}

const struct dt_strategy_type dt_one_device_strategy = {
	.name = "one_device",
	.one_process = 1,
	.check = one_device_check,
	.init = one_device_init,
	.broadcast = one_device_broadcast,
	.apply_gradients = one_device_apply,
	.reduce_sum = one_device_reduce,
};
