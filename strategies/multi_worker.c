/*
 * multi_worker_mirrored: one process per worker, launched by mpirun or srun
 * (tf.distribute.MultiWorkerMirroredStrategy without a cluster file). Rank 0
 * is the chief. The chief's parameters and optimizer state are broadcast at
 * start and after weights are loaded; each step the local replicas' gradients
 * are summed, then MPI all-reduces sum the flat gradient buffer over the
 * ranks and every rank applies the same update. Rank k reads and decodes
 * only its part of each global batch, which its R replicas share: the rows
 * of slices k * R .. k * R + R - 1 of the global batch's world * R slices.
 *
 * The gradient all-reduce runs in buckets (distribute.bucket_mb, 1 MiB by
 * default; PyTorch DDP's idea): the layers' gradients, from the last layer
 * down, close a bucket at the first layer boundary past the size, so every
 * rank has the same buckets. While the last local replica runs backward,
 * each bucket whose layers are done is summed over the local replicas and
 * its sum over the ranks started (a ring, mpi_coll.h), and the started ones
 * progress between layers; apply_gradients starts what is left, waits for
 * all, and updates. When
 * every rank runs on one host (distribute.communication auto, or
 * shared_memory) apply_gradients sums in shared memory instead (shm_sum.h),
 * after backward: each rank has one core or a few, so the sum has no core to
 * overlap on, and it costs a fraction of MPI's. Where the window's directory
 * (/dev/shm) has too little room, the buckets after all (shared_start).
 *
 * Every collective gives up after distribute.timeout seconds, naming the
 * ranks that did not arrive (mpi_coll.h).
 *
 * GPU replicas (`devices: [gpu:0, ...]`, or auto on a host with GPUs): rank
 * 0 makes an NCCL unique id and broadcasts it over MPI; local GPU l of rank k
 * becomes member k * R + l of one NCCL clique of world * R GPUs. The
 * parameter broadcast and the per-step gradient all-reduce then go through
 * NCCL on the GPUs' streams (local_gpu.c); the step count, the metrics and
 * the chief's decisions stay on MPI. distribute.timeout covers those MPI
 * collectives (and the id broadcast) only: an NCCL collective that a lost
 * rank never joins is not timed by dtrain (the host thread blocks at the
 * next metrics read-back); the launcher ends the job when a rank dies.
 *
 * Started without mpirun, it is one process (world 1) and needs no MPI.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "core/cuda/cuda.h"
#include "core/error.h"
#include "local.h"
#include "mpi_coll.h"
#include "shm_sum.h"

struct multi_worker {
	int mpi;                  /* MPI started (world > 1) */
	struct dt_mpi_group group;
	int gpu;                  /* the replicas are GPUs: NCCL */
	struct dt_local_nccl nccl;
	int64_t step;             /* gradient all-reduces done */
	double t_allreduce, t_first, t_last; /* DTRAIN_STATS: all-reduce seconds, first and last step */
	/* the gradient buckets (CPU replicas under MPI), planned on the first step */
	int64_t bucket_floats;    /* distribute.bucket_mb */
	int nbuckets;             /* -1: not planned yet */
	int64_t *bucket_lo;       /* (nbuckets + 1): bucket b is [bucket_lo[b + 1], bucket_lo[b]), lo[0] = ntrainable */
	struct dt_mpi_ring *rings; /* (nbuckets) their sums */
	float *ring_tmp;          /* the rings' room for received chunks, one after another */
	int64_t *tmp_at;          /* (nbuckets) bucket b's room: ring_tmp + tmp_at[b] */
	int posted;               /* buckets posted in this step */
	int64_t early;            /* DTRAIN_STATS: buckets posted during backward */
	int shared;               /* CPU replicas, every rank on this host: the sum in shared memory */
	int shared_asked;         /* communication: shared_memory (not auto) */
	struct dt_shm_sum shm;    /* made on the first step */
};

static const char who[] = "multi_worker_mirrored";

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The MPI world, when launched by mpirun/srun; else one process. */
int dt_strategy_join_world(struct dt_strategy *s, const char *name)
{
	const char *size = getenv("OMPI_COMM_WORLD_SIZE");
	if (!dt_mpi_launched()) {
		if (size && atoi(size) > 1)
			return dt_error("strategy '%s': OMPI_COMM_WORLD_SIZE=%s but this process was not started by "
					"mpirun or srun (run: mpirun -np N dtrain fit ...)", name, size);
		s->rank = 0;
		s->world = 1;
		return 0;
	}
	return dt_mpi_start(&s->rank, &s->world);
}

