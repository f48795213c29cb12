/*
 * GPU replicas of one process (mirrored, and the local part of
 * multi_worker_mirrored) through NCCL, which the CUDA backend exports
 * (core/cuda.h: strategies never include CUDA or NCCL headers).
 *
 * One communicator per local GPU. Every collective of a step is queued, one
 * per GPU, between nccl_group_start and nccl_group_end (one thread drives all
 * the GPUs, which NCCL allows only inside a group), on each GPU's stream: the
 * optimizer updates queued next on the same streams see the reduced
 * gradients without any host synchronization.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cuda/cuda.h"
#include "core/error.h"
#include "local.h"

/* The CUDA backend drives at most this many GPUs (DT_CUDA_MAX_GPUS, core/ops_cuda.h). */
#define MAX_GPUS 16

int dt_local_is_gpu(const struct dt_strategy *s)
{
	return s->nreplicas > 0 && s->devices[0].kind == DT_DEVICE_CUDA;
}

int dt_local_nccl_unique_id(unsigned char *id, const char *who)
{
	char err[512];
	if (dt_cuda()->nccl_unique_id(id, err, sizeof(err)) < 0)
		return dt_error("strategy '%s': %s", who, err);
	return 0;
}

int dt_local_nccl_init_all(struct dt_local_nccl *c, const struct dt_strategy *s, const char *who)
{
	int devices[DT_MAX_REPLICAS];
	char err[512];

	memset(c, 0, sizeof(*c));
	DT_ASSERT(dt_local_is_gpu(s) && s->nreplicas <= MAX_GPUS);
	if (s->nreplicas == 1)
		return 0; /* one GPU: nothing to meet */
	for (int r = 0; r < s->nreplicas; r++)
		devices[r] = s->devices[r].index;
	if (dt_cuda()->nccl_comm_init_all(c->comms, s->nreplicas, devices, err, sizeof(err)) < 0)
		return dt_error("strategy '%s': cannot make the NCCL communicators of %d GPUs: %s", who, s->nreplicas,
				err);
	c->n = s->nreplicas;
	return 0;
}

int dt_local_nccl_init_ranks(struct dt_local_nccl *c, const struct dt_strategy *s, const unsigned char *id,
			     const char *who)
{
	const struct dt_cuda_api *api = dt_cuda();
	int nranks = s->world * s->nreplicas, failed = -1;
	char err[512];

	memset(c, 0, sizeof(*c));
	DT_ASSERT(dt_local_is_gpu(s) && s->nreplicas <= MAX_GPUS);
	if (nranks == 1)
		return 0;
	/* Several GPUs of one thread join a clique only inside a group (else the first init waits for the others). */
	if (s->nreplicas > 1)
		api->nccl_group_start();
	for (int l = 0; l < s->nreplicas; l++) {
		if (api->nccl_comm_init_rank(&c->comms[l], s->devices[l].index, nranks, id, s->rank * s->nreplicas + l,
					     err, sizeof(err)) < 0) {
			failed = l;
			break;
		}
		c->n = l + 1;
	}
	if (s->nreplicas > 1)
		api->nccl_group_end(); /* an error surfacing here aborts with NCCL's message */
	if (failed >= 0)
		return dt_error("strategy '%s': rank %d cannot join the NCCL clique of %d GPUs with gpu:%d: %s", who,
				s->rank, nranks, s->devices[failed].index, err);
	return 0;
}

void dt_local_nccl_broadcast(struct dt_local_nccl *c, const struct dt_strategy *s, struct dt_model *replicas,
			     struct dt_optimizer *opts)
{
	const struct dt_cuda_api *api = dt_cuda();

	for (int r = 1; opts && r < s->nreplicas; r++)
		opts[r].iterations = opts[0].iterations;
	if (c->n == 0)
		return;
	api->nccl_group_start();
	for (int r = 0; r < c->n; r++) {
		struct dt_model *m = &replicas[r];
		api->nccl_broadcast(c->comms[r], m->dev, m->params, m->nparams, 0);
		for (int i = 0; opts && i < opts[r].nslots; i++)
			if (opts[r].slots[i])
				api->nccl_broadcast(c->comms[r], m->dev, opts[r].slots[i], m->ntrainable, 0);
	}
	api->nccl_group_end();
}

void dt_local_nccl_allreduce(struct dt_local_nccl *c, const struct dt_strategy *s, struct dt_model *replicas)
{
	const struct dt_cuda_api *api = dt_cuda();

	(void)s;
	if (c->n == 0)
		return;
	api->nccl_group_start();
	for (int r = 0; r < c->n; r++) {
		struct dt_model *m = &replicas[r];
		api->nccl_all_reduce_sum(c->comms[r], m->dev, m->grads, m->ntrainable);
		if (m->nparams > m->ntrainable)
			api->nccl_broadcast(c->comms[r], m->dev, m->params + m->ntrainable, m->nparams - m->ntrainable, 0);
	}
	api->nccl_group_end();
}

void dt_local_nccl_release(struct dt_local_nccl *c)
{
	for (int r = 0; r < c->n; r++)
		dt_cuda()->nccl_comm_destroy(c->comms[r]);
	c->n = 0;
}

/* The GPUs of `devices: auto`: all of them, or this host's share under mpirun. 0 when none is usable. */
static int auto_gpus(struct dt_strategy *s)
{
	const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK"), *ls = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
	int n = dt_cuda_device_count(), first = 0, local_rank = lr ? atoi(lr) : 0, local_size = ls ? atoi(ls) : 1;
	char why[512];

	if (n == 0 || dt_cuda_check_device(0, why, sizeof(why)) < 0)
		return 0;
	if (local_size > 1 && local_rank >= 0 && local_rank < local_size) {
		int share = n / local_size;
		if (share == 0)
			return 0; /* more ranks than GPUs on this host */
		first = local_rank * share;
		n = share;
	}
	if (n > MAX_GPUS)
		n = MAX_GPUS;
	for (int i = 0; i < n; i++)
		s->devices[i] = (struct dt_device){ DT_DEVICE_CUDA, first + i };
	s->nreplicas = n;
	return n;
}

int dt_local_devices(struct dt_strategy *s, const struct dt_distribute *d)
{
	char why[512];

	if (d->ndevices == 0) {
		/* auto: every GPU, else cpu:0 */
		if (auto_gpus(s) > 0)
			return 0;
		s->nreplicas = 1;
		s->devices[0] = DT_CPU;
		return 0;
	}
	for (int i = 1; i < d->ndevices; i++)
		if (d->devices[i].kind != d->devices[0].kind)
			return dt_node_error(d->devices_node->items[i],
					     "device '%s': the replicas are all CPUs or all GPUs, not both",
					     d->devices_node->items[i]->value);
	for (int i = 0; i < d->ndevices; i++) {
		const struct dt_node *item = d->devices_node->items[i];
		if (d->devices[i].kind == DT_DEVICE_CUDA && dt_cuda_check_device(d->devices[i].index, why, sizeof(why)) < 0)
			return dt_node_error(item, "device '%s': %s", item->value, why);
	}
	if (d->devices[0].kind == DT_DEVICE_CUDA && d->ndevices > MAX_GPUS)
		return dt_node_error(d->devices_node, "%d GPUs: at most %d per process", d->ndevices, MAX_GPUS);
	s->nreplicas = d->ndevices;
	memcpy(s->devices, d->devices, sizeof(d->devices[0]) * (size_t)d->ndevices);
	return 0;
}
