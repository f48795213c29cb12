/*
 * one_device: a single replica on one device (tf.distribute.OneDeviceStrategy).
 * `distribute: {strategy: one_device, device: cpu:0}` or `device: gpu:N`
 * (the CUDA backend, core/cuda.h); without `device:` gpu:0 when a GPU is
 * usable, else cpu:0.
 */
#include <stdio.h>
#include <string.h>

#include "core/cuda/cuda.h"
#include "core/error.h"
#include "strategies.h"

static int one_device_init(struct dt_strategy *s, const struct dt_node *args)
{
	struct dt_distribute d;
	const char *dev, *def = "cpu:0";
	int index = 0;
	char tail, why[512];

	/* Without `device:`, the first GPU when one is usable (auto's "one GPU -> gpu:0"), else the CPU. */
	if (dt_cuda_device_count() > 0 && dt_cuda_check_device(0, why, sizeof(why)) == 0)
		def = "gpu:0";
	if (dt_distribute_read(args, &d) < 0 || dt_cfg_string(args, "device", def, &dev) < 0)
		return -1;
	s->devices[0] = DT_CPU;
	if (!strcmp(dev, "gpu") || (sscanf(dev, "gpu:%d%c", &index, &tail) == 1 && index >= 0)) {
		if (dt_cuda_check_device(index, why, sizeof(why)) < 0)
			return dt_node_error(dt_node_get(args, "device"), "device '%s': %s", dev, why);
		s->devices[0] = (struct dt_device){ DT_DEVICE_CUDA, index };
	} else if (strcmp(dev, "cpu") && (sscanf(dev, "cpu:%d%c", &index, &tail) != 1 || index != 0)) {
		return dt_node_error(dt_node_get(args, "device"), "unknown device '%s' (expected cpu:0 or gpu:N)", dev);
	}
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
	.init = one_device_init,
	.broadcast = one_device_broadcast,
	.apply_gradients = one_device_apply,
	.reduce_sum = one_device_reduce,
};