/* The same JSON values, whatever the order of their keys. */
static int same_json(const char *a, const char *b)
{
	cJSON *x = cJSON_Parse(a), *y = cJSON_Parse(b);
	int same = x && y && cJSON_Compare(x, y, 1);
	cJSON_Delete(x);
	cJSON_Delete(y);
	return same;
}

int dt_strategy_same_job(struct dt_strategy *s, struct dt_mpi_group *g)
{
	double differing;
	char *chief;
	if (!s->job)
		return 0;
	chief = dt_mpi_bcast_text(g, s->job, "the config check");
	s->job_differs = !same_json(chief, s->job);
	/* Every process learns it, the chief too: all fail here, none waits in the next exchange. */
	differing = s->job_differs;
	dt_mpi_allreduce_double(g, &differing, 1, "the config check", 0);
	if (differing == 0) {
		free(chief);
		return 0;
	}
	s->chief_job = chief;
	s->jobs_differing = (int)differing;
	return -1;
}

static int multi_worker_init(struct dt_strategy *s, const struct dt_node *args)
{
	struct dt_distribute d;
	struct multi_worker *w;

	if (dt_distribute_read(args, &d) < 0 || dt_local_devices(s, &d) < 0)
		return -1;
	s->timeout = d.timeout;
	if (dt_strategy_join_world(s, who) < 0)
		return -1;
	w = dt_calloc(1, sizeof(*w));
	s->priv = w;
	w->bucket_floats = (int64_t)(d.bucket_mb * 1024 * 1024 / sizeof(float));
	w->nbuckets = -1;
	s->is_chief = s->rank == 0;
	s->first_replica = s->rank * s->nreplicas;
	s->global_replicas = s->world * s->nreplicas;
	w->mpi = s->world > 1;
	if (w->mpi) {
		dt_mpi_group_init(&w->group, MPI_COMM_WORLD, s->timeout, who);
		if (dt_strategy_same_job(s, &w->group) < 0)
			return -1;
	}
	w->gpu = dt_local_is_gpu(s);
	if (w->mpi) {
		/* Every rank must have the same kind and number of replicas (NCCL member k * R + l, the data slices). */
		double v[4] = { w->gpu, !w->gpu, s->nreplicas, -s->nreplicas };
		dt_mpi_allreduce_max(&w->group, v, 4, "the replica check", -1);
		if (v[0] > 0 && v[1] > 0)
			return dt_error("strategy '%s': some ranks have GPU replicas and others CPU replicas (rank %d: %s); "
					"give every rank the same kind of devices", who, s->rank, w->gpu ? "GPUs" : "CPUs");
		if (v[2] != -v[3])
			return dt_error("strategy '%s': the ranks have from %d to %d replicas (rank %d: %d); every rank "
					"needs the same number of devices", who, (int)-v[3], (int)v[2], s->rank, s->nreplicas);
	}
	if (w->mpi && !w->gpu && d.communication != DT_COMM_MPI) {
		w->shared = dt_shm_one_host(MPI_COMM_WORLD);
		w->shared_asked = d.communication == DT_COMM_SHARED_MEMORY;
		if (!w->shared && d.communication == DT_COMM_SHARED_MEMORY)
			return dt_node_error(d.communication_node, "communication: shared_memory needs every rank on one "
					     "host (rank %d runs on %s, not with all the others); use auto or mpi",
					     s->rank, dt_mpi_host());
	}
	if (w->gpu && !w->mpi)
		return dt_local_nccl_init_all(&w->nccl, s, who);
	if (w->gpu) {
		unsigned char id[DT_NCCL_ID_BYTES] = { 0 };
		/* Rank 0's failure to make the id must not leave the others waiting for it. */
		double bad = s->rank == 0 && dt_local_nccl_unique_id(id, who) < 0;
		dt_mpi_allreduce_max(&w->group, &bad, 1, "the NCCL start-up", -1);
		if (bad > 0)
			return s->rank == 0 ? -1 : dt_error("strategy '%s': rank 0 could not start NCCL", who);
		dt_mpi_bcast(&w->group, id, DT_NCCL_ID_BYTES, "the NCCL unique-id broadcast", -1);
		return dt_local_nccl_init_ranks(&w->nccl, s, id, who);
	}
	return 0;
}

