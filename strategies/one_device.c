/*
 * one_device: a single replica on one device (tf.distribute.OneDeviceStrategy).
 * `distribute: {strategy: one_device, device: cpu:0}`.
 */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "strategies.h"

static int one_device_init(struct dt_strategy *s, const struct dt_node *args)
{
	struct dt_distribute d;
	const char *dev;
	int index = 0;
	char tail;

	if (dt_distribute_read(args, &d) < 0 || dt_cfg_string(args, "device", "cpu:0", &dev) < 0)
		return -1;
	if (sscanf(dev, "gpu:%d%c", &index, &tail) == 1 || !strcmp(dev, "gpu"))
		return dt_node_error(dt_node_get(args, "device"), "device '%s': this build of dtrain has no GPU backend", dev);
	if (strcmp(dev, "cpu") && (sscanf(dev, "cpu:%d%c", &index, &tail) != 1 || index != 0))
		return dt_node_error(dt_node_get(args, "device"), "unknown device '%s' (expected cpu:0)", dev);
	s->nreplicas = 1;
	s->devices[0] = DT_CPU;
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