static void multi_worker_broadcast(struct dt_strategy *s, struct dt_model *replicas, struct dt_optimizer *opts)
{
	struct multi_worker *w = s->priv;
	struct dt_model *m = &replicas[0];
	if (w->gpu) {
		if (w->mpi && opts)
			dt_mpi_bcast(&w->group, &opts[0].iterations, sizeof(opts[0].iterations),
				     "the optimizer-state broadcast", -1);
		dt_local_nccl_broadcast(&w->nccl, s, replicas, opts);
		return;
	}
	if (w->mpi) {
		dt_mpi_bcast(&w->group, m->params, m->nparams * (int64_t)sizeof(float), "the parameter broadcast", -1);
		for (int i = 0; opts && i < opts[0].nslots; i++)
			if (opts[0].slots[i])
				dt_mpi_bcast(&w->group, opts[0].slots[i], m->ntrainable * (int64_t)sizeof(float),
					     "the optimizer-state broadcast", -1);
		if (opts)
			dt_mpi_bcast(&w->group, &opts[0].iterations, sizeof(opts[0].iterations),
				     "the optimizer-state broadcast", -1);
	}
	dt_local_copy_params(s, replicas, opts);
}

/* The buckets of m's gradients: layer boundaries, from the end down, each bucket at least bucket_floats. */
static void plan_buckets(struct multi_worker *w, const struct dt_model *m)
{
	int64_t hi = m->ntrainable, tmp = 0;
	w->bucket_lo = dt_malloc((size_t)(m->nlayers + 2) * sizeof(*w->bucket_lo));
	w->bucket_lo[0] = hi;
	w->nbuckets = 0;
	for (int i = m->nlayers - 1; i >= 0; i--) {
		int64_t lo = dt_model_grad_offset(m, i);
		if (lo < hi && (hi - lo >= w->bucket_floats || lo == 0)) {
			w->bucket_lo[++w->nbuckets] = lo;
			hi = lo;
		}
	}
	w->rings = dt_calloc(w->nbuckets ? w->nbuckets : 1, sizeof(*w->rings));
	w->tmp_at = dt_calloc(w->nbuckets ? w->nbuckets : 1, sizeof(*w->tmp_at));
	for (int b = 0; b < w->nbuckets; b++) {
		w->tmp_at[b] = tmp;
		tmp += dt_mpi_ring_chunk(&w->group, w->bucket_lo[b] - w->bucket_lo[b + 1]);
	}
	w->ring_tmp = dt_malloc((size_t)(tmp ? tmp : 1) * sizeof(float));
}

/* Sums bucket w->posted over the local replicas and starts its sum over the ranks. */
static void post_bucket(struct dt_strategy *s, struct multi_worker *w, struct dt_model *replicas)
{
	int b = w->posted++;
	int64_t lo = w->bucket_lo[b + 1], hi = w->bucket_lo[b];
	dt_local_sum_grads(s, replicas, lo, hi);
	dt_mpi_ring_start(&w->group, &w->rings[b], b, replicas[0].grads + lo, hi - lo, w->ring_tmp + w->tmp_at[b]);
}

static void multi_worker_grads_ready(struct dt_strategy *s, struct dt_model *replicas, int64_t lo)
{
	struct multi_worker *w = s->priv;
	if (w->gpu || !w->mpi || w->shared)
		return;
	if (w->nbuckets < 0)
		plan_buckets(w, &replicas[0]);
	while (w->posted < w->nbuckets && w->bucket_lo[w->posted + 1] >= lo) {
		post_bucket(s, w, replicas);
		w->early++;
	}
	dt_mpi_ring_progress(&w->group, w->rings, w->posted);
}

/*
 * The shared-memory window, on the first step. Where its directory has too
 * little room, every rank sums over MPI's buckets instead: the chief says so
 * (a note under auto, a warning when shared_memory was asked for).
 */
static void shared_start(struct dt_strategy *s, struct multi_worker *w, int64_t count)
{
	double need, avail;
	char room[64], bytes[32], msg[640];
	if (dt_shm_sum_init(&w->shm, &w->group, count, "the shared-memory set-up", &need, &avail) == 0)
		return;
	w->shared = 0;
	if (!s->is_chief)
		return;
	if (avail < 0)
		snprintf(room, sizeof(room), "cannot be read");
	else
		snprintf(room, sizeof(room), "has %s free", dt_bytes_format(avail, bytes, sizeof(bytes)));
	snprintf(msg, sizeof(msg), "%s'%s' %s but the shared-memory gradient sum needs %s there: the ranks sum "
		 "over MPI instead, more slowly (give it more room, as docker run --shm-size does, or set "
		 "distribute.communication: mpi)", w->shared_asked ? "communication: shared_memory: " : "",
		 dt_shm_dir(), room, dt_bytes_format(need, bytes, sizeof(bytes)));
	if (w->shared_asked)
		dt_warn("%s", msg);
	else
		dt_note("%s", msg);
}

static void multi_worker_apply(struct dt_strategy *s, struct dt_model *replicas, struct dt_optimizer *opts)
{
	struct multi_worker *w = s->priv;
	double t0 = now();
	if (w->shared && !w->shm.peer)
		shared_start(s, w, replicas[0].ntrainable);
	if (w->gpu) {
		/* Queued on the GPUs' streams: the time is that of queuing, not of the transfer. */
		double a = now();
		dt_local_nccl_allreduce(&w->nccl, s, replicas);
		w->t_allreduce += now() - a;
		for (int r = 0; r < s->nreplicas; r++)
			dt_optimizer_apply(&opts[r], &replicas[r]);
		goto done;
	}
	if (!w->mpi) {
		dt_local_sum_grads(s, replicas, 0, replicas[0].ntrainable);
	} else if (w->shared) {
		double a = now();
		dt_local_sum_grads(s, replicas, 0, replicas[0].ntrainable);
		dt_shm_sum(&w->shm, &w->group, replicas[0].grads, "the gradient all-reduce", w->step + 1);
		w->t_allreduce += now() - a;
	} else {
		/* What backward did not post (all of it under gradient accumulation), then the wait. */
		double a = now();
		if (w->nbuckets < 0)
			plan_buckets(w, &replicas[0]);
		while (w->posted < w->nbuckets)
			post_bucket(s, w, replicas);
		dt_mpi_ring_wait(&w->group, w->rings, w->posted, "the gradient all-reduce", w->step + 1);
		w->posted = 0;
		w->t_allreduce += now() - a;
	}
	dt_optimizer_apply(&opts[0], &replicas[0]);
	dt_local_copy_params(s, replicas, opts);
done:
	if (w->step == 0)
		w->t_first = t0;
	w->step++;
	w->t_last = now();
}

static void multi_worker_reduce(struct dt_strategy *s, double *v, int n)
{
	struct multi_worker *w = s->priv;
	if (w->mpi)
		dt_mpi_allreduce_double(&w->group, v, n, "the metrics all-reduce", w->step);
}

static void multi_worker_agree(struct dt_strategy *s, double *v, int n)
{
	struct multi_worker *w = s->priv;
	if (w->mpi)
		dt_mpi_bcast(&w->group, v, (int64_t)n * (int64_t)sizeof(double), "the chief's decision broadcast", w->step);
}

static void multi_worker_release(struct dt_strategy *s)
{
	struct multi_worker *w = s->priv;
	const char *stats = getenv("DTRAIN_STATS");
	if (!w)
		return;
	if (stats && *stats && strcmp(stats, "0") && s->is_chief && w->step > 1) {
		double per_step = (w->t_last - w->t_first) / (double)(w->step - 1);
		double ar = w->t_allreduce / (double)w->step;
		fprintf(stderr, "%s: %d ranks, %lld steps, %.3f ms per step, all-reduce %.3f ms per step after backward "
			"(%.1f%%), ", who, s->world, (long long)w->step, per_step * 1e3, ar * 1e3,
			per_step > 0 ? 100 * ar / per_step : 0);
		if (w->shared)
			fprintf(stderr, "in shared memory\n");
		else
			fprintf(stderr, "%d bucket%s (%.2f per step posted during backward)\n", w->nbuckets,
				w->nbuckets == 1 ? "" : "s", (double)w->early / (double)w->step);
	}
	free(w->bucket_lo);
	free(w->rings);
	free(w->ring_tmp);
	free(w->tmp_at);
	dt_shm_sum_release(&w->shm, !s->failed);
	if (w->gpu)
		dt_local_nccl_release(&w->nccl);
	if (w->mpi && s->failed > 0 && s->failed < 128)
		dt_mpi_abort_status(s->failed, "%s: rank %d failed (the error above); aborting the job", who, s->rank);
	if (w->mpi && s->failed)
		dt_mpi_leave_stopped(&w->group);
	if (w->mpi)
		dt_mpi_group_release(&w->group);
	free(w);
	s->priv = NULL;
	if (!s->failed)
		dt_mpi_stop();
}

const struct dt_strategy_type dt_multi_worker_strategy = {
	.name = "multi_worker_mirrored",
	.init = multi_worker_init,
	.broadcast = multi_worker_broadcast,
	.grads_ready = multi_worker_grads_ready,
	.apply_gradients = multi_worker_apply,
	.reduce_sum = multi_worker_reduce,
	.agree = multi_worker_agree,
	.release = multi_worker_release,
};
